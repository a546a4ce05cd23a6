// knmf's results file: round trip, resume, refusals, paths, the write protocol's on-disk
// footprint, compression, and the schema as h5py sees it.

#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "knmf/core/error.hpp"
#include "knmf/results/consensus_records.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/results/writer.hpp"
#include "test_results_file_checks.hpp"
#include "test_results_file_support.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using knmf::InputError;
using knmf::Job;
using knmf::results::ReplicateState;
using knmf::results::ResultsReader;
using knmf::results::ResultsWriteOptions;
using knmf::results::ResultsWriter;
using knmf::results::RunInfo;
using knmf::results::WriteStep;
using knmf::test::SyntheticRun;
using knmf::test::synthetic_info;
using knmf::test::synthetic_result;
using knmf::test::TempDir;
using knmf::test::fast;
using knmf::test::input_error_of;
using knmf::test::slurp;

namespace {

/// Write and commit every pending replicate, then finish.
bool run_to_end(ResultsWriter& w) {
  for (const Job& j : w.pending()) w.write(synthetic_result(w.info(), j));
  return w.finish();
}

std::vector<fs::path> listing(const fs::path& dir) {
  std::vector<fs::path> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().filename());
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

// ---- round trip ----------------------------------------------------------------------------

class ResultsRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(ResultsRoundTrip, WriteCommitFinishRead) {
  TempDir dir;
  const fs::path path = dir / "run.h5";
  SyntheticRun s;
  s.dtype = knmf::parse_dtype(GetParam());
  const RunInfo info = synthetic_info(s);
  {
    auto w = ResultsWriter::create_or_resume(path, info, fast());
    EXPECT_FALSE(w.resumed());
    EXPECT_EQ(w.info().ks, (std::vector<int>{3, 4, 5}));
    const auto jobs = knmf::cnmf_job_table({3, 4, 5}, s.n_iter, 14);
    const auto pending = w.pending();
    ASSERT_EQ(pending.size(), jobs.size());
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_EQ(pending[i].k, jobs[i].k);
      EXPECT_EQ(pending[i].iter, jobs[i].iter);
      EXPECT_EQ(pending[i].seed, jobs[i].seed);
      EXPECT_EQ(pending[i].index, static_cast<std::int64_t>(i));
    }
    EXPECT_EQ(w.n_done(), 0);
    EXPECT_TRUE(run_to_end(w));
    EXPECT_THROW(w.commit(), InputError);  // closed by finish()
  }
  const auto r = ResultsReader::open(path);
  EXPECT_TRUE(r.complete());
  EXPECT_EQ(r.ks(), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(r.n_iter(), s.n_iter);
  EXPECT_EQ(r.n_cells(), s.n_cells);
  EXPECT_EQ(r.n_genes(), s.n_genes);
  EXPECT_TRUE(r.has_usages());
  RunInfo want = info;
  want.ks = {3, 4, 5};
  want.jobs = knmf::cnmf_job_table(want.ks, s.n_iter, 14);
  knmf::test::expect_same_run(r.info(), want);
  EXPECT_EQ(r.info().genes[1], "G\xc3\xa8ne-1");
  EXPECT_EQ(r.info().device, "test device");
  EXPECT_EQ(r.info().batch_size, 8);
  EXPECT_EQ(r.info().created.size(), 20u) << r.info().created;  // 2024-05-01T12:34:56Z
  const auto sessions = r.sessions();
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_NE(sessions[0].find("\"batch_size\": 8"), std::string::npos) << sessions[0];
  EXPECT_NE(sessions[0].find("\"device\": \"test device\""), std::string::npos) << sessions[0];

  EXPECT_EQ(knmf::test::check_committed(r), static_cast<std::int64_t>(want.jobs.size()));
  // Per-k spectra are the per-replicate ones stacked; the float usages are rounded to float.
  for (int k : r.ks()) {
    const auto all = r.spectra(k);
    const std::size_t per = static_cast<std::size_t>(k * s.n_genes);
    ASSERT_EQ(all.size(), per * s.n_iter);
    for (int it = 0; it < s.n_iter; ++it)
      EXPECT_TRUE(std::equal(all.begin() + it * per, all.begin() + (it + 1) * per,
                             r.spectra(k, it).begin()));
    const auto t = r.table(k);
    for (int it = 0; it < s.n_iter; ++it) {
      const auto& job = want.jobs[static_cast<std::size_t>((k - 3) * s.n_iter + it)];
      const auto res = synthetic_result(want, job);
      EXPECT_EQ(t.status[it], knmf::results::to_state(res.status));
      const auto u = r.usages(k, it);
      if (s.dtype == knmf::Dtype::float64) {
        EXPECT_EQ(u, res.W);
      } else {
        EXPECT_NE(u, res.W);  // float32 storage rounds
      }
    }
  }
  EXPECT_THROW(r.spectra(6), InputError);
  EXPECT_THROW(r.spectra(3, s.n_iter), InputError);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ResultsRoundTrip, ::testing::Values("float", "double"));

TEST(ResultsFile, WithoutUsages) {
  TempDir dir;
  SyntheticRun s;
  s.save_usages = false;
  auto w = ResultsWriter::create_or_resume(dir / "r.h5", synthetic_info(s), fast());
  EXPECT_TRUE(run_to_end(w));
  const auto r = ResultsReader::open(dir / "r.h5");
  EXPECT_FALSE(r.has_usages());
  const std::string msg = input_error_of([&] { r.usages(3, 0); });
  EXPECT_NE(msg.find("did not save usages"), std::string::npos) << msg;
  EXPECT_EQ(knmf::test::check_committed(r), 3 * s.n_iter);
}

TEST(ResultsFile, StatesAndNames) {
  EXPECT_EQ(knmf::results::to_state(knmf::ReplicateStatus::converged), ReplicateState::converged);
  EXPECT_EQ(knmf::results::to_state(knmf::ReplicateStatus::max_iter), ReplicateState::max_iter);
  EXPECT_EQ(knmf::results::to_state(knmf::ReplicateStatus::non_finite), ReplicateState::non_finite);
  EXPECT_EQ(knmf::results::to_string(ReplicateState::pending), "pending");
  EXPECT_EQ(static_cast<int>(ReplicateState::non_finite), 3);
}

// ---- resume --------------------------------------------------------------------------------

TEST(ResultsFile, ResumeListsOnlyUncommittedJobs) {
  TempDir dir;
  const fs::path path = dir / "run.h5";
  const RunInfo info = synthetic_info({});
  std::vector<Job> committed, uncommitted;
  {
    auto w = ResultsWriter::create_or_resume(path, info, fast());
    const auto jobs = w.pending();
    // Commit jobs 0, 2, 5, 7 (out of order), then write 1 and 3 without committing.
    for (std::size_t i : {0, 2, 5, 7}) {
      w.write(synthetic_result(w.info(), jobs[i]));
      committed.push_back(jobs[i]);
    }
    w.commit();
    for (std::size_t i : {1, 3}) {
      w.write(synthetic_result(w.info(), jobs[i]));
      uncommitted.push_back(jobs[i]);
    }
    EXPECT_EQ(w.pending().size(), jobs.size() - 6);  // written ones are not pending in-session
    EXPECT_TRUE(w.done(committed[0]));
    EXPECT_FALSE(w.done(uncommitted[0]));
  }  // destroyed without commit: 1 and 3 stay pending
  {
    const auto r = ResultsReader::open(path);
    EXPECT_FALSE(r.complete());
    EXPECT_EQ(knmf::test::check_committed(r), 4);
  }
  auto w = ResultsWriter::create_or_resume(path, info, fast());
  EXPECT_TRUE(w.resumed());
  EXPECT_EQ(w.n_done(), 4);
  const auto pending = w.pending();
  EXPECT_EQ(pending.size(), w.info().jobs.size() - 4);
  for (const Job& j : committed) {
    EXPECT_TRUE(w.done(j));
    EXPECT_TRUE(std::none_of(pending.begin(), pending.end(), [&](const Job& p) { return p.index == j.index; }));
  }
  for (const Job& j : uncommitted) {
    EXPECT_FALSE(w.done(j));
    EXPECT_TRUE(std::any_of(pending.begin(), pending.end(), [&](const Job& p) { return p.index == j.index; }));
  }
  EXPECT_TRUE(std::is_sorted(pending.begin(), pending.end(),
                             [](const Job& a, const Job& b) { return a.index < b.index; }));
  // Committed data is never overwritten.
  const std::string msg = input_error_of([&] { w.write(synthetic_result(w.info(), committed[1])); });
  EXPECT_NE(msg.find("already committed"), std::string::npos) << msg;

  // Part of the rest, then finish(): not complete.
  w.write(synthetic_result(w.info(), pending[0]));
  EXPECT_FALSE(w.finish());
  {
    const auto r = ResultsReader::open(path);
    EXPECT_FALSE(r.complete());
    EXPECT_EQ(knmf::test::check_committed(r), 5);
    EXPECT_EQ(r.sessions().size(), 2u);
  }
  auto w3 = ResultsWriter::create_or_resume(path, info, fast());
  EXPECT_EQ(w3.pending().size(), w3.info().jobs.size() - 5);
  EXPECT_TRUE(run_to_end(w3));
  {
    const auto r = ResultsReader::open(path);
    EXPECT_TRUE(r.complete());
    EXPECT_EQ(r.sessions().size(), 3u);
    EXPECT_EQ(knmf::test::check_committed(r), static_cast<std::int64_t>(r.info().jobs.size()));
  }  // (HDF5 will not open a file read-write that this process has open read-only)

  // Resuming a complete file: nothing to do, still complete.
  auto w4 = ResultsWriter::create_or_resume(path, info, fast());
  EXPECT_TRUE(w4.pending().empty());
  EXPECT_TRUE(w4.finish());
  EXPECT_TRUE(ResultsReader::open(path).complete());
}

TEST(ResultsFile, ChangedOptionsAreRefusedNamingEachOne) {
  TempDir dir;
  const fs::path path = dir / "run.h5";
  const RunInfo info = synthetic_info({});
  { auto w = ResultsWriter::create_or_resume(path, info, fast()); }
  const std::string before = slurp(path);

  RunInfo other = info;
  other.solver.tol = 1e-3;
  other.solver.max_iter = 500;
  EXPECT_EQ(input_error_of([&] { ResultsWriter::create_or_resume(path, other, fast()); }),
            path.string() + " was written with --tol 0.0001 --max-iter 400; this run asks "
                            "--tol 0.001 --max-iter 500: use a new -o file or the same options");

  other = info;
  other.genes[7] = "X";
  other.n_iter = 7;
  other.solver.alpha_W = 0.5;
  other.solver.zero_guard = knmf::ZeroGuard::add_eps;
  other.dtype = knmf::Dtype::float64;
  other.save_usages = false;
  std::string msg = input_error_of([&] { ResultsWriter::create_or_resume(path, other, fast()); });
  EXPECT_EQ(msg, path.string() +
                     " was written with --n-iter 6 --alpha-usage 0.25 --zero-guard replace-zero "
                     "--dtype float --save-usages on genes [7] 'G7'; this run asks --n-iter 7 "
                     "--alpha-usage 0.5 --zero-guard add-eps --dtype double --save-usages off "
                     "genes [7] 'X': use a new -o file or the same options");

  other = info;
  other.solver.init = knmf::InitKind::nndsvd;
  EXPECT_EQ(input_error_of([&] { ResultsWriter::create_or_resume(path, other, fast()); }),
            path.string() + " was written with --init random; this run asks --init nndsvd: use a "
                            "new -o file or the same options");

  other = info;
  other.n_cells = 31;
  other.input = "other.h5ad";
  other.ks = {3, 4, 6};
  other.seed = 15;
  msg = input_error_of([&] { ResultsWriter::create_or_resume(path, other, fast()); });
  EXPECT_NE(msg.find("was written with input shape 30 x 40 -k 3 4 5 --seed 14;"
                     " this run asks input shape 31 x 40 -k 3 4 6 --seed 15:"),
            std::string::npos) << msg;

  // A job table that differs while ks, n_iter and seed agree (e.g. another seeding scheme).
  other = info;
  other.jobs = knmf::cnmf_job_table({3, 4, 5}, info.n_iter, info.seed);
  other.jobs[4].seed += 1;
  msg = input_error_of([&] { ResultsWriter::create_or_resume(path, other, fast()); });
  EXPECT_NE(msg.find("job table row 4 (k 3, iter 4, seed "), std::string::npos) << msg;

  EXPECT_EQ(slurp(path), before) << "a refused resume must not touch the file";

  // Provenance does not block a resume (another machine, another backend).
  other = info;
  other.ks = {4, 5, 3, 3};  // same set
  other.device = "NVIDIA H200";
  other.backend = "Cuda";
  other.batch_size = 64;
  other.knmf_version = "9.9.9";
  auto w = ResultsWriter::create_or_resume(path, other, fast());
  EXPECT_TRUE(w.resumed());
  EXPECT_TRUE(run_to_end(w));
  const auto r = ResultsReader::open(path);
  EXPECT_EQ(r.info().device, "test device");  // root attributes: the creating session
  const auto sessions = r.sessions();
  ASSERT_EQ(sessions.size(), 2u);
  EXPECT_NE(sessions[1].find("\"device\": \"NVIDIA H200\""), std::string::npos) << sessions[1];
  EXPECT_NE(sessions[1].find("\"backend\": \"Cuda\""), std::string::npos) << sessions[1];
  EXPECT_NE(sessions[1].find("\"knmf_version\": \"9.9.9\""), std::string::npos) << sessions[1];
}

// Issue 15, defect 2: a resume compares X by its content fingerprint, not by the input's path
// text: another X of the same shape and genes is refused (naming both paths and both
// fingerprints, the file unchanged), the same X by another path resumes, and a run that has
// not read X (check(), nothing left to do) does not compare it.
TEST(ResultsFile, ResumeComparesTheInputByContentNotByPath) {
  TempDir dir;
  const fs::path path = dir / "run.h5";
  const RunInfo info = synthetic_info({});
  {
    auto w = ResultsWriter::create_or_resume(path, info, fast());
    w.write(synthetic_result(w.info(), w.pending()[0]));
    w.commit();
  }
  const std::string before = slurp(path);

  RunInfo other = info;
  other.input_fingerprint = "fedcba9876543210";
  for (bool check : {true, false}) {
    const std::string msg = input_error_of([&] {
      if (check)
        ResultsWriter::check(path, other);
      else
        ResultsWriter::create_or_resume(path, other, fast());
    });
    EXPECT_EQ(msg, path.string() + ": its replicates were computed on input data/synthetic.h5ad "
                                   "(/data/synthetic.h5ad) with X fingerprint 0123456789abcdef, but "
                                   "this run's input data/synthetic.h5ad (/data/synthetic.h5ad) holds "
                                   "another X (fingerprint fedcba9876543210): use a new -o file or the "
                                   "original input");
  }
  EXPECT_EQ(slurp(path), before) << "a refused resume must not touch the file";

  // X not read yet (the plan's check, or nothing left to run): not compared
  other.input_fingerprint.clear();
  EXPECT_EQ(ResultsWriter::check(path, other).size(), info.ks.size() * info.n_iter - 1);

  // the same X by another path (another folder, a moved file): resumed, the record kept
  other = info;
  other.input = "../elsewhere/./synthetic.h5ad";
  other.input_absolute = "/elsewhere/synthetic.h5ad";
  {
    auto w = ResultsWriter::create_or_resume(path, other, fast());
    EXPECT_TRUE(w.resumed());
    EXPECT_TRUE(w.warnings().empty());
    EXPECT_EQ(w.pending().size(), info.ks.size() * info.n_iter - 1);
    EXPECT_TRUE(run_to_end(w));
  }
  const auto r = ResultsReader::open(path);
  EXPECT_TRUE(r.complete());
  EXPECT_EQ(r.info().input, "data/synthetic.h5ad");
  EXPECT_EQ(r.info().input_absolute, "/data/synthetic.h5ad");
  EXPECT_EQ(r.info().input_fingerprint, "0123456789abcdef");
}

// A file of an earlier knmf (format_version 2: no input_absolute, no input_fingerprint) is
// resumed when the input is its file, by the same path text or by another path to the same
// file, with a one-line warning that its content cannot be checked; another file is refused.
TEST(ResultsFile, FilesWithoutAFingerprintResumeOnTheirInputWithAWarning) {
  TempDir dir;
  const fs::path path = dir / "run.h5";
  std::ofstream(dir / "in.h5ad") << "x";
  std::ofstream(dir / "other.h5ad") << "y";
  RunInfo info = synthetic_info({});
  info.input = (dir / "in.h5ad").string();
  info.input_absolute.clear();
  info.input_fingerprint.clear();
  { auto w = ResultsWriter::create_or_resume(path, info, fast()); }
  {  // as an earlier knmf wrote it
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    ASSERT_GE(H5Adelete_by_name(f, "/", "input_absolute", H5P_DEFAULT), 0);
    ASSERT_GE(H5Adelete_by_name(f, "/", "input_fingerprint", H5P_DEFAULT), 0);
    hid_t a = H5Aopen_by_name(f, "/", "format_version", H5P_DEFAULT, H5P_DEFAULT);
    const std::int64_t v2 = 2;
    EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &v2), 0);
    H5Aclose(a);
    H5Fclose(f);
  }
  EXPECT_EQ(ResultsReader::open(path).format_version(), 2);
  EXPECT_EQ(ResultsReader::open(path).info().input_fingerprint, "");

  RunInfo other = info;
  other.input = (dir / "." / "in.h5ad").string();  // the same file by another path
  other.input_absolute = other.input;
  other.input_fingerprint = "0123456789abcdef";
  {
    auto w = ResultsWriter::create_or_resume(path, other, fast());
    EXPECT_TRUE(w.resumed());
    ASSERT_EQ(w.warnings().size(), 1u);
    EXPECT_EQ(w.warnings()[0], path.string() + " records no fingerprint of its input (a file of an "
                                                "earlier knmf): resuming without checking that " +
                                                other.input + " still holds the X its committed "
                                                "replicates were computed on");
  }
  const std::string before = slurp(path);
  other.input = "other.h5ad";
  other.input_absolute = (dir / "other.h5ad").string();
  const std::string msg = input_error_of([&] { ResultsWriter::check(path, other); });
  EXPECT_EQ(msg, path.string() + " was written from input " + info.input + ", not other.h5ad (" +
                     other.input_absolute + "), and records no fingerprint of its X to "
                     "compare them by (a file of an earlier knmf): use a new -o file or the "
                     "original input path");
  EXPECT_EQ(slurp(path), before);
  EXPECT_EQ(ResultsReader::open(path).format_version(), 2) << "resuming keeps the version";
}

