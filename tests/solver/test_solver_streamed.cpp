// Out-of-core X (host memory, streamed in row blocks through two device buffers) against the
// in-core matrices, and the 64-bit offset arithmetic of sparse blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <random>

#include "knmf/core/error.hpp"
#include "knmf/core/host_access.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/load.hpp"
#include "knmf/run/memory.hpp"
#include "live_device_bytes.hpp"
#include "solver/engine.hpp"
#include "solver_fixtures.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;

/// A sparse-ish random matrix with empty rows and columns, dense (row-major) and as CSR.
void make_matrix(size_type n, size_type g, std::vector<double>& dense, HostCsr<double>& csr) {
  std::mt19937_64 rng(99);
  dense.assign(size_t(n * g), 0.0);
  for (size_type i = 0; i < n; ++i) {
    for (size_type j = 0; j < g; ++j) {
      if (i % 17 == 3 || j == 4) continue;  // empty rows and a column
      if (rng() % 100 < 30) dense[size_t(i * g + j)] = double(1 + rng() % 50) / 7.0 * (1.0 + double(j % 5));
    }
  }
  csr = dense_to_csr<double>(dense, g, 0, n);
}

SolverOptions opts(SolverKind s) {
  SolverOptions o;
  o.solver = s;
  o.tol = 1e-5;
  o.max_iter = 300;
  o.return_W = true;
  return o;
}

TEST(Streamed, SparseIsBitwiseEqualToInCoreFor2_3_7Blocks) {
  const size_type n = 140, g = 31;
  std::vector<double> dense;
  HostCsr<double> c;
  make_matrix(n, g, dense, c);
  auto S = CsrMatrix<double>::from_host(ExecSpace(), n, g, c.row_offsets.data(), c.cols.data(), c.values.data());
  std::vector<Job> jobs{{3, 0, 11, 0}, {3, 1, 12, 1}, {3, 2, 13, 2}};
  for (auto s : {SolverKind::mu, SolverKind::cd}) {
    const auto ref = factorize(ExecSpace(), S, jobs, 2, opts(s));
    for (int want : {2, 3, 7}) {
      // the smallest buffer that holds 1/want of the entries (plus the column map)
      const size_type per = sizeof(double) + sizeof(ordinal_type);
      const size_type buffer = 8 * (g + 1) + per * (size_type(c.values.size()) / want + 12);
      auto X = StreamedMatrix<double>::from_host_csr(ExecSpace(), n, g, c.row_offsets.data(), c.cols.data(),
                                                     c.values.data(), buffer);
      ASSERT_GE(X.num_blocks(), want) << "buffer " << buffer;
      ASSERT_LE(X.num_blocks(), want + 1) << "buffer " << buffer;
      const auto res = factorize(ExecSpace(), X, jobs, 2, opts(s));
      for (size_t i = 0; i < jobs.size(); ++i) {
        EXPECT_EQ(res[i].n_iter, ref[i].n_iter);
        EXPECT_EQ(res[i].H, ref[i].H) << to_string(s) << " blocks " << X.num_blocks();  // bitwise
        EXPECT_EQ(res[i].W, ref[i].W) << to_string(s) << " blocks " << X.num_blocks();
        EXPECT_EQ(res[i].final_error, ref[i].final_error);
      }
      const auto rf = refit_usages(ExecSpace(), X, {ref[0].H}, 3, 1, opts(s));
      const auto rf0 = refit_usages(ExecSpace(), S, {ref[0].H}, 3, 1, opts(s));
      EXPECT_EQ(rf[0].W, rf0[0].W);
    }
  }
}

// Dense blocks accumulate Q = W X block by block in BLAS, so the sums associate differently
// from one GEMM: equal to rounding (bound: 1e-10 relative after hundreds of iterations).
TEST(Streamed, DenseMatchesInCoreFor2_3_7Blocks) {
  const size_type n = 140, g = 31;
  std::vector<double> dense;
  HostCsr<double> c;
  make_matrix(n, g, dense, c);
  auto D = DenseMatrix<double>::from_host(ExecSpace(), n, g, dense.data());
  std::vector<Job> jobs{{3, 0, 21, 0}, {3, 1, 22, 1}};
  for (auto s : {SolverKind::mu, SolverKind::cd}) {
    const auto ref = factorize(ExecSpace(), D, jobs, 2, opts(s));
    for (int want : {2, 3, 7}) {
      const size_type rows = (n + want - 1) / want;
      auto X = StreamedMatrix<double>::from_host_dense(ExecSpace(), n, g, dense.data(),
                                                       rows * g * size_type(sizeof(double)));
      ASSERT_EQ(X.num_blocks(), want);
      const auto res = factorize(ExecSpace(), X, jobs, 2, opts(s));
      for (size_t i = 0; i < jobs.size(); ++i) {
        EXPECT_EQ(res[i].n_iter, ref[i].n_iter);
        EXPECT_LT(max_rel_diff(res[i].H, ref[i].H), 1e-10) << to_string(s) << " blocks " << want;
        EXPECT_LT(max_rel_diff(res[i].W, ref[i].W), 1e-10) << to_string(s) << " blocks " << want;
      }
    }
  }
}

