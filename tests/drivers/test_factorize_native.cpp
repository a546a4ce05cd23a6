// `knmf factorize` in native mode: an .h5ad of the user's own and one resumable results file.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "driver_support.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/results/results_file.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;
namespace fs = std::filesystem;

std::string pbmc_counts() {
  return (pbmc_prepare_dir() / "cnmf_tmp" /
          "pbmcA.norm_counts.h5ad").string();
}

class Native : public ::testing::Test {};

TEST_F(Native, JobTableEqualsCnmfPrepareForTheSameArguments) {
  TempDir tmp("knmf-native-jobs");
  const auto out = (tmp.path() / "r.h5").string();
  // cNMF's reference run was prepared with -k 5 6 7 8 --n-iter 20 --seed 14; run one
  // replicate's worth of work only (tol large) to keep the test short.
  const auto r = run_knmf({"factorize", pbmc_counts(), "-k", "8", "7", "6", "5", "--n-iter", "20",
                           "--seed", "14", "-o", out, "--max-iter", "2", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.out;
  const auto reader = io::ResultsReader::open(out);
  const auto cnmf = io::read_cnmf_job_table((real_dir() / "cnmf-pbmc-donor-a" / "prepare" /
                                             "pbmcA" / "cnmf_tmp" / "pbmcA.nmf_params.df.npz").string());
  const auto& jobs = reader.info().jobs;
  ASSERT_EQ(jobs.size(), cnmf.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(jobs[i].k, cnmf[i].k);
    EXPECT_EQ(jobs[i].iter, cnmf[i].iter);
    EXPECT_EQ(jobs[i].seed, cnmf[i].seed);
  }
  EXPECT_TRUE(reader.complete());
  const auto t = reader.table(7);
  for (int it = 0; it < 20; ++it) EXPECT_EQ(t.seeds[size_t(it)], cnmf[size_t(40 + it)].seed);
}

void expect_same_results(const std::string& a, const std::string& b) {
  const auto ra = io::ResultsReader::open(a), rb = io::ResultsReader::open(b);
  ASSERT_EQ(ra.ks(), rb.ks());
  EXPECT_TRUE(ra.complete());
  EXPECT_TRUE(rb.complete());
  for (int k : ra.ks()) {
    EXPECT_EQ(ra.spectra(k), rb.spectra(k)) << "k=" << k;  // bitwise: the solver is deterministic
    const auto ta = ra.table(k), tb = rb.table(k);
    EXPECT_EQ(ta.seeds, tb.seeds);
    EXPECT_EQ(ta.iterations, tb.iterations);
    EXPECT_EQ(ta.error_at_init, tb.error_at_init);
    EXPECT_EQ(ta.final_error, tb.final_error);
    EXPECT_EQ(ta.status, tb.status);
    EXPECT_EQ(ta.completed, tb.completed);
  }
}

TEST_F(Native, KillAndResumeGivesTheSameResultsFile) {
  TempDir tmp("knmf-native-kill");
  const auto full = (tmp.path() / "full.h5").string();
  const auto part = (tmp.path() / "part.h5").string();
  const std::vector<std::string> common{"factorize", pbmc_counts(), "-k", "5", "6", "--n-iter", "6",
                                        "--seed", "3", "--batch", "2", "--quiet"};
  auto with = [&](const std::string& out) {
    auto a = common;
    a.insert(a.end(), {"-o", out});
    return a;
  };
  const auto r = run_knmf(with(full));
  ASSERT_EQ(r.status, 0) << r.out;
  const pid_t pid = spawn_knmf(with(part), (tmp.path() / "log.txt").string());
  // kill once some (not all) replicates are committed
  std::int64_t done = 0;
  for (int i = 0; i < 1200 && done < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    if (!fs::exists(part)) continue;
    try {
      const auto rd = io::ResultsReader::open(part);
      done = 0;
      for (int k : rd.ks())
        for (auto c : rd.completed(k)) done += c;
    } catch (const std::exception&) {
    }
  }
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  {
    const auto rd = io::ResultsReader::open(part);
    ASSERT_FALSE(rd.complete()) << "the run finished before it could be killed";
  }
  const auto resumed = run_knmf(with(part));
  ASSERT_EQ(resumed.status, 0) << resumed.out;
  expect_same_results(full, part);
}

TEST_F(Native, ChangedArgumentsOnResumeAreRefused) {
  TempDir tmp("knmf-native-args");
  const auto out = (tmp.path() / "r.h5").string();
  const auto a = run_knmf({"factorize", pbmc_counts(), "-k", "5", "--n-iter", "2", "-o", out,
                           "--max-iter", "5", "--quiet"});
  ASSERT_EQ(a.status, 0) << a.out;
  const auto b = run_knmf({"factorize", pbmc_counts(), "-k", "5", "--n-iter", "2", "-o", out,
                           "--max-iter", "7", "--solver", "mu", "--quiet"});
  EXPECT_NE(b.status, 0);
  const auto ls = lines(b.out);
  ASSERT_EQ(ls.size(), 1u) << b.out;
  EXPECT_NE(ls[0].find("--max-iter 5"), std::string::npos) << ls[0];
  EXPECT_NE(ls[0].find("--max-iter 7"), std::string::npos) << ls[0];
  EXPECT_NE(ls[0].find("--solver mu"), std::string::npos) << ls[0];
  // the same arguments again: nothing left to do, file untouched and complete
  const auto c = run_knmf({"factorize", pbmc_counts(), "-k", "5", "--n-iter", "2", "-o", out,
                           "--max-iter", "5"});
  EXPECT_EQ(c.status, 0) << c.out;
  EXPECT_NE(c.out.find("nothing to do"), std::string::npos) << c.out;
}

TEST_F(Native, UnwritableOutputIsRefusedWithoutOutput) {
  const auto r = run_knmf({"factorize", pbmc_counts(), "-k", "5", "-o", "/proc/knmf/r.h5"});
  EXPECT_NE(r.status, 0);
  ASSERT_EQ(lines(r.out).size(), 1u) << r.out;
  EXPECT_NE(r.out.find("/proc/knmf"), std::string::npos) << r.out;
  TempDir tmp("knmf-native-missing");
  const auto missing = (tmp.path() / "missing.h5ad").string();
  const auto m = run_knmf({"factorize", missing, "-k", "5", "-o", (tmp.path() / "r.h5").string()});
  EXPECT_NE(m.status, 0);
  ASSERT_EQ(lines(m.out).size(), 1u) << m.out;
  EXPECT_NE(m.out.find(missing), std::string::npos) << m.out;
  EXPECT_FALSE(fs::exists(tmp.path() / "r.h5"));
}

}  // namespace

namespace {
using namespace knmf::test;
TEST(NativePlan, RunThatCannotFitOneReplicateStopsBeforeAllocating) {
  TempDir tmp("knmf-native-mem");
  const auto in = (pbmc_prepare_dir() / "cnmf_tmp" /
                   "pbmcA.norm_counts.h5ad").string();
  const auto r = run_knmf({"factorize", in, "-k", "7", "--n-iter", "2", "-o",
                           (tmp.path() / "r.h5").string(), "--device-memory-limit", "1M"});
  EXPECT_NE(r.status, 0);
  const auto ls = lines(r.out);
  ASSERT_FALSE(ls.empty());
  EXPECT_NE(ls.back().find("one replicate of k = 7 needs"), std::string::npos) << r.out;
  EXPECT_NE(ls.back().find("available"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "r.h5")) << "no output for a run that cannot start";
  // a forced --batch that does not fit is refused the same way (with as many jobs: a larger
  // --batch is capped at the jobs there are)
  const auto b = run_knmf({"factorize", in, "-k", "7", "--n-iter", "100000", "-o",
                           (tmp.path() / "b.h5").string(), "--batch", "100000", "--quiet"});
  EXPECT_NE(b.status, 0);
  EXPECT_NE(b.out.find("--batch 100000 needs"), std::string::npos) << b.out;
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "b.h5"));
}

