// The result store's sinks (src/run/result_sinks.hpp), chosen from the configuration: in cNMF
// mode a replicate this process computed gets its spectra file (none when it failed), one
// another MPI rank sent (store_received) none, and every one of them a --log-json line; the
// failed ones are counted for the run's failure line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "knmf/run/factorize.hpp"
#include "run/factorize_detail.hpp"
#include "run/result_sinks.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
namespace fs = std::filesystem;

ReplicateResult replicate(int k, int iter, std::int64_t g, ReplicateStatus status) {
  ReplicateResult r;
  r.job = Job{k, iter, 1000 + iter, iter};
  r.n = 3;
  r.g = g;
  r.H.assign(std::size_t(k * g), 0.5);
  r.n_iter = 10;
  r.status = status;
  return r;
}

std::size_t lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

/// A cNMF-mode run's configuration (with a --log-json file) and plan in a fresh folder.
struct CnmfRun {
  explicit CnmfRun(const char* name) : tmp(name) {
    c.output_dir = tmp.path().string();
    c.name = "run";
    c.log_json = (tmp.path() / "log.json").string();
    plan.paths = io::CnmfPaths(c.output_dir, c.name);
  }
  test::TempDir tmp;
  FactorizeConfig c;
  detail::RunPlan plan;
};

TEST(ResultSinks, CnmfModeWritesSpectraOnlyForItsOwnFinishedReplicates) {
  CnmfRun run("knmf-result-sinks");
  const FactorizeConfig& c = run.c;
  const detail::RunPlan& plan = run.plan;
  fs::create_directories(plan.paths.tmp_dir());
  detail::ResultStore store(c, run.plan, {"g0", "g1", "g2"});
  store.open("");
  store.begin_k(2);
  store.store(replicate(2, 0, 3, ReplicateStatus::converged));
  store.store_received(replicate(2, 1, 3, ReplicateStatus::converged));
  store.store(replicate(2, 2, 3, ReplicateStatus::non_finite));
  store.end_k();
  EXPECT_TRUE(fs::exists(plan.paths.iter_spectra(2, 0)));
  EXPECT_FALSE(fs::exists(plan.paths.iter_spectra(2, 1))) << "the rank that computed it writes it";
  EXPECT_FALSE(fs::exists(plan.paths.iter_spectra(2, 2))) << "a failed replicate has no file";
  EXPECT_EQ(lines_of(c.log_json), 3u) << "the log has every replicate";
  EXPECT_FALSE(store.finish()) << "cNMF mode has no results file to mark complete";

  FactorizeSummary sum;
  store.report_failures(sum, c, 0.0, 3, 3);
  EXPECT_EQ(sum.jobs_failed, 1);
  EXPECT_NE(sum.failure.find("1 of 3 replicates (k = 2)"), std::string::npos) << sum.failure;
  EXPECT_NE(sum.failure.find("no spectra file"), std::string::npos) << sum.failure;
}

TEST(ResultSinks, NoLogFileForARunThatComputesNothing) {
  CnmfRun run("knmf-result-sinks-empty");
  detail::ResultStore store(run.c, run.plan, {});
  store.open_results_only();
  EXPECT_FALSE(fs::exists(run.c.log_json));
  store.open("");
  EXPECT_TRUE(fs::exists(run.c.log_json));
}

}  // namespace
