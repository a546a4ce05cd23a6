// `knmf compare` run as a process: exit status, table, JSON, one-line errors, and knmf's
// native run of pbmcA against cNMF's reference run folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../results/compare_fixtures.hpp"
#include "driver_support.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/results/writer.hpp"
#include "test_support.hpp"

namespace {

using knmf::test::FakeRun;
using knmf::test::lines;
using knmf::test::read_bytes;
using knmf::test::run_knmf;
using knmf::test::TempDir;

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

TEST(CompareDriver, IdenticalRunsExitZero) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3, 4}, 3, 40);
  knmf::test::write_results(run, tmp / "cpu.h5");
  knmf::test::write_results(run, tmp / "gpu.h5");
  const auto r = run_knmf({"compare", (tmp / "cpu.h5").string(), (tmp / "gpu.h5").string(),
                           "--json", (tmp / "c.json").string()});
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("PASS: all 6 compared jobs"), std::string::npos) << r.out;
  const auto j = read_json(tmp / "c.json");
  EXPECT_TRUE(j["passed"].get<bool>());
  EXPECT_EQ(j["overall"]["jobs"], 6);
  EXPECT_EQ(j["overall"]["max_rel_diff"], 0.0);
  EXPECT_EQ(j["per_k"].size(), 2u);
  EXPECT_TRUE(j["failures"].empty());
}

TEST(CompareDriver, PerturbedJobExitsThreeAndIsNamed) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3, 4}, 3, 40);
  FakeRun bad = run;
  auto& H = bad.spectra[{3, 2}];  // relative changes up to 1.2e-5
  for (size_t i = 0; i < H.size(); ++i) H[i] *= 1.0 + 1e-7 * double(i);
  knmf::test::write_results(run, tmp / "a.h5");
  const auto dir = knmf::test::write_cnmf_replicates(bad, tmp.path(), "b");
  const auto r = run_knmf({"compare", (tmp / "a.h5").string(), dir.string(), "--json",
                           (tmp / "c.json").string()});
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find("FAIL: 1 of 6"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("k = 3, iter = 2: max rel diff"), std::string::npos) << r.out;
  const auto j = read_json(tmp / "c.json");
  EXPECT_FALSE(j["passed"].get<bool>());
  ASSERT_EQ(j["failures"].size(), 1u);
  EXPECT_EQ(j["failures"][0]["k"], 3);
  EXPECT_EQ(j["failures"][0]["iter"], 2);
  EXPECT_GT(j["failures"][0]["max_rel_diff"].get<double>(), 1e-6);
  EXPECT_EQ(j["overall"]["failed"], 1);
  // the same with thresholds that admit it
  const auto loose = run_knmf({"compare", (tmp / "a.h5").string(), dir.string(), "--rtol", "1e-4"});
  EXPECT_EQ(loose.status, 0) << loose.out;
  // --json - : JSON alone on stdout (the table on stderr, which run_knmf merges: so parse from '{')
  const auto js = run_knmf({"compare", (tmp / "a.h5").string(), dir.string(), "--json", "-"});
  EXPECT_EQ(js.status, 3);
  const auto brace = js.out.find("\n{");
  ASSERT_NE(brace, std::string::npos) << js.out;
  EXPECT_EQ(nlohmann::json::parse(js.out.substr(brace + 1))["failures"].size(), 1u);
}

// A job of one side without a partner on the other is not a PASS: exit 3, the jobs named;
// --allow-unpaired compares the paired ones only.
TEST(CompareDriver, UnpairedJobsFailUnlessAllowed) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3, 4}, 3, 40);
  FakeRun part = run;
  part.spectra.erase({4, 1});
  knmf::test::write_results(run, tmp / "a.h5");
  const auto dir = knmf::test::write_cnmf_replicates(part, tmp.path(), "b");
  const std::string a = (tmp / "a.h5").string();
  const auto r = run_knmf({"compare", a, dir.string(), "--json", (tmp / "c.json").string()});
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_EQ(r.out.find("PASS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAIL: 1 jobs have no partner on the other side"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("only in A: (k = 4, iter = 1)"), std::string::npos) << r.out;
  EXPECT_FALSE(read_json(tmp / "c.json")["passed"].get<bool>());
  const auto ok = run_knmf({"compare", a, dir.string(), "--allow-unpaired"});
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("PASS: all 5 compared jobs"), std::string::npos) << ok.out;
}

TEST(CompareDriver, BadInputsGiveOneLineErrors) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3}, 2, 20);
  knmf::test::write_results(run, tmp / "a.h5");
  const std::string a = (tmp / "a.h5").string();
  std::ofstream(tmp / "notes.txt") << "not a run\n";
  std::filesystem::create_directories(tmp / "folder");
  const auto disjoint = knmf::test::write_cnmf_replicates(knmf::test::make_fake_run({7}, 2, 20),
                                                          tmp.path(), "other");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {(tmp / "missing.h5").string(), "does not exist"},
      {(tmp / "notes.txt").string(), "not a knmf results file"},
      {(tmp / "folder").string(), "not a cNMF run folder"},
      {disjoint.string(), "no (k, iter) job in common"},
  };
  for (const auto& [b, expect] : cases) {
    const auto r = run_knmf({"compare", a, b});
    EXPECT_EQ(r.status, 1) << b << ": " << r.out;
    const auto l = lines(r.out);
    ASSERT_EQ(l.size(), 1u) << r.out;
    EXPECT_EQ(l[0].rfind("knmf: error: ", 0), 0u) << l[0];
    EXPECT_NE(l[0].find(expect), std::string::npos) << l[0];
  }
}