// ---- refusals and paths --------------------------------------------------------------------

TEST(ResultsFile, NotAResultsFileIsNeverOverwritten) {
  TempDir dir;
  const RunInfo info = synthetic_info({});
  const fs::path text = dir / "notes.h5";
  std::ofstream(text) << "not hdf5 at all\n";
  std::string msg = input_error_of([&] { ResultsWriter::create_or_resume(text, info, fast()); });
  EXPECT_EQ(msg, text.string() + " exists and is not a knmf results file (not an HDF5 file); "
                                 "refusing to overwrite it: use a new -o file");
  EXPECT_EQ(slurp(text), "not hdf5 at all\n");
  msg = input_error_of([&] { ResultsReader::open(text); });
  EXPECT_EQ(msg, text.string() + " is not a knmf results file (not an HDF5 file)");

  // An HDF5 file of another kind (an AnnData file).
  const fs::path h5ad = dir / "x.h5ad";
  fs::copy_file(knmf::test::data_dir() / "h5ad" / "csr_f32.h5ad", h5ad);
  const std::string before = slurp(h5ad);
  msg = input_error_of([&] { ResultsWriter::create_or_resume(h5ad, info, fast()); });
  EXPECT_EQ(msg, h5ad.string() + " exists and is not a knmf results file (no root attribute "
                                 "format = \"knmf-results\"); refusing to overwrite it: use a new -o file");
  EXPECT_EQ(slurp(h5ad), before);
  msg = input_error_of([&] { ResultsReader::open(h5ad); });
  EXPECT_EQ(msg, h5ad.string() + " is not a knmf results file (no root attribute format = \"knmf-results\")");

  msg = input_error_of([&] { ResultsReader::open(dir / "missing.h5"); });
  EXPECT_EQ(msg, (dir / "missing.h5").string() + ": no such file");
  EXPECT_EQ(listing(dir.path()), (std::vector<fs::path>{"notes.h5", "x.h5ad"}));
}

