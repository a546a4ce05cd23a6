// The batched solver against scikit-learn 1.2.1 on synthetic matrices (fp64), plus the
// properties the contract asks for: batch independence, the identity error, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "knmf/core/error.hpp"
#include "knmf/core/host_access.hpp"
#include "knmf/solver/init.hpp"
#include "solver_fixtures.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;

// Relative tolerances (normwise, see max_rel_diff): MU and the refits follow scikit-learn to
// rounding (different summation orders only): 1e-9. CD is a sequential sweep whose path
// amplifies rounding a little more: 1e-6, as the contract allows.
constexpr double kMuTol = 1e-9;
constexpr double kCdTol = 1e-6;

std::vector<Job> jobs_for(const nlohmann::json& c) {
  std::vector<Job> jobs;
  for (const auto& r : c["runs"]) jobs.push_back(Job{c["k"].get<int>(), int(jobs.size()), r["seed"], 0});
  return jobs;
}

void check_case(const std::string& name, int batch) {
  SCOPED_TRACE(name + " batch " + std::to_string(batch));
  const auto c = nmf_golden()["cases"][name];
  const bool is_synth2 = name.find("synth2") != std::string::npos;
  auto X = synthetic_matrix<double>(is_synth2 ? "synth2" : "synth");
  auto opts = options_of(c);
  opts.return_W = true;
  const auto res = factorize(ExecSpace(), X, jobs_for(c), batch, opts);
  const double tol = opts.solver == SolverKind::mu ? kMuTol : kCdTol;
  for (size_t i = 0; i < res.size(); ++i) {
    const auto& run = c["runs"][i];
    const std::string tag = "s" + std::to_string(run["seed"].get<std::int64_t>());
    SCOPED_TRACE(tag);
    EXPECT_EQ(res[i].n_iter, run["n_iter"].get<int>());
    EXPECT_LT(max_rel_diff(res[i].H, golden_array(name, tag + ".H")), tol);
    EXPECT_LT(max_rel_diff(res[i].W, golden_array(name, tag + ".W")), tol);
    EXPECT_LT(rel_diff(res[i].error_at_init, run["error_at_init"]), 1e-12);
    EXPECT_LT(rel_diff(res[i].final_error, run["final_error"]), tol);
    if (opts.tol == 0) {
      EXPECT_EQ(res[i].status, ReplicateStatus::max_iter);
    } else if (res[i].n_iter < opts.max_iter) {
      EXPECT_EQ(res[i].status, ReplicateStatus::converged);
    }
  }
}

TEST(Init, RandomInitEqualsScikitLearn) {
  auto X = synthetic_matrix<double>("synth");
  const auto c = nmf_golden()["cases"]["init_synth"];
  for (const auto& run : c["runs"]) {
    const int k = run["k"];
    const std::int64_t s = run["seed"];
    std::vector<double> H(size_t(k * X.cols())), W(size_t(X.rows() * k));
    random_init<double>(s, X.mean(), k, X.rows(), X.cols(), H.data(), W.data());
    const std::string tag = "k" + std::to_string(k) + "s" + std::to_string(s);
    // X.mean() may differ from numpy's pairwise mean in the last bits: a few ulps.
    EXPECT_LT(max_rel_diff(H, golden_array("init_synth", tag + ".H")), 8e-16) << tag;
    EXPECT_LT(max_rel_diff(W, golden_array("init_synth", tag + ".W")), 8e-16) << tag;
  }
}

TEST(Mu, MatchesScikitLearnConvergencePath) { check_case("mu_synth_tol", 4); }
TEST(Mu, MatchesScikitLearnFixedIterations) { check_case("mu_synth_fixed", 2); }
TEST(Mu, MatchesScikitLearnWithRegularization) { check_case("mu_synth_reg", 2); }
TEST(Mu, MatchesScikitLearnSecondMatrix) { check_case("mu_synth2_tol", 1); }
TEST(Cd, MatchesScikitLearnConvergencePath) { check_case("cd_synth_tol", 3); }
TEST(Cd, MatchesScikitLearnWithRegularization) { check_case("cd_synth_reg", 2); }
TEST(Cd, MatchesScikitLearnFixedIterations) { check_case("cd_synth2_fixed", 1); }

void check_refit(const std::string& name) {
  SCOPED_TRACE(name);
  const auto c = nmf_golden()["cases"][name];
  auto X = synthetic_matrix<double>("synth");
  auto opts = options_of(c);
  const auto H = golden_array(name, "H");
  const int k = c["k"];
  // Three copies of the same spectra in one batch of two: slots refill and must agree.
  const auto res = refit_usages(ExecSpace(), X, {H, H, H}, k, 2, opts);
  const auto W = golden_array(name, "W");
  for (const auto& r : res) {
    EXPECT_EQ(r.n_iter, c["n_iter"].get<int>());
    EXPECT_LT(max_rel_diff(r.W, W), opts.solver == SolverKind::mu ? kMuTol : kCdTol);
    EXPECT_LT(rel_diff(r.final_error, c["final_error"]), 1e-9);
  }
}

