// Issue 15, defect 3: a replicate that is not a valid factorization (status non_finite) is a
// failed attempt. The writer records it (committed, so a resume does not run it again) but
// never marks the file complete while there is one; compare leaves it out (it has nothing to
// compare: its partner on the other side is unpaired).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "compare_fixtures.hpp"
#include "knmf/results/compare.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/results/writer.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
using knmf::test::FakeRun;
using knmf::test::TempDir;

results::CompareReport compare_files(const std::string& a, const std::string& b) {
  results::CompareOptions o;
  o.a = a;
  o.b = b;
  return results::compare_runs(o);
}

/// `run` as a results file, the jobs in `failed` written non_finite (their spectra as given).
bool write_with_failures(const FakeRun& run, const std::filesystem::path& path,
                         const std::vector<std::pair<int, int>>& failed) {
  results::ResultsWriteOptions wo;
  wo.fsync = false;
  auto w = results::ResultsWriter::create_or_resume(path, run_info_of(run), wo);
  for (const Job& j : w.pending()) {
    ReplicateResult res;
    res.job = j;
    res.n = 7;
    res.g = run.g();
    res.H = run.spectra.at({j.k, j.iter});
    res.n_iter = run.iterations.at({j.k, j.iter});
    res.error_at_init = 1000.0;
    res.final_error = run.final_error.at({j.k, j.iter});
    res.status = ReplicateStatus::converged;
    if (std::find(failed.begin(), failed.end(), std::pair{j.k, j.iter}) != failed.end()) {
      res.status = ReplicateStatus::non_finite;
      res.final_error = std::numeric_limits<double>::quiet_NaN();
    }
    w.write(res);
  }
  return w.finish();
}

TEST(ResultsFailed, NonFiniteReplicatesAreCommittedButTheFileIsNeverComplete) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3, 4}, 3, 20);
  const auto path = tmp / "r.h5";
  EXPECT_FALSE(write_with_failures(run, path, {{4, 1}}));
  EXPECT_FALSE(results::ResultsReader::open(path).complete());
  // resumed: nothing pending (the failure is not run again), the failure is listed, and
  // finishing again still leaves the file incomplete
  auto w = results::ResultsWriter::create_or_resume(path, run_info_of(run));
  EXPECT_TRUE(w.pending().empty());
  ASSERT_EQ(w.failed().size(), 1u);
  EXPECT_EQ(w.failed()[0].k, 4);
  EXPECT_EQ(w.failed()[0].iter, 1);
  EXPECT_EQ(w.n_done(), 6);
  EXPECT_FALSE(w.finish());
  const auto reader = results::ResultsReader::open(path);
  EXPECT_FALSE(reader.complete());
  EXPECT_EQ(reader.table(4).status[1], results::ReplicateState::non_finite);
  // without failures the same run completes
  EXPECT_TRUE(write_with_failures(run, tmp / "ok.h5", {}));
  EXPECT_TRUE(results::ResultsReader::open(tmp / "ok.h5").complete());
}

// Side A's job (4, 1) failed (its spectra happen to equal B's): it is not a result, so the
// job has no partner and the comparison fails unless unpaired jobs are allowed.
TEST(ResultsFailed, CompareLeavesOutNonFiniteReplicates) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3, 4}, 3, 20);
  write_with_failures(run, tmp / "a.h5", {{4, 1}});
  write_with_failures(run, tmp / "b.h5", {});
  const auto r = compare_files((tmp / "a.h5").string(), (tmp / "b.h5").string());
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.overall.jobs, 5);
  EXPECT_TRUE(r.only_in_a.empty());
  EXPECT_EQ(r.only_in_b, (std::vector<std::pair<int, int>>{{4, 1}}));
  EXPECT_NE(r.a.description.find("1 non_finite, left out"), std::string::npos) << r.a.description;
}

}  // namespace
