#pragma once
/// \file
/// scikit-learn's Frobenius multiplicative update of one value, shared by the portable kernel
/// (kernels.hpp) and the host loop (host_kernels.cpp) so both compute it the same way:
///   F * (Num / d),  d = T(den) [+ l1] [+ l2 F], then + eps ("add eps") or, by default, the
///   zero guard (d == 0 replaced by float32's epsilon, as scikit-learn does).

#include <Kokkos_Macros.hpp>

#include "knmf/solver/options.hpp"

namespace knmf::detail {

template <class T>
KOKKOS_INLINE_FUNCTION T mu_value(double den, T f, T num, double l1, double l2, bool add_eps,
                                  double eps) {
  T d = T(den);
  if (l1 > 0) d += T(l1);
  if (l2 > 0) d = d + T(l2) * f;
  if (add_eps)
    d += T(eps);
  else if (d == T(0))
    d = T(sklearn_epsilon);
  return T(f * (num / d));
}

}  // namespace knmf::detail