TEST(Streamed, RealMatrixSparseStreamedEqualsInCore) {
  auto reader = io::H5adReader::open(real_dir() / "cnmf-pbmc-donor-a" / "prepare" /
                                     "pbmcA" / "cnmf_tmp" / "pbmcA.norm_counts.h5ad");
  auto S = load_csr<double>(ExecSpace(), reader);
  auto X = StreamedMatrix<double>::load(ExecSpace(), reader, true, 1 << 20);
  EXPECT_GT(X.num_blocks(), 2);
  EXPECT_EQ(X.nnz(), S.nnz());
  EXPECT_EQ(X.stats().norm2, S.stats().norm2);
  std::vector<Job> jobs{{5, 0, 59886188, 0}, {5, 1, 1812018521, 1}};
  const auto a = factorize(ExecSpace(), S, jobs, 2, opts(SolverKind::cd));
  const auto b = factorize(ExecSpace(), X, jobs, 2, opts(SolverKind::cd));
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(a[i].H, b[i].H);
}

// Sparse blocks keep X's global 64-bit row offsets: a block late in a matrix with more than
// 2^32 stored entries indexes its local arrays with offset - base. Built here with offsets
// near 2^33 over small arrays (a matrix that large is not needed to exercise the arithmetic).
TEST(Streamed, SparseBlockOffsetsBeyond2To32) {
  const size_type base = (size_type(1) << 33) + 12345;
  const size_type rows = 4, g = 6, rk = 3;
  std::vector<size_type> map{base, base + 2, base + 2, base + 5, base + 6};
  std::vector<ordinal_type> ent{0, 5, 1, 2, 3, 4};
  std::vector<double> val{1, 2, 3, 4, 5, 6};
  Kokkos::View<size_type*, MemSpace> d_map("map", map.size());
  Kokkos::View<ordinal_type*, MemSpace> d_ent("ent", ent.size());
  Kokkos::View<double*, MemSpace> d_val("val", val.size());
  auto copy = [](auto& d, auto& h) {
    auto m = knmf::host_mirror(d);
    for (size_t i = 0; i < h.size(); ++i) m(i) = h[i];
    Kokkos::deep_copy(d, m);
  };
  copy(d_map, map);
  copy(d_ent, ent);
  copy(d_val, val);
  Matrix<double> H("knmf::test::H", rk, g), P("knmf::test::P", rk, rows);
  auto hH = knmf::host_mirror(H);
  for (size_type r = 0; r < rk; ++r)
    for (size_type j = 0; j < g; ++j) hH(r, j) = double(10 * r + j);
  Kokkos::deep_copy(H, hH);
  detail::GatherScratch<double> scratch;
  detail::spmm_gather(ExecSpace(), d_map, base, d_ent, d_val, H, P, false, detail::GatherSegments{},
                      scratch);
  EXPECT_EQ(scratch.partials.span(), 0u);  // no long row: no partials
  auto hP = knmf::host_copy(P);
  for (size_type i = 0; i < rows; ++i)
    for (size_type r = 0; r < rk; ++r) {
      double e = 0;
      for (size_type p = map[size_t(i)]; p < map[size_t(i) + 1]; ++p)
        e += val[size_t(p - base)] * hH(r, ent[size_t(p - base)]);
      EXPECT_EQ(hP(r, i), e) << i << "," << r;
    }
  // and the counts that feed such offsets are 64-bit end to end
  static_assert(sizeof(size_type) == 8, "offsets must be 64-bit");
  static_assert(std::is_same_v<CsrMatrix<float>::crs_type::size_type, std::int64_t>,
                "CrsMatrix offsets must be 64-bit");
}

