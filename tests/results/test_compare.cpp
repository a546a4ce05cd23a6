// knmf::results::compare_runs (the library side of `knmf compare`) on small synthetic runs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "compare_fixtures.hpp"
#include "knmf/core/error.hpp"
#include "knmf/results/compare.hpp"
#include "test_support.hpp"

namespace {

using knmf::results::CompareOptions;
using knmf::results::CompareReport;
using knmf::InputError;
using knmf::test::FakeRun;
using knmf::test::TempDir;

CompareReport compare(const std::string& a, const std::string& b, CompareOptions o = {}) {
  o.a = a;
  o.b = b;
  return knmf::results::compare_runs(o);
}

/// The InputError message of compare_runs (fails the test when it does not throw).
std::string error_of(const CompareOptions& o) {
  try {
    knmf::results::compare_runs(o);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "compare_runs(" << o.a << ", " << o.b << ") did not throw";
  return "";
}

TEST(CompareSpectra, MetricsByHand) {
  // A's rows are B's in swapped order; A's second row differs from its match in one entry.
  const int k = 2;
  const std::int64_t g = 3;
  const std::vector<double> b = {1.0, 2.0, 4.0,   // b0
                                 3.0, 0.0, 1.0};  // b1
  const std::vector<double> a = {3.0, 0.0, 1.0,   // = b1
                                 1.0, 2.0, 4.5};  // b0 with entry 2 off by 0.5
  CompareOptions o;
  o.rtol = 0.1;
  o.min_cos = 0.99;
  const auto c = knmf::results::compare_spectra(k, g, a, b, o);
  ASSERT_EQ(c.match, (std::vector<int>{1, 0}));
  EXPECT_EQ(c.rel_diffs[0], 0.0);
  EXPECT_DOUBLE_EQ(c.rel_diffs[1], 0.5 / 4.5);  // max|a-b| / max(max|a|, max|b|)
  EXPECT_DOUBLE_EQ(c.cosines[0], 1.0);
  const double cos1 = (1.0 + 4.0 + 18.0) / std::sqrt(1.0 + 4.0 + 20.25) / std::sqrt(21.0);
  EXPECT_NEAR(c.cosines[1], cos1, 1e-15);
  EXPECT_DOUBLE_EQ(c.max_rel_diff, 0.5 / 4.5);
  EXPECT_DOUBLE_EQ(c.median_rel_diff, 0.5 * (0.5 / 4.5));
  EXPECT_NEAR(c.min_cos, cos1, 1e-15);
  EXPECT_FALSE(c.passed);  // 0.111 > rtol 0.1
  ASSERT_EQ(c.reasons.size(), 1u);
  EXPECT_NE(c.reasons[0].find("rtol"), std::string::npos) << c.reasons[0];
  o.rtol = 0.2;
  EXPECT_TRUE(knmf::results::compare_spectra(k, g, a, b, o).passed);
  o.min_cos = 0.9999;  // cos1 = 0.99938...
  const auto c2 = knmf::results::compare_spectra(k, g, a, b, o);
  EXPECT_FALSE(c2.passed);
  ASSERT_EQ(c2.reasons.size(), 1u);
  EXPECT_NE(c2.reasons[0].find("min cosine"), std::string::npos) << c2.reasons[0];
}

TEST(CompareSpectra, ZeroAndNonFiniteRows) {
  const std::vector<double> zero = {0, 0, 0, 1, 2, 3};
  auto c = knmf::results::compare_spectra(2, 3, zero, zero, {});
  EXPECT_TRUE(c.passed);
  EXPECT_EQ(c.max_rel_diff, 0.0);
  EXPECT_EQ(c.min_cos, 1.0);
  // a zero row against a nonzero one: cosine 0, rel diff 1
  const std::vector<double> other = {0, 0, 0, 0, 0, 0};
  c = knmf::results::compare_spectra(2, 3, zero, other, {});
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.max_rel_diff, 1.0);
  EXPECT_EQ(c.min_cos, 0.0);
  std::vector<double> nan = zero;
  nan[4] = std::nan("");
  c = knmf::results::compare_spectra(2, 3, nan, zero, {});
  EXPECT_FALSE(c.passed);
  EXPECT_TRUE(std::isnan(c.max_rel_diff));
}

TEST(Compare, IdenticalResultsFiles) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3, 4}, 3, 40);
  knmf::test::write_results(run, tmp / "a.h5");
  knmf::test::write_results(run, tmp / "b.h5");
  const auto r = compare((tmp / "a.h5").string(), (tmp / "b.h5").string());
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.a.kind, "knmf-results");
  EXPECT_EQ(r.overall.jobs, 6);
  EXPECT_EQ(r.overall.failed, 0);
  EXPECT_EQ(r.overall.max_rel_diff, 0.0);
  EXPECT_NEAR(r.overall.min_cos, 1.0, 1e-15);  // rounding of dot / (|a| |b|)
  EXPECT_EQ(r.overall.iterations_compared, 6);
  EXPECT_EQ(r.overall.iterations_different, 0);
  EXPECT_EQ(r.overall.final_errors_compared, 6);
  EXPECT_EQ(r.overall.max_final_error_rel_diff, 0.0);
  ASSERT_EQ(r.per_k.size(), 2u);
  EXPECT_EQ(r.per_k[0].k, 3);
  EXPECT_EQ(r.per_k[1].jobs, 3);
  EXPECT_TRUE(r.only_in_a.empty() && r.only_in_b.empty());
  EXPECT_FALSE(r.genes_reordered);
  EXPECT_EQ(r.seed_mismatches, 0);
  for (const auto& j : r.jobs)
    for (int i = 0; i < j.k; ++i) EXPECT_EQ(j.match[size_t(i)], i);
}

