// A full disk (issue 15, defect 1): the knmf driver runs with a test-only LD_PRELOAD library
// (tests/support/enospc_shim.c) that fails every write to a regular file with ENOSPC once a
// byte budget is spent. At every budget, from "nothing can be written" to "the last byte
// fails", the driver ends with exit status 1 (not a crash in HDF5's shutdown, 139, nor an
// abort) and one line naming the output file and the OS reason; no temporary remains, and
// nothing reads as complete: a results file left by a disk filling mid-run is the resumable
// file of an interrupted run, which a rerun with room completes. (A disk that fills after the
// results file is marked complete fails only the close's rewrite of its superblock, which
// changes no byte: that run succeeds.)
#include <cstdlib>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "driver_support.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/results/reader.hpp"
#include "driver_fixtures.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;
namespace fs = std::filesystem;

/// `knmf args...` with the shim: at most `budget` bytes reach regular files (-1: no limit);
/// the bytes written go to `count` when given.
/// With `only`, the budget is that of the files whose path ends with it (the others unlimited).
ProcResult run_with_budget(const std::vector<std::string>& args, long long budget,
                           const fs::path& count = {}, const std::string& only = {}) {
  // Under the sanitizer build the shim comes before ASan's runtime: allow that, keeping the
  // suite's other sanitizer options (exit code, leaks).
  const char* asan = std::getenv("ASAN_OPTIONS");
  std::string env = "ASAN_OPTIONS=" + shell_quote(std::string(asan ? asan : "") +
                                                  (asan && *asan ? ":" : "") + "verify_asan_link_order=0") +
                    " LD_PRELOAD=" + shell_quote(knmf::test::enospc_shim_path());
  if (budget >= 0) env += " KNMF_TEST_WRITE_BUDGET=" + std::to_string(budget);
  if (!count.empty()) env += " KNMF_TEST_WRITE_COUNT=" + shell_quote(count.string());
  if (!only.empty()) env += " KNMF_TEST_WRITE_ONLY=" + shell_quote(only);
  return run_knmf(args, env);
}

long long read_count(const fs::path& p) {
  long long n = -1;
  std::ifstream(p) >> n;
  return n;
}

/// 60 cells x 30 genes of small positive counts.
void write_x(const fs::path& path) { write_small_counts(path, 60, 30); }

/// Budgets from none to all but the last byte of a run that writes `total` bytes.
std::vector<long long> budgets(long long total) {
  std::vector<long long> b{0, 1, 600, 4096};
  for (double f : {0.02, 0.1, 0.25, 0.4, 0.55, 0.7, 0.75, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.99}) b.push_back((long long)(f * double(total)));
  b.push_back(total - 64);
  b.push_back(total - 1);
  b.erase(std::remove_if(b.begin(), b.end(), [&](long long v) { return v < 0 || v >= total; }), b.end());
  return b;
}

/// Exit 1 and one line: "knmf: error: cannot write <target>: No space left on device".
void expect_disk_full(const ProcResult& r, const std::string& target, const std::string& what) {
  EXPECT_EQ(r.status, 1) << what << "\n" << r.out;
  const auto ls = lines(r.out);
  ASSERT_EQ(ls.size(), 1u) << what << "\n" << r.out;
  EXPECT_EQ(ls[0].rfind("knmf: error: cannot write " + target, 0), 0u) << what << ": " << ls[0];
  EXPECT_NE(ls[0].find(": No space left on device"), std::string::npos) << what << ": " << ls[0];
}

bool has_temporaries(const fs::path& dir) {
  for (const auto& f : files_under(dir))
    if (f.find(".knmf-tmp-") != std::string::npos) return true;
  return false;
}

TEST(FullDisk, NativeRunEndsInOneLineAtEveryBudget) {
  TempDir tmp("knmf-full-disk");
  const fs::path in = tmp / "in.h5ad";
  write_x(in);
  const fs::path out = tmp / "out";
  fs::create_directories(out);
  const fs::path r = out / "r.h5";
  const std::vector<std::string> args{"factorize", in.string(), "-k", "3", "4", "5", "6", "--n-iter", "6",
                                      "--save-usages", "--batch", "3", "-o", r.string(), "--quiet"};
  const auto full = run_with_budget(args, -1, tmp / "count");
  ASSERT_EQ(full.status, 0) << full.out;
  const long long total = read_count(tmp / "count");
  ASSERT_GT(total, 10000);
  int partial = 0;
  for (long long b : budgets(total)) {
    const std::string what = "budget " + std::to_string(b) + " of " + std::to_string(total);
    fs::remove_all(out);
    fs::create_directories(out);
    const auto res = run_with_budget(args, b);
    EXPECT_FALSE(has_temporaries(out)) << what;
    if (res.status == 0 && b > total / 2) {
      // only the close's rewrite of the superblock failed, after `complete` was flushed: the
      // file on disk is the complete one (that rewrite changes no byte)
      EXPECT_TRUE(results::ResultsReader::open(r).complete()) << what;
      continue;
    }
    expect_disk_full(res, r.string(), what);
    if (!fs::exists(r)) {
      EXPECT_TRUE(files_under(out).empty()) << what;
      continue;
    }
    // the disk filled after the file was created: an interrupted run, resumable, and the one
    // error line says what the file keeps and what to do (issue 27: it only named the error)
    ++partial;
    EXPECT_FALSE(results::ResultsReader::open(r).complete()) << what;
    const auto line = lines(res.out).at(0);
    EXPECT_NE(line.find(r.string() + " keeps "), std::string::npos) << what << ": " << line;
    EXPECT_NE(line.find(" replicates committed ("), std::string::npos) << what << ": " << line;
    EXPECT_NE(line.find("run the same command again to resume it, or remove " + r.string()),
              std::string::npos) << what << ": " << line;
    const auto again = run_knmf(args);
    EXPECT_EQ(again.status, 0) << what << "\n" << again.out;
    EXPECT_TRUE(results::ResultsReader::open(r).complete()) << what;
  }
  EXPECT_GT(partial, 3);  // the budgets reach past the file's creation
}

