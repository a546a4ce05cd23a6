// The solver's per-slot kernels (src/solver/detail/kernels.hpp) against plain host references,
// at the sizes where their code paths change: column chunks (1,024) with a partial last chunk,
// the Gram's scratch tiles (a partial last tile) and its register blocks from k = 64, the CD sweep's G + l2 I in team scratch (k <= 71) or in global memory (k > 71),
// and an inactive slot that must be left alone. The default build runs the host-tuned
// kernels here, the device-kernels build (KNMF_DEVICE_KERNELS_ON_HOST) the portable ones.
//
// Tolerances: every reference sums in long double; the kernels accumulate in double over at
// most m = 2,500 terms of one sign (Gram, dot: relative error <= m * 2^-53 ~ 3e-13 in the
// worst case, 1e-14 asserted for these well-conditioned sums, measured ~1e-16), and the MU
// update differs from the reference only by the rounding of k-term sums (1e-13). The CD sweep
// is checked against the objective it minimises, with bounds derived at its test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "knmf/core/host_access.hpp"
#include "knmf/core/types.hpp"
#include "solver/detail/host_kernels.hpp"
#include "solver/detail/mu_value.hpp"
#include "solver/engine.hpp"

namespace {
using namespace knmf;
using knmf::detail::SlotGram;
using knmf::detail::SlotMask;

constexpr size_type m_cols = 2500;  // two full 1,024-column chunks and a partial one

struct Case {
  int R, k;
};

Matrix<double> random_factor(int R, int k, size_type m, unsigned seed, HostMatrix<double>& h) {
  Matrix<double> F(Kokkos::view_alloc(std::string("knmf::test::F")), size_type(R) * k, m);
  h = HostMatrix<double>("knmf::host::test::F", F.extent(0), m);  // a copy, never an alias of F
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (size_type j = 0; j < m; ++j)
    for (size_type i = 0; i < size_type(R) * k; ++i) h(i, j) = (u(gen) < 0.2) ? 0.0 : u(gen);
  Kokkos::deep_copy(F, h);
  return F;
}

SlotMask mask_with_inactive(int R, int inactive) {
  SlotMask a(Kokkos::view_alloc(std::string("knmf::test::active")), R);
  auto h = host_mirror(a);
  for (int r = 0; r < R; ++r) h(r) = (r == inactive) ? 0 : 1;
  Kokkos::deep_copy(a, h);
  return a;
}

double rel(double a, long double ref) {
  const long double d = std::fabs((long double)a - ref);
  return ref == 0 ? double(d) : double(d / std::fabs(ref));
}

class Kernels : public ::testing::TestWithParam<Case> {};

TEST_P(Kernels, SlotGramEqualsLongDoubleReference) {
  const auto [R, k] = GetParam();
  HostMatrix<double> h;
  const auto F = random_factor(R, k, m_cols, 11u + unsigned(k), h);
  const auto active = mask_with_inactive(R, R - 1);
  Kokkos::View<double*, MemSpace> partial(Kokkos::view_alloc(std::string("knmf::test::partial")),
                                          detail::num_chunks(m_cols) * R * k * k);
  SlotGram G(Kokkos::view_alloc(std::string("knmf::test::G")), R, k, k);
  detail::slot_gram(ExecSpace(), F, R, k, active, partial, G);
  const auto g = host_copy(G);
  double worst = 0;
  for (int r = 0; r < R; ++r)
    for (int s = 0; s < k; ++s)
      for (int t = 0; t < k; ++t) {
        if (r == R - 1) {
          ASSERT_EQ(g(r, s, t), 0.0) << "inactive slot " << r;
          continue;
        }
        long double ref = 0;
        for (size_type j = 0; j < m_cols; ++j)
          ref += (long double)h(r * k + s, j) * (long double)h(r * k + t, j);
        worst = std::max(worst, rel(g(r, s, t), ref));
        ASSERT_EQ(g(r, s, t), g(r, t, s)) << "symmetric";
        if constexpr (!host_tuned_kernels) {
          // the portable kernels' order (a thread per pair below gram_blocks_from_k, register
          // blocks from there): each 1,024-column chunk summed in column order in double from
          // zero, the chunks' sums added in chunk order; -ffp-contract=off in both
          double sum = 0;
          for (size_type j0 = 0; j0 < m_cols; j0 += detail::slot_chunk) {
            double a = 0;
            for (size_type j = j0; j < std::min(m_cols, j0 + detail::slot_chunk); ++j)
              a += h(r * k + s, j) * h(r * k + t, j);
            sum += a;
          }
          ASSERT_EQ(g(r, s, t), sum) << "r=" << r << " s=" << s << " t=" << t;
        }
      }
  EXPECT_LT(worst, 1e-14) << "R=" << R << " k=" << k;
}

TEST_P(Kernels, SlotDotEqualsLongDoubleReference) {
  const auto [R, k] = GetParam();
  HostMatrix<double> ha, hb;
  const auto A = random_factor(R, k, m_cols, 21u, ha);
  const auto B = random_factor(R, k, m_cols, 22u, hb);
  const auto active = mask_with_inactive(R, 0);
  const size_type nch = detail::num_chunks(m_cols);
  Kokkos::View<double*, MemSpace> partial(Kokkos::view_alloc(std::string("knmf::test::partial")),
                                          nch * R);
  detail::slot_dot(ExecSpace(), A, B, R, k, active, partial);
  const auto sums = detail::sum_slot_partials(partial, nch, R);
  for (int r = 0; r < R; ++r) {
    long double ref = 0;
    for (size_type j = 0; j < m_cols; ++j)
      for (int t = 0; t < k; ++t) ref += (long double)ha(r * k + t, j) * hb(r * k + t, j);
    if (r == 0) {
      EXPECT_EQ(sums[0], 0.0);
    } else {
      EXPECT_LT(rel(sums[size_t(r)], ref), 1e-14) << "slot " << r;
    }
  }
}

/// The Gram of the other factor, plus its host copy, from a random factor with m columns.
SlotGram gram_of(int R, int k, unsigned seed, std::vector<double>& gh) {
  HostMatrix<double> h;
  const size_type m = 300;
  const auto O = random_factor(R, k, m, seed, h);
  const auto all = mask_with_inactive(R, -1);
  Kokkos::View<double*, MemSpace> partial(Kokkos::view_alloc(std::string("knmf::test::partial")),
                                          detail::num_chunks(m) * R * k * k);
  SlotGram G(Kokkos::view_alloc(std::string("knmf::test::G")), R, k, k);
  detail::slot_gram(ExecSpace(), O, R, k, all, partial, G);
  const auto g = host_copy(G);
  gh.assign(size_t(R) * k * k, 0.0);
  for (int r = 0; r < R; ++r)
    for (int s = 0; s < k; ++s)
      for (int t = 0; t < k; ++t) gh[size_t((r * k + s) * k + t)] = g(r, s, t);
  return G;
}

/// What an update kernel reads: the other factor's Gram G (host copy gh), the factor F and the
/// product Num (host copies hf, hn), from seeds seed, seed + 1, seed + 2.
struct UpdateOperands {
  std::vector<double> gh;
  SlotGram G;
  HostMatrix<double> hf, hn;
  Matrix<double> F, Num;
  UpdateOperands(int R, int k, unsigned seed)
      : G(gram_of(R, k, seed, gh)),
        F(random_factor(R, k, m_cols, seed + 1, hf)),
        Num(random_factor(R, k, m_cols, seed + 2, hn)) {}
};

// The CD sweep against an oracle that does not restate the kernel's arithmetic: for every
// column i and coordinate t, in long double, the exact minimiser over x_t >= 0 of the per-column
// objective the sweep descends (scikit-learn's _update_cdnmf_fast: HHt + l2 I, XHt - l1)
//   phi(x) = 1/2 x^T (G + l2 I) x - (Num(:, i) - l1)^T x,
// as a function of x_t alone a parabola a/2 x_t^2 + c x_t + const with a = G_tt + l2 (> 0 here:
// l2 > 0) and c = sum_{s != t} G_ts x_s - (Num(t, i) - l1), hence x_t = max(0, -c / a); and its
// projected gradient at the old x_t, grad = a x_t + c (pg = min(grad, 0) where x_t = 0), whose
// absolute values sum to the slot's violation. The kernel takes the Newton step on the full
// gradient instead, max(0, x_t - grad / hess): the same number in exact arithmetic, by another
// formula. The other coordinates are those the sweep had when it reached t (scikit-learn's
// order 0..k-1, in place): the kernel's new values before t, the old ones from t on. So every
// coordinate is checked by itself, with no error carried along the sweep, and a sweep in
// another order, or one that reads stale values (Jacobi), misses the minimisers.
//
// Tolerances, from the rounding of the kernel's double arithmetic (u = 2^-53; the long-double
// reference is 2^11 times finer). With S = sum_s |(G + l2 I)_ts x_s| + |Num(t, i) - l1|: its
// gradient is a sum of k + 1 rounded terms (the products, Num - l1; G_tt + l2 rounded too),
// which any summation order gets to within (k + 2) u S; the step adds a division, the rounding
// of hess and a subtraction: |kernel - x_t*| <= (k + 5) u S / a + u |x_t|, asserted with one u
// more for the reference: (k + 6) u (|x_t| + S / a) per entry. The violation: each |pg| within
// (k + 2) u S of the oracle's, and their m k nonnegative values summed in double in partials
// of at most slot_chunk columns (a column's k terms included), then the partials in chunk
// order: within (slot_chunk k + num_chunks) u of the sum.
TEST_P(Kernels, CdSweepMinimisesEachCoordinateOfTheObjective) {
  // plain copies: a lambda may not capture structured bindings in C++17 (nvcc refuses it)
  const int R = GetParam().R, k = GetParam().k;
  const double l1 = 0.05, l2 = 0.1;
  UpdateOperands op(R, k, 31u);
  const auto& gh = op.gh;
  const auto& G = op.G;
  const auto& hf = op.hf;
  const auto& hn = op.hn;
  const auto& F = op.F;
  const auto& Num = op.Num;
  // scale Num like a product with X (the same order as G F) so the sweep moves values both ways
  for (size_type j = 0; j < m_cols; ++j)
    for (size_type i = 0; i < size_type(R) * k; ++i) hn(i, j) *= 100.0 * k;
  Kokkos::deep_copy(Num, hn);
  const auto active = mask_with_inactive(R, 1);
  const size_type nch = detail::num_chunks(m_cols);
  Kokkos::View<double*, MemSpace> viol(Kokkos::view_alloc(std::string("knmf::test::viol")), nch * R);
  detail::cd_update(ExecSpace(), F, Num, G, R, k, active, l1, l2, viol);
  const auto out = host_copy(F);
  const auto vsum = detail::sum_slot_partials(viol, nch, R);

  constexpr long double u = 0x1p-53L;
  double worst = 0;  // the largest |kernel - oracle| / bound
  std::string where;
  int moved = 0, clipped = 0;  // coordinates the sweep changed; minimisers clipped to zero
  for (int r = 0; r < R; ++r) {
    long double vref = 0, vbound = 0;
    for (size_type i = 0; i < m_cols; ++i) {
      if (r == 1) {
        for (int t = 0; t < k; ++t) ASSERT_EQ(out(r * k + t, i), hf(r * k + t, i)) << "inactive slot changed";
        continue;
      }
      for (int t = 0; t < k; ++t) {
        const auto g_ts = [&](int s) { return (long double)gh[size_t((r * k + t) * k + s)]; };
        const auto x = [&](int s) { return (long double)(s < t ? out(r * k + s, i) : hf(r * k + s, i)); };
        const long double b = (long double)hn(r * k + t, i) - l1;
        const long double a = g_ts(t) + l2;
        ASSERT_GT(a, 0.0L);
        long double c = -b, S = std::fabs(b) + a * std::fabs(x(t));
        for (int s = 0; s < k; ++s)
          if (s != t) {
            c += g_ts(s) * x(s);
            S += std::fabs(g_ts(s) * x(s));
          }
        const long double grad = a * x(t) + c;
        const long double pg = x(t) == 0 ? std::min(grad, 0.0L) : grad;
        vref += std::fabs(pg);
        vbound += (k + 2) * u * S;
        const long double want = std::max(0.0L, -c / a);
        const long double bound = (k + 6) * u * (std::fabs(x(t)) + S / a);
        const double got = out(r * k + t, i);
        const double ratio = double(std::fabs(got - want) / bound);
        if (!(ratio <= worst)) {  // NaN included
          worst = ratio;
          where = "slot " + std::to_string(r) + " column " + std::to_string(i) + " coordinate " +
                  std::to_string(t) + ": " + std::to_string(got) + ", the minimiser " +
                  std::to_string(double(want));
        }
        moved += got != hf(r * k + t, i);
        clipped += -c / a < 0;
      }
    }
    if (r == 1) {
      EXPECT_EQ(vsum[1], 0.0);
    } else {
      vbound += (detail::slot_chunk * k + nch) * u * vref;
      EXPECT_LE(std::fabs(vsum[size_t(r)] - vref), vbound)
          << "violation of slot " << r << ": " << vsum[size_t(r)] << ", the oracle's " << double(vref);
    }
  }
  EXPECT_LE(worst, 1.0) << "R=" << R << " k=" << k << ", the worst at " << where;
  // the case moves values both ways: most coordinates change, some minimisers are clipped
  EXPECT_GT(moved, (R - 1) * k * m_cols / 2);
  EXPECT_GT(clipped, 0);
}

// The host loops (src/solver/host_kernels.cpp) run several columns side by side in vector
// lanes or register tiles; each must compute exactly what the one-column loop does, bit for
// bit, in fp32 and fp64: the CD sweep against itself one column at a time (a range of one
// column takes the scalar path), the MU update and the Gram against plain loops of the
// documented operations. 61 columns: the lane groups (16, then 8) and a scalar remainder;
// k = 4, 20 and 64 (partial and whole vectors of 8, the largest k of the tiled paths).
template <class T>
struct HostSlot {
  int k;
  std::int64_t ld, row0, m = 61;
  std::vector<T> F, Num;
  std::vector<double> G;  // k x k, symmetric positive definite
  HostSlot(int k_, unsigned seed) : k(k_), ld(3 * k_ + 1), row0(k_) {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    F.resize(size_t(ld * m));
    Num.resize(size_t(ld * m));
    for (auto& v : F) v = u(gen) < 0.2 ? T(0) : T(u(gen));
    for (auto& v : Num) v = T(u(gen) * k);
    G.assign(size_t(k * k), 0.0);
    for (int s = 0; s < k; ++s)
      for (int t = 0; t < k; ++t) G[size_t(s * k + t)] = s == t ? 1.0 + k * u(gen) : 0.1 * u(gen);
    for (int s = 0; s < k; ++s)
      for (int t = 0; t < s; ++t) G[size_t(s * k + t)] = G[size_t(t * k + s)];
  }
};

template <class T>
void check_host_loops(int k) {
  SCOPED_TRACE("k = " + std::to_string(k) + (sizeof(T) == 4 ? " fp32" : " fp64"));
  HostSlot<T> a(k, 7u + unsigned(k));
  {  // CD: the lanes against one column at a time
    auto lanes = a.F, single = a.F;
    const double v = detail::host_cd_sweep(a.G.data(), 0.05, k, lanes.data(), a.Num.data(), a.ld,
                                           a.row0, 0, a.m);
    double w = 0;
    for (std::int64_t i = 0; i < a.m; ++i)
      w += detail::host_cd_sweep(a.G.data(), 0.05, k, single.data(), a.Num.data(), a.ld, a.row0,
                                 i, i + 1);
    for (size_t e = 0; e < lanes.size(); ++e) ASSERT_EQ(lanes[e], single[e]) << "value " << e;
    EXPECT_EQ(v, w);  // each column's sum, the columns' sums added in order
  }
  {  // MU: den(t) = sum_s F(s) G(s, t) from 0 in double, s in order, then mu_value
    std::vector<T> out(a.F.size(), T(-1));
    detail::host_mu_update(a.G.data(), k, a.F.data(), a.Num.data(), out.data(), a.ld, a.row0, 0,
                           a.m, 0.01, 0.2, false, 0.0);
    for (std::int64_t i = 0; i < a.m; ++i)
      for (int t = 0; t < k; ++t) {
        const std::int64_t e = i * a.ld + a.row0 + t;
        double den = 0.0;
        for (int s = 0; s < k; ++s) den += double(a.F[size_t(i * a.ld + a.row0 + s)]) * a.G[size_t(s * k + t)];
        ASSERT_EQ(out[size_t(e)], detail::mu_value(den, a.F[size_t(e)], a.Num[size_t(e)], 0.01, 0.2, false, 0.0))
            << "column " << i << " t " << t;
      }
  }
  {  // Gram: both triangles, each sum over the columns in order, in double
    std::vector<double> acc(size_t(k * k), -1.0);
    detail::host_slot_gram(k, a.F.data(), a.ld, a.row0, 0, a.m, acc.data());
    for (int s = 0; s < k; ++s)
      for (int t = 0; t < k; ++t) {
        double want = 0.0;
        for (std::int64_t i = 0; i < a.m; ++i)
          want += double(a.F[size_t(i * a.ld + a.row0 + s)]) * double(a.F[size_t(i * a.ld + a.row0 + t)]);
        ASSERT_EQ(acc[size_t(s * k + t)], want) << "s " << s << " t " << t;
      }
  }
}

// Every vector width this CPU has (host_vector_level: AVX-512, AVX2, baseline), each against
// its own one-column loops. k = 4, 8, 9, 20, 64: the lanes' loads and stores in 8 values of t
// at a time on AVX-512 (a partial chunk, one whole, one and a bit, two and a half, eight);
// 61 columns: groups of lanes side by side, single groups and columns one by one.
TEST(HostKernels, LanesAndTilesEqualTheOneColumnLoops) {
  const int top = detail::host_vector_level();
  for (int level = top; level >= 0; --level) {
    SCOPED_TRACE("vector level " + std::to_string(level));
    detail::set_host_vector_level(level);
    for (const int k : {4, 8, 9, 20, 64}) {
      check_host_loops<float>(k);
      check_host_loops<double>(k);
    }
  }
  detail::set_host_vector_level(top);
}

// The widths against each other, bit for bit: CD sweep, MU update, Gram and the gather.
template <class T>
void check_widths_agree(int k) {
  SCOPED_TRACE("k = " + std::to_string(k) + (sizeof(T) == 4 ? " fp32" : " fp64"));
  HostSlot<T> a(k, 11u + unsigned(k));
  const int top = detail::host_vector_level();
  // a CSR of 9 rows over the slot's 61 columns, rows of 0 to 20 entries
  std::vector<std::int64_t> map{0};
  std::vector<std::int32_t> entries;
  std::vector<T> values;
  std::mt19937_64 gen(5u);
  for (int r = 0; r < 9; ++r) {
    for (int e = 0; e < int(gen() % 21); ++e) {
      entries.push_back(std::int32_t(gen() % std::uint64_t(a.m)));
      values.push_back(T(double(gen() % 1000) / 997.0));
    }
    map.push_back(std::int64_t(entries.size()));
  }
  struct Out {
    std::vector<T> cd, mu, gather;
    double viol;
    std::vector<double> gram;
  };
  const auto run = [&](int level) {
    detail::set_host_vector_level(level);
    Out o{a.F, std::vector<T>(a.F.size(), T(-1)), {}, 0.0, std::vector<double>(size_t(k * k))};
    o.viol = detail::host_cd_sweep(a.G.data(), 0.05, k, o.cd.data(), a.Num.data(), a.ld, a.row0,
                                   0, a.m);
    detail::host_mu_update(a.G.data(), k, a.F.data(), a.Num.data(), o.mu.data(), a.ld, a.row0,
                           0, a.m, 0.01, 0.2, false, 0.0);
    detail::host_slot_gram(k, a.F.data(), a.ld, a.row0, 0, a.m, o.gram.data());
    // out (a.ld rows x 9 columns) = the rows' entries gathered from F's columns
    o.gather.assign(size_t(a.ld * 9), T(0));
    detail::host_gather_ranges(map.data(), map.data() + 1, 0, entries.data(), values.data(), 0, 9,
                               a.F.data(), a.ld, o.gather.data(), a.ld, a.ld, false);
    return o;
  };
  const Out want = run(top);
  for (int level = top - 1; level >= 0; --level) {
    SCOPED_TRACE("vector level " + std::to_string(level) + " against " + std::to_string(top));
    const Out got = run(level);
    EXPECT_EQ(got.cd, want.cd);
    EXPECT_EQ(got.viol, want.viol);
    EXPECT_EQ(got.mu, want.mu);
    EXPECT_EQ(got.gram, want.gram);
    EXPECT_EQ(got.gather, want.gather);
  }
  detail::set_host_vector_level(top);
}

TEST(HostKernels, EveryVectorWidthComputesTheSameNumbers) {
  if (detail::host_vector_level() == 0) GTEST_SKIP() << "this CPU has one vector width only";
  for (const int k : {4, 8, 9, 20, 64}) {
    check_widths_agree<float>(k);
    check_widths_agree<double>(k);
  }
}

TEST_P(Kernels, MuUpdateEqualsHostReference) {
  const auto [R, k] = GetParam();
  const double l1 = 0.0, l2 = 0.2;
  UpdateOperands op(R, k, 41u);
  const auto& [gh, G, hf, hn, F, Num] = op;
  Matrix<double> out(Kokkos::view_alloc(std::string("knmf::test::out")), size_type(R) * k, m_cols);
  Kokkos::deep_copy(out, -1.0);
  const auto active = mask_with_inactive(R, 0);
  detail::mu_update(ExecSpace(), F, Num, G, k, active, l1, l2, false, 0.0, out);
  const auto ho = host_copy(out);
  double worst = 0;
  for (int r = 0; r < R; ++r)
    for (size_type i = 0; i < m_cols; ++i)
      for (int t = 0; t < k; ++t) {
        const double got = ho(r * k + t, i);
        if (r == 0) {
          ASSERT_EQ(got, -1.0) << "inactive slot written";
          continue;
        }
        long double den = 0;
        for (int s = 0; s < k; ++s) den += (long double)hf(r * k + s, i) * gh[size_t((r * k + s) * k + t)];
        den += (long double)l2 * hf(r * k + t, i);
        const long double want = den == 0 ? 0.0L : hf(r * k + t, i) * (hn(r * k + t, i) / den);
        worst = std::max(worst, rel(got, want));
      }
  EXPECT_LT(worst, 1e-13) << "R=" << R << " k=" << k;
}

// k = 4, 20: scratch paths; 31 / 32: the last k of the thread-per-column CD sweep and the
// first of the lanes-per-column one (cd_lanes_from_k); 71 / 72: the last k whose G + l2 I fits
// the CD kernel's scratch, and the first that does not; 63 / 64: the last k of the portable
// Gram's thread per pair and the first of its register blocks (gram_blocks_from_k); 110: k
// past 100 (before the register blocks, the Gram without scratch tiles), a partial block.
INSTANTIATE_TEST_SUITE_P(Sizes, Kernels,
                         ::testing::Values(Case{3, 4}, Case{3, 20}, Case{3, 31}, Case{3, 32},
                                           Case{2, 63}, Case{2, 64}, Case{2, 71}, Case{2, 72},
                                           Case{2, 110}),
                         [](const auto& info) {
                           return "R" + std::to_string(info.param.R) + "_k" +
                                  std::to_string(info.param.k);
                         });

}  // namespace