TEST(ResultsFile, BadOutputPaths) {
  TempDir dir;
  const RunInfo info = synthetic_info({});
  const fs::path missing = dir / "no" / "such" / "run.h5";
  EXPECT_EQ(input_error_of([&] { ResultsWriter::create_or_resume(missing, info, fast()); }),
            missing.string() + ": output folder '" + (dir / "no" / "such").string() + "' does not exist");

  std::ofstream(dir / "plain") << "x";
  const fs::path under_file = dir / "plain" / "run.h5";
  EXPECT_EQ(input_error_of([&] { ResultsWriter::create_or_resume(under_file, info, fast()); }),
            under_file.string() + ": '" + (dir / "plain").string() + "' is not a folder");

  fs::create_directory(dir / "folder.h5");
  EXPECT_EQ(input_error_of([&] { ResultsWriter::create_or_resume(dir / "folder.h5", info, fast()); }),
            (dir / "folder.h5").string() + " is a folder, not a results file");

  // A folder that cannot be written: mode 0555, or for root (who ignores modes) sysfs.
  fs::path locked;
  if (::geteuid() != 0) {
    fs::create_directory(dir / "locked");
    fs::permissions(dir / "locked", fs::perms::owner_read | fs::perms::owner_exec);
    locked = dir / "locked" / "run.h5";
  } else if (fs::is_directory("/sys/kernel")) {
    locked = "/sys/kernel/knmf-results-test.h5";
  }
  if (locked.empty()) {
    std::fprintf(stderr, "*** running as root without /sys: unwritable-folder case not checked ***\n");
  } else {
    const std::string msg = input_error_of([&] { ResultsWriter::create_or_resume(locked, info, fast()); });
    EXPECT_EQ(msg.rfind(locked.string() + ": cannot create a file in output folder '" +
                            locked.parent_path().string() + "': ", 0), 0u) << msg;
    EXPECT_FALSE(fs::exists(locked));
  }
  if (fs::exists(dir / "locked")) fs::permissions(dir / "locked", fs::perms::owner_all);
  EXPECT_EQ(listing(dir.path()), (std::vector<fs::path>{"folder.h5", "plain"}));
}