// --log-json is written as the replicates finish (a log to follow). Its writes were not
// checked: a disk that filled while the log was written left a run that exited 0 with a log
// that stopped short. Here only the log's writes are limited (KNMF_TEST_WRITE_ONLY): at every
// budget short of the whole log the run fails with the one line naming the log.
TEST(FullDisk, LogJsonThatCannotBeWrittenFailsTheRun) {
  TempDir tmp("knmf-full-disk-log");
  const fs::path in = tmp / "in.h5ad";
  write_x(in);
  const fs::path out = tmp / "out";
  const fs::path r = out / "r.h5", log = out / "log.json";
  const std::vector<std::string> args{"factorize", in.string(), "-k", "3", "4", "--n-iter", "6", "-o",
                                      r.string(), "--log-json", log.string(), "--quiet"};
  fs::create_directories(out);
  const auto full = run_with_budget(args, -1, tmp / "count", "/log.json");
  ASSERT_EQ(full.status, 0) << full.out;
  const long long total = read_count(tmp / "count");
  ASSERT_EQ(total, static_cast<long long>(fs::file_size(log))) << "the count is the log's bytes";
  // (the log's length varies from run to run with the digits of each replicate's seconds:
  // the largest budget stays a quarter of the log short)
  for (long long b : {0LL, 1LL, total / 3, total / 2, total * 3 / 4}) {
    const std::string what = "log budget " + std::to_string(b) + " of " + std::to_string(total);
    fs::remove_all(out);
    fs::create_directories(out);
    const auto res = run_with_budget(args, b, {}, "/log.json");
    expect_disk_full(res, log.string(), what);
    // the results file holds what was committed: an interrupted run, resumed without the log
    EXPECT_FALSE(results::ResultsReader::open(r).complete()) << what;
  }
}

TEST(FullDisk, SimulateEndsInOneLineAtEveryBudget) {
  TempDir tmp("knmf-full-disk-sim");
  const fs::path x = tmp / "x.h5ad";
  const std::vector<std::string> sim{"simulate", "-o", x.string(), "--cells", "80", "--genes", "40",
                                     "--seed", "5", "--programs", "3"};
  const auto full = run_with_budget(sim, -1, tmp / "count");
  ASSERT_EQ(full.status, 0) << full.out;
  const auto made = files_under(tmp.path());
  const long long total = read_count(tmp / "count");
  ASSERT_GT(total, 10000);
  for (long long b : budgets(total)) {
    const std::string what = "simulate, budget " + std::to_string(b) + " of " + std::to_string(total);
    for (const auto& f : made) fs::remove(tmp / f);
    const auto res = run_with_budget(sim, b);
    // simulate writes X, then the truth frames: whichever the disk filled on is named
    EXPECT_EQ(res.status, 1) << what << "\n" << res.out;
    const auto ls = lines(res.out);
    ASSERT_FALSE(ls.empty()) << what;
    EXPECT_EQ(ls.back().rfind("knmf: error: cannot write " + tmp.path().string(), 0), 0u) << what << ": " << ls.back();
    EXPECT_NE(ls.back().find(": No space left on device"), std::string::npos) << what << ": " << ls.back();
    for (std::size_t i = 0; i + 1 < ls.size(); ++i) EXPECT_EQ(ls[i].find("error"), std::string::npos) << what << ": " << ls[i];
    EXPECT_FALSE(has_temporaries(tmp.path())) << what;
  }
}

// cNMF mode: the replicate spectra files (each written whole under a temporary name).
TEST(FullDisk, CnmfModeEndsInOneLineAtEveryBudget) {
  TempDir tmp("knmf-full-disk-cnmf");
  const fs::path x = tmp / "x.h5ad";
  write_x(x);
  const io::CnmfPaths p = make_cnmf_run(tmp.path(), "run", x, {{3, 0, 101}, {3, 1, 102}, {4, 0, 103}, {4, 1, 104}});
  const auto before = files_under(tmp.path());
  const std::vector<std::string> args{"factorize", "--output-dir", tmp.path().string(), "--name", "run", "--quiet"};
  const auto full = run_with_budget(args, -1, tmp / "count");
  ASSERT_EQ(full.status, 0) << full.out;
  const long long total = read_count(tmp / "count");
  ASSERT_GT(total, 1000);
  for (long long b : budgets(total)) {
    const std::string what = "cNMF mode, budget " + std::to_string(b) + " of " + std::to_string(total);
    for (const auto& f : files_under(tmp.path()))
      if (std::find(before.begin(), before.end(), f) == before.end()) fs::remove(tmp / f);
    const auto res = run_with_budget(args, b);
    EXPECT_EQ(res.status, 1) << what << "\n" << res.out;
    const auto ls = lines(res.out);
    ASSERT_EQ(ls.size(), 1u) << what << "\n" << res.out;
    EXPECT_EQ(ls[0].rfind("knmf: error: cannot write " + p.tmp_dir(), 0), 0u) << what << ": " << ls[0];
    EXPECT_NE(ls[0].find(": No space left on device"), std::string::npos) << what << ": " << ls[0];
    EXPECT_FALSE(has_temporaries(tmp.path())) << what;
  }
}

}  // namespace
