// `knmf factorize` under mpiexec with KNMF_TEST_NP ranks (the test is registered for 1, 2, 3):
// outputs equal a single-process run, kill-and-restart resumes, a failing rank ends the run.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>

#include "driver_fixtures.hpp"
#include "driver_support.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/results/reader.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;
namespace fs = std::filesystem;

int np() { return std::atoi(std::getenv("KNMF_TEST_NP") ? std::getenv("KNMF_TEST_NP") : "2"); }

std::vector<std::string> mpi(std::vector<std::string> knmf_args) {
  std::vector<std::string> a{MPIEXEC, "-n", std::to_string(np()), "--oversubscribe", knmf::test::driver_path()};
  a.insert(a.end(), knmf_args.begin(), knmf_args.end());
  return a;
}

/// `env`: more VAR=value settings for every rank.
ProcResult run(const std::vector<std::string>& args, const std::string& env = "") {
  std::string cmd = "OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + env;
  for (const auto& a : args) cmd += " " + shell_quote(a);
  return run_command(cmd);
}

std::string counts() {
  return (pbmc_prepare_dir() / "cnmf_tmp" /
          "pbmcA.norm_counts.h5ad").string();
}

class MpiDriver : public ::testing::Test {};

// The one-process runs the cases compare against are the same for 1, 2 and 3 ranks. Under
// ctest they are made once, by the fixture test mpi_driver_references (MpiDriverReferences.*),
// into the folder KNMF_MPI_REFERENCES that mpi_driver_np1/2/3 then read (tests/mpi/CMakeLists.txt);
// a case run without that folder makes its own in its temporary folder.
fs::path shared_references() {
  const char* d = std::getenv("KNMF_MPI_REFERENCES");
  return d ? fs::path(d) : fs::path();
}

/// The first 1,000 of pbmcA's 2,896 cells (all 2,000 genes), for the cases whose cost is the
/// factorization itself (native, rows, Kullback-Leibler): what they check, MPI against one
/// process, bitwise or to rounding, holds for any input, and a third of the cells is a third
/// of their time (.ci/README.md, eighth round). The fixture writes it beside the references;
/// a case run without the fixture writes its own copy once per process.
constexpr std::int64_t kSmallCells = 1000;
void write_pbmc_subset(const fs::path& path) {
  const auto rd = io::H5adReader::open(counts());
  io::CsrBlock<float> X;
  rd.read_csr_rows(0, kSmallCells, X);
  auto names = rd.obs_names();
  names.resize(kSmallCells);
  io::write_h5ad(path, X, names, rd.var_names());
}
std::string small_counts() {
  const auto shared = shared_references() / "pbmcA-1000.h5ad";
  if (!shared_references().empty() && fs::exists(shared)) return shared.string();
  static TempDir own("knmf-mpi-small");
  const auto mine = own.path() / "pbmcA-1000.h5ad";
  if (!fs::exists(mine)) write_pbmc_subset(mine);
  return mine.string();
}

// The runs, each named for its reference (the -o file or the cNMF output folder are added).
std::vector<std::string> native_args() {
  return {"factorize", small_counts(), "-k", "5", "7", "--n-iter", "5", "--quiet"};
}
std::vector<std::string> rows_args() {
  return {"factorize", small_counts(), "-k", "6", "--n-iter", "4", "--quiet", "--save-usages"};
}
std::vector<std::string> kl_args() {
  return {"factorize", small_counts(), "-k", "4", "--n-iter", "3", "--quiet",
          "--solver", "mu", "--beta-loss", "kullback-leibler"};
}
std::vector<std::string> kill_args() {
  return {"factorize", counts(), "-k", "5", "6", "--n-iter", "8", "--batch", "2", "--quiet"};
}
const std::vector<std::string> cnmf_split{"--worker-index", "1", "--total-workers", "4", "--quiet"};

/// A copy of cNMF's pbmcA prepare output in DIR/pbmcA, writable.
void copy_pbmc_prepare(const fs::path& dir) {
  fs::create_directories(dir);
  fs::copy(pbmc_prepare_dir(), dir / "pbmcA", fs::copy_options::recursive);
  for (auto& e : fs::recursive_directory_iterator(dir))
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
}

