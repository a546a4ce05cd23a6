#pragma once
/// \file
/// The two products with X that dominate an iteration, for each storage format of X:
///   P = H X^T   ((R k) x n)      and      Q = W X   ((R k) x g)
/// with H: (R k) x g and W: (R k) x n, all LayoutLeft (see kernels.hpp for the layout).

#include "knmf/core/compat.hpp"
#include "knmf/matrix/dense_matrix.hpp"

namespace knmf::detail {

/// P = H X^T: one GEMM, H (Rk x g) times X^T (g x n).
template <class T>
void x_times_ht(const ExecSpace& space, const DenseMatrix<T>& X, const Matrix<T>& H,
                const Matrix<T>& P) {
  compat::gemm(space, "N", "N", T(1), H, X.xt(), T(0), P);
}

/// Q = W X: one GEMM, W (Rk x n) times X (n x g) = (X^T)^T.
template <class T>
void wt_times_x(const ExecSpace& space, const DenseMatrix<T>& X, const Matrix<T>& W,
                const Matrix<T>& Q) {
  compat::gemm(space, "N", "T", T(1), W, X.xt(), T(0), Q);
}

}  // namespace knmf::detail