// A gene present in every one of 20,000 cells: its row of X^T has 20,000 entries, more than
// gather_segment_entries (8,192), so the portable gather sums it in segments of 8,192 (three),
// one team each, and adds the three partials in order; the host-tuned gather sums it straight.
// Q = W X is checked bitwise against that order on the host, in core and streamed (two
// blocks of 10,000 cells: two segments a block), and P = H X^T (no long row) straight.
TEST(Streamed, LongColumnsAreGatheredInSegmentsInAFixedOrder) {
  constexpr size_type S = detail::gather_segment_entries;
  const size_type n = 20000, g = 4, rk = 5;
  HostCsr<double> c;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.5, 2.0);
  for (size_type i = 0; i < n; ++i) {
    for (size_type j = 0; j < g; ++j)
      if (j == 0 || (j == 1 && i % 3 == 0) || (j >= 2 && rng() % 50 == 0)) {
        c.cols.push_back(ordinal_type(j));
        c.values.push_back(u(rng));
      }
    c.row_offsets.push_back(size_type(c.values.size()));
  }
  const auto X = CsrMatrix<double>::from_host(ExecSpace(), n, g, c.row_offsets.data(), c.cols.data(),
                                              c.values.data());
  EXPECT_EQ(X.xt_segments().count(), 3);  // gene 0: 8,192 + 8,192 + 3,616
  EXPECT_EQ(X.xt_segments().long_rows(), 1);
  EXPECT_EQ(X.x_segments().count(), 0);  // a cell holds at most 4 entries
  EXPECT_EQ(X.bytes(), CsrMatrix<double>::bytes_for(n, g, X.nnz(), 8) + 8 * (2 + 1 + 3));

  Matrix<double> W("knmf::test::W", rk, n), Q("knmf::test::Q", rk, g);
  auto hW = knmf::host_mirror(W);
  for (size_type i = 0; i < n; ++i)
    for (size_type r = 0; r < rk; ++r) hW(r, i) = u(rng);
  Kokkos::deep_copy(W, hW);
  // the expected sums, in the order the build's gather takes (per cell of gene j, in order)
  auto expect = [&](size_type j, size_type r, size_type i0, size_type i1, double from) {
    std::vector<std::pair<size_type, double>> e;  // (cell, value) of gene j in [i0, i1)
    for (size_type i = i0; i < i1; ++i)
      for (size_type p = c.row_offsets[size_t(i)]; p < c.row_offsets[size_t(i) + 1]; ++p)
        if (size_type(c.cols[size_t(p)]) == j) e.emplace_back(i, c.values[size_t(p)]);
    if (host_tuned_kernels || e.size() <= size_t(S)) {
      double acc = from;
      for (auto [i, v] : e) acc += v * hW(r, i);
      return acc;
    }
    double acc = from;
    for (size_t s0 = 0; s0 < e.size(); s0 += size_t(S)) {
      double part = 0;
      for (size_t q = s0; q < std::min(e.size(), s0 + size_t(S)); ++q)
        part += e[q].second * hW(r, e[q].first);
      acc += part;
    }
    return acc;
  };
  // the partials live in the caller's scratch: made by the first product (portable path: rk x
  // 3 values), reused by every later one (no allocation inside an iteration); the host-tuned
  // gather needs none
  detail::GatherScratch<double> scratch;
  detail::XOperandOf<CsrMatrix<double>>(X).wt_times_x(ExecSpace(), W, Q, scratch);
  auto hQ = knmf::host_copy(Q);
  for (size_type j = 0; j < g; ++j)
    for (size_type r = 0; r < rk; ++r) EXPECT_EQ(hQ(r, j), expect(j, r, 0, n, 0.0)) << j << "," << r;
  const double* partials = scratch.partials.data();
  EXPECT_EQ(scratch.partials.span(), host_tuned_kernels ? 0u : size_t(rk * 3));
  // again: the same bits, in the same scratch
  detail::XOperandOf<CsrMatrix<double>>(X).wt_times_x(ExecSpace(), W, Q, scratch);
  auto hQ2 = knmf::host_copy(Q);
  for (size_type j = 0; j < g; ++j)
    for (size_type r = 0; r < rk; ++r) EXPECT_EQ(hQ2(r, j), hQ(r, j));
  EXPECT_EQ(scratch.partials.data(), partials);

  // streamed in two blocks of about 10,000 cells: each block's gene 0 in two segments, the
  // second block continuing from the first's sums
  const size_type per = sizeof(double) + sizeof(ordinal_type);
  const size_type half = std::max(c.row_offsets[size_t(n / 2)], c.row_offsets[size_t(n)] - c.row_offsets[size_t(n / 2)]);
  auto Y = StreamedMatrix<double>::from_host_csr(ExecSpace(), n, g, c.row_offsets.data(), c.cols.data(),
                                                 c.values.data(), 8 * (n / 2 + 2) + per * (half + 4));
  ASSERT_EQ(Y.num_blocks(), 2);
  const auto& bounds = Y.block_bounds();
  ASSERT_GT(bounds[1], S);
  ASSERT_GT(n - bounds[1], S);
  detail::XOperandOf<StreamedMatrix<double>>(Y).wt_times_x(ExecSpace(), W, Q, scratch);
  EXPECT_EQ(scratch.partials.data(), partials);  // two segments a block fit the three
  auto hQs = knmf::host_copy(Q);
  for (size_type j = 0; j < g; ++j)
    for (size_type r = 0; r < rk; ++r) {
      EXPECT_EQ(hQs(r, j), expect(j, r, bounds[1], n, expect(j, r, 0, bounds[1], 0.0))) << j << "," << r;
      EXPECT_NEAR(hQs(r, j), hQ(r, j), 1e-13 * std::abs(hQ(r, j)));
    }

  // P = H X^T: rows of X are short, summed straight
  Matrix<double> H("knmf::test::H", rk, g), P("knmf::test::P", rk, n);
  auto hH = knmf::host_mirror(H);
  for (size_type j = 0; j < g; ++j)
    for (size_type r = 0; r < rk; ++r) hH(r, j) = u(rng);
  Kokkos::deep_copy(H, hH);
  detail::XOperandOf<CsrMatrix<double>>(X).x_times_ht(ExecSpace(), H, P, scratch);
  auto hP = knmf::host_copy(P);
  for (size_type i = 0; i < n; i += 97)
    for (size_type r = 0; r < rk; ++r) {
      double e = 0;
      for (size_type p = c.row_offsets[size_t(i)]; p < c.row_offsets[size_t(i) + 1]; ++p)
        e += c.values[size_t(p)] * hH(r, c.cols[size_t(p)]);
      EXPECT_EQ(hP(r, i), e) << i << "," << r;
    }
}