/// The one-process results file of `args` (a native run): NAME.h5 in `dir`, made there.
std::string make_reference(const fs::path& dir, const std::string& name, std::vector<std::string> args) {
  const auto out = (dir / (name + ".h5")).string();
  args.insert(args.end(), {"-o", out});
  const auto r = run_knmf(args);
  EXPECT_EQ(r.status, 0) << r.out;
  return out;
}
/// cNMF mode: worker 1 of 4 of pbmcA's jobs in DIR/pbmcA.
void make_cnmf_reference(const fs::path& dir) {
  copy_pbmc_prepare(dir);
  auto one = std::vector<std::string>{"factorize", "--output-dir", dir.string(), "--name", "pbmcA"};
  one.insert(one.end(), cnmf_split.begin(), cnmf_split.end());
  const auto r = run_knmf(one);
  EXPECT_EQ(r.status, 0) << r.out;
}

/// The reference NAME: the shared one if the fixture made it, else made in `tmp`.
std::string reference(const fs::path& tmp, const std::string& name, const std::vector<std::string>& args) {
  const auto shared = shared_references() / (name + ".h5");
  if (!shared_references().empty() && fs::exists(shared)) return shared.string();
  return make_reference(tmp, name, args);
}
fs::path cnmf_reference(const fs::path& tmp) {
  const auto shared = shared_references() / "cnmf-one";
  if (!shared_references().empty() && fs::exists(shared / "pbmcA" / "cnmf_tmp")) return shared;
  make_cnmf_reference(tmp / "one");
  return tmp / "one";
}

// The fixture: every reference, each run checked (exit 0, a complete results file).
TEST(MpiDriverReferences, OneProcessRunsForEveryRankCount) {
  std::optional<TempDir> own;
  fs::path dir = shared_references();
  if (dir.empty()) {
    own.emplace("knmf-mpi-refs");
    dir = own->path();
  }
  fs::remove_all(dir);  // never an earlier build's
  fs::create_directories(dir);
  write_pbmc_subset(dir / "pbmcA-1000.h5ad");
  EXPECT_EQ(io::H5adReader::open(dir / "pbmcA-1000.h5ad").info().n_obs, kSmallCells);
  for (const auto& [name, args] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"native", native_args()}, {"rows", rows_args()}, {"kl", kl_args()}, {"kill", kill_args()}}) {
    const auto out = make_reference(dir, name, args);
    EXPECT_TRUE(results::ResultsReader::open(out).complete()) << name;
  }
  make_cnmf_reference(dir / "cnmf-one");
  std::size_t spectra = 0;
  for (auto& e : fs::directory_iterator(dir / "cnmf-one" / "pbmcA" / "cnmf_tmp"))
    spectra += e.path().string().find(".spectra.") != std::string::npos;
  EXPECT_EQ(spectra, 20u);
}

/// Compare two results files: bitwise, or within `tol` (relative, spectra) when reordered sums.
void compare_results(const std::string& a, const std::string& b, double tol) {
  const auto ra = results::ResultsReader::open(a), rb = results::ResultsReader::open(b);
  ASSERT_TRUE(ra.complete());
  ASSERT_TRUE(rb.complete());
  ASSERT_EQ(ra.ks(), rb.ks());
  for (int k : ra.ks()) {
    const auto sa = ra.spectra(k), sb = rb.spectra(k);
    if (tol == 0) {
      EXPECT_EQ(sa, sb) << "k=" << k;
    } else {
      EXPECT_LT(max_rel_diff(sb, sa), tol) << "k=" << k;
    }
    EXPECT_EQ(ra.table(k).iterations, rb.table(k).iterations);
    EXPECT_EQ(ra.table(k).seeds, rb.table(k).seeds);
  }
}