TEST(ResultsFile, FailedCreateLeavesNoFile) {
  TempDir dir;
  const fs::path path = dir / "run.h5";
  ResultsWriteOptions o = fast();
  o.on_step = [](WriteStep s) {
    if (s == WriteStep::created) throw std::runtime_error("stop before rename");
  };
  EXPECT_THROW(ResultsWriter::create_or_resume(path, synthetic_info({}), o), std::runtime_error);
  EXPECT_TRUE(listing(dir.path()).empty()) << "neither the file nor its temporary may remain";
}

TEST(ResultsFile, InvalidRunsAndWritesAreInputErrors) {
  TempDir dir;
  const fs::path path = dir / "run.h5";
  RunInfo info = synthetic_info({});
  RunInfo bad = info;
  bad.ks.clear();
  EXPECT_NE(input_error_of([&] { ResultsWriter::create_or_resume(path, bad, fast()); }).find("no k given"), std::string::npos);
  bad = info;
  bad.n_iter = 0;
  EXPECT_NE(input_error_of([&] { ResultsWriter::create_or_resume(path, bad, fast()); }).find("--n-iter 0"), std::string::npos);
  bad = info;
  bad.jobs = knmf::cnmf_job_table({3, 4, 5}, info.n_iter, info.seed);
  bad.jobs[3].iter = 2;
  EXPECT_NE(input_error_of([&] { ResultsWriter::create_or_resume(path, bad, fast()); }).find("job table row 3 repeats k 3 iter 2"),
            std::string::npos);
  ResultsWriteOptions o = fast();
  o.gzip_level = 10;
  EXPECT_NE(input_error_of([&] { ResultsWriter::create_or_resume(path, info, o); }).find("gzip level 10"), std::string::npos);
  EXPECT_FALSE(fs::exists(path));

  auto w = ResultsWriter::create_or_resume(path, info, fast());
  const Job job = w.pending()[2];
  auto r = synthetic_result(w.info(), job);
  r.job.seed += 1;
  EXPECT_NE(input_error_of([&] { w.write(r); }).find("is not in the job table"), std::string::npos);
  r = synthetic_result(w.info(), job);
  r.H.pop_back();
  EXPECT_NE(input_error_of([&] { w.write(r); }).find("spectra values"), std::string::npos);
  r = synthetic_result(w.info(), job);
  r.W.clear();
  EXPECT_NE(input_error_of([&] { w.write(r); }).find("usage values"), std::string::npos);
  Job stranger = job;
  stranger.index = 1000;
  EXPECT_THROW(w.done(stranger), InputError);
  // The writer is still usable.
  w.write(synthetic_result(w.info(), job));
  w.commit();
  EXPECT_TRUE(w.done(job));
  EXPECT_EQ(w.n_done(), 1);
}

