#pragma once
/// \file
/// The long rows of a CSR graph, cut into segments for the portable sparse gather
/// (src/solver/detail/products.hpp): one team per output column runs that column's row of X
/// (or of X^T) alone, so a gene present in most of 2.4M cells keeps one team, on one
/// multiprocessor, looping over millions of entries while the rest of the GPU idles. A row with
/// more than `gather_segment_entries` entries is summed instead in segments of that many
/// (the last one shorter), one team each, and its segments' partial sums are then added in
/// segment order: a fixed order, so every product stays reproducible run to run.
/// Built once on the host from the row offsets (a CsrMatrix's X and X^T, each block of a
/// streamed X); empty (no device memory) when no row is long, as for any X of fewer than
/// 8,193 cells and genes.

#include <cstdint>

#include "knmf/core/types.hpp"

namespace knmf::detail {

/// Entries per segment of a long row.
inline constexpr size_type gather_segment_entries = 8192;

struct GatherSegments {
  /// The long rows (row indices of the graph), the first segment of each (long rows + 1
  /// entries: segments [first(i), first(i + 1)) belong to rows(i)), and for each segment the
  /// index i of its long row. Segment s of rows(i) holds the row's entries
  /// [(s - first(i)) * gather_segment_entries, ...) counted from the row's start.
  Kokkos::View<size_type*, MemSpace> rows, first, owner;

  size_type long_rows() const { return size_type(rows.extent(0)); }
  /// Segments in all.
  size_type count() const { return size_type(owner.extent(0)); }
  /// Device bytes of the three tables (0 when there is no long row).
  size_type bytes() const {
    return count() == 0 ? 0 : size_type(sizeof(size_type)) * (2 * long_rows() + 1 + count());
  }

  /// From host row offsets (`n_rows` + 1 of them; only their differences are used).
  static GatherSegments build(const size_type* row_offsets, size_type n_rows);
};

/// Cells per block of the CSC copy's cell-block table (CsrMatrix::xt_cell_blocks): the host
/// gather of Q = W X walks W in blocks of whole multiples of this many cells, all genes per
/// block, so a block of W is read from memory once and then from cache (products.hpp). A fixed
/// number: the sums do not depend on it anyway (each gene's entries in cell order).
inline constexpr size_type gather_cell_block = 2048;

/// At most this many segments for a graph of `nnz` entries (a long row of L entries has
/// ceil(L / S) <= 2 L / S segments): what the memory plan counts for the gather's partial
/// sums (knmf/solver/nmf.hpp, solver_bytes).
inline std::int64_t max_gather_segments(std::int64_t nnz) {
  return 2 * nnz / std::int64_t(gather_segment_entries);
}

}  // namespace knmf::detail
