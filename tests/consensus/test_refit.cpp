// The streamed fixed-H refit against knmf::refit_usages (X resident on the device): the same
// iterations from the same products, so the same usages and errors; and the small solve.
#include <gtest/gtest.h>

#include <random>

#include "knmf/consensus/consensus.hpp"
#include "knmf/consensus/refit.hpp"
#include "knmf/core/error.hpp"
#include "knmf/matrix/dense_matrix.hpp"
#include "knmf/solver/nmf.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
using namespace knmf::consensus;
using namespace knmf::test;

struct Problem {
  io::CsrBlock<double> csr;
  std::vector<double> dense;  // n x g row-major
  std::vector<HostRows> spectra;
};

Problem make_problem(std::int64_t n, std::int64_t g, std::vector<int> ks, double density, unsigned seed) {
  Problem p;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  p.dense.assign(size_t(n * g), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < g; ++j)
      if (u(rng) < density) p.dense[size_t(i * g + j)] = std::floor(u(rng) * 20.0) / 4.0 + 0.25;
  p.csr = knmf::test::dense_to_csr_block<io::CsrBlock<double>>(p.dense, g);
  for (int k : ks) {
    HostRows h{k, g, std::vector<double>(size_t(k * g))};
    for (auto& v : h.values) v = u(rng) < 0.3 ? 0.0 : u(rng);
    p.spectra.push_back(h);
  }
  return p;
}

void compare(const SolverOptions& o, double tol) {
  const auto p = make_problem(700, 90, {4, 7}, 0.15, 11);
  CsrRowSource src(p.csr, "synthetic");
  // small blocks: the products must not depend on the block boundaries
  const auto streamed = refit_usages_streamed(ExecSpace(), src, p.spectra, o, 1000);
  const auto X = DenseMatrix<double>::from_host(ExecSpace(), 700, 90, p.dense.data());
  for (size_t s = 0; s < p.spectra.size(); ++s) {
    const int k = int(p.spectra[s].rows);
    const auto ref = refit_usages(ExecSpace(), X, {p.spectra[s].values}, k, 1, o)[0];
    EXPECT_EQ(streamed[s].n_iter, ref.n_iter) << "k = " << k;
    EXPECT_EQ(streamed[s].status, ref.status);
    EXPECT_LT(max_rel_diff(streamed[s].W.values, ref.W), tol) << "k = " << k;
    EXPECT_LT(rel_diff(std::sqrt(streamed[s].squared_error), ref.final_error), tol);
    EXPECT_LT(rel_diff(streamed[s].error_at_init, ref.error_at_init), 1e-13);
  }
}

TEST(StreamedRefit, EqualsDeviceRefitCd) {
  SolverOptions o;
  o.solver = SolverKind::cd;
  compare(o, 1e-12);
  o.alpha_W = 0.01;
  o.l1_ratio = 0.5;
  compare(o, 1e-12);
}

TEST(StreamedRefit, EqualsDeviceRefitMu) {
  SolverOptions o;
  o.solver = SolverKind::mu;
  o.max_iter = 200;
  compare(o, 1e-12);
}

TEST(StreamedRefit, RejectsBadSpectra) {
  const auto p = make_problem(20, 5, {2}, 0.5, 3);
  CsrRowSource src(p.csr, "synthetic");
  auto bad = p.spectra;
  bad[0].values[3] = -1.0;
  EXPECT_THROW(refit_usages_streamed(ExecSpace(), src, bad, SolverOptions{}), InputError);
  HostRows wrong{2, 4, std::vector<double>(8, 1.0)};
  EXPECT_THROW(refit_usages_streamed(ExecSpace(), src, {wrong}, SolverOptions{}), InputError);
}

TEST(GramLstsq, SolvesAndCutsOffSingularDirections) {
  // A = B^T B for a well-conditioned B; X known
  const int k = 5;
  const size_type m = 3;
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> Bm(size_t(8 * k)), A(size_t(k * k), 0.0), X(size_t(k * m)), rhs(size_t(k * m), 0.0);
  for (auto& v : Bm) v = u(rng);
  for (auto& v : X) v = u(rng);
  for (int a = 0; a < k; ++a)
    for (int b = 0; b < k; ++b)
      for (int r = 0; r < 8; ++r) A[size_t(a * k + b)] += Bm[size_t(r * k + a)] * Bm[size_t(r * k + b)];
  for (int a = 0; a < k; ++a)
    for (size_type j = 0; j < m; ++j)
      for (int b = 0; b < k; ++b) rhs[size_t(a * m + j)] += A[size_t(a * k + b)] * X[size_t(b * m + j)];
  const auto got = gram_lstsq(A, rhs, k, m);
  EXPECT_LT(max_rel_diff(got, X), 1e-12);
  // a rank-1 A: the minimum-norm solution (pseudo-inverse)
  std::vector<double> A1 = {1, 2, 2, 4}, b1 = {1, 2};
  const auto x1 = gram_lstsq(A1, b1, 2, 1);
  EXPECT_NEAR(x1[0], 0.2, 1e-15);
  EXPECT_NEAR(x1[1], 0.4, 1e-15);
}

}  // namespace
