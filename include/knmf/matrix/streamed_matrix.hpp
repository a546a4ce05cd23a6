#pragma once
/// \file
/// Out-of-core X: kept in host memory (pinned where the backend has it) and streamed to the
/// device in row blocks through two device buffers, for matrices larger than the device memory
/// left after the factors. Each product of an iteration is one pass over the blocks; the copy
/// of block b+1 overlaps the compute on block b (on CUDA: a second stream).
///
/// Results equal the in-core ones: for a sparse X bitwise (each product continues the very
/// same per-entry accumulation across blocks), for a dense X to rounding (the GEMM of X^T's
/// column blocks accumulates Q block by block).

#include <Kokkos_Profiling_ScopedRegion.hpp>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "knmf/core/compat.hpp"
#include "knmf/core/types.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/gather_segments.hpp"
#include "knmf/matrix/stats.hpp"

namespace knmf {

namespace detail {
class CopyInstance;
}

/// Host memory that the device can copy from asynchronously.
#ifdef KOKKOS_ENABLE_CUDA
using PinnedHostSpace = std::conditional_t<std::is_same_v<ExecSpace, Kokkos::Cuda>,
                                           Kokkos::CudaHostPinnedSpace, Kokkos::HostSpace>;
#else
using PinnedHostSpace = Kokkos::HostSpace;
#endif

/// One resident block of a streamed X (device views; valid inside for_each_block's callback).
template <class T>
struct StreamBlock {
  size_type r0 = 0, r1 = 0;  ///< rows of X in this block
  size_type rows() const { return r1 - r0; }
  /// dense: X^T columns r0..r1 (g x rows)
  Matrix<T> xt;
  /// sparse, CSR pass: row_map (rows + 1 GLOBAL offsets), entries/values indexed by
  /// offset - base; CSC pass: row_map = column map (g + 1, from 0), entries = global row
  /// indices, base = 0.
  Kokkos::View<size_type*, MemSpace> row_map;
  size_type base = 0;
  Kokkos::View<ordinal_type*, MemSpace> entries;
  Kokkos::View<T*, MemSpace> values;
  /// sparse: the long rows of this pass's row_map in segments (gather_segments.hpp)
  detail::GatherSegments segments;
};

template <class T>
class StreamedMatrix {
public:
  using value_type = T;

  StreamedMatrix() = default;

  /// Read X from an AnnData file into host memory (dense or sparse, independent of the file's
  /// format), with two device buffers of at most `buffer_bytes` each.
  static StreamedMatrix load(const ExecSpace& space, const io::H5adReader& reader, bool sparse,
                             size_type buffer_bytes);
  /// From n x g row-major host data (validated as `source`).
  static StreamedMatrix from_host_dense(const ExecSpace& space, size_type n, size_type g,
                                        const T* row_major, size_type buffer_bytes,
                                        const std::string& source = "X");
  /// From host CSR arrays (row_offsets: n + 1 entries from 0).
  static StreamedMatrix from_host_csr(const ExecSpace& space, size_type n, size_type g,
                                      const size_type* row_offsets, const ordinal_type* cols,
                                      const T* values, size_type buffer_bytes,
                                      const std::string& source = "X");

  size_type rows() const { return n_; }
  size_type cols() const { return g_; }
  size_type nnz() const { return nnz_; }
  bool sparse() const { return sparse_; }
  const ValueStats& stats() const { return stats_; }
  double mean() const { return stats_.sum / (double(n_) * double(g_)); }
  int num_blocks() const { return int(bounds_.size()) - 1; }
  /// Row boundaries of the blocks (num_blocks() + 1 entries).
  const std::vector<size_type>& block_bounds() const { return bounds_; }
  /// Device bytes of the two buffers (and of the blocks' segment tables of long rows).
  size_type device_bytes() const { return device_bytes_; }
  const ExecSpace& space() const { return space_; }
  /// The content fingerprint of the file's X (io/fingerprint.hpp), set by load(); it has no
  /// rows for a matrix built from host data.
  const io::XFingerprint& fingerprint() const { return fingerprint_; }

