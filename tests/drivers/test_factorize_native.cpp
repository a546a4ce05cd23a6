// `knmf factorize` in native mode: an .h5ad of the user's own and one resumable results file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>
#include <iterator>

#include "driver_support.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/results/writer.hpp"
#include "knmf/run/memory.hpp"
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
  const auto reader = results::ResultsReader::open(out);
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
  const auto ra = results::ResultsReader::open(a), rb = results::ResultsReader::open(b);
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
      const auto rd = results::ResultsReader::open(part);
      done = 0;
      for (int k : rd.ks())
        for (auto c : rd.completed(k)) done += c;
    } catch (const std::exception&) {
    }
  }
  kill(pid, SIGKILL);
  wait_child(pid, SIGKILL, "the killed run");
  {
    const auto rd = results::ResultsReader::open(part);
    ASSERT_FALSE(rd.complete()) << "the run finished before it could be killed";
  }
  const auto resumed = run_knmf(with(part));
  ASSERT_EQ(resumed.status, 0) << resumed.out;
  expect_same_results(full, part);
}

// ---- resume and the input (issue 15, defect 2) -----------------------------------------------

/// `part`: the run of the complete results file `full` with only its first `committed`
/// replicates (in job-table order) committed, as a run killed after them leaves it.
void make_partial(const std::string& full, const std::string& part, std::size_t committed) {
  const auto r = results::ResultsReader::open(full);
  auto w = results::ResultsWriter::create_or_resume(part, r.info());
  const auto jobs = w.pending();
  for (std::size_t i = 0; i < committed && i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    const auto t = r.table(j.k);
    const auto it = std::size_t(j.iter);
    ReplicateResult res;
    res.job = j;
    res.n = r.n_cells();
    res.g = r.n_genes();
    res.H = r.spectra(j.k, j.iter);
    if (r.has_usages()) res.W = r.usages(j.k, j.iter);
    res.n_iter = t.iterations[it];
    res.error_at_init = t.error_at_init[it];
    res.final_error = t.final_error[it];
    res.status = t.status[it] == results::ReplicateState::converged ? ReplicateStatus::converged
                                                               : ReplicateStatus::max_iter;
    res.seconds = t.seconds[it];
    w.write(res);
  }
  w.commit();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The words of 16 hex digits in `s` (fingerprints).
std::vector<std::string> hex16(const std::string& s) {
  std::vector<std::string> out;
  std::string word;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    const char c = i < s.size() ? s[i] : ' ';
    if (std::isxdigit(static_cast<unsigned char>(c))) {
      word += c;
      continue;
    }
    if (word.size() == 16) out.push_back(word);
    word.clear();
  }
  return out;
}

void simulate(const std::string& out, const std::string& seed) {
  ASSERT_EQ(run_knmf({"simulate", "-o", out, "--cells", "200", "--genes", "100", "--seed", seed,
                      "--programs", "3"})
                .status,
            0);
}

const std::vector<std::string> kQuick{"-k", "3", "--n-iter", "4", "--max-iter", "20", "--quiet"};

std::vector<std::string> factorize(const std::string& in, const std::string& out) {
  // --batch 1: each replicate solved alone, so a resumed run (fewer pending jobs, other
  // batches) is bitwise the uninterrupted one in the device-kernels build too
  std::vector<std::string> a{"factorize", in, "-o", out, "--batch", "1"};
  a.insert(a.end(), kQuick.begin(), kQuick.end());
  return a;
}

