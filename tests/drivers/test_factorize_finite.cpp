// Issue 15, defect 3: a run never reports success over replicates that are not valid
// factorizations. An X whose scale float32 arithmetic cannot hold is refused before anything
// is written (--dtype float); an X whose largest value carries all of ||X||^2 (every
// replicate would "converge" with error 0) is refused in either dtype; replicates that still
// become non-finite fail the run (exit 1, one line naming how many, for which k and why),
// are recorded as failed (the results file is not complete, a resume does not run them
// again) and get no cNMF spectra file.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <type_traits>

#include "driver_support.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/results/run_info.hpp"
#include "driver_fixtures.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;
namespace fs = std::filesystem;

/// 40 cells x 8 genes of small counts, each times `scale`; with `huge` > 0 the entry (3, 2)
/// is `huge` instead (driver_fixtures.hpp).
template <class T>
void write_x(const fs::path& path, double scale, double huge = 0.0) {
  write_small_counts<T>(path, 40, 8, {}, scale, huge);
}

/// The last line is "knmf: error: ..." holding every needle; exit status 1.
void expect_error_line(const ProcResult& r, const std::vector<std::string>& needles,
                       const std::string& what, bool only_line) {
  EXPECT_EQ(r.status, 1) << what << "\n" << r.out;
  const auto ls = lines(r.out);
  ASSERT_FALSE(ls.empty()) << what;
  if (only_line) {
    EXPECT_EQ(ls.size(), 1u) << what << "\n" << r.out;
  }
  EXPECT_EQ(ls.back().rfind("knmf: error: ", 0), 0u) << what << ": " << ls.back();
  for (const auto& n : needles)
    EXPECT_NE(ls.back().find(n), std::string::npos) << what << ": " << ls.back() << "\n  lacks: " << n;
}

// (c) float32: 3e38 is a finite float, but W^T X, X H^T and their products with the factors
// overflow float32: refused when X is read, before the results file or the log exist (the
// run used to end "complete" with every replicate non_finite).
TEST(FactorizeFinite, Float32ScaleOverflowIsRefusedBeforeWriting) {
  for (const bool sparse_in_memory : {false, true}) {
    TempDir tmp("knmf-finite-f32");
    const fs::path in = tmp / "in.h5ad";
    write_x<float>(in, 1.0, 3e38);
    const auto r = run_knmf({"factorize", in.string(), "-k", "2", "--n-iter", "3", "-o",
                             (tmp / "r.h5").string(), "--log-json", (tmp / "log.json").string(),
                             "--dtype", "float", "--format", sparse_in_memory ? "sparse" : "dense",
                             "--quiet"});
    expect_error_line(r, {in.string(), "3e+38", "float32", "--dtype double"}, "float", true);
    EXPECT_EQ(files_under(tmp.path()), std::vector<std::string>{"in.h5ad"});
  }
  // a scale float32 holds (1e6) runs as before
  TempDir tmp("knmf-finite-f32-ok");
  write_x<float>(tmp / "in.h5ad", 1e6);
  const auto ok = run_knmf({"factorize", (tmp / "in.h5ad").string(), "-k", "2", "--n-iter", "2",
                            "-o", (tmp / "r.h5").string(), "--dtype", "float", "--quiet"});
  EXPECT_EQ(ok.status, 0) << ok.out;
}

TEST(FactorizeFinite, Float32ScaleOverflowIsRefusedInCnmfMode) {
  TempDir tmp("knmf-finite-f32-cnmf");
  write_x<float>(tmp / "x.h5ad", 1.0, 3e38);
  const auto p = make_cnmf_run(tmp.path(), "run", tmp / "x.h5ad");
  const auto before = files_under(tmp.path());
  const auto r = run_knmf({"factorize", "--output-dir", tmp.path().string(), "--name", "run",
                           "--dtype", "float"});
  expect_error_line(r, {p.normalized_counts(), "3e+38", "--dtype double"}, "cnmf float", false);
  EXPECT_EQ(files_under(tmp.path()), before);
}

