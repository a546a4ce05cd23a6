#pragma once
/// \file
/// MPI: X partitioned by rows over the ranks of a communicator (`--distribute rows`).
///
/// Each rank holds a contiguous block of the rows of X and the matching rows of every W;
/// per iteration the k x g and k x k reductions (W^T X, W^T W, the W-side violation) are
/// MPI_Allreduce'd, H is replicated and updated identically on every rank. Requires
/// KNMF_ENABLE_MPI. Results equal a single-rank run up to the reordering of those sums.

#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

#include "knmf/core/types.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/csr_matrix.hpp"
#include "knmf/matrix/dense_matrix.hpp"
#include "knmf/matrix/stats.hpp"
#include "knmf/solver/nmf.hpp"

namespace knmf::mpi {

/// Rank `rank`'s share [first, second) of n rows split into `size` contiguous blocks whose
/// stored entries (prefix: n + 1 cumulative counts) are as equal as possible.
std::pair<size_type, size_type> balanced_rows(const std::vector<size_type>& prefix, int rank,
                                              int size);

/// The rows [first, second) of the X in `reader` that each of `size` ranks holds: blocks
/// balanced by stored entries (from indptr; by rows for a dense X), as the loaders below split
/// X. Reads no values; not collective.
std::vector<std::pair<size_type, size_type>> row_blocks(const io::H5adReader& reader, int size);

/// This rank's block of a row-partitioned X (Inner = DenseMatrix<T> or CsrMatrix<T>).
template <class Inner>
class DistributedMatrix {
public:
  using value_type = typename Inner::value_type;

  /// `local`: rows [row0, row0 + local.rows()) of an X with `n_global` rows (may be empty on
  /// some ranks). Collective: reduces the statistics over `comm`.
  DistributedMatrix(MPI_Comm comm, Inner local, size_type row0, size_type n_global);

  size_type rows() const { return local_.rows(); }
  size_type cols() const { return local_.cols(); }
  size_type global_rows() const { return n_global_; }
  size_type row_offset() const { return row0_; }
  /// Statistics of the whole X (reduced over the ranks).
  const ValueStats& stats() const { return stats_; }
  double mean() const { return stats_.sum / (double(n_global_) * double(cols())); }
  /// The content fingerprint of the whole X (the ranks' blocks merged; io/fingerprint.hpp).
  const io::XFingerprint& fingerprint() const { return fingerprint_; }
  const Inner& local() const { return local_; }
  MPI_Comm comm() const { return comm_; }

private:
  MPI_Comm comm_;
  Inner local_;
  size_type row0_ = 0, n_global_ = 0;
  ValueStats stats_;
  io::XFingerprint fingerprint_;
};

/// Read this rank's block of X from an AnnData file (every rank opens the file) and build the
/// distributed matrix. `sparse` picks the device format. Collective.
template <class T>
DistributedMatrix<DenseMatrix<T>> load_distributed_dense(MPI_Comm comm, const ExecSpace& space,
                                                         const io::H5adReader& reader);
template <class T>
DistributedMatrix<CsrMatrix<T>> load_distributed_csr(MPI_Comm comm, const ExecSpace& space,
                                                     const io::H5adReader& reader);

/// Sum of a host array over the ranks, in place.
void allreduce_sum(MPI_Comm comm, double* data, std::size_t count);
void allreduce_sum(MPI_Comm comm, float* data, std::size_t count);

}  // namespace knmf::mpi