// ---- what the write protocol changes on disk ------------------------------------------------

namespace {

/// [offset, offset + size) of every dataset's raw storage in the file (contiguous storage,
/// or each allocated chunk).
std::vector<std::pair<std::uint64_t, std::uint64_t>> raw_extents(const fs::path& path, const RunInfo& info) {
  std::vector<std::string> names = {"/genes", "/jobs/k", "/jobs/iter", "/jobs/seed", "/sessions"};
  for (int k : info.ks)
    for (const char* leaf : {"spectra", "usages", "seeds", "iterations", "error_at_init",
                             "final_error", "status", "seconds", "completed"})
      names.push_back("/k_" + std::to_string(k) + "/" + leaf);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(f, 0);
  for (const auto& name : names) {
    hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    EXPECT_GE(d, 0) << name;
    hid_t dcpl = H5Dget_create_plist(d);
    if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
      hid_t space = H5Dget_space(d);
      hsize_t n = 0;
      EXPECT_GE(H5Dget_num_chunks(d, space, &n), 0) << name;
      for (hsize_t i = 0; i < n; ++i) {
        hsize_t offset[3];
        unsigned mask = 0;
        haddr_t addr = 0;
        hsize_t size = 0;
        EXPECT_GE(H5Dget_chunk_info(d, space, i, offset, &mask, &addr, &size), 0) << name;
        out.emplace_back(addr, size);
      }
      H5Sclose(space);
    } else {
      out.emplace_back(H5Dget_offset(d), H5Dget_storage_size(d));
    }
    H5Pclose(dcpl);
    H5Dclose(d);
  }
  H5Fclose(f);
  return out;
}

