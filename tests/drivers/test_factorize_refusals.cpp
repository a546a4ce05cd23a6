// What `knmf factorize` refuses before it writes anything (issue 15), in both modes. Each
// refusal is one line and exit status 1, and the folder holds nothing new afterwards (no
// results file, no spectra file, no log). An unknown key of cNMF's yaml is a warning, and the
// run goes on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "driver_support.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/io/h5ad.hpp"
#include "driver_fixtures.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;
namespace fs = std::filesystem;

const nlohmann::json& h5ad_golden() {
  static const nlohmann::json g = load_json("h5ad/golden.json");
  return g;
}

/// 40 cells x 8 genes of small positive counts (about two thirds of the entries), gene names given.
void write_small_x(const fs::path& path, std::vector<std::string> genes = {}) {
  write_small_counts(path, 40, 8, std::move(genes));
}

/// One line, "knmf: error: ..." holding every needle.
void expect_one_error_line(const ProcResult& r, const std::vector<std::string>& needles,
                           const std::string& what) {
  EXPECT_EQ(r.status, 1) << what << "\n" << r.out;
  const auto ls = lines(r.out);
  ASSERT_EQ(ls.size(), 1u) << what << "\n" << r.out;
  EXPECT_EQ(ls[0].rfind("knmf: error: ", 0), 0u) << what << ": " << ls[0];
  for (const auto& n : needles) EXPECT_NE(ls[0].find(n), std::string::npos) << what << ": " << ls[0] << " lacks " << n;
}

const std::vector<std::string> kBadX = {
    "bad_nan_value.h5ad",          "bad_negative_value.h5ad",  "bad_dense_inf.h5ad",
    "bad_index_out_of_range.h5ad", "bad_indptr_not_monotone.h5ad", "bad_csc_negative.h5ad",
    "bad_csc_index_out_of_range.h5ad"};

// Item 6: X's values are checked as X is loaded; the results file and the log are made only
// after that, so a bad X leaves no incomplete r.h5 (nor an empty log).
TEST(FactorizeRefusals, BadXLeavesNoResultsFileNorLog) {
  for (const auto& name : kBadX)
    for (const char* dtype : {"double", "float"}) {
      const std::string what = name + " --dtype " + dtype;
      TempDir tmp("knmf-refuse-x");
      const fs::path in = tmp / "in.h5ad";
      fs::copy_file(data_dir() / "h5ad" / name, in);
      const auto r = run_knmf({"factorize", in.string(), "-k", "2", "--n-iter", "2", "-o",
                               (tmp / "r.h5").string(), "--log-json", (tmp / "log.json").string(),
                               "--dtype", dtype, "--quiet"});
      std::vector<std::string> needles{in.string()};
      for (const auto& part : h5ad_golden()["malformed"][name]) needles.push_back(part.get<std::string>());
      expect_one_error_line(r, needles, what);
      EXPECT_EQ(files_under(tmp.path()), std::vector<std::string>{"in.h5ad"}) << what;
    }
}

TEST(FactorizeRefusals, CnmfModeBadXLeavesNoFile) {
  for (const auto& name : {std::string("bad_nan_value.h5ad"), std::string("bad_index_out_of_range.h5ad")}) {
    TempDir tmp("knmf-refuse-cnmf-x");
    const auto p = make_cnmf_run(tmp.path(), "run", data_dir() / "h5ad" / name);
    const auto before = files_under(tmp.path());
    const auto r = run_knmf({"factorize", "--output-dir", tmp.path().string(), "--name", "run",
                             "--log-json", (tmp / "log.json").string()});
    std::vector<std::string> needles{p.normalized_counts()};
    for (const auto& part : h5ad_golden()["malformed"][name]) needles.push_back(part.get<std::string>());
    // the header line comes first in cNMF mode without --quiet: check the error line only
    EXPECT_EQ(r.status, 1) << r.out;
    const auto ls = lines(r.out);
    ASSERT_FALSE(ls.empty());
    EXPECT_EQ(ls.back().rfind("knmf: error: ", 0), 0u) << r.out;
    for (const auto& n : needles) EXPECT_NE(ls.back().find(n), std::string::npos) << ls.back();
    EXPECT_EQ(files_under(tmp.path()), before) << name;
  }
}

