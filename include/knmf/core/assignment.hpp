#pragma once
/// \file
/// The one-to-one matching of two sets of programs (true programs to recovered ones, A's to
/// B's in `knmf compare`): maximum-weight assignment by the Hungarian algorithm.

#include <vector>

namespace knmf {

/// Maximum-weight assignment of rows to columns of a rows x cols matrix (row-major):
/// result[r] = the column assigned to row r, or -1 (when rows > cols). NaN weights count as
/// the worst possible. O(max(rows, cols)^3).
std::vector<int> hungarian_max(const std::vector<double>& weight, int rows, int cols);

}  // namespace knmf