TEST(Refit, MuMatchesScikitLearn) { check_refit("refit_mu_synth"); }
TEST(Refit, MuWithRegularizationMatchesScikitLearn) { check_refit("refit_mu_synth_reg"); }
TEST(Refit, CdMatchesScikitLearn) { check_refit("refit_cd_synth"); }
TEST(Refit, CdWithRegularizationMatchesScikitLearn) { check_refit("refit_cd_synth_reg"); }

/// ||X - W H||_F by brute force in long double.
long double direct_error(const std::vector<double>& x, size_type n, size_type g,
                         const std::vector<double>& W, const std::vector<double>& H, int k) {
  long double s = 0;
  for (size_type i = 0; i < n; ++i)
    for (size_type j = 0; j < g; ++j) {
      long double wh = 0;
      for (int t = 0; t < k; ++t) wh += (long double)W[size_t(i * k + t)] * H[size_t(t * g + j)];
      const long double d = x[size_t(i * g + j)] - wh;
      s += d * d;
    }
  return std::sqrt(s);
}

TEST(Error, IdentityEqualsDirectFrobenius) {
  size_type n, g;
  auto X = synthetic_matrix<double>("synth", &n, &g);
  const auto x = read_f64(data_dir() / "nmf" / "synth.X.f64");
  for (auto solver : {SolverKind::mu, SolverKind::cd}) {
    SolverOptions o;
    o.solver = solver;
    o.return_W = true;
    o.tol = 1e-3;
    std::vector<Job> jobs{{3, 0, 5, 0}, {3, 1, 6, 1}, {3, 2, 7, 2}};
    const auto res = factorize(ExecSpace(), X, jobs, 2, o);
    for (const auto& r : res) {
      const double d = double(direct_error(x, n, g, r.W, r.H, 3));
      EXPECT_LT(rel_diff(r.final_error, d), 1e-12) << to_string(solver);
      // error at init from the same identity, against W0/H0 drawn independently
      std::vector<double> H0(size_t(3 * g)), W0(size_t(n * 3));
      random_init<double>(r.job.seed, X.mean(), 3, n, g, H0.data(), W0.data());
      EXPECT_LT(rel_diff(r.error_at_init, double(direct_error(x, n, g, W0, H0, 3))), 1e-12);
    }
  }
}

// A replicate's numbers do not depend on its batch: every per-slot reduction of knmf's own
// kernels runs in a fixed order (bitwise equal; see test_solver_sparse for the all-knmf-kernel
// path). With dense X the two products go to the host BLAS, whose GEMM kernels tile the
// R*k rows into register blocks: a replicate's rows land at other tile positions in another
// batch, and OpenBLAS' AVX-512 edge tiles sum in another order, so the last bits may differ.
// Bound: 1e-12 relative (measured below 1e-13) and the same iteration counts.
TEST(Batch, ReplicateIsIdenticalAloneOrInABatch) {
  auto X = synthetic_matrix<double>("synth");
  for (auto solver : {SolverKind::mu, SolverKind::cd}) {
    SCOPED_TRACE(to_string(solver));
    SolverOptions o;
    o.solver = solver;
    o.return_W = true;
    std::vector<Job> jobs;
    for (int r = 0; r < 11; ++r) jobs.push_back(Job{4, r, 1000 + 7 * r, r});
    // 11 jobs through 8 slots: slots refill at different times and the batch shrinks.
    const auto batched = factorize(ExecSpace(), X, jobs, 8, o);
    std::set<int> iters;
    double worst = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const auto alone = factorize(ExecSpace(), X, {jobs[i]}, 1, o);
      EXPECT_EQ(batched[i].n_iter, alone[0].n_iter);
      worst = std::max({worst, max_rel_diff(batched[i].H, alone[0].H),
                        max_rel_diff(batched[i].W, alone[0].W)});
      EXPECT_LT(rel_diff(batched[i].final_error, alone[0].final_error), 1e-12);
      EXPECT_LT(rel_diff(batched[i].error_at_init, alone[0].error_at_init), 1e-12);
      iters.insert(batched[i].n_iter);
    }
    std::printf("dense %s: batched vs alone, worst factor rel diff %.3g\n", to_string(solver).c_str(), worst);
    EXPECT_LT(worst, 1e-12);
    EXPECT_GT(iters.size(), 2u) << "the jobs should converge at different times";
  }
}