/// Offsets of the bytes that differ between `a` and `b` (same size) outside every extent.
std::vector<std::size_t> changes_outside(const std::string& a, const std::string& b,
                                         const std::vector<std::pair<std::uint64_t, std::uint64_t>>& raw,
                                         std::size_t* changed_total) {
  std::vector<std::size_t> out;
  *changed_total = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i] == b[i]) continue;
    ++*changed_total;
    const bool in_raw = std::any_of(raw.begin(), raw.end(), [i](const auto& e) {
      return i >= e.first && i < e.first + e.second;
    });
    if (!in_raw) out.push_back(i);
  }
  return out;
}

}  // namespace

// The durability argument rests on this: once created, a file's HDF5 metadata never changes
// while replicates are written and committed (every write lands in preallocated raw storage),
// and finish() changes only the value of `complete`.
TEST(ResultsFile, OnlyRawDataChangesAfterCreation) {
  TempDir dir;
  const fs::path path = dir / "run.h5";
  const RunInfo info = synthetic_info({});
  { auto w = ResultsWriter::create_or_resume(path, info, fast()); }
  const std::string created = slurp(path);
  std::vector<Job> jobs;
  {
    auto w = ResultsWriter::create_or_resume(path, info, fast());
    jobs = w.pending();
    for (std::size_t i = 0; i < jobs.size() - 2; ++i) {
      w.write(synthetic_result(w.info(), jobs[i]));
      if (i % 4 == 3) w.commit();
    }
  }  // closed with uncommitted writes
  const std::string midway = slurp(path);
  ASSERT_EQ(midway.size(), created.size()) << "the file grew: storage was allocated after creation";
  const auto raw = raw_extents(path, synthetic_info({}));
  std::size_t total = 0;
  auto outside = changes_outside(created, midway, raw, &total);
  EXPECT_GT(total, 1000u) << "replicates were written";
  EXPECT_TRUE(outside.empty()) << outside.size() << " metadata bytes changed, first at " << outside.front();

  {
    auto w = ResultsWriter::create_or_resume(path, info, fast());
    EXPECT_TRUE(run_to_end(w));
  }
  const std::string done = slurp(path);
  ASSERT_EQ(done.size(), created.size());
  outside = changes_outside(midway, done, raw, &total);
  ASSERT_EQ(outside.size(), 1u) << "finish() must change only the value of `complete`";
  EXPECT_EQ(midway[outside[0]], 0);
  EXPECT_EQ(done[outside[0]], 1);
}

