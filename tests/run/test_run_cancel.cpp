// The run's cancellation and progress hook (FactorizeConfig::on_progress): a run stopped by it
// commits the replicates finished so far, reports `cancelled`, leaves a results file that is
// not complete, and the same run again resumes from it to the results of a run never stopped.
// Also what the summary says of X's device format (FactorizeSummary::x_format, `knmf demo`'s
// step 3).
#include <gtest/gtest.h>

#include <sstream>

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

}  // namespace