TEST(Float, SinglePrecisionTracksDouble) {
  auto Xd = synthetic_matrix<double>("synth");
  auto Xf = synthetic_matrix<float>("synth");
  SolverOptions o;
  o.solver = SolverKind::mu;
  o.tol = 0;
  o.max_iter = 40;
  std::vector<Job> jobs{{4, 0, 3, 0}};
  const auto rd = factorize(ExecSpace(), Xd, jobs, 1, o);
  const auto rf = factorize(ExecSpace(), Xf, jobs, 1, o);
  EXPECT_LT(max_rel_diff(rf[0].H, rd[0].H), 1e-3);
  EXPECT_LT(rel_diff(rf[0].final_error, rd[0].final_error), 1e-5);
}

TEST(Norm, ChunkedNormEqualsLongDoubleAcrossChunkBoundaries) {
  const size_type count = 10007;
  Kokkos::View<double*, MemSpace> v("knmf::test::v", count);
  auto h = knmf::host_mirror(v);
  long double ref2 = 0, ref1 = 0;
  for (size_type i = 0; i < count; ++i) {
    h(i) = std::sin(double(i)) * 1e3 + 1e3 + double(i % 13) * 1e-7;
    ref2 += (long double)h(i) * h(i);
    ref1 += h(i);
  }
  Kokkos::deep_copy(v, h);
  for (size_type chunk : {size_type(1), size_type(7), size_type(1000), size_type(10007),
                          size_type(1) << 20}) {
    const auto s = value_stats(ExecSpace(), v.data(), count, chunk);
    EXPECT_LT(rel_diff(s.norm2, double(ref2)), 1e-14) << chunk;
    EXPECT_LT(rel_diff(s.sum, double(ref1)), 1e-14) << chunk;
    EXPECT_EQ(s.count, count);
  }
}

// ------------------------------------------------------------------ bad input
template <class F>
void expect_input_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no InputError; expected one mentioning '" << needle << "'";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

TEST(BadInput, EveryCheckFiresWithItsMessage) {
  std::vector<double> x{1, 2, 3, 4, 5, 6};
  expect_input_error([] { DenseMatrix<double>::from_host(ExecSpace(), 0, 3, nullptr, "empty.h5ad"); },
                     "empty");
  auto bad = x;
  bad[4] = -2.5;
  expect_input_error([&] { DenseMatrix<double>::from_host(ExecSpace(), 2, 3, bad.data(), "neg.h5ad"); },
                     "min -2.5 at row 1, column 1");
  bad = x;
  bad[2] = std::numeric_limits<double>::quiet_NaN();
  expect_input_error([&] { DenseMatrix<double>::from_host(ExecSpace(), 2, 3, bad.data(), "nan.h5ad"); },
                     "at row 0, column 2");
  auto X = DenseMatrix<double>::from_host(ExecSpace(), 2, 3, x.data(), "ok");
  SolverOptions o;
  expect_input_error([&] { factorize(ExecSpace(), X, {Job{0, 0, 1, 0}}, 1, o); }, "k = 0");
  expect_input_error([&] { factorize(ExecSpace(), X, {Job{2, 0, -3, 0}}, 1, o); },
                     "seed -3");
  expect_input_error(
      [&] { factorize(ExecSpace(), X, {Job{2, 0, std::int64_t(1) << 32, 0}}, 1, o); },
      "seed 4294967296");
  expect_input_error([&] { factorize(ExecSpace(), X, {Job{2, 0, 1, 0}}, 0, o); },
                     "--batch 0");
  auto o2 = o;
  o2.tol = -1;
  expect_input_error([&] { factorize(ExecSpace(), X, {Job{2, 0, 1, 0}}, 1, o2); }, "--tol -1");
  o2 = o;
  o2.max_iter = 0;
  expect_input_error([&] { factorize(ExecSpace(), X, {Job{2, 0, 1, 0}}, 1, o2); },
                     "--max-iter 0");
  o2 = o;
  o2.l1_ratio = 1.5;
  expect_input_error([&] { factorize(ExecSpace(), X, {Job{2, 0, 1, 0}}, 1, o2); },
                     "--l1-ratio 1.5");
  o2 = o;
  o2.alpha_W = -0.1;
  expect_input_error([&] { factorize(ExecSpace(), X, {Job{2, 0, 1, 0}}, 1, o2); },
                     "--alpha-usage -0.1");
  expect_input_error([&] { refit_usages(ExecSpace(), X, {{1, 2, 3}}, 2, 1, o); },
                     "expected k x g = 2 x 3 = 6");
  expect_input_error([&] { refit_usages(ExecSpace(), X, {{1, 2, 3, 4, -5, 6}}, 2, 1, o); },
                     "invalid value -5 at row 1, column 1");
}

}  // namespace