// A file rebuilt by update_results_file (consensus groups added while replicates are still
// pending) keeps the property: resuming the run then changes only raw data, and `complete`.
TEST(ResultsFile, OnlyRawDataChangesAfterAConsensusUpdate) {
  TempDir dir;
  const fs::path path = dir / "run.h5";
  const RunInfo info = synthetic_info({});
  std::size_t left = 0;
  {
    auto w = ResultsWriter::create_or_resume(path, info, fast());
    const auto jobs = w.pending();
    for (std::size_t i = 0; i < jobs.size() / 2; ++i) w.write(synthetic_result(w.info(), jobs[i]));
    w.commit();
    left = w.pending().size();
  }
  const RunInfo stored = ResultsReader::open(path).info();
  knmf::results::ResultsAdditions add;
  add.consensus = {knmf::test::synthetic_consensus(stored, 3, 0.5, 1, true, true)};
  for (std::int64_t i = 0; i < stored.n_cells; ++i) add.cells.push_back("c" + std::to_string(i));
  add.k_selection = knmf::test::synthetic_k_selection(stored, 1);
  knmf::results::update_results_file(path, add);
  const std::string updated = slurp(path);
  {
    auto w = ResultsWriter::create_or_resume(path, info, fast());
    EXPECT_EQ(w.pending().size(), left);
    EXPECT_TRUE(run_to_end(w));
  }
  const std::string done = slurp(path);
  ASSERT_EQ(done.size(), updated.size()) << "the file grew: storage was allocated after the update";
  const auto raw = raw_extents(path, info);
  std::size_t total = 0;
  const auto outside = changes_outside(updated, done, raw, &total);
  EXPECT_GT(total, 1000u) << "replicates were written";
  ASSERT_EQ(outside.size(), 1u) << "only the value of `complete` may change outside raw data";
  EXPECT_EQ(updated[outside[0]], 0);
  EXPECT_EQ(done[outside[0]], 1);
  const auto r = ResultsReader::open(path);
  EXPECT_EQ(knmf::test::check_committed(r), static_cast<std::int64_t>(r.info().jobs.size()));
  knmf::test::expect_same_record(r.consensus(3, 0.5), add.consensus[0]);
}

// ---- compression ---------------------------------------------------------------------------

namespace {
int filters_of(const fs::path& path, const char* dataset) {
  // A second, independent open (HDF5's default driver, not the writer's): without HDF5's
  // file lock, which the open writer holds.
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_file_locking(fapl, false, true);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl);
  H5Pclose(fapl);
  hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
  hid_t dcpl = H5Dget_create_plist(d);
  const int n = H5Pget_nfilters(dcpl);
  H5Pclose(dcpl);
  H5Dclose(d);
  H5Fclose(f);
  return n;
}
}  // namespace

TEST(ResultsFile, GzipIsAppliedWhenTheRunCompletes) {
  TempDir dir;
  SyntheticRun s;
  s.n_genes = 300;
  const RunInfo info = synthetic_info(s);
  ResultsWriteOptions gz = fast();
  gz.gzip_level = 6;
  {
    auto w = ResultsWriter::create_or_resume(dir / "gz.h5", info, gz);
    const auto jobs = w.pending();
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      w.write(synthetic_result(w.info(), jobs[i]));
      if (i == 4) {
        w.commit();
        EXPECT_EQ(filters_of(dir / "gz.h5", "/k_3/spectra"), 0) << "no filter while running";
      }
    }
    EXPECT_TRUE(w.finish());
  }
  {
    auto w = ResultsWriter::create_or_resume(dir / "plain.h5", info, fast());
    EXPECT_TRUE(run_to_end(w));
  }
  EXPECT_EQ(filters_of(dir / "gz.h5", "/k_3/spectra"), 2);  // shuffle + deflate
  EXPECT_EQ(filters_of(dir / "gz.h5", "/k_5/usages"), 2);
  EXPECT_EQ(filters_of(dir / "plain.h5", "/k_3/spectra"), 0);
  EXPECT_LT(fs::file_size(dir / "gz.h5"), fs::file_size(dir / "plain.h5"));
  const auto a = ResultsReader::open(dir / "gz.h5"), b = ResultsReader::open(dir / "plain.h5");
  knmf::test::expect_same_content(a, b);
  EXPECT_EQ(a.sessions().size(), 1u);
  EXPECT_EQ(a.info().created, ResultsReader::open(dir / "gz.h5").info().created);
  EXPECT_EQ(listing(dir.path()), (std::vector<fs::path>{"gz.h5", "plain.h5"}));
}

// ---- the schema as h5py reads it -----------------------------------------------------------