// Issue 15, defect 5: --batch 1000000 on 2 jobs planned (and allocated) a million replicate
// slots, 21.8 GB for a 200 x 100 X. The batch is capped at the jobs pending, and the plan says so.
TEST(NativePlan, ForcedBatchIsCappedAtThePendingJobs) {
  TempDir tmp("knmf-native-batch");
  const auto in = (tmp.path() / "tiny.h5ad").string();
  ASSERT_EQ(run_knmf({"simulate", "-o", in, "--cells", "200", "--genes", "100", "--seed", "5",
                      "--programs", "3"})
                .status,
            0);
  const auto out = (tmp.path() / "r.h5").string();
  const auto r = run_knmf({"factorize", in, "-k", "3", "--n-iter", "2", "-o", out, "--batch",
                           "1000000", "--device-memory-limit", "64M"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("plan: k = 3: 2 replicate(s) per batch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--batch 1000000 capped at the 2 job(s) of k = 3 pending"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(out + " is complete"), std::string::npos) << r.out;
  // a --batch within the jobs is taken as given, without the note
  const auto b = run_knmf({"factorize", in, "-k", "3", "--n-iter", "2", "-o",
                           (tmp.path() / "b.h5").string(), "--batch", "2"});
  ASSERT_EQ(b.status, 0) << b.out;
  EXPECT_NE(b.out.find("plan: k = 3: 2 replicate(s) per batch"), std::string::npos) << b.out;
  EXPECT_EQ(b.out.find("capped"), std::string::npos) << b.out;
}

// Issue 15, defect 9: -o naming the input reported HDF5's "file locking flag values don't
// match". The same file by another path, a symbolic or a hard link is refused, nothing written.
TEST(NativePlan, OutputThatIsTheInputIsRefused) {
  TempDir tmp("knmf-native-same");
  const auto in = (tmp.path() / "tiny.h5ad").string();
  ASSERT_EQ(run_knmf({"simulate", "-o", in, "--cells", "60", "--genes", "30", "--seed", "5",
                      "--programs", "3"})
                .status,
            0);
  std::filesystem::create_symlink(in, tmp.path() / "soft.h5");
  std::filesystem::create_hard_link(in, tmp.path() / "hard.h5");
  auto listing = [&] {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(tmp.path()))
      names.push_back(e.path().filename().string() + ":" +
                      std::to_string(e.is_symlink() ? 0 : std::filesystem::file_size(e.path())));
    std::sort(names.begin(), names.end());
    return names;
  };
  const auto before = listing();
  const std::string bytes = [&] {
    std::ifstream f(in, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }();
  for (const auto& out : {(tmp.path() / "." / "tiny.h5ad").string(), (tmp.path() / "soft.h5").string(),
                          (tmp.path() / "hard.h5").string()}) {
    const auto r = run_knmf({"factorize", in, "-k", "3", "--n-iter", "2", "-o", out});
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_EQ(lines(r.out), std::vector<std::string>{"knmf: error: -o '" + out +
                                                     "': output is the input file '" + in + "'"});
  }
  EXPECT_EQ(listing(), before);
  std::ifstream f(in, std::ios::binary);
  EXPECT_TRUE(std::string(std::istreambuf_iterator<char>(f), {}) == bytes) << "the input changed";
}

TEST(NativePlan, BadDtypeOrFormatIsOneLine) {
  TempDir tmp("knmf-native-opts");
  const auto in = (pbmc_prepare_dir() / "cnmf_tmp" / "pbmcA.norm_counts.h5ad").string();
  const auto out = (tmp.path() / "r.h5").string();
  const auto d = run_knmf({"factorize", in, "-k", "7", "-o", out, "--dtype", "half"});
  EXPECT_EQ(d.status, 1);
  EXPECT_EQ(lines(d.out), std::vector<std::string>{
                              "knmf: error: --dtype 'half' is invalid: expected float or double"});
  const auto f = run_knmf({"factorize", in, "-k", "7", "-o", out, "--format", "csr"});
  EXPECT_EQ(f.status, 1);
  EXPECT_EQ(lines(f.out), std::vector<std::string>{
                              "knmf: error: --format 'csr' is invalid: expected auto, dense or sparse"});
  EXPECT_FALSE(std::filesystem::exists(out));
}
}  // namespace
