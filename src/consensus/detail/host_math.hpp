#pragma once
/// \file
/// Host-side arithmetic that follows numpy's evaluation order where the order decides a
/// result that must match cNMF's (internal).

#include <cstddef>

namespace knmf::consensus::detail {

/// numpy's pairwise summation of n contiguous doubles (`np.sum` along a contiguous axis):
/// blocks of up to 128 values summed with 8 interleaved accumulators, halves recursively.
inline double pairwise_sum(const double* a, std::ptrdiff_t n) {
  if (n < 8) {
    double res = 0.0;
    for (std::ptrdiff_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    std::ptrdiff_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::ptrdiff_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

}  // namespace knmf::consensus::detail