TEST(ResultsFile, PythonReadsTheSchema) {
  const char* python = "/usr/bin/python3";
  if (!fs::exists(python) ||
      knmf::test::run_command(std::string(python) + " -c 'import h5py, numpy'").status != 0) {
    // cmake/bootstrap.sh installs python3-h5py and python3-numpy: a missing one fails
    FAIL() << python << " with h5py and numpy is missing (cmake/bootstrap.sh installs python3-h5py, "
                        "python3-numpy): the h5py schema check cannot run";
  }
  TempDir dir;
  const fs::path path = dir / "run.h5";
  SyntheticRun s;
  const RunInfo info = synthetic_info(s);
  Job probe;
  {
    auto w = ResultsWriter::create_or_resume(path, info, fast());
    probe = w.pending()[s.n_iter + 2];  // k = 4, iter 2
    EXPECT_TRUE(run_to_end(w));
  }
  const auto want = synthetic_result(synthetic_info(s), probe);
  {
    std::ofstream h(dir / "H.f64", std::ios::binary);
    h.write(reinterpret_cast<const char*>(want.H.data()), static_cast<std::streamsize>(want.H.size() * 8));
    std::ofstream w(dir / "W.f64", std::ios::binary);
    w.write(reinterpret_cast<const char*>(want.W.data()), static_cast<std::streamsize>(want.W.size() * 8));
  }
  const std::string script = R"PY(
import json, sys
import h5py, numpy as np
path, d = sys.argv[1], sys.argv[2]
f = h5py.File(path, "r")
a = f.attrs
assert a["format"] == "knmf-results", a["format"]
assert int(a["format_version"]) == 3
for name in ["knmf_version", "kokkos_version", "backend", "device", "created", "input",
             "input_absolute", "input_fingerprint", "solver", "zero_guard", "dtype", "beta_loss",
             "init"]:
    assert isinstance(a[name], str), name
for name in ["batch_size", "n_iter", "seed", "max_iter", "check_every", "save_usages", "complete",
             "format_version"]:
    assert np.asarray(a[name]).dtype == np.int64 and np.ndim(a[name]) == 0, name
for name in ["tol", "alpha_W", "alpha_H", "l1_ratio", "eps"]:
    assert np.asarray(a[name]).dtype == np.float64 and np.ndim(a[name]) == 0, name
assert list(a["ks"]) == [3, 4, 5]
n, g = (int(x) for x in a["input_shape"])
assert (n, g) == (30, 40)
assert a["tol"] == 1e-4 and a["solver"] == "mu" and a["dtype"] == "float" and a["complete"] == 1
assert a["zero_guard"] == "replace-zero" and a["input"] == "data/synthetic.h5ad"
assert a["init"] == "random"
assert a["input_absolute"] == "/data/synthetic.h5ad" and a["input_fingerprint"] == "0123456789abcdef"
genes = f["genes"].asstr()[:]
assert len(genes) == g and genes[1] == "G\u00e8ne-1" and genes[39] == "G39"
assert h5py.check_string_dtype(f["genes"].dtype).encoding == "utf-8"
jobs = {c: f["jobs"][c][:] for c in ("k", "iter", "seed")}
assert all(v.dtype == np.int64 and v.shape == (18,) for v in jobs.values())
assert list(jobs["k"][:7]) == [3] * 6 + [4] and list(jobs["iter"][:7]) == [0, 1, 2, 3, 4, 5, 0]
sessions = [json.loads(s.decode("utf-8")) for s in f["sessions"][:] if s]
assert len(sessions) == 1 and sessions[0]["batch_size"] == 8 and sessions[0]["device"] == "test device"
assert f["sessions"].shape == (256,)
for k in (3, 4, 5):
    grp = f["k_%d" % k]
    assert int(grp.attrs["k"]) == k and int(grp.attrs["n_iter"]) == 6
    sp = grp["spectra"]
    assert sp.shape == (6, k, g) and sp.dtype == np.float64 and sp.chunks == (1, k, g), (sp.shape, sp.chunks)
    us = grp["usages"]
    assert us.shape == (6, n, k) and us.dtype == np.float32 and us.chunks == (1, n, k)
    for name, dt in [("seeds", np.int64), ("iterations", np.int32), ("error_at_init", np.float64),
                     ("final_error", np.float64), ("seconds", np.float64), ("completed", np.uint8)]:
        assert grp[name].shape == (6,) and grp[name].dtype == dt, name
    assert h5py.check_enum_dtype(grp["status"].dtype) == {"pending": 0, "converged": 1, "max_iter": 2, "non_finite": 3}
    assert grp["status"].dtype.itemsize == 1
    assert list(grp["completed"][:]) == [1] * 6
    assert list(grp["seeds"][:]) == list(jobs["seed"][jobs["k"] == k])
    assert list(grp["status"][:]) == [1, 2, 1, 2, 1, 2]
H = np.fromfile(d + "/H.f64", dtype="<f8").reshape(4, g)
W = np.fromfile(d + "/W.f64", dtype="<f8").reshape(n, 4)
assert np.array_equal(f["k_4/spectra"][2], H)
assert np.array_equal(f["k_4/usages"][2], W.astype(np.float32))
print("h5py schema check: ok")
)PY";
  std::ofstream(dir / "check.py") << script;
  const std::string cmd = std::string(python) + " " + (dir / "check.py").string() + " " + path.string() + " " + dir.path().string();
  const auto r = knmf::test::run_command(cmd);
  std::fputs(r.out.c_str(), stdout);
  EXPECT_EQ(r.status, 0) << "the h5py check failed:\n" << r.out;
}
