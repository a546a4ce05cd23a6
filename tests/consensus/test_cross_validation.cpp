// Bi-cross-validation for k (knmf/consensus/cross_validation.hpp): the folds (deterministic,
// balanced), the held-out block never read by its own fits, the minimum of the prediction
// error at the rank of a noise-free matrix, the choice of k, the option errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>

#include "knmf/consensus/cross_validation.hpp"
#include "knmf/core/error.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
using namespace knmf::consensus;

/// X = W H + noise (n x g, row-major dense and CSR): W with about half its entries zero (a
/// sparse X), H of k0 non-negative programs. noise 0: exactly rank k0.
struct LowRank {
  std::vector<double> dense;
  io::CsrBlock<double> csr;
};
LowRank low_rank(std::int64_t n, std::int64_t g, int k0, double noise, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> W(size_t(n * k0)), H(size_t(k0 * g));
  for (auto& v : W) v = u(rng) < 0.5 ? 0.0 : u(rng);
  for (auto& v : H) v = u(rng) < 0.3 ? 0.0 : 4.0 * u(rng);
  LowRank x;
  x.dense.assign(size_t(n * g), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < g; ++j) {
      double s = 0.0;
      for (int t = 0; t < k0; ++t) s += W[size_t(i * k0 + t)] * H[size_t(t * g + j)];
      if (s > 0.0 && noise > 0.0) s = std::max(0.0, s + noise * (u(rng) - 0.5));
      x.dense[size_t(i * g + j)] = s;
    }
  x.csr = knmf::test::dense_to_csr_block<io::CsrBlock<double>>(x.dense, g);
  return x;
}

SolverOptions cd_options() {
  SolverOptions o;
  o.solver = SolverKind::cd;
  o.max_iter = 400;
  o.tol = 1e-6;
  return o;
}

TEST(CrossValidation, FoldsAreDeterministicBalancedAndSeeded) {
  for (std::int64_t count : {1, 7, 100, 1001})
    for (int groups : {1, 2, 3, 5}) {
      const auto a = fold_assignment(count, groups, 14);
      EXPECT_EQ(a, fold_assignment(count, groups, 14)) << "the same seed, the same folds";
      std::vector<std::int64_t> size(size_t(groups), 0);
      for (int f : a) {
        ASSERT_GE(f, 0);
        ASSERT_LT(f, groups);
        ++size[size_t(f)];
      }
      const auto [lo, hi] = std::minmax_element(size.begin(), size.end());
      EXPECT_LE(*hi - *lo, 1) << count << " items in " << groups << " groups";
    }
  EXPECT_NE(fold_assignment(1000, 2, 14), fold_assignment(1000, 2, 15));
  // a permutation, not the items in order
  const auto a = fold_assignment(1000, 2, 14);
  EXPECT_FALSE(std::is_sorted(a.begin(), a.end()));
}

TEST(CrossValidation, TheHeldOutBlockIsNeverRead) {
  const std::int64_t n = 60, g = 40;
  const auto x = low_rank(n, g, 3, 0.2, 3);
  CrossValidationOptions cv;
  cv.replicates = 2;
  const auto folds = cross_validation_folds(n, g, cv);
  const auto before = predict_block(ExecSpace(), x.csr, 0, 1, 3, cd_options(), cv);
  // every value of X[I, J] of block (0, 1) changed, zeros included
  const auto changed = [&](bool in_j) {
    std::vector<double> d = x.dense;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < g; ++j)
        if (folds.cells[size_t(i)] == 0 && (folds.genes[size_t(j)] == 1) == in_j)
          d[size_t(i * g + j)] = 7.0 - d[size_t(i * g + j)];
    return knmf::test::dense_to_csr_block<io::CsrBlock<double>>(d, g);
  };
  const auto after = predict_block(ExecSpace(), changed(true), 0, 1, 3, cd_options(), cv);
  EXPECT_EQ(after.usages, before.usages);
  EXPECT_EQ(after.spectra_t, before.spectra_t);
  // the control: the same change of X[I, -J], which the usages' refit reads
  const auto control = predict_block(ExecSpace(), changed(false), 0, 1, 3, cd_options(), cv);
  EXPECT_NE(control.usages, before.usages);
  std::int64_t in_i = 0, in_j = 0;
  for (int f : folds.cells) in_i += f == 0;
  for (int f : folds.genes) in_j += f == 1;
  ASSERT_EQ(before.usages.size(), 2u);
  EXPECT_EQ(before.usages[0].size(), size_t(in_i * 3));      // |I| x k
  EXPECT_EQ(before.spectra_t[0].size(), size_t(in_j * 3));   // |J| x k
}