// In double the same X used to "converge" in 2 iterations with final error 0: ||X||^2 is
// 9e76 and the identity ||X||^2 - 2 <W^T X, H> + <W^T W, H H^T> cancels to rounding noise
// (about 1e61), clamped at 0; the other values cannot influence anything. Refused up front.
TEST(FactorizeFinite, OneValueCarryingAllOfTheNormIsRefusedInDouble) {
  for (const char* solver : {"cd", "mu"}) {
    TempDir tmp("knmf-finite-f64");
    const fs::path in = tmp / "in.h5ad";
    write_x<float>(in, 1.0, 3e38);
    const auto r = run_knmf({"factorize", in.string(), "-k", "2", "--n-iter", "3", "-o",
                             (tmp / "r.h5").string(), "--log-json", (tmp / "log.json").string(),
                             "--dtype", "double", "--solver", solver, "--quiet"});
    expect_error_line(r, {in.string(), "3e+38", "carries all of ||X||^2"}, solver, true);
    EXPECT_EQ(files_under(tmp.path()), std::vector<std::string>{"in.h5ad"});
  }
}

// (a, b) X of scale 1e154 in double: ||X||^2 and the products overflow double, every
// replicate ends non_finite. The run exits 1 with one line counting them per k and saying
// why; the results file records them as failed and is not complete; a resume does not run
// them again (deterministic) and fails the same way.
TEST(FactorizeFinite, NonFiniteReplicatesFailTheRunAndAreRecordedAsFailed) {
  TempDir tmp("knmf-finite-nf");
  const fs::path in = tmp / "in.h5ad", out = tmp / "r.h5";
  write_x<double>(in, 1e154);
  const std::vector<std::string> args{"factorize", in.string(), "-k", "2", "3", "--n-iter", "2",
                                      "--max-iter", "30", "-o", out.string(), "--dtype", "double"};
  const auto r = run_knmf(args);
  expect_error_line(r, {"4 of 4 replicates", "k = 2: 2 of 2", "k = 3: 2 of 2", "non-finite",
                        out.string() + " is not complete", "5e+154", "beyond what double"},
                    "first run", false);
  EXPECT_EQ(r.out.find("is complete"), std::string::npos) << r.out;
  {
    const auto reader = results::ResultsReader::open(out);
    EXPECT_FALSE(reader.complete());
    for (int k : {2, 3}) {
      const auto t = reader.table(k);
      for (int it = 0; it < 2; ++it) {
        EXPECT_EQ(t.completed[size_t(it)], 1) << "k " << k << " iter " << it;
        EXPECT_EQ(t.status[size_t(it)], results::ReplicateState::non_finite) << "k " << k << " iter " << it;
      }
    }
  }
  const auto again = run_knmf(args);
  expect_error_line(again, {"4 of 4 replicates", "recorded by an earlier run, not run again"},
                    "resume", false);
  EXPECT_NE(again.out.find("0 job(s) to run"), std::string::npos) << again.out;
  EXPECT_FALSE(results::ResultsReader::open(out).complete());
}

// (a) cNMF mode: a non_finite replicate gets no spectra file (cNMF would combine it as a
// completed replicate), and the run fails.
TEST(FactorizeFinite, CnmfModeWritesNoSpectraForNonFiniteReplicates) {
  TempDir tmp("knmf-finite-nf-cnmf");
  write_x<double>(tmp / "x.h5ad", 1e154);
  const auto p = make_cnmf_run(tmp.path(), "run", tmp / "x.h5ad");
  const auto r = run_knmf({"factorize", "--output-dir", tmp.path().string(), "--name", "run",
                           "--dtype", "double"});
  expect_error_line(r, {"3 of 3 replicates (k = 2)", "non-finite", "no spectra file"}, "cnmf",
                    false);
  for (int it = 0; it < 3; ++it) EXPECT_FALSE(fs::exists(p.iter_spectra(2, it))) << it;
}

}  // namespace