TEST(Compare, OnePerturbedJobFailsAndIsNamed) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3, 4}, 3, 40);
  FakeRun bad = run;
  bad.spectra[{4, 1}][5] *= 1.0 + 1e-4;  // one entry of job (4, 1)
  bad.iterations[{3, 2}] += 7;           // iterations differ (reported, not a failure)
  bad.final_error[{3, 2}] *= 1.0 + 1e-3;
  knmf::test::write_results(run, tmp / "a.h5");
  knmf::test::write_results(bad, tmp / "b.h5");
  const auto r = compare((tmp / "a.h5").string(), (tmp / "b.h5").string());
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.overall.failed, 1);
  std::vector<std::pair<int, int>> failed;
  for (const auto& j : r.jobs)
    if (!j.passed) failed.emplace_back(j.k, j.iter);
  EXPECT_EQ(failed, (std::vector<std::pair<int, int>>{{4, 1}}));
  EXPECT_GT(r.overall.max_rel_diff, 1e-6);
  EXPECT_EQ(r.per_k[0].failed, 0);
  EXPECT_EQ(r.per_k[1].failed, 1);
  EXPECT_EQ(r.overall.iterations_different, 1);
  EXPECT_EQ(r.overall.max_abs_iteration_diff, 7);
  EXPECT_EQ(r.per_k[0].max_abs_iteration_diff, 7);
  EXPECT_NEAR(r.overall.max_final_error_rel_diff, 1e-3 / (1.0 + 1e-3), 1e-12);
  // a looser rtol lets it pass (the change is ~1e-4 relative to the row's maximum at most)
  CompareOptions loose;
  loose.rtol = 1e-3;
  loose.min_cos = 0.99;
  EXPECT_TRUE(compare((tmp / "a.h5").string(), (tmp / "b.h5").string(), loose).passed());
  const std::string text = knmf::results::format_compare_report(r);
  EXPECT_NE(text.find("k = 4, iter = 1:"), std::string::npos) << text;
  EXPECT_NE(text.find("FAIL: 1 of 6"), std::string::npos) << text;
  const auto j = nlohmann::json::parse(knmf::results::compare_report_json(r));
  EXPECT_FALSE(j["passed"].get<bool>());
  ASSERT_EQ(j["failures"].size(), 1u);
  EXPECT_EQ(j["failures"][0]["k"], 4);
  EXPECT_EQ(j["failures"][0]["iter"], 1);
  EXPECT_EQ(j["overall"]["failed"], 1);
  EXPECT_EQ(j["overall"]["iterations"]["different"], 1);
  EXPECT_EQ(j["per_k"][1]["k"], 4);
  EXPECT_EQ(j["jobs"].size(), 6u);
}