TEST(CrossValidation, ThePredictionErrorDropsAtTheRankOfANoiseFreeMatrix) {
  const int k0 = 4;
  const auto x = low_rank(160, 80, k0, 0.0, 7);
  CrossValidationOptions cv;
  cv.replicates = 2;
  const std::vector<int> ks = {1, 2, 3, 4, 5, 6};
  const auto table = cross_validate(ExecSpace(), x.csr, ks, cd_options(), cv);
  ASSERT_EQ(table.size(), ks.size());
  for (const auto& row : table) {
    EXPECT_EQ(row.errors.size(), size_t(cv.cell_folds * cv.gene_folds * cv.replicates));
    EXPECT_TRUE(std::isfinite(row.mean)) << "k " << row.k;
  }
  for (const auto& row : table)
    std::printf("k = %d: relative prediction error %.3g (sd %.3g)\n", row.k, row.mean, row.sd);
  const double at_k0 = table[size_t(k0 - 1)].mean;
  // below k0 the error is that of a missing program; at k0 the block is predicted
  EXPECT_LT(at_k0, 0.1 * table[size_t(k0 - 2)].mean) << "k0 - 1: " << table[size_t(k0 - 2)].mean
                                                     << ", k0: " << at_k0;
  for (int k = 1; k < k0; ++k) EXPECT_GT(table[size_t(k - 1)].mean, table[size_t(k)].mean);
  // and stays there above k0 (no program is missing; the extra ones predict nothing wrong)
  for (int k = k0 + 1; k <= 6; ++k)
    EXPECT_LT(table[size_t(k - 1)].mean, 0.1 * table[size_t(k0 - 2)].mean) << "k " << k;
  EXPECT_EQ(choose_k(table), k0);
  EXPECT_EQ(choose_k(table, KChoiceRule::one_se), k0);
}

TEST(CrossValidation, ChooseK) {
  using R = KChoiceRule;
  std::vector<CrossValidationK> t = {{2, 0.5, 0, 0.01, {}}, {3, 0.30, 0, 0.02, {}},
                                     {4, 0.29, 0, 0.02, {}}, {5, 0.31, 0, 0.02, {}}};
  EXPECT_EQ(choose_k(t, R::smallest_mean), 4);
  EXPECT_EQ(choose_k(t, R::one_se), 3) << "the smallest k within one standard error";
  // unpaired rows: three of the minimum's own standard errors (0.29 + 0.06)
  EXPECT_EQ(choose_k(t), 3);
  t[1].mean = 0.36;
  EXPECT_EQ(choose_k(t), 4) << "0.36 is more than three standard errors above 0.29";
  t[1].mean = 0.30;
  EXPECT_EQ(choose_k({}), 0);
  // paired: k = 3 is above k = 4 in every block by more than the differences' scatter (its
  // unpaired spread would have let it through), k = 2 is not
  t[0].errors = {0.50, 0.60, 0.40, 0.50};
  t[1].errors = {0.30, 0.31, 0.29, 0.30};
  t[2].errors = {0.28, 0.30, 0.28, 0.30};
  t[3].errors = {0.31, 0.31, 0.31, 0.31};
  for (auto& r : t) {
    double m = 0.0;
    for (double e : r.errors) m += e / 4.0;
    r.mean = m;
  }
  EXPECT_EQ(choose_k(t, R::smallest_mean), 4);
  EXPECT_EQ(choose_k(t, R::one_se), 4) << "3 is 0.01 above 4 in every block: not within";
  // three pooled standard errors: the variances of the neighbours' differences (2-3: 0.0054,
  // 3-4: 0.0000667, 4-5: 0.000133) average 0.0018667, a standard error of sqrt(0.0018667 / 4)
  // = 0.0216; 3 is 0.01 above the minimum, 2 is 0.21 above it
  EXPECT_EQ(choose_k(t), 3);
  // the rows in another order choose the same
  std::vector<CrossValidationK> shuffled = {t[3], t[1], t[0], t[2]};
  EXPECT_EQ(choose_k(shuffled), 3);
  EXPECT_EQ(choose_k(shuffled, R::one_se), 4);
  // a steep curve with little scatter: three standard errors keep the minimum
  t[0].errors = {0.50, 0.50, 0.50, 0.50};
  t[0].mean = 0.5;
  t[1].errors = {0.33, 0.33, 0.33, 0.34};
  t[1].mean = 0.3325;
  EXPECT_EQ(choose_k(t), 4);
  t[1].errors = {0.27, 0.33, 0.27, 0.31};  // the same mean, 0.295, now scattered around 4's
  t[1].mean = 0.295;
  EXPECT_EQ(choose_k(t, R::one_se), 3);
}