// Replacing the input by another matrix of the same shape and genes, then resuming, mixed
// two inputs in one file and reported it complete: the resume is refused, naming the input
// and both fingerprints, and the results file is left as it was.
TEST_F(Native, ReplacedInputWithTheSameShapeAndGenesIsRefusedOnResume) {
  TempDir tmp("knmf-native-replaced");
  const auto in = (tmp.path() / "in.h5ad").string(), other = (tmp.path() / "other.h5ad").string();
  simulate(in, "5");
  simulate(other, "6");
  {
    const auto a = io::H5adReader::open(in), b = io::H5adReader::open(other);
    ASSERT_EQ(a.info().n_obs, b.info().n_obs);
    ASSERT_EQ(a.var_names(), b.var_names()) << "the test needs the same genes";
  }
  const auto full = (tmp.path() / "full.h5").string(), part = (tmp.path() / "part.h5").string();
  ASSERT_EQ(run_knmf(factorize(in, full)).status, 0);
  make_partial(full, part, 2);
  fs::copy_file(other, in, fs::copy_options::overwrite_existing);
  const std::string before = slurp(part);
  const auto r = run_knmf(factorize(in, part));
  EXPECT_NE(r.status, 0) << r.out;
  const auto ls = lines(r.out);
  ASSERT_EQ(ls.size(), 1u) << r.out;
  EXPECT_NE(ls[0].find(in), std::string::npos) << ls[0];
  const auto fps = hex16(ls[0]);
  ASSERT_EQ(fps.size(), 2u) << ls[0];
  EXPECT_NE(fps[0], fps[1]) << ls[0];
  EXPECT_EQ(slurp(part), before) << "a refused resume must leave the results file as it was";
  EXPECT_FALSE(results::ResultsReader::open(part).complete());
}

// Issue 27: the same with every job complete. The rerun said "nothing to do" and exited 0
// (the fingerprint was compared only when jobs were pending); it now reads X once and is
// refused the same way, the results file left as it was. The same X still has nothing to do.
TEST_F(Native, ReplacedInputOfACompleteRunIsRefusedNotNothingToDo) {
  TempDir tmp("knmf-native-replaced-complete");
  const auto in = (tmp.path() / "in.h5ad").string(), other = (tmp.path() / "other.h5ad").string();
  simulate(in, "5");
  simulate(other, "6");
  const auto full = (tmp.path() / "full.h5").string();
  ASSERT_EQ(run_knmf(factorize(in, full)).status, 0);
  ASSERT_TRUE(results::ResultsReader::open(full).complete());
  const auto same = run_knmf(factorize(in, full));
  EXPECT_EQ(same.status, 0) << same.out;
  fs::copy_file(other, in, fs::copy_options::overwrite_existing);
  const std::string before = slurp(full);
  const auto r = run_knmf(factorize(in, full));
  EXPECT_NE(r.status, 0) << r.out;
  const auto ls = lines(r.out);
  ASSERT_EQ(ls.size(), 1u) << r.out;
  EXPECT_EQ(ls[0].find("nothing to do"), std::string::npos) << ls[0];
  EXPECT_NE(ls[0].find(in), std::string::npos) << ls[0];
  const auto fps = hex16(ls[0]);
  ASSERT_EQ(fps.size(), 2u) << ls[0];
  EXPECT_NE(fps[0], fps[1]) << ls[0];
  EXPECT_EQ(slurp(full), before) << "a refused rerun must leave the results file as it was";
}

