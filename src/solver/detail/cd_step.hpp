#pragma once
/// \file
/// scikit-learn's coordinate-descent step of one coordinate (_update_cdnmf_fast), shared by
/// the portable kernel (kernels.hpp, cd_update) and the host sweeps (host_kernels.cpp: one
/// column, and columns side by side in vector lanes) so all of them compute it the same way.
/// With Gl = G + l2 I (the slot's Gram, l2 on its diagonal) and w = F(t, i):
///   grad = -(Num(t, i) - l1) + sum_s Gl(t, s) F(s, i)   (the caller sums it, s in order)
///   pg   = grad, or min(grad, 0) where w == 0             (the projected gradient)
///   new w = max(0, w - grad / Gl(t, t)), only where Gl(t, t) != 0.
/// V is double or, in the host sweep's lanes, a GCC vector of doubles (the comparisons and
/// selections below are then per lane, with the same operations in the same order; passed by
/// reference: GCC notes an ABI change for 64-byte vectors passed by value, -Wpsabi).

#include <Kokkos_Macros.hpp>

namespace knmf::detail {

/// The gradient's constant term before its sign: Num - l1, rounded to T (as scikit-learn's
/// loop computes it in the factor's type); grad starts at minus this.
template <class T>
KOKKOS_INLINE_FUNCTION double cd_num_l1(T num, double l1) {
  return double(T(num - T(l1)));
}

/// One coordinate's step: the projected gradient's magnitude (its share of the violation)
/// and, where the Hessian is nonzero, the new value (in double: the caller stores it as T).
template <class V>
struct CdStep {
  V violation;  ///< |pg|
  V value;      ///< max(0, w - grad / hess); meaningful where `update`
  bool update;  ///< hess != 0 (scikit-learn leaves the coordinate as it is otherwise)
};

/// The step's statements, declaring CdStep<V> `step` from w, grad and hess. A macro so that
/// the host's AVX-512 lane sweep (host_kernels.cpp) can expand it inside its own
/// target("avx512f") function: GCC lowers the vector comparisons of a function compiled for
/// the baseline ISA (a template such as cd_step below) lane by lane, with scalar compares,
/// even where that function is then inlined into an AVX-512 one.
#define KNMF_CD_STEP(V, step, w, grad, hess)                                                  \
  const V step##_zero = V{};                                                                 \
  const V step##_neg = (grad) < step##_zero ? (grad) : step##_zero;                          \
  const V step##_pg = (w) == step##_zero ? step##_neg : (grad);                              \
  ::knmf::detail::CdStep<V> step{step##_pg < step##_zero ? -step##_pg : step##_pg,           \
                                 step##_zero, (hess) != 0.0};                                \
  if (step.update) {                                                                         \
    const V step##_nw = (w) - (grad) / (hess);                                               \
    step.value = step##_nw > step##_zero ? step##_nw : step##_zero;                          \
  }

template <class V>
KOKKOS_INLINE_FUNCTION CdStep<V> cd_step(const V& w, const V& grad, double hess) {
  KNMF_CD_STEP(V, step, w, grad, hess)
  return step;
}

}  // namespace knmf::detail
