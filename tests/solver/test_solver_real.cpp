// The solver on the real cNMF-prepared matrix (pbmcA norm_counts, 2,896 cells x 2,000 HVG,
// float64) against scikit-learn 1.2.1 and against cNMF's own factorize run.
#include <gtest/gtest.h>

#include <fstream>

#include "knmf/io/dataframe.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/load.hpp"
#include "knmf/solver/init.hpp"
#include "solver_fixtures.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;

std::filesystem::path pbmc_prepare() {
  return pbmc_prepare_dir() / "cnmf_tmp";
}
std::filesystem::path pbmc_reference() {
  return pbmc_reference_dir();
}

const DenseMatrix<double>& real_matrix() {
  // Loaded once for all tests; deliberately never freed (it must not outlive Kokkos).
  static const auto* X = [] {
    auto reader = io::H5adReader::open(pbmc_prepare() / "pbmcA.norm_counts.h5ad");
    return new DenseMatrix<double>(load_dense<double>(ExecSpace(), reader));
  }();
  return *X;
}

class Real : public ::testing::Test {};

TEST_F(Real, MatrixMatchesTheFile) {
  const auto meta = nmf_golden()["real"];
  const auto& X = real_matrix();
  EXPECT_EQ(X.rows(), meta["shape"][0].get<size_type>());
  EXPECT_EQ(X.cols(), meta["shape"][1].get<size_type>());
  EXPECT_LT(rel_diff(X.stats().sum, meta["sum"]), 1e-13);
  EXPECT_LT(rel_diff(X.stats().norm2, meta["norm2"]), 1e-13);
}

TEST_F(Real, RandomInitEqualsScikitLearn) {
  const auto& X = real_matrix();
  const auto run = nmf_golden()["cases"]["init_real"]["runs"][0];
  const int k = run["k"];
  std::vector<double> H(size_t(k * X.cols())), W(size_t(X.rows() * k));
  random_init<double>(run["seed"], X.mean(), k, X.rows(), X.cols(), H.data(), W.data());
  EXPECT_LT(max_rel_diff(H, golden_array("init_real", "H")), 8e-16);
  EXPECT_LT(max_rel_diff(W, golden_array("init_real", "W")), 8e-16);
}

void check_real_case(const std::string& name) {
  SCOPED_TRACE(name);
  const auto c = nmf_golden()["cases"][name];
  auto opts = options_of(c);
  opts.return_W = true;
  std::vector<Job> jobs;
  for (const auto& r : c["runs"]) jobs.push_back(Job{c["k"], int(jobs.size()), r["seed"], 0});
  const auto res = factorize(ExecSpace(), real_matrix(), jobs, 2, opts);
  for (size_t i = 0; i < res.size(); ++i) {
    const auto& run = c["runs"][i];
    const std::string tag = "s" + std::to_string(run["seed"].get<std::int64_t>());
    SCOPED_TRACE(tag);
    EXPECT_EQ(res[i].n_iter, run["n_iter"].get<int>());
    EXPECT_LT(max_rel_diff(res[i].H, golden_array(name, tag + ".H")), 1e-9);
    EXPECT_LT(max_rel_diff(res[i].W, golden_array(name, tag + ".W")), 1e-9);
    EXPECT_LT(rel_diff(res[i].error_at_init, run["error_at_init"]), 1e-10);
    EXPECT_LT(rel_diff(res[i].final_error, run["final_error"]), 1e-9);
  }
}

TEST_F(Real, MuMatchesScikitLearnConvergencePath) { check_real_case("mu_real_tol"); }
TEST_F(Real, MuMatchesScikitLearnFixedIterationsWithRegularization) {
  check_real_case("mu_real_fixed_reg");
}

TEST_F(Real, RefitMatchesScikitLearn) {
  for (const std::string name : {"refit_mu_real", "refit_cd_real"}) {
    SCOPED_TRACE(name);
    const auto c = nmf_golden()["cases"][name];
    const auto res = refit_usages(ExecSpace(), real_matrix(), {golden_array(name, "H")},
                                          c["k"], 1, options_of(c));
    EXPECT_EQ(res[0].n_iter, c["n_iter"].get<int>());
    EXPECT_LT(max_rel_diff(res[0].W, golden_array(name, "W")), name == "refit_mu_real" ? 1e-9 : 1e-6);
    EXPECT_LT(rel_diff(res[0].final_error, c["final_error"]), 1e-9);
  }
}

// CD against cNMF's own run: the 20 k=5 replicates of the reference job table. The contract:
// same iteration count for >= 95% of them, spectra within 1e-6 relative on those.
TEST_F(Real, CdMatchesCnmfReferenceRun) {
  std::vector<Job> jobs;
  std::vector<int> ref_iters;
  std::vector<double> ref_err;
  std::ifstream in(pbmc_reference() / "sklearn_cd_jobs.jsonl");
  for (std::string line; std::getline(in, line) && jobs.size() < 20;) {
    const auto j = nlohmann::json::parse(line);
    if (j["k"] != 5) continue;
    jobs.push_back(Job{5, j["iter"], j["seed"], j["job"]});
    ref_iters.push_back(j["n_iter"]);
    ref_err.push_back(j["err"]);
  }
  ASSERT_EQ(jobs.size(), 20u);
  SolverOptions o;  // cNMF's yaml: cd, tol 1e-4, max_iter 1000, no regularization
  const auto res = factorize(ExecSpace(), real_matrix(), jobs, 8, o);
  const auto merged = io::read_df_npz(
      (pbmc_reference() / "pbmcA" / "cnmf_tmp" / "pbmcA.spectra.k_5.merged.df.npz").string());
  ASSERT_EQ(merged.rows, 100);
  int same = 0;
  double worst = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    // rows iter<r>_topic<t>: the reference spectra of this job
    std::vector<double> ref(size_t(5 * merged.cols));
    for (int t = 0; t < 5; ++t) {
      const std::string label = "iter" + std::to_string(jobs[i].iter) + "_topic" + std::to_string(t + 1);
      std::int64_t row = -1;
      for (std::int64_t r = 0; r < merged.rows; ++r)
        if (std::get<std::string>(merged.index[size_t(r)]) == label) row = r;
      ASSERT_GE(row, 0) << label;
      for (std::int64_t j = 0; j < merged.cols; ++j) ref[size_t(t * merged.cols + j)] = merged.at(row, j);
    }
    EXPECT_LT(rel_diff(res[i].final_error, ref_err[i]), 1e-6) << "job " << i;
    if (res[i].n_iter == ref_iters[i]) {
      ++same;
      const double d = max_rel_diff(res[i].H, ref);
      worst = std::max(worst, d);
      EXPECT_LT(d, 1e-6) << "job " << i;
    } else {
      std::printf("job %zu: %d iterations (reference %d)\n", i, res[i].n_iter, ref_iters[i]);
    }
  }
  std::printf("CD vs cNMF reference: %d/20 same iteration count, worst spectra rel diff %.3g\n",
              same, worst);
  EXPECT_GE(same, 19);
}

}  // namespace