  /// Stream every block through `f(const StreamBlock<T>&)` in row order: CSR blocks (or
  /// dense X^T blocks) when `transposed` is false, CSC blocks of sparse X when true. `f`
  /// launches its work on `space`; the next block is copied meanwhile.
  template <class F>
  void for_each_block(const ExecSpace& space, bool transposed, F&& f) const;

private:
  void plan_blocks(size_type buffer_bytes);
  void allocate_buffers();
  void build_csc();
  void finalize(const std::string& source);
  void upload(const ExecSpace& copy_space, int b, int buf, bool transposed) const;
  StreamBlock<T> block_view(int b, int buf, bool transposed) const;

  ExecSpace space_;
  size_type n_ = 0, g_ = 0, nnz_ = 0;
  bool sparse_ = false;
  ValueStats stats_;
  io::XFingerprint fingerprint_;
  std::vector<size_type> bounds_;
  size_type max_rows_ = 0, max_nnz_ = 0, device_bytes_ = 0;
  // host copies
  Kokkos::View<T*, PinnedHostSpace> dense_;             ///< n * g, row-major
  Kokkos::View<size_type*, PinnedHostSpace> row_map_;   ///< n + 1
  Kokkos::View<ordinal_type*, PinnedHostSpace> cols_;   ///< nnz
  Kokkos::View<T*, PinnedHostSpace> vals_;              ///< nnz
  Kokkos::View<size_type*, PinnedHostSpace> csc_map_;   ///< per block: g + 1 offsets from 0
  Kokkos::View<ordinal_type*, PinnedHostSpace> csc_rows_;  ///< nnz, block by block
  Kokkos::View<T*, PinnedHostSpace> csc_vals_;          ///< nnz, block by block
  // two device buffers
  struct Buffer {
    Matrix<T> xt;
    Kokkos::View<size_type*, MemSpace> map;
    Kokkos::View<ordinal_type*, MemSpace> idx;
    Kokkos::View<T*, MemSpace> val;
  };
  mutable Buffer buf_[2];
  /// per block: the segment tables of its long rows (CSR pass) and long columns (CSC pass)
  std::vector<detail::GatherSegments> seg_rows_, seg_csc_;
  /// The copies' execution space instance (CUDA: its own stream), made at the first pass and
  /// kept: a Kokkos::Cuda instance's teardown synchronizes the device, so one per pass would
  /// stall it twice an iteration. Shared by copies of this matrix.
  mutable std::shared_ptr<detail::CopyInstance> copy_;
};

// ---- for_each_block (a template over the callback) -------------------------------------------

namespace detail {
/// A second instance of the execution space for copies: its own stream on CUDA; the same
/// (synchronous) instance elsewhere. One per streamed matrix (StreamedMatrix::copy_).
class CopyInstance {
public:
  CopyInstance();
  ~CopyInstance();
  CopyInstance(const CopyInstance&) = delete;
  CopyInstance& operator=(const CopyInstance&) = delete;
  const ExecSpace& space() const { return space_; }

private:
  ExecSpace space_;
  void* stream_ = nullptr;
};
}  // namespace detail

template <class T>
template <class F>
void StreamedMatrix<T>::for_each_block(const ExecSpace& space, bool transposed, F&& f) const {
  Kokkos::Profiling::ScopedRegion region(transposed ? "knmf::stream::csc" : "knmf::stream::rows");
  if (!copy_) copy_ = std::make_shared<detail::CopyInstance>();
  const detail::CopyInstance& copy = *copy_;
  const int nb = num_blocks();
  upload(copy.space(), 0, 0, transposed);
  for (int b = 0; b < nb; ++b) {
    copy.space().fence("knmf::stream::block_ready");
    // block b - 1's compute must be done before its buffer takes block b + 1
    space.fence("knmf::stream::buffer_free");
    if (b + 1 < nb) upload(copy.space(), b + 1, (b + 1) % 2, transposed);
    f(block_view(b, b % 2, transposed));
  }
  space.fence("knmf::stream::done");
}

}  // namespace knmf
