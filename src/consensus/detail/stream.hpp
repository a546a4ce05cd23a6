#pragma once
/// \file
/// Products of streamed CSR row blocks with small dense factors, on the device (internal).
/// Without a column map they are the solver's sparse gathers (solver/engine.hpp: spmm_gather,
/// as for a streamed X); every sum runs in stored (row, then column) order, so results do
/// not depend on the block boundaries, the thread count or the backend instance (on the
/// portable path a row of more than gather_segment_entries entries is summed by segments,
/// as the solver's products sum it).

#include <Kokkos_Core.hpp>

#include <memory>
#include <vector>

#include "consensus/detail/device.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/gather_segments.hpp"

namespace knmf::detail {
template <class T>
struct GatherScratch;
}  // namespace knmf::detail

namespace knmf::consensus::detail {

using IndexView = Kokkos::View<size_type*, MemSpace>;
using OrdinalView = Kokkos::View<ordinal_type*, MemSpace>;

/// One CSR row block on the device and, on request, its column-major (CSC) copy.
/// Buffers are kept between blocks and grow when a block needs more.
class DeviceBlock {
public:
  explicit DeviceBlock(const ExecSpace& space);
  ~DeviceBlock();
  /// Copy `b` to the device (CSR, and CSC when `csc`); the host block may change afterwards.
  void upload(const io::CsrBlock<double>& b, bool csr, bool csc);

  size_type row_begin = 0, rows = 0, ncols = 0, nnz = 0;
  IndexView row_ptr;    ///< rows + 1 (CSR)
  OrdinalView col;      ///< nnz (CSR)
  DVector val;          ///< nnz (CSR)
  knmf::detail::GatherSegments row_segments;  ///< the CSR's long rows
  IndexView col_ptr;    ///< ncols + 1 (CSC)
  OrdinalView row_idx;  ///< nnz, local row of each entry (CSC)
  DVector cval;         ///< nnz (CSC)
  knmf::detail::GatherSegments col_segments;  ///< the CSC's long columns
  /// The gathers' partial sums of long rows (kept between blocks).
  std::unique_ptr<knmf::detail::GatherScratch<double>> scratch;

private:
  ExecSpace space_;
  std::vector<size_type> h_col_ptr_;
  std::vector<ordinal_type> h_row_idx_;
  std::vector<double> h_cval_;
};

/// P(t, row_begin + i) = sum over the entries (c, v) of block row i of
/// v * scale(c) * H(t, map(c)), skipping entries with map(c) < 0. `map` and `scale` may be
/// empty (identity, 1): then the solver's gather (P's columns of the block = H X_block^T).
/// H: k x gh, P: k x n (LayoutLeft). Needs the CSR copy.
void block_times_ht(const ExecSpace& space, const DeviceBlock& b, const DMatrix& H,
                    const Kokkos::View<int*, MemSpace>& map, const DVector& scale, const DMatrix& P);

/// Q(t, j) += sum over the entries (r, v) of block column j of v * U(t, row_begin + r): the
/// solver's gather over the CSC copy, accumulating (Q += U_block X_block).
/// U: k x n, Q: k x ncols (LayoutLeft). Needs the CSC copy.
void accumulate_ut_block(const ExecSpace& space, const DeviceBlock& b, const DMatrix& U,
                         const DMatrix& Q);

/// A row-major host matrix x (rows x cols) as the LayoutLeft device matrix of the same shape.
DMatrix upload_rows(const ExecSpace& space, const HostRows& x, const std::string& label);

}  // namespace knmf::consensus::detail
