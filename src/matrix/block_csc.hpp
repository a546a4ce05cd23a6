#pragma once
/// \file
/// The CSC of a block of CSR rows, on the host: the one transpose that both streaming paths
/// (StreamedMatrix for factorize, the consensus DeviceBlock over a RowSource) use, so that
/// every column lists its entries in ascending row order, the order of the in-core X^T.

#include <vector>

#include "knmf/core/types.hpp"

namespace knmf::detail {

/// Rows [0, rows) of a CSR block: entries row_offsets[r] - row_offsets[0] ..
/// row_offsets[r + 1] - row_offsets[0] of `cols` / `vals` (column indices in [0, ncols),
/// not checked here). Writes col_map (ncols + 1 offsets from 0) and, per entry in column
/// order, its row label row0 + r and its value. Counting sort: O(nnz + ncols).
template <class Off, class Col, class Val, class RowOut, class ValOut>
void csr_block_to_csc(size_type rows, size_type ncols, const Off* row_offsets, const Col* cols,
                      const Val* vals, size_type row0, size_type* col_map, RowOut* out_rows,
                      ValOut* out_vals) {
  const size_type base = size_type(row_offsets[0]);
  const size_type nnz = size_type(row_offsets[rows]) - base;
  for (size_type j = 0; j <= ncols; ++j) col_map[j] = 0;
  for (size_type p = 0; p < nnz; ++p) ++col_map[size_type(cols[p]) + 1];
  for (size_type j = 0; j < ncols; ++j) col_map[j + 1] += col_map[j];
  std::vector<size_type> next(col_map, col_map + ncols);
  for (size_type r = 0; r < rows; ++r)
    for (size_type p = size_type(row_offsets[r]) - base; p < size_type(row_offsets[r + 1]) - base; ++p) {
      const size_type q = next[size_t(cols[p])]++;
      out_rows[q] = RowOut(row0 + r);
      out_vals[q] = vals[p];
    }
}

}  // namespace knmf::detail
