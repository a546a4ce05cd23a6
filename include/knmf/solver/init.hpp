#pragma once
/// \file
/// scikit-learn's `_initialize_nmf(X, k, init='random', random_state=seed)`, drawn on the host.

#include <cstdint>

#include "knmf/core/types.hpp"

namespace knmf {

/// avg = sqrt(mean / k); with RandomState(seed): H = |T(avg) * T(N(0,1))| of shape k x g in C
/// order FIRST, then W likewise of shape n x k (the gauss cache carries over from H to W).
/// Normals are drawn in double and cast to T before scaling, as scikit-learn does.
/// H_row_major: k*g values; W_row_major: n*k values (may be null to draw H only, in which
/// case the W draws are skipped).
template <class T>
void random_init(std::int64_t seed, double mean, int k, size_type n, size_type g,
                 T* H_row_major, T* W_row_major);

}  // namespace knmf
