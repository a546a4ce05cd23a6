// The recovery metric: Hungarian matching (against brute force), correlations of known
// permutations, weights, rectangular cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "prepare/sim_random.hpp"
#include "knmf/prepare/evaluate.hpp"

namespace {
using namespace knmf::prepare;

double assignment_value(const std::vector<double>& w, int cols, const std::vector<int>& a) {
  double s = 0;
  for (size_t r = 0; r < a.size(); ++r)
    if (a[r] >= 0) s += w[r * size_t(cols) + size_t(a[r])];
  return s;
}

// Best total weight over all injective maps of the smaller side into the larger.
double brute_force(const std::vector<double>& w, int rows, int cols) {
  const int n = std::max(rows, cols);
  std::vector<int> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  double best = -1e300;
  do {
    double s = 0;
    for (int r = 0; r < rows; ++r)
      if (perm[size_t(r)] < cols) s += w[size_t(r) * size_t(cols) + size_t(perm[size_t(r)])];
    best = std::max(best, s);
  } while (std::next_permutation(perm.begin(), perm.end()));
  return best;
}

TEST(Hungarian, OptimalAgainstBruteForce) {
  knmf::prepare::detail::SimRng rng(3, 0, 0);
  for (int trial = 0; trial < 200; ++trial) {
    const int rows = 1 + int(rng.below(6)), cols = 1 + int(rng.below(6));
    std::vector<double> w(size_t(rows * cols));
    for (auto& x : w) x = rng.uniform() * 2 - 1;
    const auto a = knmf::hungarian_max(w, rows, cols);
    ASSERT_EQ(a.size(), size_t(rows));
    std::vector<int> used;
    for (int c : a)
      if (c >= 0) used.push_back(c);
    std::sort(used.begin(), used.end());
    EXPECT_EQ(std::adjacent_find(used.begin(), used.end()), used.end()) << "column used twice";
    EXPECT_EQ(int(used.size()), std::min(rows, cols));
    EXPECT_NEAR(assignment_value(w, cols, a), brute_force(w, rows, cols), 1e-12);
  }
}

// Greedy would pick (0,0) = 0.9 and then be forced into (1,1) = 0.1; optimal is 0.8 + 0.8.
TEST(Hungarian, BeatsGreedy) {
  const std::vector<double> w = {0.9, 0.8, 0.8, 0.1};
  EXPECT_EQ(knmf::hungarian_max(w, 2, 2), (std::vector<int>{1, 0}));
}

TEST(Recovery, KnownPermutationScaleAndGeneSubset) {
  knmf::prepare::detail::SimRng rng(11, 0, 0);
  const int P = 4;
  const std::int64_t g = 50;
  std::vector<double> truth(size_t(P * g));
  for (auto& x : truth) x = rng.gamma(0.5);
  // Components = programs permuted (2, 0, 3, 1), each scaled, over genes 10..49 reversed,
  // divided by a per-gene weight (as a variance-scaled spectrum is).
  const std::vector<int> perm = {2, 0, 3, 1};
  std::vector<std::int32_t> genes;
  std::vector<double> weight;
  for (int j = 49; j >= 10; --j) {
    genes.push_back(j);
    weight.push_back(0.5 + rng.uniform());
  }
  const size_t gs = genes.size();
  std::vector<double> spectra(size_t(P) * gs);
  for (int t = 0; t < P; ++t)
    for (size_t j = 0; j < gs; ++j)
      spectra[size_t(t) * gs + j] = (t + 1.5) * truth[size_t(perm[size_t(t)]) * g + size_t(genes[j])] * weight[j];
  const auto r = match_programs(truth, P, g, spectra, P, genes, weight);
  for (int t = 0; t < P; ++t) {
    EXPECT_EQ(r.match[size_t(perm[size_t(t)])], t);
    EXPECT_NEAR(r.matched[size_t(perm[size_t(t)])], 1.0, 1e-12);
    EXPECT_NEAR(r.best[size_t(perm[size_t(t)])], 1.0, 1e-12);
    EXPECT_LT(r.closest_other[size_t(t)], 0.9);
  }
  EXPECT_NEAR(r.min_matched(), 1.0, 1e-12);
  // Without the weights the match is no longer exact.
  const auto u = match_programs(truth, P, g, spectra, P, genes);
  EXPECT_LT(u.min_matched(), 0.9999);

  // More components than programs: the extra (a constant row: NaN correlation) is left over.
  auto more = spectra;
  more.insert(more.end(), gs, 1.0);
  const auto r5 = match_programs(truth, P, g, more, P + 1, genes, weight);
  for (int p = 0; p < P; ++p) EXPECT_NE(r5.match[size_t(p)], P);
  EXPECT_TRUE(std::isnan(r5.correlation[size_t(P)]));
  EXPECT_NEAR(r5.min_matched(), 1.0, 1e-12);
  // Fewer components: one program unmatched, min_matched NaN.
  const std::vector<double> three(spectra.begin(), spectra.begin() + std::ptrdiff_t(3 * gs));
  const auto r3 = match_programs(truth, P, g, three, 3, genes, weight);
  EXPECT_EQ(std::count(r3.match.begin(), r3.match.end(), -1), 1);
  EXPECT_EQ(r3.match[1], -1);  // program 1 was component 3, which is gone
  EXPECT_TRUE(std::isnan(r3.min_matched()));
}

}  // namespace
