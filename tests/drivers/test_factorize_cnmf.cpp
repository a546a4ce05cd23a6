// `knmf factorize` in cNMF mode, end to end on cNMF's real prepared run (pbmcA), as a process.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>

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

fs::path prepare_dir() { return pbmc_prepare_dir(); }
fs::path reference_tmp() {
  return pbmc_reference_dir() / "pbmcA" / "cnmf_tmp";
}

/// A writable copy of cNMF's prepare outputs.
void copy_run(const fs::path& to) {
  fs::copy(prepare_dir(), to / "pbmcA", fs::copy_options::recursive);
  for (auto& e : fs::recursive_directory_iterator(to))
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
}

std::set<std::string> spectra_files(const fs::path& dir) {
  std::set<std::string> s;
  for (auto& e : fs::directory_iterator(dir / "pbmcA" / "cnmf_tmp")) {
    const auto name = e.path().filename().string();
    // final names only (a killed writer's temporary is `.NAME...knmf-tmp-*`)
    if (name[0] != '.' && name.find(".spectra.k_") != std::string::npos) s.insert(name);
  }
  return s;
}

/// The spectra of a run in `dir` are cNMF's: 80 files, each within 1e-5 of cNMF's merged
/// spectra for at least 95% of the jobs, and each loads in pandas as cNMF's combine loads it.
void expect_cnmf_spectra(const fs::path& dir) {
  ASSERT_EQ(spectra_files(dir).size(), 80u);
  io::CnmfPaths paths(dir.string(), "pbmcA");
  const auto jobs = io::read_cnmf_job_table(paths.nmf_replicate_parameters());
  int within = 0;
  double worst = 0;
  for (int k : {5, 6, 7, 8}) {
    const auto ref = io::read_df_npz((reference_tmp() / ("pbmcA.spectra.k_" + std::to_string(k) +
                                                         ".merged.df.npz")).string());
    for (int it = 0; it < 20; ++it) {
      const auto df = io::read_df_npz(paths.iter_spectra(k, it));
      ASSERT_EQ(df.rows, k);
      ASSERT_EQ(df.cols, ref.cols);
      for (int t = 0; t < k; ++t) EXPECT_EQ(std::get<std::int64_t>(df.index[size_t(t)]), t + 1);
      EXPECT_EQ(df.columns, ref.columns);
      double dmax = 0, smax = 0;
      for (int t = 0; t < k; ++t) {
        const std::string label = "iter" + std::to_string(it) + "_topic" + std::to_string(t + 1);
        std::int64_t row = -1;
        for (std::int64_t q = 0; q < ref.rows; ++q)
          if (std::get<std::string>(ref.index[size_t(q)]) == label) row = q;
        ASSERT_GE(row, 0);
        for (std::int64_t j = 0; j < df.cols; ++j) {
          dmax = std::max(dmax, std::abs(df.at(t, j) - ref.at(row, j)));
          smax = std::max(smax, std::abs(ref.at(row, j)));
        }
      }
      worst = std::max(worst, dmax / smax);
      within += dmax / smax < 1e-5;
    }
  }
  std::printf("cNMF drop-in: %d/80 jobs within 1e-5 of cNMF's merged spectra, worst %.3g\n",
              within, worst);
  EXPECT_GE(within, 76);  // >= 95%

  // cmake/bootstrap.sh installs python3-numpy and python3-pandas: a missing one fails
  ASSERT_TRUE(have_python("numpy, pandas"))
      << "/usr/bin/python3 with numpy and pandas is missing (cmake/bootstrap.sh installs them)";
  // Load every file exactly as cNMF's combine does.
  const auto py = run_python(R"(
import glob, sys, numpy as np, pandas as pd
files = sorted(glob.glob(sys.argv[1] if len(sys.argv) > 1 else ')" +
                                 (dir / "pbmcA" / "cnmf_tmp").string() + R"(/pbmcA.spectra.k_*.iter_*.df.npz'))
genes = [l.strip() for l in open(')" + (prepare_dir() / "pbmcA.overdispersed_genes.txt").string() + R"(')]
assert len(files) == 80, len(files)
for f in files:
    k = int(f.split('.k_')[1].split('.')[0])
    df = pd.DataFrame(**np.load(f, allow_pickle=True))
    assert df.shape == (k, 2000), (f, df.shape)
    assert list(df.index) == list(range(1, k + 1)), f
    assert list(df.columns) == genes, f
    assert df.values.dtype == np.float64
    df2 = pd.DataFrame(**np.load(f, allow_pickle=False))
    assert df2.equals(df)
print('pandas ok', len(files))
)",
                             dir);
  EXPECT_EQ(py.status, 0) << py.out;
  EXPECT_NE(py.out.find("pandas ok 80"), std::string::npos) << py.out;
}

/// One run of cNMF's 80 jobs, shared by the three tests that read it (the device-kernels and
/// sanitizer builds take 30-100 s per run of the 80 jobs, so the jobs run once, not three
/// times): two workers in the same folder; worker 0 (`--batch 4`) is killed without warning
/// once a few replicates are written and resumed with `--skip-completed-runs`, then worker 1
/// runs. The drop-in comparison reads the files of this killed, resumed and shared run (a
/// plain uninterrupted run in cNMF mode is tested by the smaller runs below and by the MPI
/// driver tests' one-process runs).
struct SharedRun {
  TempDir tmp{"knmf-cnmf"};
  std::set<std::string> before_kill;                  // final names when worker 0 was killed
  std::map<std::string, fs::file_time_type> mtimes;   // of those
  std::vector<std::string> unreadable;                // of those, any that did not load
  ProcResult resumed, worker1;
  std::set<std::string> after_worker0, after_both;

  SharedRun() {
    copy_run(tmp.path());
    const std::string dir = tmp.path().string();
    const std::vector<std::string> worker0{"factorize", "--output-dir", dir, "--name", "pbmcA",
                                           "--worker-index", "0", "--total-workers", "2", "--batch", "4"};
    const pid_t pid = spawn_knmf(worker0, (tmp.path() / "log1.txt").string());
    // wait until a few replicates are written, then kill without warning
    for (int i = 0; i < 600 && spectra_files(tmp.path()).size() < 6; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    kill(pid, SIGKILL);
    wait_child(pid, SIGKILL, "the killed worker 0");
    before_kill = spectra_files(tmp.path());
    // every file under a final name is complete
    for (const auto& f : before_kill) {
      const auto p = tmp.path() / "pbmcA" / "cnmf_tmp" / f;
      try {
        io::read_df_npz(p.string());
      } catch (const std::exception&) {
        unreadable.push_back(f);
      }
      mtimes[f] = fs::last_write_time(p);
    }
    auto again = worker0;
    again.push_back("--skip-completed-runs");
    resumed = run_knmf(again);
    after_worker0 = spectra_files(tmp.path());
    if (resumed.status == 0)
      worker1 = run_knmf({"factorize", "--output-dir", dir, "--name", "pbmcA", "--worker-index",
                          "1", "--total-workers", "2", "--quiet"});
    after_both = spectra_files(tmp.path());
  }
};

const SharedRun& shared_run() {
  static const SharedRun run;  // its folder is removed at exit
  return run;
}

class CnmfMode : public ::testing::Test {};

TEST_F(CnmfMode, DropInForCnmfFactorizeMatchesCnmfsRun) {
  const auto& run = shared_run();
  ASSERT_EQ(run.resumed.status, 0) << run.resumed.out;
  ASSERT_EQ(run.worker1.status, 0) << run.worker1.out;
  expect_cnmf_spectra(run.tmp.path());
}

TEST_F(CnmfMode, TwoWorkersWriteExactlyTheEightyFiles) {
  const auto& run = shared_run();
  ASSERT_EQ(run.resumed.status, 0) << run.resumed.out;
  EXPECT_EQ(run.after_worker0.size(), 40u);
  ASSERT_EQ(run.worker1.status, 0) << run.worker1.out;
  EXPECT_EQ(run.after_both.size(), 80u);
  std::set<std::string> expect;
  for (int k : {5, 6, 7, 8})
    for (int it = 0; it < 20; ++it)
      expect.insert("pbmcA.spectra.k_" + std::to_string(k) + ".iter_" + std::to_string(it) + ".df.npz");
  EXPECT_EQ(run.after_both, expect);
}

TEST_F(CnmfMode, KilledRunResumesWithSkipCompletedRuns) {
  const auto& run = shared_run();
  ASSERT_GE(run.before_kill.size(), 6u);
  ASSERT_LT(run.before_kill.size(), 40u) << "worker 0 finished before it could be killed";
  EXPECT_TRUE(run.unreadable.empty()) << run.unreadable.front() << " is incomplete under its final name";
  ASSERT_EQ(run.resumed.status, 0) << run.resumed.out;
  EXPECT_NE(run.resumed.out.find(std::to_string(run.before_kill.size()) + " already complete"),
            std::string::npos)
      << run.resumed.out;
  EXPECT_EQ(run.after_worker0.size(), 40u);
  for (const auto& [f, t] : run.mtimes)
    EXPECT_EQ(fs::last_write_time(run.tmp.path() / "pbmcA" / "cnmf_tmp" / f), t) << f << " was redone";
  // no temporary files left behind by the resumed run (nor by worker 1)
  for (auto& e : fs::directory_iterator(run.tmp.path() / "pbmcA" / "cnmf_tmp"))
    EXPECT_EQ(e.path().filename().string().find("knmf-tmp"), std::string::npos) << e.path();
}

TEST(DriverErrors, OneLineMessagesAndNonZeroExit) {
  TempDir tmp("knmf-args");
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::string missing = (tmp.path() / "nope").string();
  const std::vector<Case> cases{
      {{"factorize", "--bogus-option"}, "--bogus-option"},
      {{"nonsense-command"}, "nonsense-command"},
      {{"factorize", "--output-dir", missing, "--name", "x"}, missing},
      {{"factorize", (tmp.path() / "in.h5ad").string(), "-k", "0", "-o", (tmp.path() / "r.h5").string()},
       "-k 0"},
      {{"factorize", "--output-dir", tmp.path().string(), "--name", "x", "--batch", "zero"},
       "--batch 'zero'"},
      {{"factorize", "--output-dir", tmp.path().string(), "--name", "x", "--dtype", "half"},
       "--dtype 'half'"},
      {{"factorize", (tmp.path() / "in.h5ad").string(), "-k", "2", "-o", (tmp.path() / "r.h5").string(),
        "--init", "bogus"},
       "--init 'bogus'"},
  };
  write_small_counts(tmp / "x.h5ad", 40, 8);
  const std::string x = (tmp / "x.h5ad").string(), out = (tmp / "acc.h5").string();
  const std::vector<Case> accel{
      {{"factorize", x, "-k", "2", "-o", out, "--inner-sweeps", "0"}, "--inner-sweeps '0'"},
      {{"factorize", x, "-k", "2", "-o", out, "--inner-sweeps", "fast"}, "--inner-sweeps 'fast'"},
      {{"factorize", x, "-k", "2", "-o", out, "--inner-sweeps", "auto", "--inner-alpha", "-1"},
       "--inner-alpha -1"},
      {{"factorize", x, "-k", "2", "-o", out, "--inner-sweeps", "auto", "--inner-eps", "0"},
       "--inner-eps 0"},
      {{"factorize", x, "-k", "2", "-o", out, "--inner-sweeps", "auto", "--inner-eps", "1.5"},
       "--inner-eps 1.5"},
      {{"factorize", x, "-k", "2", "-o", out, "--inner-sweeps", "3", "--solver", "mu",
        "--beta-loss", "kullback-leibler"},
       "--beta-loss kullback-leibler"},
  };
  for (const auto& c : accel) {
    const auto r = run_knmf(c.args);
    EXPECT_NE(r.status, 0) << c.needle;
    const auto ls = lines(r.out);
    ASSERT_EQ(ls.size(), 1u) << r.out;
    EXPECT_NE(ls[0].find(c.needle), std::string::npos) << ls[0];
    EXPECT_FALSE(std::filesystem::exists(out)) << c.needle << ": a results file was written";
  }
  // and the mode runs: the file records it, a rerun with another --inner-sweeps is refused
  auto ok = run_knmf({"factorize", x, "-k", "2", "-o", out, "--inner-sweeps", "auto", "--quiet"});
  ASSERT_EQ(ok.status, 0) << ok.out;
  const auto info = results::ResultsReader::open(out).info();
  EXPECT_EQ(info.solver.inner_sweeps, SolverOptions::inner_sweeps_auto);
  ok = run_knmf({"factorize", x, "-k", "2", "-o", out, "--inner-sweeps", "4", "--quiet"});
  EXPECT_NE(ok.status, 0);
  EXPECT_NE(ok.out.find("--inner-sweeps"), std::string::npos) << ok.out;
  for (const auto& c : cases) {
    const auto r = run_knmf(c.args);
    EXPECT_NE(r.status, 0) << c.args[0] << " " << c.needle;
    const auto ls = lines(r.out);
    ASSERT_EQ(ls.size(), 1u) << r.out;
    EXPECT_NE(ls[0].find(c.needle), std::string::npos) << ls[0];
  }
}

TEST_F(CnmfMode, OutputDirectoryThatIsNotADirectoryIsRefused) {
  TempDir tmp("knmf-notdir");
  copy_run(tmp.path());
  const auto file = tmp.path() / "pbmcA" / "pbmcA.overdispersed_genes.txt";
  const auto r = run_knmf({"factorize", "--output-dir", file.string(), "--name", "pbmcA"});
  EXPECT_NE(r.status, 0);
  ASSERT_EQ(lines(r.out).size(), 1u) << r.out;
  EXPECT_NE(r.out.find(file.string()), std::string::npos) << r.out;
}

// A run killed while it checked that cnmf_tmp takes new files left that check's temporary
// (..knmf-write-probe.knmf-tmp-PID-N); the next run left it there for good (found by
// soak_kill_resume). The next run removes it now, and keeps a live run's.
TEST(CnmfModeFiles, AKilledRunsWriteProbeIsRemovedByTheNextRun) {
  TempDir tmp("knmf-cnmf-probe");
  write_small_counts(tmp / "x.h5ad", 40, 8);
  const auto p = make_cnmf_run(tmp.path(), "run", tmp / "x.h5ad");
  // a process that has ended: its pid is free (not reused within this test)
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_EQ(wait_child(dead), 0);
  const fs::path stale = fs::path(p.tmp_dir()) / ("..knmf-write-probe.knmf-tmp-" + std::to_string(dead) + "-0");
  const fs::path live = fs::path(p.tmp_dir()) / ("..knmf-write-probe.knmf-tmp-" + std::to_string(getpid()) + "-0");
  std::ofstream(stale).put('x');
  std::ofstream(live).put('x');
  const auto r = run_knmf({"factorize", "--output-dir", tmp.path().string(), "--name", "run", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_FALSE(fs::exists(stale)) << "the dead run's probe";
  EXPECT_TRUE(fs::exists(live)) << "a live process's probe";
}

// cNMF's prepare --init nndsvd writes `init: nndsvd` in the yaml: the run factorizes from
// scikit-learn's NNDSVD (with CD, as cNMF's own run does), and each spectra file is the
// library's factorization of X from that init.
TEST(CnmfModeFiles, InitNndsvdInTheYamlFactorizesFromNndsvd) {
  TempDir tmp("knmf-cnmf-nndsvd");
  write_small_counts(tmp / "x.h5ad", 40, 8);
  const auto p = make_cnmf_run(tmp.path(), "run", tmp / "x.h5ad", {{2, 0, 101}, {3, 0, 102}});
  std::ofstream(p.nmf_run_parameters())
      << "alpha_H: 0.0\nalpha_W: 0.0\nbeta_loss: frobenius\ninit: nndsvd\nl1_ratio: 0.0\n"
         "max_iter: 50\nsolver: cd\ntol: 0.0001\n";
  const auto r = run_knmf({"factorize", "--output-dir", tmp.path().string(), "--name", "run", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.out;
  auto reader = io::H5adReader::open(tmp / "x.h5ad");
  const auto X = load_dense<double>(ExecSpace(), reader);
  SolverOptions o;
  o.max_iter = 50;
  for (const auto& [k, seed] : {std::pair{2, 101}, std::pair{3, 102}}) {
    o.init = InitKind::nndsvd;
    const auto want = factorize(ExecSpace(), X, {Job{k, 0, seed, 0}}, 1, o);
    o.init = InitKind::random;
    const auto other = factorize(ExecSpace(), X, {Job{k, 0, seed, 0}}, 1, o);
    const auto df = io::read_df_npz(p.iter_spectra(k, 0));
    ASSERT_EQ(df.rows, k);
    ASSERT_EQ(df.cols, 8);
    const std::vector<double>& got = df.data;
    EXPECT_LT(max_rel_diff(got, want[0].H), 1e-12) << "k " << k;
    EXPECT_GT(max_rel_diff(got, other[0].H), 1e-6) << "k " << k << ": the same as init random";
  }
  // --init is the yaml's in cNMF mode
  const auto bad = run_knmf({"factorize", "--output-dir", tmp.path().string(), "--name", "run",
                             "--init", "nndsvda"});
  EXPECT_NE(bad.status, 0);
  ASSERT_EQ(lines(bad.out).size(), 1u) << bad.out;
  EXPECT_NE(bad.out.find("--init cannot be used in cNMF mode"), std::string::npos) << bad.out;
}

}  // namespace
