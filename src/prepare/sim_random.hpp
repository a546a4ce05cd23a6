#pragma once
/// \file
/// The simulator's random numbers, identical on every machine for a given seed.
///
/// The standard library's distributions (and the libm behind exp/log) may give different
/// values on different platforms, so the simulator uses none of them: a xoshiro256** generator
/// seeded through SplitMix64, and samplers written here on top of exp/log implemented with
/// +, -, *, / only (compiled without floating-point contraction). IEEE-754 basic operations
/// and sqrt are correctly rounded everywhere, so every value below is reproducible bit for bit.

#include <cstdint>

namespace knmf::prepare::detail {

/// e^x to within a few ulp, from basic operations only (Cody-Waite reduction, Taylor series).
double det_exp(double x);
/// Natural logarithm to within a few ulp, from basic operations only (atanh series).
/// 0 gives -inf; negative or NaN arguments give NaN.
double det_log(double x);
/// log Gamma(x) for x >= 1 (Stirling series with upward shift below 7; numpy's loggam).
double det_lgamma(double x);

/// xoshiro256** with samplers. One object is one independent stream: the key
/// (seed, stream, substream) picks it, so e.g. every cell can have its own stream and a row
/// block's values never depend on how the rows were split into blocks.
class SimRng {
public:
  SimRng(std::uint64_t seed, std::uint64_t stream, std::uint64_t substream);

  /// Next 64 random bits.
  std::uint64_t next_u64();
  /// Uniform double in [0, 1) with 53 random bits.
  double uniform();
  /// Uniform integer in [0, n), n >= 1.
  std::int64_t below(std::int64_t n);
  /// Standard normal (polar Box-Muller; every second value comes from a cache).
  double normal();
  /// Gamma(shape, scale 1), shape > 0 (Marsaglia-Tsang; shape < 1 via the U^(1/shape) boost).
  double gamma(double shape);
  /// exp(N(mu, sigma^2)).
  double lognormal(double mu, double sigma);
  /// Chi-square with `dof` degrees of freedom (2 * Gamma(dof / 2)).
  double chi_square(double dof);
  /// Poisson(mean), mean >= 0: multiplication method below 10, Hormann's PTRS above.
  std::int64_t poisson(double mean);

private:
  std::uint64_t s_[4];
  bool has_normal_ = false;
  double cached_normal_ = 0.0;
};

}  // namespace knmf::prepare::detail