// A block's replicates share its held-out data: the rules pair the blocks' means, so a
// replicate that repeats its block's error (no new information) changes nothing, where
// counting every value would shrink the standard error by sqrt(2).
TEST(CrossValidation, ChooseKPairsTheBlocksNotTheReplicates) {
  using R = KChoiceRule;
  std::vector<CrossValidationK> blocks = {{2, 0, 0, 0, {0.50, 0.60, 0.40, 0.50}},
                                          {3, 0, 0, 0, {0.33, 0.36, 0.30, 0.35}},
                                          {4, 0, 0, 0, {0.28, 0.30, 0.28, 0.30}},
                                          {5, 0, 0, 0, {0.31, 0.31, 0.31, 0.31}}};
  for (auto& r : blocks)
    for (double e : r.errors) r.mean += e / 4.0;
  // pooled SE sqrt(mean(0.00543, 0.000367, 0.000133) / 4) = 0.0178: 3 is 0.045 above the
  // minimum (4, 0.29), within 3 SE (0.053)
  ASSERT_EQ(choose_k(blocks), 3);
  auto twice = blocks;  // two replicates per block, each the block's error again
  for (auto& r : twice) {
    std::vector<double> e;
    for (double v : r.errors) e.insert(e.end(), {v, v});
    r.errors = e;
    r.replicates = 2;
  }
  EXPECT_EQ(choose_k(twice), 3);
  EXPECT_EQ(choose_k(twice, R::one_se), choose_k(blocks, R::one_se));
  for (auto& r : twice) r.replicates = 1;  // the 8 values taken as independent: SE 0.0116
  EXPECT_EQ(choose_k(twice), 4) << "0.045 is more than 3 x 0.0116 above the minimum";
  // replicates that differ within a block: only their block's mean counts
  auto spread = twice;
  for (auto& r : spread) {
    r.replicates = 2;
    for (size_t i = 0; i < r.errors.size(); i += 2) {
      r.errors[i] -= 0.02;
      r.errors[i + 1] += 0.02;
    }
  }
  EXPECT_EQ(choose_k(spread), 3);
}

TEST(CrossValidation, ChoiceRuleNames) {
  ASSERT_EQ(std::size(k_choice_rules), 3u);
  for (const auto r : k_choice_rules)
    EXPECT_EQ(parse_k_choice_rule(k_choice_rule_name(r), "--cv-rule"), r);
  EXPECT_EQ(k_choice_rules[0], KChoiceRule::three_pooled_se) << "the default first";
  EXPECT_STREQ(k_choice_rule_name(KChoiceRule::three_pooled_se), "3se");
  try {
    parse_k_choice_rule("2se", "--cv-rule");
    ADD_FAILURE() << "2se accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--cv-rule '2se'"), std::string::npos) << e.what();
  }
}

// Resume: a run stopped after some units (a held-out block at one k) leaves them in its
// checkpoint file; a later run with the same key takes them up, computes only the others and
// gives the same table bit for bit. A file of another run (another seed) or one that does not
// parse is ignored.
namespace {
/// Saves through to a checkpoint, counts the saves and, after `stop_after` of them, throws as a
/// kill would end the run (after the unit's file was committed).
class StoppingStore final : public CrossValidationStore {
public:
  StoppingStore(CrossValidationCheckpoint& inner, int stop_after) : inner_(inner), left_(stop_after) {}
  void begin(const std::string& key) override { inner_.begin(key); }
  bool find(int block, int k, std::vector<double>& e) const override { return inner_.find(block, k, e); }
  void save(int block, int k, const std::vector<double>& e) override {
    inner_.save(block, k, e);
    ++saves;
    if (--left_ == 0) throw std::runtime_error("stopped");
  }
  int saves = 0;

private:
  CrossValidationCheckpoint& inner_;
  int left_;
};
}  // namespace

