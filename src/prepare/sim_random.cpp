// Compiled with -ffp-contract=off (see CMakeLists.txt): a fused multiply-add would round
// differently from the separate operations and break reproducibility across machines.
#include "prepare/sim_random.hpp"

#include <cmath>
#include <limits>

namespace knmf::prepare::detail {

namespace {

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// ln 2 split so that k * kLn2Hi is exact for |k| < 2^11 (fdlibm's constants).
constexpr double kLn2Hi = 6.93147180369123816490e-01;
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kInvLn2 = 1.44269504088896338700e+00;

}  // namespace

double det_exp(double x) {
  if (x != x) return x;
  if (x > 709.782712893384) return std::numeric_limits<double>::infinity();
  if (x < -745.1332191019412) return 0.0;
  const double kf = std::floor(x * kInvLn2 + 0.5);
  const double r = (x - kf * kLn2Hi) - kf * kLn2Lo;  // |r| <= 0.35
  // sum_{i=0}^{15} r^i / i!  (the next term is below 1e-20 relative)
  double p = 1.0 / 1307674368000.0;
  p = p * r + 1.0 / 87178291200.0;
  p = p * r + 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  return std::ldexp(p, static_cast<int>(kf));  // exact scaling (rounded once if subnormal)
}

double det_log(double x) {
  if (x != x || x < 0) return std::numeric_limits<double>::quiet_NaN();
  if (x == 0) return -std::numeric_limits<double>::infinity();
  if (x == std::numeric_limits<double>::infinity()) return x;
  int e = 0;
  double m = std::frexp(x, &e);  // exact: x = m 2^e, m in [0.5, 1)
  if (m < 0.70710678118654752440) {
    m *= 2.0;
    e -= 1;
  }
  // log m = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = (m - 1) / (m + 1), |s| <= 0.1716
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  double p = 1.0 / 25.0;
  p = p * z + 1.0 / 23.0;
  p = p * z + 1.0 / 21.0;
  p = p * z + 1.0 / 19.0;
  p = p * z + 1.0 / 17.0;
  p = p * z + 1.0 / 15.0;
  p = p * z + 1.0 / 13.0;
  p = p * z + 1.0 / 11.0;
  p = p * z + 1.0 / 9.0;
  p = p * z + 1.0 / 7.0;
  p = p * z + 1.0 / 5.0;
  p = p * z + 1.0 / 3.0;
  const double log_m = 2.0 * s + 2.0 * s * (z * p);
  const double de = static_cast<double>(e);
  return de * kLn2Hi + (log_m + de * kLn2Lo);
}

double det_lgamma(double x) {
  static constexpr double a[10] = {8.333333333333333e-02,  -2.777777777777778e-03,
                                   7.936507936507937e-04,  -5.952380952380952e-04,
                                   8.417508417508418e-04,  -1.917526917526918e-03,
                                   6.410256410256410e-03,  -2.955065359477124e-02,
                                   1.796443723688307e-01,  -1.39243221690590e+00};
  if (x == 1.0 || x == 2.0) return 0.0;
  double x0 = x;
  std::int64_t n = 0;
  if (x <= 7.0) {
    n = static_cast<std::int64_t>(7 - x);
    x0 = x + static_cast<double>(n);
  }
  const double x2 = 1.0 / (x0 * x0);
  double gl0 = a[9];
  for (int k = 8; k >= 0; --k) gl0 = gl0 * x2 + a[k];
  constexpr double lg2pi = 1.8378770664093453e+00;
  double gl = gl0 / x0 + 0.5 * lg2pi + (x0 - 0.5) * det_log(x0) - x0;
  for (std::int64_t k = 1; k <= n; ++k) {
    gl -= det_log(x0 - 1.0);
    x0 -= 1.0;
  }
  return gl;
}

SimRng::SimRng(std::uint64_t seed, std::uint64_t stream, std::uint64_t substream) {
  std::uint64_t x = seed;
  std::uint64_t key = splitmix64(x);
  x = key ^ (stream * 0xD1B54A32D192ED03ULL);
  key = splitmix64(x);
  x = key ^ (substream * 0xAEF17502108EF2D9ULL);
  for (auto& w : s_) w = splitmix64(x);
}

std::uint64_t SimRng::next_u64() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double SimRng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

std::int64_t SimRng::below(std::int64_t n) {
  const auto v = static_cast<std::int64_t>(uniform() * static_cast<double>(n));
  return v < n ? v : n - 1;
}

double SimRng::normal() {
  if (has_normal_) {
    has_normal_ = false;
    return cached_normal_;
  }
  double x1, x2, r2;
  do {
    x1 = 2.0 * uniform() - 1.0;
    x2 = 2.0 * uniform() - 1.0;
    r2 = x1 * x1 + x2 * x2;
  } while (r2 >= 1.0 || r2 == 0.0);
  const double f = std::sqrt(-2.0 * det_log(r2) / r2);
  cached_normal_ = f * x1;
  has_normal_ = true;
  return f * x2;
}

double SimRng::gamma(double shape) {
  if (shape < 1.0) {
    // Gamma(a) = Gamma(a + 1) * U^(1/a), U uniform in (0, 1]
    const double g = gamma(shape + 1.0);
    const double u = 1.0 - uniform();
    return g * det_exp(det_log(u) / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = uniform();
    const double x2 = x * x;
    if (u < 1.0 - 0.0331 * (x2 * x2)) return d * v;
    if (det_log(u) < 0.5 * x2 + d * (1.0 - v + det_log(v))) return d * v;
  }
}

double SimRng::lognormal(double mu, double sigma) { return det_exp(mu + sigma * normal()); }

double SimRng::chi_square(double dof) { return 2.0 * gamma(dof / 2.0); }

std::int64_t SimRng::poisson(double mean) {
  if (!(mean > 0.0)) return 0;
  if (mean < 10.0) {
    const double limit = det_exp(-mean);
    std::int64_t k = 0;
    double prod = uniform();
    while (prod > limit) {
      ++k;
      prod *= uniform();
    }
    return k;
  }
  // PTRS: transformed rejection with squeeze (W. Hormann, 1993), as numpy's legacy sampler.
  const double slam = std::sqrt(mean);
  const double loglam = det_log(mean);
  const double b = 0.931 + 2.53 * slam;
  const double a = -0.059 + 0.02483 * b;
  const double invalpha = 1.1239 + 1.1328 / (b - 3.4);
  const double vr = 0.9277 - 3.6224 / (b - 2.0);
  for (;;) {
    const double U = uniform() - 0.5;
    const double V = uniform();
    const double us = 0.5 - std::fabs(U);
    if (us <= 0.0) continue;  // U = -0.5 exactly: the transform is undefined there
    const auto k = static_cast<std::int64_t>(std::floor((2.0 * a / us + b) * U + mean + 0.43));
    if (us >= 0.07 && V <= vr) return k;
    if (k < 0 || (us < 0.013 && V > us)) continue;
    if (det_log(V) + det_log(invalpha) - det_log(a / (us * us) + b) <=
        -mean + static_cast<double>(k) * loglam - det_lgamma(static_cast<double>(k + 1)))
      return k;
  }
}

}  // namespace knmf::prepare::detail