// Issue 27: consensus --tpm on counts with a gene that has no counts at all. cNMF's starCAT
// reference divides by that gene's standard deviation, 0, and knmf wrote NaN into the results
// file and the .starcat_spectra file and exited 0. The gene's starCAT values are now 0 (the
// value its unit-variance column gets in the usage refit), a warning names it, and every
// value written is finite.
TEST_F(Native, ConsensusTpmWithAGeneOfNoCountsWritesFiniteStarcatAndWarns) {
  TempDir tmp("knmf-native-zero-gene");
  const std::string dir = tmp.path().string(), sim = dir + "/sim.h5ad", in = dir + "/in.h5ad";
  simulate(sim, "5");
  const auto rd = io::H5adReader::open(sim);
  io::CsrBlock<double> X, Z;
  rd.read_csr_rows<double>(0, rd.info().n_obs, X);
  Z.row_begin = X.row_begin;
  Z.row_end = X.row_end;
  Z.ncols = X.ncols;
  for (std::int64_t i = 0; i < X.rows(); ++i) {  // every entry of gene 1 (column 1) dropped
    for (auto p = X.row_offsets[size_t(i)]; p < X.row_offsets[size_t(i) + 1]; ++p)
      if (X.cols[size_t(p)] != 1) {
        Z.cols.push_back(X.cols[size_t(p)]);
        Z.values.push_back(X.values[size_t(p)]);
      }
    Z.row_offsets.push_back(std::int64_t(Z.values.size()));
  }
  const auto genes = rd.var_names();
  io::write_h5ad(in, Z, rd.obs_names(), genes);
  ASSERT_EQ(run_knmf(factorize(in, dir + "/r.h5")).status, 0);
  const auto c = run_knmf({"consensus", "--results", dir + "/r.h5", "-k", "3", "--tpm", in,
                           "--local-density-threshold", "2", "--output-dir", dir, "--name", "run"});
  ASSERT_EQ(c.status, 0) << c.out;
  std::string warning;
  for (const auto& l : lines(c.out))
    if (l.find("knmf: warning:") == 0) warning = l;
  EXPECT_NE(warning.find("standard deviation 0"), std::string::npos) << c.out;
  EXPECT_NE(warning.find(genes[1]), std::string::npos) << warning;
  const io::CnmfPaths paths(dir, "run");
  const auto starcat = io::read_df_npz(paths.starcat_spectra(3, 2.0));
  ASSERT_EQ(starcat.cols, std::int64_t(genes.size()));
  for (std::int64_t t = 0; t < starcat.rows; ++t) {
    for (std::int64_t j = 0; j < starcat.cols; ++j)
      ASSERT_TRUE(std::isfinite(starcat.data[size_t(t * starcat.cols + j)])) << t << "," << j;
    EXPECT_EQ(starcat.data[size_t(t * starcat.cols + 1)], 0.0) << "program " << t + 1;
  }
  for (const char* what : {"usages", "gene_spectra_score", "gene_spectra_tpm", "spectra"}) {
    const auto path = std::string(what) == "usages" ? paths.consensus_usages(3, 2.0)
                      : std::string(what) == "gene_spectra_score" ? paths.gene_spectra_score(3, 2.0)
                      : std::string(what) == "gene_spectra_tpm"   ? paths.gene_spectra_tpm(3, 2.0)
                                                                  : paths.consensus_spectra(3, 2.0);
    const auto df = io::read_df_npz(path);
    for (double v : df.data) ASSERT_TRUE(std::isfinite(v)) << what;
  }
}

// The same input by another path text, or from another working folder, resumes (the path
// text used to be compared), and the result is the uninterrupted run's.
TEST_F(Native, TheSameInputByAnotherPathOrFolderResumes) {
  TempDir tmp("knmf-native-paths");
  fs::create_directories(tmp.path() / "a");
  simulate((tmp.path() / "a" / "in.h5ad").string(), "5");
  const std::string dir = tmp.path().string();
  ASSERT_EQ(run_knmf(factorize("a/in.h5ad", "full.h5"), "", dir).status, 0);
  make_partial(dir + "/full.h5", dir + "/p1.h5", 2);
  const auto r1 = run_knmf(factorize("./a/in.h5ad", "p1.h5"), "", dir);
  EXPECT_EQ(r1.status, 0) << r1.out;
  expect_same_results(dir + "/full.h5", dir + "/p1.h5");
  make_partial(dir + "/full.h5", dir + "/p2.h5", 1);
  const auto r2 = run_knmf(factorize("in.h5ad", "../p2.h5"), "", dir + "/a");
  EXPECT_EQ(r2.status, 0) << r2.out;
  expect_same_results(dir + "/full.h5", dir + "/p2.h5");
  EXPECT_EQ(results::ResultsReader::open(dir + "/p2.h5").info().input, "a/in.h5ad") << "the record is kept";
}