TEST_F(MpiDriver, NativeJobDistributionEqualsOneProcess) {
  TempDir tmp("knmf-mpi-native");
  const auto common = native_args();
  auto with = [&](std::string out, std::vector<std::string> extra) {
    auto a = common;
    a.insert(a.end(), {"-o", out});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const auto ref = reference(tmp.path(), "native", common);
  ASSERT_FALSE(HasFailure());
  for (const auto& extra : std::vector<std::vector<std::string>>{{}, {"--static"}}) {
    const auto out = (tmp.path() / ("mpi" + std::to_string(extra.size()) + ".h5")).string();
    const auto r = run(mpi(with(out, extra)));
    ASSERT_EQ(r.status, 0) << r.out;
    compare_results(ref, out, 0.0);  // whole replicates per rank: bitwise
  }
}

TEST_F(MpiDriver, NativeRowPartitionMatchesOneProcess) {
  TempDir tmp("knmf-mpi-rows");
  const auto out = (tmp.path() / "rows.h5").string();
  const auto a = rows_args();
  const auto ref = reference(tmp.path(), "rows", a);
  ASSERT_FALSE(HasFailure());
  auto rb = a;
  rb.insert(rb.end(), {"-o", out, "--distribute", "rows"});
  const auto r = run(mpi(rb));
  ASSERT_EQ(r.status, 0) << r.out;
  // reordered sums of W^T X and W^T W: bound measured < 1e-13, asserted at 1e-10
  compare_results(ref, out, 1e-10);
  const auto x = results::ResultsReader::open(ref), y = results::ResultsReader::open(out);
  EXPECT_LT(max_rel_diff(y.usages(6, 2), x.usages(6, 2)), 1e-10);  // W gathered from all ranks
}

// Kullback-Leibler (solver mu, --beta-loss): jobs mode is bitwise one process, rows mode to
// rounding (the beta rule's sums over the ranks).
TEST_F(MpiDriver, KullbackLeiblerJobsAndRowsMatchOneProcess) {
  TempDir tmp("knmf-mpi-kl");
  const auto a = kl_args();
  const auto ref = reference(tmp.path(), "kl", a);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(beta_loss_name(results::ResultsReader::open(ref).info().solver.beta_loss), "kullback-leibler");
  const auto jobs = (tmp.path() / "jobs.h5").string(), rows = (tmp.path() / "rows.h5").string();
  auto rj = a;
  rj.insert(rj.end(), {"-o", jobs});
  auto r = run(mpi(rj));
  ASSERT_EQ(r.status, 0) << r.out;
  compare_results(ref, jobs, 0.0);
  auto rr = a;
  rr.insert(rr.end(), {"-o", rows, "--distribute", "rows"});
  r = run(mpi(rr));
  ASSERT_EQ(r.status, 0) << r.out;
  compare_results(ref, rows, 1e-10);
}

TEST_F(MpiDriver, CnmfModeWritesTheSameFilesAsOneProcess) {
  TempDir tmp("knmf-mpi-cnmf");
  const fs::path one = cnmf_reference(tmp.path());
  ASSERT_FALSE(HasFailure());
  copy_pbmc_prepare(tmp.path() / "many");
  auto many = std::vector<std::string>{"factorize", "--output-dir", (tmp.path() / "many").string(), "--name", "pbmcA"};
  many.insert(many.end(), cnmf_split.begin(), cnmf_split.end());
  const auto r = run(mpi(many));
  ASSERT_EQ(r.status, 0) << r.out;
  std::set<std::string> a, b;
  for (auto& e : fs::directory_iterator(one / "pbmcA" / "cnmf_tmp"))
    if (e.path().string().find(".spectra.") != std::string::npos) a.insert(e.path().filename().string());
  for (auto& e : fs::directory_iterator(tmp.path() / "many" / "pbmcA" / "cnmf_tmp"))
    if (e.path().string().find(".spectra.") != std::string::npos) b.insert(e.path().filename().string());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 20u);
  for (const auto& f : a) {
    const auto x = io::read_df_npz((one / "pbmcA" / "cnmf_tmp" / f).string());
    const auto y = io::read_df_npz((tmp.path() / "many" / "pbmcA" / "cnmf_tmp" / f).string());
    EXPECT_EQ(x.data, y.data) << f;
  }
}