TEST(Compare, ResultsFileAgainstCnmfReplicateFiles) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3, 4}, 2, 30);
  knmf::test::write_results(run, tmp / "a.h5");
  const auto dir = knmf::test::write_cnmf_replicates(run, tmp.path(), "myrun");
  const auto r = compare((tmp / "a.h5").string(), dir.string());
  EXPECT_TRUE(r.passed()) << knmf::results::format_compare_report(r);
  EXPECT_EQ(r.b.kind, "cnmf");
  EXPECT_EQ(r.b.name, "myrun");
  EXPECT_EQ(r.overall.jobs, 4);
  EXPECT_EQ(r.overall.iterations_compared, 0);  // cNMF's files do not record them
  EXPECT_EQ(r.overall.final_errors_compared, 0);
  const std::string text = knmf::results::format_compare_report(r);
  EXPECT_NE(text.find("n/a"), std::string::npos) << text;
  const auto j = nlohmann::json::parse(knmf::results::compare_report_json(r));
  EXPECT_TRUE(j["overall"]["iterations"].is_null());
  EXPECT_TRUE(j["jobs"][0]["iteration_diff"].is_null());
  // and the other way round, with the run folder given with a trailing slash
  const auto r2 = compare(dir.string() + "/", (tmp / "a.h5").string());
  EXPECT_TRUE(r2.passed());
  EXPECT_EQ(r2.a.name, "myrun");
}

TEST(Compare, CnmfMergedFilesAndNames) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3, 5}, 3, 25);
  knmf::test::write_results(run, tmp / "a.h5");
  // merged files in a folder named other than the run: needs --b-name
  const auto dir = knmf::test::write_cnmf_merged(run, tmp / "x", "run1");
  const auto moved = tmp / "x" / "renamed";
  std::filesystem::rename(dir, moved);
  CompareOptions o;
  o.a = (tmp / "a.h5").string();
  o.b = moved.string();
  const std::string e = error_of(o);
  EXPECT_NE(e.find("--b-name run1"), std::string::npos) << e;
  o.b_name = "run1";
  const auto r = knmf::results::compare_runs(o);
  EXPECT_TRUE(r.passed()) << knmf::results::format_compare_report(r);
  EXPECT_EQ(r.overall.jobs, 6);
  EXPECT_NE(r.b.description.find("merged"), std::string::npos) << r.b.description;
  // the cnmf_tmp folder itself is accepted as the run folder
  o.b = (moved / "cnmf_tmp").string();
  EXPECT_TRUE(knmf::results::compare_runs(o).passed());
}

TEST(Compare, ReplicateFilesWinOverMergedAndMixes) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3, 4}, 2, 20);
  FakeRun other = run;
  for (auto& [key, H] : other.spectra) H[0] += 1.0;  // merged files that would fail
  knmf::test::write_cnmf_merged(other, tmp.path(), "r");
  FakeRun only3 = run;
  only3.spectra.erase({4, 0});
  only3.spectra.erase({4, 1});
  const auto dir = knmf::test::write_cnmf_replicates(only3, tmp.path(), "r");
  // k = 3 from replicate files (good), k = 4 from merged files (bad)
  knmf::test::write_results(run, tmp / "a.h5");
  const auto r = compare((tmp / "a.h5").string(), dir.string());
  ASSERT_EQ(r.per_k.size(), 2u);
  EXPECT_EQ(r.per_k[0].failed, 0);
  EXPECT_EQ(r.per_k[1].failed, 2);
}