// Item 6: an unopenable --log-json is found before the results file is created.
TEST(FactorizeRefusals, UnopenableLogJsonLeavesNoOutput) {
  TempDir tmp("knmf-refuse-log");
  const fs::path in = tmp / "in.h5ad";
  write_small_x(in);
  const auto p = make_cnmf_run(tmp.path(), "run", in);
  const auto before = files_under(tmp.path());
  const std::vector<std::string> logs{(tmp / "no" / "such" / "log.json").string(), tmp.path().string()};
  for (const auto& log : logs) {
    const auto n = run_knmf({"factorize", in.string(), "-k", "2", "--n-iter", "2", "-o",
                             (tmp / "r.h5").string(), "--log-json", log, "--quiet"});
    expect_one_error_line(n, {"--log-json '" + log + "'"}, "native, " + log);
    const auto c = run_knmf({"factorize", "--output-dir", tmp.path().string(), "--name", "run",
                             "--log-json", log, "--quiet"});
    expect_one_error_line(c, {"--log-json '" + log + "'"}, "cNMF mode, " + log);
    EXPECT_EQ(files_under(tmp.path()), before) << log;
  }
  // a writable log: the run writes it
  const auto ok = run_knmf({"factorize", in.string(), "-k", "2", "--n-iter", "2", "-o",
                            (tmp / "r.h5").string(), "--log-json", (tmp / "log.json").string(), "--quiet"});
  ASSERT_EQ(ok.status, 0) << ok.out;
  std::ifstream log(tmp / "log.json");
  int n = 0;
  for (std::string l; std::getline(log, l);) n += !l.empty();
  EXPECT_EQ(n, 2);
}

// Item 7: names that are not UTF-8 would go into the results file's UTF-8 /genes (or cNMF's
// data frames); they are refused in one line naming the file, the position and the bytes.
TEST(FactorizeRefusals, NonUtf8GeneNamesAreRefusedBeforeWriting) {
  TempDir tmp("knmf-refuse-utf8");
  const fs::path in = tmp / "in.h5ad";
  write_small_x(in, {"G0", "G1", "G2", "Caf\xe9", "G4", "G5", "G6", "G7"});
  const auto p = make_cnmf_run(tmp.path(), "run", in);
  const auto before = files_under(tmp.path());
  const auto n = run_knmf({"factorize", in.string(), "-k", "2", "--n-iter", "2", "-o",
                           (tmp / "r.h5").string(), "--quiet"});
  expect_one_error_line(n, {in.string(), "gene name 3", "not valid UTF-8", "(bytes 43 61 66 e9)"},
                        "native");
  const auto c = run_knmf({"factorize", "--output-dir", tmp.path().string(), "--name", "run", "--quiet"});
  expect_one_error_line(c, {p.normalized_counts(), "gene name 3", "(bytes 43 61 66 e9)"}, "cNMF mode");
  EXPECT_EQ(files_under(tmp.path()), before);
}

// Item 7: a job table listing a (k, iter) job twice would run two jobs into one spectra file.
TEST(FactorizeRefusals, JobTableWithADuplicatedJobIsRefused) {
  TempDir tmp("knmf-refuse-dup");
  const fs::path in = tmp / "in.h5ad";
  write_small_x(in);
  const auto p = make_cnmf_run(tmp.path(), "run", in, {{2, 0, 101}, {2, 1, 102}, {2, 2, 103}, {2, 1, 104}});
  const auto before = files_under(tmp.path());
  const auto r = run_knmf({"factorize", "--output-dir", tmp.path().string(), "--name", "run", "--quiet"});
  expect_one_error_line(r, {p.nmf_replicate_parameters(), "rows 1 and 3", "n_components 2, iter 1"},
                        "duplicated job");
  EXPECT_EQ(files_under(tmp.path()), before);
}