// consensus --results reads the input the results file records: from another working folder
// (where its relative path does not resolve) by its absolute path; an input replaced since
// is refused (naming both fingerprints) and the results file is left as it was.
TEST_F(Native, ConsensusFindsTheRunsInputFromAnotherFolderAndChecksIt) {
  TempDir tmp("knmf-native-consensus");
  fs::create_directories(tmp.path() / "a");
  fs::create_directories(tmp.path() / "elsewhere");
  simulate((tmp.path() / "a" / "in.h5ad").string(), "5");
  simulate((tmp.path() / "other.h5ad").string(), "6");
  const std::string dir = tmp.path().string(), elsewhere = dir + "/elsewhere";
  ASSERT_EQ(run_knmf(factorize("a/in.h5ad", "r.h5"), "", dir).status, 0);
  fs::copy_file(dir + "/r.h5", dir + "/r2.h5");
  const auto c = run_knmf({"consensus", "--results", "../r.h5", "--local-density-threshold", "2"}, "", elsewhere);
  EXPECT_EQ(c.status, 0) << c.out;
  EXPECT_TRUE(results::ResultsReader::open(dir + "/r.h5").has_consensus(3, 2.0)) << c.out;
  fs::copy_file(dir + "/other.h5ad", dir + "/a/in.h5ad", fs::copy_options::overwrite_existing);
  const std::string before = slurp(dir + "/r2.h5");
  const auto d = run_knmf({"consensus", "--results", "r2.h5", "--local-density-threshold", "2"}, "", dir);
  EXPECT_NE(d.status, 0) << d.out;
  const auto ls = lines(d.out);
  ASSERT_EQ(ls.size(), 1u) << d.out;
  EXPECT_NE(ls[0].find("a/in.h5ad"), std::string::npos) << ls[0];
  EXPECT_EQ(hex16(ls[0]).size(), 2u) << ls[0];
  EXPECT_EQ(slurp(dir + "/r2.h5"), before);
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

// A resumed run's fit check planned for every replicate (--n-iter) of every k: a forced
// --batch was capped at --n-iter, not at the jobs still pending, and a run that fits what
// remains was refused. It plans for what remains to run.
TEST(NativePlan, FitCheckOnResumeCountsThePendingJobs) {
  TempDir tmp("knmf-native-fit");
  const auto in = (tmp.path() / "tiny.h5ad").string();
  simulate(in, "5");
  const auto full = (tmp.path() / "full.h5").string(), part = (tmp.path() / "part.h5").string();
  const std::vector<std::string> run{"-k", "3", "--n-iter", "8", "--max-iter", "20", "--dtype",
                                     "double", "--format", "dense", "--batch", "8"};
  auto with = [&](const std::string& out, const std::vector<std::string>& more) {
    std::vector<std::string> a{"factorize", in, "-o", out};
    a.insert(a.end(), run.begin(), run.end());
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  ASSERT_EQ(run_knmf(with(full, {"--quiet"})).status, 0);
  make_partial(full, part, 6);  // 2 jobs pending
  // a device that holds a batch of the 2 pending replicates, not one of 8
  const std::int64_t n = 200, g = 100, bytes_x = n * g * 8, lots = std::int64_t(1) << 40;
  const auto two = plan_batch(n, g, 3, 8, bytes_x, lots, 2, 2).total();
  const auto eight = plan_batch(n, g, 3, 8, bytes_x, lots, 8, 8).total();
  ASSERT_LT(two, eight);
  const std::string limit = std::to_string((two + eight) / 2);
  const auto fresh = run_knmf(with((tmp.path() / "fresh.h5").string(), {"--device-memory-limit", limit}));
  EXPECT_NE(fresh.status, 0) << "a new run of 8 replicates does not fit: " << fresh.out;
  const auto r = run_knmf(with(part, {"--device-memory-limit", limit}));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("2 job(s) to run, 6 already complete"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("plan: k = 3: 2 replicate(s) per batch"), std::string::npos) << r.out;
  EXPECT_TRUE(results::ResultsReader::open(part).complete());
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
  const std::string bytes = read_bytes(in);
  for (const auto& out : {(tmp.path() / "." / "tiny.h5ad").string(), (tmp.path() / "soft.h5").string(),
                          (tmp.path() / "hard.h5").string()}) {
    const auto r = run_knmf({"factorize", in, "-k", "3", "--n-iter", "2", "-o", out});
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_EQ(lines(r.out), std::vector<std::string>{"knmf: error: -o '" + out +
                                                     "': output is the input file '" + in + "'"});
  }
  EXPECT_EQ(listing(), before);
  EXPECT_TRUE(read_bytes(in) == bytes) << "the input changed";
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