TEST(Streamed, BufferTooSmallForOneRowIsAnError) {
  std::vector<double> x(4 * 5, 1.0);
  EXPECT_THROW(StreamedMatrix<double>::from_host_dense(ExecSpace(), 4, 5, x.data(), 16), InputError);
}

}  // namespace

namespace {
// The host gathers (vector-width variants with register blocks and halving remainders) for
// every number of rows 1..140 (fp32: remainders of 1 to 8 vectors; fp64: past two blocks), float and double, against a naive loop in long double.
template <class T>
void check_gather_rows() {
  using namespace knmf;
  std::mt19937_64 rng(11);
  const size_type m = 9, g = 13;
  std::vector<size_type> map{0};
  std::vector<ordinal_type> ent;
  std::vector<T> val;
  for (size_type a = 0; a < m; ++a) {
    for (size_type j = 0; j < g; ++j)
      if (rng() % 3 == 0) {
        ent.push_back(ordinal_type(j));
        val.push_back(T(1 + rng() % 7));
      }
    map.push_back(size_type(val.size()));
  }
  for (size_type rows = 1; rows <= 140; ++rows) {
    std::vector<T> in(size_t(rows * g)), out(size_t(rows * m), T(0.5));
    for (auto& v : in) v = T(rng() % 100) / T(8);
    for (bool acc : {false, true}) {
      auto o = out;
      detail::host_gather_ranges(map.data(), map.data() + 1, 0, ent.data(), val.data(), 0, m,
                                 in.data(), rows, o.data(), rows, rows, acc);
      for (size_type a = 0; a < m; ++a)
        for (size_type r = 0; r < rows; ++r) {
          long double e = acc ? 0.5L : 0.0L;
          for (size_type p = map[size_t(a)]; p < map[size_t(a) + 1]; ++p)
            e += (long double)val[size_t(p)] * in[size_t(ent[size_t(p)] * rows + r)];
          ASSERT_EQ(o[size_t(a * rows + r)], T(e)) << "rows " << rows << " a " << a << " r " << r;
        }
    }
  }
}
TEST(Streamed, HostGatherCoversEveryRowCount) {
  check_gather_rows<double>();
  check_gather_rows<float>();
}

/// A batch sized by a device-memory limit, in every mode (in-core dense and sparse, streamed
/// dense and sparse; factorize and the fixed-H refit; MU and CD): the device bytes held at the
/// peak, X included, stay within what the plan counts (its total less the unplanned slack).
TEST(MemoryPlan, PeakAtAForcedLimitIsWithinThePlan) {
  const size_type n = 600, g = 80;
  const int k = 4, jobs_n = 5;  // batches of 3: a refill, slots ending apart (compaction)
  std::vector<double> dense;
  HostCsr<double> c;
  make_matrix(n, g, dense, c);
  std::vector<Job> jobs;
  for (int i = 0; i < jobs_n; ++i) jobs.push_back({k, i, 300 + i, i});
  std::mt19937_64 rng(5);
  std::vector<std::vector<double>> spectra(4, std::vector<double>(size_t(k * g)));
  for (auto& h : spectra)
    for (auto& v : h) v = double(1 + rng() % 20) / 10.0;
  const std::int64_t slack = unplanned_bytes(allocation_rules());
  const auto options = [](SolverKind s) {
    auto o = opts(s);
    o.tol = 1e-4;
    o.max_iter = 80;
    return o;
  };
  double worst = 0.0;
  for (int form = 0; form < 4; ++form)
    for (bool refit : {false, true})
      for (auto solver : {SolverKind::mu, SolverKind::cd}) {
        const char* names[] = {"dense", "sparse", "streamed dense", "streamed sparse"};
        SCOPED_TRACE(testing::Message() << names[form] << (refit ? ", refit, " : ", factorize, ")
                                        << to_string(solver));
        LiveDeviceBytes live;
        const auto run = [&](const auto& X, std::int64_t bytes_x) {
          // building X holds more than X for a moment (a CSR's transpose counters, at most
          // 64 MiB: matrix/csr_matrix.cpp), before any batch exists
          EXPECT_LE(live.peak - bytes_x, (std::int64_t(64) << 20) + 8 * live.peak_views);
          live.restart_peak();
          const std::int64_t per = bytes_per_replicate(n, g, k, 8, refit);
          const std::int64_t fixed = batch_fixed_bytes(n, g, k, 8, refit);
          const std::int64_t budget = bytes_x + fixed + 3 * per + per / 2;  // room for 3
          const auto plan = plan_batch(n, g, k, 8, bytes_x, budget, 0, jobs_n, refit);
          ASSERT_EQ(plan.R, 3);
          if (refit) {
            const auto r = refit_usages(ExecSpace(), X, spectra, k, plan.R, options(solver));
            ASSERT_EQ(r.size(), spectra.size());
          } else {
            const auto r = factorize(ExecSpace(), X, jobs, plan.R, options(solver));
            ASSERT_EQ(r.size(), jobs.size());
          }
          // the plan without its slack, but the slot flags (16 bytes a slot, left to the slack)
          // and Kokkos' rounding of each View to 8 bytes
          const std::int64_t planned = plan.total() - slack;
          const std::int64_t margin = plan.R * 16 + 8 * live.peak_views;
          worst = std::max(worst, double(live.peak) / double(planned));
          std::cout << "[ peak / plan ] " << names[form] << (refit ? ", refit, " : ", factorize, ")
                    << to_string(solver) << ": " << live.peak << " / " << planned << " bytes\n";
          EXPECT_LE(live.peak, planned + margin)
              << "peak " << live.peak << " bytes, plan " << plan.describe();
          EXPECT_LE(live.peak_views, kPlannedViews);  // the Views the GPU's rounding counts
        };
        const size_type half = size_type(c.values.size()) * 12 / 2 + 8 * (g + 1);
        if (form == 0) {
          auto X = DenseMatrix<double>::from_host(ExecSpace(), n, g, dense.data());
          run(X, std::int64_t(X.bytes()));
        } else if (form == 1) {
          auto X = CsrMatrix<double>::from_host(ExecSpace(), n, g, c.row_offsets.data(), c.cols.data(),
                                                c.values.data());
          run(X, std::int64_t(X.bytes()));
        } else if (form == 2) {
          auto X = StreamedMatrix<double>::from_host_dense(ExecSpace(), n, g, dense.data(),
                                                           n * g * sizeof(double) / 3);
          run(X, std::int64_t(X.device_bytes()));
        } else {
          auto X = StreamedMatrix<double>::from_host_csr(ExecSpace(), n, g, c.row_offsets.data(),
                                                         c.cols.data(), c.values.data(), half);
          run(X, std::int64_t(X.device_bytes()));
        }
      }
  std::cout << "[ peak / plan ] the largest ratio of a run's device peak to its plan (less the "
               "slack): "
            << worst << "\n";
}
}  // namespace
