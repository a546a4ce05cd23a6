// The simulator's own math and samplers: exp/log accuracy, sampler moments, and pinned
// values (the same on every machine: that is the point of not using std:: distributions).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "prepare/sim_random.hpp"

namespace {
using namespace knmf::prepare::detail;

double ulps(double a, double b) {
  if (a == b) return 0;
  return std::abs(a - b) / (std::numeric_limits<double>::epsilon() * std::abs(b));
}

TEST(SimMath, ExpWithinFewUlpOfLibm) {
  double worst = 0;
  for (double x = -708.0; x < 709.7; x += 0.01234567) worst = std::max(worst, ulps(det_exp(x), std::exp(x)));
  // Subnormal results: within one unit of the smallest subnormal.
  for (double x = -745.0; x < -708.5; x += 0.0123)
    EXPECT_LE(std::abs(det_exp(x) - std::exp(x)), std::numeric_limits<double>::denorm_min()) << x;
  for (double x = -1; x < 1; x += 1e-4) worst = std::max(worst, ulps(det_exp(x), std::exp(x)));
  EXPECT_LE(worst, 4.0);
  EXPECT_EQ(det_exp(0.0), 1.0);
  EXPECT_EQ(det_exp(-800.0), 0.0);
  EXPECT_TRUE(std::isinf(det_exp(710.0)));
  EXPECT_TRUE(std::isnan(det_exp(std::nan(""))));
}

TEST(SimMath, LogWithinFewUlpOfLibm) {
  double worst = 0;
  for (double x = 1e-300; x < 1e300; x *= 1.0123) {
    const double ref = std::log(x);
    if (std::abs(ref) > 1e-3) worst = std::max(worst, ulps(det_log(x), ref));
  }
  // Near 1 the absolute error is what matters (relative error of a tiny result).
  double worst_abs = 0;
  for (double x = 0.99; x < 1.01; x += 1e-6) worst_abs = std::max(worst_abs, std::abs(det_log(x) - std::log(x)));
  EXPECT_LE(worst, 4.0);
  EXPECT_LE(worst_abs, 1e-17);
  EXPECT_EQ(det_log(1.0), 0.0);
  EXPECT_TRUE(std::isinf(det_log(0.0)) && det_log(0.0) < 0);
  EXPECT_TRUE(std::isnan(det_log(-1.0)));
  EXPECT_NEAR(det_log(std::numeric_limits<double>::denorm_min()), std::log(std::numeric_limits<double>::denorm_min()), 1e-12);
}

TEST(SimMath, LogGammaMatchesLibm) {
  for (int k = 1; k < 2000; ++k) EXPECT_LE(std::abs(det_lgamma(k) - std::lgamma(double(k))), 1e-12 * std::max(1.0, std::lgamma(double(k)))) << k;
}

// Sample mean and variance against the distribution's, within 6 standard errors (the
// variance's standard error from the sample's fourth central moment: sqrt((m4 - s^4) / n)).
void check_moments(const std::vector<double>& x, double mean, double var, const char* what) {
  const double n = double(x.size());
  double s = 0, s2 = 0, s4 = 0;
  for (double v : x) s += v;
  const double m = s / n;
  for (double v : x) {
    const double d2 = (v - m) * (v - m);
    s2 += d2;
    s4 += d2 * d2;
  }
  const double v = s2 / (n - 1), m4 = s4 / n;
  EXPECT_NEAR(m, mean, 6 * std::sqrt(var / n)) << what;
  EXPECT_NEAR(v, var, 6 * std::sqrt(std::max(m4 - v * v, 0.0) / n)) << what;
}

TEST(SimRng, SamplerMoments) {
  SimRng rng(123, 4, 5);
  const int n = 200000;
  std::vector<double> x(n);
  for (auto& v : x) v = rng.uniform();
  check_moments(x, 0.5, 1.0 / 12, "uniform");
  for (auto& v : x) v = rng.normal();
  check_moments(x, 0.0, 1.0, "normal");
  for (double a : {0.02, 0.34, 1.0, 3.7, 50.0}) {
    for (auto& v : x) v = rng.gamma(a);
    check_moments(x, a, a, ("gamma " + std::to_string(a)).c_str());
  }
  for (double l : {0.001, 0.7, 9.99, 10.0, 37.5, 5000.0}) {
    for (auto& v : x) v = double(rng.poisson(l));
    check_moments(x, l, l, ("poisson " + std::to_string(l)).c_str());
  }
  for (auto& v : x) v = rng.chi_square(22.087);
  check_moments(x, 22.087, 2 * 22.087, "chi-square");
  for (auto& v : x) v = rng.lognormal(0.5, 0.4);
  const double s2 = 0.16;
  check_moments(x, std::exp(0.5 + s2 / 2), (std::exp(s2) - 1) * std::exp(1 + s2), "lognormal");
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70000; ++i) ++counts[size_t(rng.below(7))];
  for (int c : counts) EXPECT_NEAR(c, 10000, 600);
  EXPECT_EQ(rng.poisson(0.0), 0);
}

TEST(SimRng, StreamsAreReproducibleAndDistinct) {
  SimRng a(7, 1, 2), b(7, 1, 2), c(7, 1, 3), d(7, 2, 2), e(8, 1, 2);
  for (int i = 0; i < 100; ++i) {
    const auto va = a.next_u64();
    EXPECT_EQ(va, b.next_u64());
    EXPECT_NE(va, c.next_u64());
    EXPECT_NE(va, d.next_u64());
    EXPECT_NE(va, e.next_u64());
  }
}

// Pinned values: xoshiro256** seeded by SplitMix64 and the samplers built on it. A change here
// changes every simulation (and the golden checksums in test_simulate.cpp).
TEST(SimRng, PinnedValues) {
  SimRng rng(0, 0, 0);
  std::vector<std::uint64_t> raw;
  for (int i = 0; i < 3; ++i) raw.push_back(rng.next_u64());
  std::vector<double> vals = {rng.uniform(), rng.normal(), rng.normal(), rng.gamma(0.34),
                              rng.gamma(2.5), double(rng.poisson(3.5)), double(rng.poisson(120.0))};
  const std::vector<std::uint64_t> raw_expected = {
      0x8c4986f3f0e565d5ULL, 0xf4547fdf5c2f56b6ULL, 0x6a9e0d6a14f022fbULL};
  const std::vector<double> vals_expected = {0.87219605551537938,  -0.49957091256456848,
                                             -0.50116321421508547, 0.033721176566560186,
                                             1.7171853990918569,   4, 121};
  EXPECT_EQ(raw, raw_expected);
  EXPECT_EQ(vals, vals_expected);
}

}  // namespace