TEST(CrossValidation, AStoppedRunResumesFromItsCheckpoint) {
  const auto x = low_rank(60, 30, 3, 0.05, 5);
  CrossValidationOptions cv;
  cv.replicates = 2;
  const std::vector<int> ks = {2, 3, 4};
  const auto whole = cross_validate(ExecSpace(), x.csr, ks, cd_options(), cv);
  knmf::test::TempDir tmp("knmf-cv-resume");
  const auto path = tmp.path() / "cv.checkpoint";
  {
    CrossValidationCheckpoint file(path);
    StoppingStore stop(file, 5);  // 4 blocks x 3 k = 12 units: stopped after 5
    EXPECT_THROW(cross_validate(ExecSpace(), x.csr, ks, cd_options(), cv, &stop), std::runtime_error);
    EXPECT_EQ(stop.saves, 5);
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  std::string header, key;
  {
    std::ifstream in(path);
    std::getline(in, header);
    std::getline(in, key);
  }
  EXPECT_EQ(key.rfind("key n=60 g=30 ", 0), 0u) << key;
  CrossValidationCheckpoint file(path);
  StoppingStore counting(file, -1);
  const auto resumed = cross_validate(ExecSpace(), x.csr, ks, cd_options(), cv, &counting);
  EXPECT_EQ(file.resumed(), 5u);
  EXPECT_EQ(counting.saves, 12 - 5) << "only the units not finished before";
  ASSERT_EQ(resumed.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(resumed[i].errors, whole[i].errors) << "k " << whole[i].k;
    EXPECT_EQ(resumed[i].mean, whole[i].mean);
    EXPECT_EQ(resumed[i].sd, whole[i].sd);
  }
  // another run's file: its units are not taken up
  CrossValidationOptions other = cv;
  other.seed = 15;
  CrossValidationCheckpoint again(path);
  StoppingStore recount(again, -1);
  cross_validate(ExecSpace(), x.csr, {2}, cd_options(), other, &recount);
  EXPECT_EQ(again.resumed(), 0u);
  EXPECT_EQ(recount.saves, 4);
  // a damaged file of this run: ignored, then replaced by the run's own
  {
    std::ofstream(path) << header << "\n" << key << "\n0 2 2 0.5 x\n";
  }
  CrossValidationCheckpoint damaged(path);
  const auto fresh = cross_validate(ExecSpace(), x.csr, {2}, cd_options(), cv, &damaged);
  EXPECT_EQ(damaged.resumed(), 0u);
  EXPECT_EQ(fresh[0].errors, whole[0].errors);
  damaged.remove();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(CrossValidation, OptionErrorsNameTheOption) {
  const auto x = low_rank(20, 10, 2, 0.0, 1);
  const auto message = [&](CrossValidationOptions cv, std::vector<int> ks = {2}) {
    try {
      cross_validate(ExecSpace(), x.csr, ks, cd_options(), cv);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CrossValidationOptions cv;
  cv.cell_folds = 1;
  EXPECT_NE(message(cv).find("--cv-cell-folds 1"), std::string::npos) << message(cv);
  cv = {};
  cv.gene_folds = 0;
  EXPECT_NE(message(cv).find("--cv-gene-folds 0"), std::string::npos);
  cv = {};
  cv.replicates = 0;
  EXPECT_NE(message(cv).find("--cv-replicates 0"), std::string::npos);
  cv = {};
  cv.seed = std::uint64_t(1) << 32;
  EXPECT_NE(message(cv).find("--cv-seed"), std::string::npos);
  cv = {};
  cv.cell_folds = 30;
  EXPECT_NE(message(cv).find("cannot be split"), std::string::npos);
  EXPECT_NE(message({}, {0}).find("k = 0"), std::string::npos);
}

}  // namespace
