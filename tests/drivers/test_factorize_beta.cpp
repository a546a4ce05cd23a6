// `knmf factorize` with a beta-divergence loss (solver mu, beta_loss != frobenius), as a
// process: cNMF mode takes the yaml's beta_loss (cNMF writes solver mu for it), native mode
// takes --beta-loss; the refusals are one line, exit 1, nothing written.
#include <gtest/gtest.h>

#include <fstream>

#include "driver_fixtures.hpp"
#include "driver_support.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/load.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/solver/nmf.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;
namespace fs = std::filesystem;

void write_yaml(const io::CnmfPaths& p, const std::string& beta_loss, const std::string& solver) {
  std::ofstream(p.nmf_run_parameters())
      << "alpha_H: 0.0\nalpha_W: 0.0\nbeta_loss: " << beta_loss
      << "\ninit: random\nl1_ratio: 0.0\nmax_iter: 200\nsolver: " << solver << "\ntol: 0.0001\n";
}

/// The library's factorization of the jobs on the file's X (double, dense).
std::vector<ReplicateResult> library_run(const fs::path& x, const std::vector<Job>& jobs,
                                         const SolverOptions& o) {
  const auto reader = io::H5adReader::open(x);
  const auto X = load_dense<double>(ExecSpace(), reader);
  return factorize(ExecSpace(), X, jobs, 1, o);
}

TEST(FactorizeBeta, CnmfModeWithKullbackLeiblerInTheYamlFactorizes) {
  TempDir tmp("knmf-cnmf-kl");
  write_small_counts<double>(tmp / "x.h5ad", 40, 8);
  const std::vector<CnmfJob> table{{2, 0, 101}, {2, 1, 102}, {3, 0, 103}};
  const auto p = make_cnmf_run(tmp.path(), "run", tmp / "x.h5ad", table);
  write_yaml(p, "kullback-leibler", "mu");
  const auto r = run_knmf({"factorize", "--output-dir", tmp.path().string(), "--name", "run",
                           "--quiet"});
  ASSERT_EQ(r.status, 0) << r.out;
  SolverOptions o;
  o.solver = SolverKind::mu;
  o.beta_loss = 1.0;
  o.max_iter = 200;
  std::vector<Job> jobs;
  for (const auto& j : table) jobs.push_back(Job{int(j[0]), int(j[1]), j[2], std::int64_t(jobs.size())});
  const auto want = library_run(tmp / "x.h5ad", jobs, o);
  SolverOptions frob = o;
  frob.beta_loss = 2.0;
  const auto frobenius = library_run(tmp / "x.h5ad", jobs, frob);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto df = io::read_df_npz(p.iter_spectra(jobs[i].k, jobs[i].iter));
    ASSERT_EQ(df.rows, jobs[i].k);
    EXPECT_LT(max_rel_diff(df.data, want[i].H), 1e-12) << "job " << i;
    EXPECT_GT(max_rel_diff(df.data, frobenius[i].H), 1e-3) << "job " << i << " is Frobenius";
  }
}

TEST(FactorizeBeta, CnmfModeRefusesABetaLossWithSolverCd) {
  TempDir tmp("knmf-cnmf-kl-cd");
  write_small_counts<double>(tmp / "x.h5ad", 40, 8);
  const auto p = make_cnmf_run(tmp.path(), "run", tmp / "x.h5ad");
  write_yaml(p, "kullback-leibler", "cd");
  const auto before = files_under(tmp.path());
  const auto r = run_knmf({"factorize", "--output-dir", tmp.path().string(), "--name", "run"});
  EXPECT_EQ(r.status, 1) << r.out;
  const auto ls = lines(r.out);
  ASSERT_EQ(ls.size(), 1u) << r.out;
  EXPECT_NE(ls[0].find("needs solver mu"), std::string::npos) << ls[0];
  EXPECT_EQ(files_under(tmp.path()), before);
}

TEST(FactorizeBeta, NativeModeBetaLossRecordedAndRefusals) {
  TempDir tmp("knmf-native-kl");
  write_small_counts<double>(tmp / "x.h5ad", 40, 8);
  const std::string x = (tmp / "x.h5ad").string(), out = (tmp / "r.h5").string();
  struct Case {
    std::vector<std::string> extra;
    std::string needle;
  };
  const std::vector<Case> refused{
      {{"--beta-loss", "bogus", "--solver", "mu"}, "--beta-loss 'bogus'"},
      {{"--beta-loss", "kullback-leibler", "--solver", "cd"}, "--solver cd with --beta-loss kullback-leibler"},
      {{"--beta-loss", "kullback-leibler"}, "--solver cd"},  // cd is the default solver
      // X has zeros: scikit-learn refuses beta_loss <= 0 on it
      {{"--beta-loss", "itakura-saito", "--solver", "mu"}, "X contains zeros"},
      {{"--beta-loss", "-1", "--solver", "mu"}, "X contains zeros"},
  };
  for (const auto& c : refused) {
    std::vector<std::string> args{"factorize", x, "-k", "2", "--n-iter", "2", "-o", out, "--quiet"};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const auto r = run_knmf(args);
    EXPECT_EQ(r.status, 1) << c.needle << "\n" << r.out;
    const auto ls = lines(r.out);
    ASSERT_EQ(ls.size(), 1u) << r.out;
    EXPECT_NE(ls[0].find(c.needle), std::string::npos) << ls[0];
    EXPECT_FALSE(fs::exists(out)) << c.needle;
  }
  const auto r = run_knmf({"factorize", x, "-k", "2", "--n-iter", "3", "-o", out, "--quiet",
                           "--solver", "mu", "--beta-loss", "kullback-leibler"});
  ASSERT_EQ(r.status, 0) << r.out;
  const auto rd = results::ResultsReader::open(out);
  EXPECT_EQ(beta_loss_name(rd.info().solver.beta_loss), "kullback-leibler");
  const auto t = rd.table(2);
  SolverOptions o;
  o.solver = SolverKind::mu;
  o.beta_loss = 1.0;
  std::vector<Job> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back(Job{2, i, t.seeds[size_t(i)], i});
  const auto want = library_run(tmp / "x.h5ad", jobs, o);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(t.iterations[i], want[i].n_iter);
    // the divergence sqrt(2 D_KL), not the Frobenius norm
    EXPECT_LT(rel_diff(t.final_error[i], want[i].final_error), 1e-12);
    EXPECT_LT(rel_diff(t.error_at_init[i], want[i].error_at_init), 1e-12);
  }
}

}  // namespace
