#pragma once
/// \file
/// X (cells x genes) as a sparse device matrix: CSR with 32-bit column indices and 64-bit
/// row offsets (nnz may pass 2^31), plus a second CSR of X^T (i.e. X in CSC) built once on
/// the device, so that both products of an iteration are gathers without atomics:
///   P = H X^T : P(:, i) = sum_j X(i, j) H(:, j)   over row i of X
///   Q = W X   : Q(:, j) = sum_i X(i, j) W(:, i)   over row j of X^T
/// The transpose keeps row order inside each column, so every sum runs in a fixed order and
/// results are reproducible run to run.

#include <KokkosSparse_CrsMatrix.hpp>

#include <functional>
#include <string>
#include <utility>

#include "knmf/core/types.hpp"
#include "knmf/io/fingerprint.hpp"
#include "knmf/matrix/gather_segments.hpp"
#include "knmf/matrix/stats.hpp"

namespace knmf {

template <class T>
class CsrMatrix {
public:
  using value_type = T;
  using device_type = Kokkos::Device<ExecSpace, MemSpace>;
  using crs_type = KokkosSparse::CrsMatrix<T, ordinal_type, device_type, void, size_type>;
  using row_map_type = Kokkos::View<size_type*, MemSpace>;
  using index_type = Kokkos::View<ordinal_type*, MemSpace>;
  using values_type = Kokkos::View<T*, MemSpace>;

  CsrMatrix() = default;
  /// Allocate an n x g matrix with `nnz` stored entries, filled by set_rows in row order.
  CsrMatrix(const ExecSpace& space, size_type n, size_type g, size_type nnz);

  /// Build from host CSR arrays (row_offsets: n + 1 entries from 0), validated as `source`.
  static CsrMatrix from_host(const ExecSpace& space, size_type n, size_type g,
                             const size_type* row_offsets, const ordinal_type* cols,
                             const T* values, const std::string& source = "X");

  /// Copy rows [r0, r1): local_offsets has r1 - r0 + 1 entries starting at 0; cols/values
  /// hold local_offsets[r1 - r0] entries. Rows must arrive in order, each block once.
  void set_rows(size_type r0, size_type r1, const size_type* local_offsets,
                const ordinal_type* cols, const T* values);

  /// Validate (offsets, column indices, finite non-negative values; InputError naming
  /// `source`), compute the statistics and build X^T on the device.
  /// `allow_empty`: a zero-row block is valid (a rank's share of a row-partitioned X).
  void finalize(const std::string& source = "X", size_type chunk = default_reduction_chunk,
                bool allow_empty = false);

  size_type rows() const { return n_; }
  size_type cols() const { return g_; }
  size_type nnz() const { return nnz_; }
  double density() const { return double(nnz_) / (double(n_) * double(g_)); }
  const ValueStats& stats() const { return stats_; }
  /// X.mean() over all n*g entries (implicit zeros included), as scikit-learn's init uses it.
  double mean() const { return stats_.sum / (double(n_) * double(g_)); }
  /// X in CSR (n x g) and X^T in CSR (g x n).
  const crs_type& x() const { return x_; }
  const crs_type& xt() const { return xt_; }
  /// The long rows of X and of X^T cut into segments for the portable gather (empty unless a
  /// row holds more than detail::gather_segment_entries entries).
  const detail::GatherSegments& x_segments() const { return x_segments_; }
  const detail::GatherSegments& xt_segments() const { return xt_segments_; }
  /// The CSC copy cut into blocks of detail::gather_cell_block cells, for the host gathers:
  /// entry b * g + j is the offset in xt() of gene j's first entry of a cell >= b * block, for
  /// b = 0 .. blocks (blocks + 1 rows of g offsets; the last row is each gene's end). Built by
  /// host builds (knmf::host_tuned_kernels) when X has more than one block of cells; empty
  /// otherwise.
  const Kokkos::View<size_type*, MemSpace>& xt_cell_blocks() const { return xt_blocks_; }
  /// Device bytes of both copies (and of the segment and block tables, if any).
  size_type bytes() const {
    return bytes_for(n_, g_, nnz_, sizeof(T)) + x_segments_.bytes() + xt_segments_.bytes();
  }
  /// Both copies and the cell-block table (without the segment tables, which depend on the
  /// row lengths): what the memory plan counts for X.
  static size_type bytes_for(size_type n, size_type g, size_type nnz, size_type elem) {
    return 2 * nnz * (elem + size_type(sizeof(ordinal_type))) +
           (n + g + 2) * size_type(sizeof(size_type)) + cell_block_bytes(n, g);
  }
  /// Bytes of the cell-block table of an n x g matrix (0 where none is built).
  static size_type cell_block_bytes(size_type n, size_type g);
  const ExecSpace& space() const { return space_; }
  /// The content fingerprint of the file's X over these rows (io/fingerprint.hpp), set by the
  /// loaders of matrix/load.hpp; it has no rows for a matrix built from host data.
  const io::XFingerprint& fingerprint() const { return fingerprint_; }
  void set_fingerprint(const io::XFingerprint& f) { fingerprint_ = f; }

private:
  ExecSpace space_;
  size_type n_ = 0, g_ = 0, nnz_ = 0;
  size_type filled_rows_ = 0;
  row_map_type row_map_;
  index_type cols_;
  values_type values_;
  crs_type x_, xt_;
  detail::GatherSegments x_segments_, xt_segments_;
  Kokkos::View<size_type*, MemSpace> xt_blocks_;
  ValueStats stats_;
  io::XFingerprint fingerprint_;
};

}  // namespace knmf