// Issue 15, defect 9: a results file with no replicate committed yet was described as having
// "0 jobs of k = ," (an empty list of k).
TEST(CompareDriver, SideWithoutJobsIsNamedPlainly) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3, 4}, 2, 20);
  knmf::test::write_results(run, tmp / "a.h5");
  {
    knmf::results::RunInfo info;
    info.input = "fake.h5ad";
    info.n_cells = 7;
    info.genes = run.genes;
    info.ks = run.ks;
    info.n_iter = run.n_iter;
    info.dtype = knmf::Dtype::float64;
    info.batch_size = 1;
    knmf::results::ResultsWriteOptions wo;
    wo.fsync = false;
    auto w = knmf::results::ResultsWriter::create_or_resume(tmp / "empty.h5", info, wo);
    w.commit();  // the run's file before its first replicate
  }
  const std::string a = (tmp / "a.h5").string(), empty = (tmp / "empty.h5").string();
  for (const auto& [x, y] : {std::pair{a, empty}, std::pair{empty, a}}) {
    const auto r = run_knmf({"compare", x, y});
    EXPECT_EQ(r.status, 1) << r.out;
    const auto l = lines(r.out);
    ASSERT_EQ(l.size(), 1u) << r.out;
    EXPECT_EQ(l[0].find("k = ,"), std::string::npos) << l[0];
    EXPECT_EQ(l[0].find("k = )"), std::string::npos) << l[0];
    EXPECT_NE(l[0].find("(" + empty + ") has no completed replicate (0 of 4 committed)"),
              std::string::npos)
        << l[0];
    EXPECT_NE(l[0].find("(" + a + ") has 4 jobs of k = 3 4"), std::string::npos) << l[0];
    EXPECT_EQ(l[0].find("other replicates"), std::string::npos) << l[0];
  }
}

std::string file_bytes(const std::filesystem::path& p) { return read_bytes(p); }

// --json naming one of the compared files (by another path too) is refused before anything is
// written: the results file stays as it was.
TEST(CompareDriver, JsonThatIsAComparedFileIsRefused) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3, 4}, 2, 20);
  knmf::test::write_results(run, tmp / "a.h5");
  knmf::test::write_results(run, tmp / "b.h5");
  const std::string a = (tmp / "a.h5").string(), b = (tmp / "b.h5").string();
  const std::string before = file_bytes(tmp / "b.h5");
  std::filesystem::create_hard_link(tmp / "b.h5", tmp / "b-link.h5");
  for (const std::string& json : {b, (tmp / "." / "b.h5").string(), (tmp / "b-link.h5").string()}) {
    const auto r = run_knmf({"compare", a, b, "--json", json});
    EXPECT_EQ(r.status, 1) << r.out;
    const auto l = lines(r.out);
    ASSERT_EQ(l.size(), 1u) << r.out;
    EXPECT_NE(l[0].find("--json '" + json + "': it is the compared file '" + b + "'"), std::string::npos)
        << l[0];
    EXPECT_EQ(file_bytes(tmp / "b.h5"), before) << "the results file was replaced";
  }
}

// knmf factorize (native mode) on cNMF's pbmcA input against cNMF's own run of the same job
// table (its merged spectra files): knmf's cd solver reproduces scikit-learn's to ~1e-13.
TEST(CompareDriver, PbmcANativeAgainstCnmfReference) {
  const auto base = knmf::test::real_dir() / "cnmf-pbmc-donor-a";
  TempDir tmp;
  const std::string results = (tmp / "results.h5").string();
  const auto f = run_knmf({"factorize", (base / "prepare" / "pbmcA" / "cnmf_tmp" / "pbmcA.norm_counts.h5ad").string(),
                           "-k", "5", "--n-iter", "20", "--seed", "14", "-o", results, "--quiet"});
  ASSERT_EQ(f.status, 0) << f.out;
  // the reference also has k = 6, 7, 8: compare the paired jobs (k = 5) only
  const auto r = run_knmf({"compare", results, (base / "reference" / "pbmcA").string(), "--json",
                           (tmp / "c.json").string(), "--allow-unpaired"});
  EXPECT_EQ(r.status, 0) << r.out;
  std::cout << r.out;
  const auto j = read_json(tmp / "c.json");
  EXPECT_EQ(j["overall"]["jobs"], 20);
  EXPECT_EQ(j["only_in_a"].size(), 0u);
  EXPECT_EQ(j["only_in_b"].size(), 60u);  // k = 6, 7, 8 of the reference
  EXPECT_EQ(j["b"]["kind"], "cnmf");
  EXPECT_EQ(j["b"]["name"], "pbmcA");
  EXPECT_LT(j["overall"]["max_rel_diff"].get<double>(), 1e-9);
  EXPECT_GT(j["overall"]["min_cos"].get<double>(), 1.0 - 1e-12);
  EXPECT_TRUE(j["overall"]["iterations"].is_null());  // cNMF's files do not record them
}

}  // namespace
