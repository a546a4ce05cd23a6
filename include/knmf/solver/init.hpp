#pragma once
/// \file
/// scikit-learn's `_initialize_nmf(X, k, init=..., random_state=seed)`: 'random' drawn on the
/// host; 'nndsvd', 'nndsvda', 'nndsvdar' from a randomized SVD of X (src/solver/detail/nndsvd.hpp).

#include <cstdint>

#include "knmf/core/types.hpp"
#include "knmf/solver/options.hpp"

namespace knmf {

/// avg = sqrt(mean / k); with RandomState(seed): H = |T(avg) * T(N(0,1))| of shape k x g in C
/// order FIRST, then W likewise of shape n x k (the gauss cache carries over from H to W).
/// Normals are drawn in double and cast to T before scaling, as scikit-learn does.
/// H_row_major: k*g values; W_row_major: n*k values (may be null to draw H only, in which
/// case the W draws are skipped).
template <class T>
void random_init(std::int64_t seed, double mean, int k, size_type n, size_type g,
                 T* H_row_major, T* W_row_major);

/// W0 (n x k) and H0 (k x g), row-major in X's value type, of scikit-learn 1.2.1's
/// `_initialize_nmf(X, k, init=init, random_state=seed)` for a whole X (DenseMatrix, CsrMatrix or
/// StreamedMatrix of float or double). 'random' is random_init with X.mean(). The NNDSVD
/// variants run `randomized_svd(X, k, random_state=seed)` (k + 10 columns, 7 LU power
/// iterations when k < 0.1 min(n, g), else 4; X^T when n < g) with X's products on `space`
/// and host LAPACK in double; nndsvdar's fill draws from a fresh RandomState(seed). In double
/// they agree with scikit-learn to rounding (max|a-b|/max|b| below 4e-15 on the test cases,
/// tests/solver/test_solver_nndsvd.cpp); for float X the host part is double where
/// scikit-learn computes in float32 (below 4e-6 there).
/// InputError when k > min(n, g), as scikit-learn. A zero positive/negative part of a singular
/// vector gives zeros here where scikit-learn divides 0 by 0.
template <class XMat>
void init_factors(const ExecSpace& space, const XMat& X, int k, std::int64_t seed, InitKind init,
                  typename XMat::value_type* H_row_major, typename XMat::value_type* W_row_major);

}  // namespace knmf