TEST_F(MpiDriver, KilledRunResumesWithoutRedoingFinishedJobs) {
  TempDir tmp("knmf-mpi-kill");
  const auto out = (tmp.path() / "r.h5").string();
  const auto a = kill_args();
  const auto ref = reference(tmp.path(), "kill", a);
  ASSERT_FALSE(HasFailure());
  auto ao = a;
  ao.insert(ao.end(), {"-o", out});
  const auto args = mpi(ao);
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();  // its own process group: the kill reaches mpiexec and every rank
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    std::freopen((tmp.path() / "log.txt").c_str(), "w", stdout);
    std::freopen((tmp.path() / "log.txt").c_str(), "a", stderr);
    std::vector<char*> argv;
    for (const auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  std::int64_t done = 0;
  for (int i = 0; i < 2400 && done < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    try {
      if (!fs::exists(out)) continue;
      const auto rd = results::ResultsReader::open(out);
      done = 0;
      for (int k : rd.ks())
        for (auto c : rd.completed(k)) done += c;
    } catch (const std::exception&) {
    }
  }
  // as a batch scheduler ends a job: every process of it (OpenMPI puts each rank in its own
  // process group, so kill the launcher's group and every rank by its command line)
  // The pattern is a regular expression that matches the ranks' command lines but not its own
  // text ("r[.]h5" against "r.h5"): the `sh -c` that run_command starts for pgrep holds the
  // pattern in its own command line, so a literal path matched that shell every time and the
  // wait below ran out its 100 rounds (5 s per rank count) without ever seeing the ranks gone.
  const auto pattern = shell_quote(out.substr(0, out.rfind('.')) + "[.]" + out.substr(out.rfind('.') + 1));
  kill(-pid, SIGKILL);
  run_command("pkill -KILL -f " + pattern);
  wait_child(pid, SIGKILL, "the killed mpiexec");
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {  // wait until no rank is left
    gone = run_command("pgrep -f " + pattern).status != 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gone) << "a rank of the killed run is still running after 5 s";
  std::int64_t before = 0;
  {
    const auto rd = results::ResultsReader::open(out);
    ASSERT_FALSE(rd.complete()) << "finished before the kill";
    for (int k : rd.ks())
      for (auto c : rd.completed(k)) before += c;
  }
  const auto r = run(mpi(ao));
  ASSERT_EQ(r.status, 0) << r.out;
  compare_results(ref, out, 0.0);
  std::printf("killed with %lld of 16 replicates committed; the rerun did the rest\n", (long long)before);
}

TEST_F(MpiDriver, AFailingRankEndsTheRunWithItsMessage) {
  // A file whose last rows hold a NaN: with --distribute rows only the last rank reads them.
  TempDir tmp("knmf-mpi-fail");
  const auto bad = (tmp.path() / "bad.h5ad").string();
  {
    std::vector<float> x(60 * 8, 0.0f);
    for (int i = 0; i < 60; ++i)
      for (int j = 0; j < 8; ++j)
        if ((i + j) % 3 == 0)
          x[size_t(i * 8 + j)] = i == 59 && j == 1 ? std::numeric_limits<float>::quiet_NaN() : float(1 + i % 5);
    io::write_h5ad(bad, dense_to_csr_block<io::CsrBlock<float>>(x, 8));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run(mpi({"factorize", bad, "-k", "2", "--n-iter", "2", "-o",
                          (tmp.path() / "r.h5").string(), "--distribute", "rows", "--log-json",
                          (tmp.path() / "log.json").string()}));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("bad.h5ad"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not finite"), std::string::npos) << r.out;
  EXPECT_LT(secs, 60.0);
  // nothing is written before every rank has read and checked its rows of X
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(tmp.path())) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, std::vector<std::string>{"bad.h5ad"}) << "a failed run left output behind";
  std::printf("failing rank: exit %d after %.1f s\n", r.status, secs);
}

/// Without Kokkos' warning of oversubscribed cores, which the other ranks print while rank 0
/// prints knmf's lines (the two can interleave within a line).
ProcResult run_lines(const std::vector<std::string>& args) {
  return run(args, "KOKKOS_DISABLE_WARNINGS=1");
}

/// knmf's own lines of an mpiexec run's output (the launcher adds its own report of a failure).
std::vector<std::string> knmf_lines(const std::string& out) {
  std::vector<std::string> v;
  for (const auto& l : lines(out))
    if (l.rfind("knmf", 0) == 0 || l.rfind("plan:", 0) == 0 || l.rfind("[k=", 0) == 0) v.push_back(l);
  return v;
}

TEST_F(MpiDriver, RunThatCannotFitStopsBeforeTheResultsFileAsWithoutMpi) {
  // as NativePlan.RunThatCannotFitOneReplicateStopsBeforeAllocating (one process): the same
  // one-line error, printed once, and no results file
  TempDir tmp("knmf-mpi-mem");
  for (const std::vector<std::string>& dist :
       {std::vector<std::string>{}, {"--static"}, {"--distribute", "rows"}, {"--distribute", "auto"}}) {
    const auto out = (tmp.path() / "r.h5").string();
    std::vector<std::string> a{"factorize", counts(), "-k", "7", "--n-iter", "2", "-o", out,
                               "--device-memory-limit", "1M"};
    a.insert(a.end(), dist.begin(), dist.end());
    const auto r = run_lines(mpi(a));
    const std::string what = dist.empty() ? "jobs" : dist.back();
    EXPECT_NE(r.status, 0) << what << "\n" << r.out;
    const auto ls = knmf_lines(r.out);
    ASSERT_EQ(ls.size(), 1u) << what << "\n" << r.out;
    EXPECT_EQ(ls[0].rfind("knmf: error: not enough ", 0), 0u) << what << "\n" << r.out;
    EXPECT_NE(ls[0].find("one replicate of k = 7 needs"), std::string::npos) << what << "\n" << r.out;
    EXPECT_NE(ls[0].find("available"), std::string::npos) << what << "\n" << r.out;
    EXPECT_FALSE(fs::exists(out)) << what << ": no output for a run that cannot start";
  }
  // a forced --batch that does not fit is refused the same way (with as many jobs: a larger
  // --batch is capped at the jobs there are)
  const auto out = (tmp.path() / "b.h5").string();
  const auto b = run_lines(mpi({"factorize", counts(), "-k", "7", "--n-iter", "100000", "-o", out,
                                "--batch", "100000", "--quiet"}));
  EXPECT_NE(b.status, 0);
  const auto ls = knmf_lines(b.out);
  ASSERT_EQ(ls.size(), 1u) << b.out;
  EXPECT_NE(ls[0].find("--batch 100000 needs"), std::string::npos) << b.out;
  EXPECT_FALSE(fs::exists(out));
  // a bad option value: one line from rank 0
  const auto d = run_lines(mpi({"factorize", counts(), "-k", "7", "-o", out, "--distribute", "cells"}));
  EXPECT_NE(d.status, 0);
  ASSERT_EQ(knmf_lines(d.out).size(), 1u) << d.out;
  EXPECT_EQ(knmf_lines(d.out)[0],
            "knmf: error: --distribute 'cells' is invalid: expected jobs, rows or auto");
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(MpiDriver, NndsvdRunsWithTheJobDistributionAndIsRefusedByTheRowPartition) {
  TempDir tmp("knmf-mpi-nndsvd");
  const auto out = (tmp.path() / "r.h5").string();
  const auto rows = run_lines(mpi({"factorize", counts(), "-k", "5", "--n-iter", "2", "-o", out,
                                   "--init", "nndsvd", "--distribute", "rows", "--quiet"}));
  EXPECT_NE(rows.status, 0) << rows.out;
  const auto ls = knmf_lines(rows.out);
  ASSERT_EQ(ls.size(), 1u) << rows.out;
  EXPECT_EQ(ls[0], "knmf: error: --init nndsvd is not available with X partitioned by rows "
                   "(--distribute rows): the randomized SVD's LU and QR need every row on one "
                   "rank; use --distribute jobs or --init random");
  EXPECT_FALSE(fs::exists(out)) << "no output for a run that cannot start";
  const auto jobs = run_lines(mpi({"factorize", counts(), "-k", "5", "--n-iter", "2", "-o", out,
                                   "--init", "nndsvd", "--max-iter", "20", "--quiet"}));
  EXPECT_EQ(jobs.status, 0) << jobs.out;
  EXPECT_TRUE(fs::exists(out));
}

TEST_F(MpiDriver, SummaryAndNothingToDoAreThoseOfOneProcess) {
  TempDir tmp("knmf-mpi-summary");
  const auto out = (tmp.path() / "r.h5").string();
  const std::vector<std::string> a{"factorize", counts(), "-k", "5", "--n-iter", "2", "-o", out,
                                   "--max-iter", "20"};
  const auto r = run_lines(mpi(a));
  ASSERT_EQ(r.status, 0) << r.out;
  const auto ls = knmf_lines(r.out);
  ASSERT_FALSE(ls.empty());
  const std::string ranks = np() > 1 ? " on " + std::to_string(np()) + " rank(s)" : "";
  EXPECT_EQ(ls.back().rfind("knmf factorize: 2 job(s)" + ranks + " in ", 0), 0u) << r.out;
  EXPECT_NE(ls.back().find(np() > 1 ? ", peak device memory per rank " : ", peak device memory "),
            std::string::npos) << r.out;
  // the progress line forced by the run's last replicate: once (rank 0's progress hook, which
  // counts the replicates of every rank), as without MPI
  std::size_t last_progress = 0;
  for (const auto& l : ls) last_progress += l.rfind("[k=5] 2/2 replicates, mean ", 0) == 0;
  EXPECT_EQ(last_progress, 1u) << r.out;
  const auto again = run_lines(mpi(a));
  ASSERT_EQ(again.status, 0) << again.out;
  const auto la = knmf_lines(again.out);
  ASSERT_EQ(la.size(), 2u) << again.out;  // the header and
  EXPECT_EQ(la[1], "knmf factorize: nothing to do");
}

// Replicates that end non_finite (X of scale 1e154 in double: the products overflow) fail the
// run under MPI as without it: rank 0, which stores every replicate, prints the one line
// counting all of them, once, and every rank takes its count and exits 1 (each rank runs
// under `sh -c` here, which prints its exit status; the other ranks exited 0 before). The
// results file is not complete.
TEST_F(MpiDriver, NonFiniteReplicatesFailTheRunOnEveryRank) {
  TempDir tmp("knmf-mpi-nonfinite");
  const fs::path in = tmp / "in.h5ad", out = tmp / "r.h5";
  write_small_counts<double>(in, 40, 8, {}, 1e154);
  const auto r = run({MPIEXEC, "-n", std::to_string(np()), "--oversubscribe", "sh", "-c",
                      "\"$0\" \"$@\"; echo \"rank exit status $?\"", knmf::test::driver_path(), "factorize",
                      in.string(), "-k", "2", "3", "--n-iter", "3", "--max-iter", "30", "-o",
                      out.string(), "--quiet"});
  std::size_t ones = 0;
  for (std::size_t at = r.out.find("rank exit status 1"); at != std::string::npos;
       at = r.out.find("rank exit status 1", at + 1))
    ++ones;
  EXPECT_EQ(ones, std::size_t(np())) << "every rank exits 1\n" << r.out;
  EXPECT_EQ(r.out.find("rank exit status 0"), std::string::npos) << r.out;
  const std::string line = "knmf: error: 6 of 6 replicates (k = 2: 3 of 3; k = 3: 3 of 3) became non-finite";
  const auto at = r.out.find(line);
  EXPECT_NE(at, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(line, at + 1), std::string::npos) << "printed by one rank only\n" << r.out;
  EXPECT_FALSE(results::ResultsReader::open(out).complete());
}

// A bad X (a NaN value) under the job distribution: every rank reads and validates X, so each
// met the error, printed it ("... (rank 1)") and MPI_Abort ended the job with Open MPI's
// banner. The ranks now agree on it before anything runs: one line, from rank 0, exit 1 on
// every rank, and nothing written, as without MPI.
TEST_F(MpiDriver, BadXIsReportedOnceAsWithoutMpi) {
  TempDir tmp("knmf-mpi-bad-x");
  const fs::path in = tmp / "in.h5ad", out = tmp / "r.h5";
  fs::copy_file(data_dir() / "h5ad" / "bad_nan_value.h5ad", in);
  const auto r = run({MPIEXEC, "-n", std::to_string(np()), "--oversubscribe", "sh", "-c",
                      "\"$0\" \"$@\"; echo \"rank exit status $?\"", knmf::test::driver_path(), "factorize",
                      in.string(), "-k", "2", "--n-iter", "2", "-o", out.string(), "--quiet"});
  std::vector<std::string> errors;
  std::size_t ones = 0;
  for (const auto& l : lines(r.out)) {
    if (l.rfind("knmf: error: ", 0) == 0) errors.push_back(l);
    if (l == "rank exit status 1") ++ones;
  }
  ASSERT_EQ(errors.size(), 1u) << r.out;
  EXPECT_NE(errors[0].find(in.string()), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("not finite"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[0].find("(rank"), std::string::npos) << errors[0];
  EXPECT_EQ(r.out.find("MPI_ABORT"), std::string::npos) << r.out;
  EXPECT_EQ(ones, std::size_t(np())) << "every rank exits 1\n" << r.out;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
