#pragma once
/// \file
/// One pass over the values of X: sum, squared norm, smallest and largest value and the first
/// non-finite value, with 64-bit indices. The sums are chunked (each chunk summed sequentially,
/// the chunk sums added in order), so the result is the same for any thread count and backend
/// instance, and X may hold more than 2^31 entries.

#include <cstdint>
#include <string>

#include "knmf/core/types.hpp"

namespace knmf {

struct ValueStats {
  double sum = 0.0;          ///< sum of all values
  double norm2 = 0.0;        ///< sum of squares (||X||_F^2)
  size_type count = 0;       ///< number of values visited (stored entries)
  double min_value = 0.0;    ///< smallest finite value (0 for an empty range)
  size_type min_pos = -1;    ///< its position in the value array
  double max_value = 0.0;    ///< largest finite value (0 for an empty range)
  size_type max_pos = -1;    ///< its position in the value array
  /// ||X||^2 less the largest value's square, from the compensated sum (so exact to about
  /// one rounding of itself, however large max_value^2 is next to it).
  double norm2_rest = 0.0;
  size_type nonfinite = 0;   ///< how many NaN/Inf values
  size_type first_nonfinite_pos = -1;
  double first_nonfinite_value = 0.0;
};

/// Default chunk length of the chunked reductions (a parameter so tests can hit boundaries).
inline constexpr size_type default_reduction_chunk = size_type(1) << 20;

/// Statistics of `count` contiguous values at `data` (device memory of ExecSpace).
template <class T>
ValueStats value_stats(const ExecSpace& space, const T* data, size_type count,
                       size_type chunk = default_reduction_chunk);

/// The same statistics (same chunking, so the same numbers) of values in host memory.
template <class T>
ValueStats host_value_stats(const T* data, size_type count,
                            size_type chunk = default_reduction_chunk);

}  // namespace knmf
