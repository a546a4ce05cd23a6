// The run's cancellation and progress hook (FactorizeConfig::on_progress): a run stopped by it
// commits the replicates finished so far, reports `cancelled`, leaves a results file that is
// not complete, and the same run again resumes from it to the results of a run never stopped;
// the hook's calls (an iteration's, a finished replicate's) as the driver's progress line needs
// them, and no progress line from the library itself. Also what the summary says of X's device
// format (FactorizeSummary::x_format, `knmf demo`'s step 3).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../drivers/driver_fixtures.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/run/factorize.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;

FactorizeConfig small_run(const std::filesystem::path& x, const std::filesystem::path& out) {
  FactorizeConfig c;
  c.input = x.string();
  c.results = out.string();
  c.ks = {2, 3};
  c.n_iter = 3;
  c.seed = 14;
  c.quiet = true;
  c.batch = 1;  // one replicate at a time: a resumed replicate is bitwise the uninterrupted one
  c.solver.max_iter = 60;
  return c;
}

TEST(RunCancel, StopsCleanlyAndResumesToTheSameResults) {
  TempDir tmp("knmf-run-cancel");
  write_small_counts<double>(tmp / "x.h5ad", 50, 12);
  std::ostringstream log;

  const auto full = run_factorize(small_run(tmp / "x.h5ad", tmp / "full.h5"), log);
  ASSERT_FALSE(full.cancelled);
  ASSERT_EQ(full.jobs_run, 6);

  auto c = small_run(tmp / "x.h5ad", tmp / "cut.h5");
  std::vector<RunProgress> seen;
  c.on_progress = [&](const RunProgress& p) {
    seen.push_back(p);
    return p.done < 2;  // stop once two replicates are finished
  };
  const auto cut = run_factorize(c, log);
  EXPECT_TRUE(cut.cancelled);
  EXPECT_EQ(cut.jobs_run, 2);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().total, 6);
  EXPECT_EQ(seen.front().k, 2);
  EXPECT_EQ(seen.front().running, 1);
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i].seconds, seen[i - 1].seconds);
  {
    const auto r = results::ResultsReader::open(tmp / "cut.h5");
    EXPECT_FALSE(r.complete());
    int committed = 0;
    for (int k : r.ks())
      for (auto done : r.completed(k)) committed += done;
    EXPECT_EQ(committed, 2);
  }

  // the same run again, with no hook: it takes up the four replicates left
  const auto rest = run_factorize(small_run(tmp / "x.h5ad", tmp / "cut.h5"), log);
  EXPECT_FALSE(rest.cancelled);
  EXPECT_EQ(rest.jobs_skipped, 2);
  EXPECT_EQ(rest.jobs_run, 4);
  const auto a = results::ResultsReader::open(tmp / "full.h5");
  const auto b = results::ResultsReader::open(tmp / "cut.h5");
  ASSERT_TRUE(b.complete());
  for (int k : {2, 3})
    for (int it = 0; it < 3; ++it)
      EXPECT_EQ(a.spectra(k, it), b.spectra(k, it)) << "k " << k << " iter " << it;
}

TEST(RunSummary, NamesTheDeviceFormatOfX) {
  TempDir tmp("knmf-run-summary");
  write_small_counts<double>(tmp / "x.h5ad", 50, 12);  // CSR on disk, 2/3 nonzero
  std::ostringstream log;
  const auto autom = run_factorize(small_run(tmp / "x.h5ad", tmp / "auto.h5"), log);
  EXPECT_FALSE(autom.x_format.sparse);
  EXPECT_NE(autom.x_format.reason.find(">= crossover"), std::string::npos) << autom.x_format.reason;
  EXPECT_FALSE(autom.x_streamed);

  auto c = small_run(tmp / "x.h5ad", tmp / "sparse.h5");
  c.format = XFormat::sparse;
  const auto sparse = run_factorize(c, log);
  EXPECT_TRUE(sparse.x_format.sparse);
  EXPECT_EQ(sparse.x_format.reason, "--format sparse");

  // nothing left to run: X is not placed, no format
  const auto again = run_factorize(small_run(tmp / "x.h5ad", tmp / "auto.h5"), log);
  EXPECT_EQ(again.jobs_run, 0);
  EXPECT_TRUE(again.x_format.reason.empty());
}

TEST(RunProgressHook, CallsAfterEveryIterationAndForEveryFinishedReplicate) {
  TempDir tmp("knmf-run-progress");
  write_small_counts<double>(tmp / "x.h5ad", 50, 12);
  auto c = small_run(tmp / "x.h5ad", tmp / "r.h5");
  c.quiet = false;  // the library prints its plan and summary, never a progress line
  c.log_json = (tmp / "log.json").string();
  std::vector<RunProgress> seen;
  c.on_progress = [&](const RunProgress& p) {
    seen.push_back(p);
    return true;
  };
  std::ostringstream log;
  const auto sum = run_factorize(c, log);
  ASSERT_EQ(sum.jobs_run, 6);
  EXPECT_FALSE(sum.cancelled);
  EXPECT_EQ(log.str().find("[k="), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("is complete"), std::string::npos) << log.str();

  // the replicates in the order they were stored (the log), with their iterations
  std::vector<nlohmann::json> stored;
  std::ifstream in(tmp / "log.json");
  for (std::string line; std::getline(in, line);) stored.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(stored.size(), 6u);

  ASSERT_FALSE(seen.empty());
  std::int64_t done = 0, iterations = 0;
  int iteration_calls = 0;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    const auto& p = seen[i];
    EXPECT_EQ(p.total, 6);
    if (i > 0) {
      EXPECT_GE(p.seconds, seen[i - 1].seconds);
      EXPECT_GE(p.k, seen[i - 1].k) << "the k values in order";
    }
    if (p.event == RunProgress::Event::iteration) {
      ++iteration_calls;
      EXPECT_LE(p.running, 1) << "one replicate per batch";
      EXPECT_EQ(p.done, done);
      EXPECT_EQ(p.iterations, iterations);
      continue;
    }
    // a finished replicate: counted, with its iterations, as the store got it
    ASSERT_LT(done, 6) << "more finished calls than replicates";
    const auto& r = stored[std::size_t(done)];
    iterations += r["n_iter"].get<std::int64_t>();
    ++done;
    EXPECT_EQ(p.k, r["k"].get<int>());
    EXPECT_EQ(p.done, done);
    EXPECT_EQ(p.iterations, iterations);
    EXPECT_EQ(p.running, 0);
  }
  EXPECT_EQ(done, 6);
  EXPECT_GE(iteration_calls, iterations) << "a call after every iteration";
  // the last call: the run's last replicate (the driver's line is forced there)
  EXPECT_EQ(seen.back().event, RunProgress::Event::finished);
  EXPECT_EQ(seen.back().done, seen.back().total);
}

}  // namespace
