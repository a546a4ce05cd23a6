#pragma once
/// \file
/// The beta-divergence multiplicative update of scikit-learn 1.2.1 (`_multiplicative_update_w`,
/// `_multiplicative_update_h`, `_beta_divergence` for beta != 2), value by value and as the
/// block kernels the beta passes (beta_passes.hpp) run on one slot and a block of rows of X.
///
/// scikit-learn's rules, written once here (device functions, so the host and CUDA builds
/// compute the same values):
///  * numerator ratio X * WH^(beta-2): WH == 0 becomes EPSILON when beta < 2 (beta 1: X / WH;
///    beta 0: (1 / WH)^2 * X, numpy's fast powers);
///  * denominator power WH^(beta-1) (WH == 0 becomes EPSILON when beta < 1);
///  * update F * (num / den)^gamma with den += l1, den += l2 F, den == 0 -> EPSILON, and
///    gamma = 1/(2-beta) for beta < 1, 1/(beta-1) for beta > 2, else 1;
///  * divergence terms only where X > EPSILON, WH == 0 there becoming EPSILON.
/// numpy's `a **= e` takes fast paths for e in {-1, 0, 0.5, 1, 2} (reciprocal, ones, sqrt,
/// copy, square): np_power does the same so the roundings match.

#include <Kokkos_Core.hpp>

#include "knmf/core/types.hpp"
#include "knmf/solver/options.hpp"

namespace knmf::detail {

/// numpy's float64 machine epsilon (W, H entries below it are zeroed for small beta).
inline constexpr double float64_epsilon = 2.220446049250313080847263336181640625e-16;

/// scikit-learn's gamma for the Maximization-Minimization update (Fevotte & Idier 2011).
inline double beta_gamma(double beta) {
  if (beta < 1.0) return 1.0 / (2.0 - beta);
  if (beta > 2.0) return 1.0 / (beta - 1.0);
  return 1.0;
}

/// x ** e as numpy computes it for an array and a scalar exponent.
template <class T>
KOKKOS_INLINE_FUNCTION T np_power(T x, double e) {
  if (e == 1.0) return x;
  if (e == 2.0) return x * x;
  if (e == -1.0) return T(1) / x;
  if (e == 0.5) return Kokkos::sqrt(x);
  if (e == 0.0) return T(1);
  return Kokkos::pow(x, T(e));
}

/// X * WH^(beta - 2) at one entry (the numerators' operand).
template <class T>
KOKKOS_INLINE_FUNCTION T beta_ratio(T x, T wh, double beta) {
  if (beta < 2.0 && wh == T(0)) wh = T(sklearn_epsilon);
  if (beta == 1.0) return x / wh;
  if (beta == 0.0) {
    T r = T(1) / wh;
    r = r * r;
    return r * x;
  }
  return np_power(wh, beta - 2.0) * x;
}

/// WH^(beta - 1) at one entry (the denominators' operand, beta != 1).
template <class T>
KOKKOS_INLINE_FUNCTION T beta_den_power(T wh, double beta) {
  if (beta < 1.0 && wh == T(0)) wh = T(sklearn_epsilon);
  return np_power(wh, beta - 1.0);
}

/// One updated value: f * (num / d)^gamma, d = den [+ l1] [+ l2 f], d == 0 -> EPSILON; then
/// zeroed below float64's epsilon when `zero_small` (scikit-learn's stability step).
template <class T>
KOKKOS_INLINE_FUNCTION T beta_mu_value(T den, T f, T num, double l1, double l2, double gamma,
                                       bool zero_small) {
  T d = den;
  if (l1 > 0) d += T(l1);
  if (l2 > 0) d = d + T(l2) * f;
  if (d == T(0)) d = T(sklearn_epsilon);
  T delta = num / d;
  if (gamma != 1.0) delta = np_power(delta, gamma);
  T out = f * delta;
  if (zero_small && out < T(float64_epsilon)) out = T(0);
  return out;
}

/// The divergence term of one entry with X > EPSILON (0 otherwise), in double:
///   beta 1: x log(x / wh) - x      beta 0: x / wh - log(x / wh)
///   else:   x^beta - beta x wh^(beta - 1)
/// (the rest of each divergence is added elsewhere: sum WH for beta 1, -n g for beta 0,
/// (beta - 1) sum WH^beta otherwise; then the division by beta (beta - 1)).
template <class T>
KOKKOS_INLINE_FUNCTION double beta_div_entry(T x, T wh, double beta) {
  if (!(double(x) > sklearn_epsilon)) return 0.0;
  const T w = wh == T(0) ? T(sklearn_epsilon) : wh;
  if (beta == 1.0) {
    const T d = x / w;
    return double(x) * double(Kokkos::log(d)) - double(x);
  }
  if (beta == 0.0) {
    const T d = x / w;
    return double(d) - double(Kokkos::log(d));
  }
  return double(np_power(x, beta)) - beta * double(x) * double(np_power(w, beta - 1.0));
}

/// The term of one entry over all of WH (beta not 0 or 1): (beta - 1) wh^beta.
template <class T>
KOKKOS_INLINE_FUNCTION double beta_div_all(T wh, double beta) {
  return (beta - 1.0) * double(np_power(wh, beta));
}

}  // namespace knmf::detail