TEST(Compare, PermutedProgramsStillMatch) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({4, 6}, 2, 36);
  FakeRun perm = run;
  knmf::test::permute_programs(perm, [](int k) {
    std::vector<int> p;  // reversed, then rotated by 2: a permutation moving most rows
    for (int t = 0; t < k; ++t) p.push_back((k + 1 - t) % k);
    return p;
  });
  knmf::test::write_results(run, tmp / "a.h5");
  const auto dir = knmf::test::write_cnmf_replicates(perm, tmp.path(), "p");
  const auto r = compare((tmp / "a.h5").string(), dir.string());
  EXPECT_TRUE(r.passed()) << knmf::results::format_compare_report(r);
  EXPECT_EQ(r.overall.max_rel_diff, 0.0);
  bool some_moved = false;
  for (const auto& j : r.jobs) {
    // B's row match[i] is A's row i: B row t holds A row p[t]
    const auto& H_a = run.spectra.at({j.k, j.iter});
    const auto& H_b = perm.spectra.at({j.k, j.iter});
    for (int i = 0; i < j.k; ++i) {
      const auto row_a = H_a.begin() + i * 36, row_b = H_b.begin() + j.match[size_t(i)] * 36;
      EXPECT_TRUE(std::equal(row_a, row_a + 36, row_b)) << "k " << j.k << " program " << i;
      if (j.match[size_t(i)] != i) some_moved = true;
    }
  }
  EXPECT_TRUE(some_moved);
}

TEST(Compare, GenesInAnotherOrderAreAligned) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3}, 2, 30);
  knmf::test::write_results(run, tmp / "a.h5");
  std::vector<int> order;
  for (int j = 29; j >= 0; j -= 2) order.push_back(j);
  for (int j = 0; j < 30; j += 2) order.push_back(j);
  const auto dir = knmf::test::write_cnmf_replicates(run, tmp.path(), "g", order);
  const auto r = compare((tmp / "a.h5").string(), dir.string());
  EXPECT_TRUE(r.passed()) << knmf::results::format_compare_report(r);
  EXPECT_TRUE(r.genes_reordered);
  EXPECT_EQ(r.overall.max_rel_diff, 0.0);
  EXPECT_NE(knmf::results::format_compare_report(r).find("reordered"), std::string::npos);
  // and with A the reordered side
  const auto r2 = compare(dir.string(), (tmp / "a.h5").string());
  EXPECT_TRUE(r2.passed());
  EXPECT_TRUE(r2.genes_reordered);
}