// Item 7: an unknown key of the yaml is ignored, but not without a word.
TEST(FactorizeRefusals, UnknownYamlKeysAreWarnedAbout) {
  TempDir tmp("knmf-yaml-keys");
  const fs::path in = tmp / "in.h5ad";
  write_small_x(in);
  const auto p = make_cnmf_run(tmp.path(), "run", in, {{2, 0, 101}, {2, 1, 102}, {2, 2, 103}}, "random_state: 3\nmax_iters: 10\n");
  const auto r = run_knmf({"factorize", "--output-dir", tmp.path().string(), "--name", "run", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.out;
  const auto ls = lines(r.out);
  ASSERT_EQ(ls.size(), 2u) << r.out;
  const std::string yaml = p.nmf_run_parameters();
  EXPECT_EQ(ls[0].rfind("knmf: warning: " + yaml + ": unknown key 'random_state' is ignored", 0), 0u) << ls[0];
  EXPECT_EQ(ls[1].rfind("knmf: warning: " + yaml + ": unknown key 'max_iters' is ignored", 0), 0u) << ls[1];
  for (int it = 0; it < 3; ++it) EXPECT_TRUE(fs::exists(p.iter_spectra(2, it))) << it;
}

// Files whose corrupt object headers HDF5 1.10 fails to open and, doing so, leaves objects of
// its own behind (tests/fuzz/hdf5-bugs/, found by fuzz_h5ad). The error is one line naming the
// object; HDF5's shutdown after it printed "HDF5: infinite loop closing library" and a line
// of package names, until the driver left HDF5 unclosed after a failed command
// (drivers/hdf5_library.hpp).
TEST(FactorizeRefusals, CorruptHdf5ObjectsEndInOneErrorLine) {
  const std::vector<std::pair<std::string, std::string>> files{
      {"leak-metadata-cache-load.h5", "cannot open /var/_index (a corrupt object header?)"},
      {"leak-dataset-open-datatype.h5", "cannot open /obs (a corrupt object header?)"},
      {"oom-metadata-cache-32gib.h5", "cannot open /X (a corrupt object header?)"},
      {"oom-vlen-names-length.h5", "cannot open /obs (a corrupt object header?)"}};
  for (const auto& [name, message] : files) {
    TempDir tmp("knmf-refuse-corrupt");
    const fs::path in = tmp / "in.h5ad";
    fs::copy_file(data_dir().parent_path() / "fuzz" / "hdf5-bugs" / name, in);
    // HDF5 1.10 leaks what it loaded of a corrupt header, and asks malloc for the 32 GiB a
    // corrupt metadata entry states (tests/fuzz/hdf5-bugs/README.md): in the sanitizer build,
    // for these runs alone, LeakSanitizer is off and ASan's malloc returns null as malloc does
    // (HDF5's bugs, not knmf's)
    const char* asan = std::getenv("ASAN_OPTIONS");
    const std::string env =
        "ASAN_OPTIONS=" + shell_quote(std::string(asan ? asan : "") + (asan && *asan ? ":" : "") +
                                      "detect_leaks=0:allocator_may_return_null=1");
    const auto r = run_knmf({"factorize", in.string(), "-k", "2", "--n-iter", "1", "-o",
                             (tmp / "r.h5").string(), "--quiet"}, env);
    expect_one_error_line(r, {in.string() + ": " + message}, name);
    EXPECT_EQ(r.out.find("HDF5"), std::string::npos) << name << "\n" << r.out;
    EXPECT_EQ(files_under(tmp.path()), std::vector<std::string>{"in.h5ad"}) << name;
  }
}

}  // namespace

// Issue 15, defect 8: a k beyond min(cells, genes) is refused before anything is written
// (k = 20000 on 40 x 8 once planned a 9.7 GB batch and wrote an r.h5), in both modes.
TEST(FactorizeRefusals, KBeyondTheInputIsRefusedBeforeWriting) {
  TempDir tmp("knmf-refuse-k");
  const fs::path in = tmp / "in.h5ad";
  write_small_x(in);
  for (const char* k : {"20000", "9"}) {
    const auto r = run_knmf({"factorize", in.string(), "-k", "2", k, "--n-iter", "1", "-o",
                             (tmp / "r.h5").string(), "--quiet"});
    expect_one_error_line(r, {std::string("-k ") + k + " exceeds min(cells, genes) = 8 of " + in.string()},
                          std::string("-k ") + k);
    EXPECT_EQ(files_under(tmp.path()), std::vector<std::string>{"in.h5ad"}) << k;
  }
  const auto ok = run_knmf({"factorize", in.string(), "-k", "8", "--n-iter", "1", "-o",
                            (tmp / "r.h5").string(), "--quiet"});
  EXPECT_EQ(ok.status, 0) << ok.out;  // k = min(cells, genes) is allowed
}