TEST(Compare, DifferentGenesAreRefused) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3}, 2, 30);
  knmf::test::write_results(run, tmp / "a.h5");
  FakeRun renamed = run;
  renamed.genes[7] = "OTHER";
  const auto dir = knmf::test::write_cnmf_replicates(renamed, tmp.path(), "d");
  CompareOptions o;
  o.a = (tmp / "a.h5").string();
  o.b = dir.string();
  const std::string e = error_of(o);
  EXPECT_NE(e.find("different genes"), std::string::npos) << e;
  EXPECT_NE(e.find("GENE7"), std::string::npos) << e;
  EXPECT_NE(e.find("OTHER"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  // fewer genes
  const FakeRun smaller = knmf::test::make_fake_run({3}, 2, 29);
  o.b = knmf::test::write_cnmf_replicates(smaller, tmp.path(), "s").string();
  EXPECT_NE(error_of(o).find("has 29"), std::string::npos);
}

// Jobs of one side without a partner cannot be compared: they fail the comparison (and are
// listed) unless the user asks to compare the paired jobs only.
TEST(Compare, PartialOverlapFailsUnlessAllowed) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3, 4}, 3, 20);
  FakeRun part = run;
  part.spectra.erase({3, 0});
  part.spectra.erase({4, 0});
  part.spectra.erase({4, 2});
  knmf::test::write_results(run, tmp / "a.h5");
  const auto dir = knmf::test::write_cnmf_replicates(part, tmp.path(), "part");
  const auto r = compare((tmp / "a.h5").string(), dir.string());
  EXPECT_FALSE(r.passed());
  EXPECT_TRUE(r.unpaired_fail());
  EXPECT_EQ(r.overall.jobs, 3);
  EXPECT_EQ(r.overall.failed, 0);
  EXPECT_EQ(r.only_in_a, (std::vector<std::pair<int, int>>{{3, 0}, {4, 0}, {4, 2}}));
  EXPECT_TRUE(r.only_in_b.empty());
  const std::string text = knmf::results::format_compare_report(r);
  EXPECT_EQ(text.find("PASS"), std::string::npos) << text;
  EXPECT_NE(text.find("FAIL: 3 jobs have no partner on the other side"), std::string::npos) << text;
  EXPECT_NE(text.find("only in A: (k = 3, iter = 0), (k = 4, iter = 0), (k = 4, iter = 2)\n"),
            std::string::npos) << text;
  const auto j = nlohmann::json::parse(knmf::results::compare_report_json(r));
  EXPECT_EQ(j["only_in_a"].size(), 3u);
  EXPECT_FALSE(j["passed"].get<bool>());
  EXPECT_FALSE(j["allow_unpaired"].get<bool>());
  // B against A: the same jobs, now only in B
  const auto back = compare(dir.string(), (tmp / "a.h5").string());
  EXPECT_FALSE(back.passed());
  EXPECT_EQ(back.only_in_b.size(), 3u);

  CompareOptions allow;
  allow.allow_unpaired = true;
  const auto ok = compare((tmp / "a.h5").string(), dir.string(), allow);
  EXPECT_TRUE(ok.passed());
  EXPECT_EQ(ok.only_in_a.size(), 3u);
  const std::string ok_text = knmf::results::format_compare_report(ok);
  EXPECT_NE(ok_text.find("PASS: all 3 compared jobs are within the thresholds (3 jobs without a "
                         "partner not compared: --allow-unpaired)"),
            std::string::npos) << ok_text;
  EXPECT_TRUE(nlohmann::json::parse(knmf::results::compare_report_json(ok))["passed"].get<bool>());
}

TEST(Compare, BadInputsAreOneLineErrors) {
  TempDir tmp;
  const FakeRun run = knmf::test::make_fake_run({3}, 2, 20);
  knmf::test::write_results(run, tmp / "a.h5");
  CompareOptions o;
  o.a = (tmp / "a.h5").string();
  auto one_line = [](const std::string& e) { EXPECT_EQ(e.find('\n'), std::string::npos) << e; };

  o.b = (tmp / "missing.h5").string();
  std::string e = error_of(o);
  EXPECT_NE(e.find("B: "), std::string::npos) << e;
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
  one_line(e);

  std::ofstream(tmp / "text.txt") << "hello\n";
  o.b = (tmp / "text.txt").string();
  e = error_of(o);
  EXPECT_NE(e.find("not a knmf results file"), std::string::npos) << e;
  one_line(e);

  std::filesystem::create_directories(tmp / "plain");
  o.b = (tmp / "plain").string();
  e = error_of(o);
  EXPECT_NE(e.find("not a cNMF run folder"), std::string::npos) << e;
  one_line(e);

  std::filesystem::create_directories(tmp / "empty" / "cnmf_tmp");
  o.b = (tmp / "empty").string();
  e = error_of(o);
  EXPECT_NE(e.find("holds no replicate spectra"), std::string::npos) << e;
  one_line(e);

  const FakeRun disjoint = knmf::test::make_fake_run({5, 6}, 2, 20);
  o.b = knmf::test::write_cnmf_replicates(disjoint, tmp.path(), "dj").string();
  e = error_of(o);
  EXPECT_NE(e.find("no (k, iter) job in common"), std::string::npos) << e;
  one_line(e);

  o.b = (tmp / "a.h5").string();
  o.rtol = -1;
  EXPECT_NE(error_of(o).find("--rtol"), std::string::npos);
  o.rtol = 1e-6;
  o.min_cos = 2;
  EXPECT_NE(error_of(o).find("--min-cos"), std::string::npos);
  o.min_cos = 0.5;
  o.b_name = "x";
  EXPECT_NE(error_of(o).find("--b-name"), std::string::npos);
}

}  // namespace
