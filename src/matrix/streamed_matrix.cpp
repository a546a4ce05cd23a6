#include "knmf/matrix/streamed_matrix.hpp"
#include "matrix/block_csc.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <Kokkos_Profiling_ScopedRegion.hpp>

#include "knmf/core/error.hpp"
#include "knmf/matrix/dense_matrix.hpp"

namespace knmf {

namespace detail {
CopyInstance::CopyInstance() {
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same_v<ExecSpace, Kokkos::Cuda>) {
    cudaStream_t s;
    if (cudaStreamCreate(&s) == cudaSuccess) {
      stream_ = s;
      space_ = Kokkos::Cuda(s);
    }
  }
#endif
}
CopyInstance::~CopyInstance() {
#ifdef KOKKOS_ENABLE_CUDA
  if (stream_) {
    space_ = ExecSpace();
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
#endif
}
}  // namespace detail

namespace {
template <class V>
V host_view(const std::string& label, size_type n) {
  return V(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), size_t(n));
}
}  // namespace

template <class T>
void StreamedMatrix<T>::plan_blocks(size_type buffer_bytes) {
  const size_type s = size_type(sizeof(T));
  bounds_.assign(1, 0);
  if (!sparse_) {
    const size_type rows = buffer_bytes / (g_ * s);
    if (rows < 1)
      input_error("out-of-core X: a device buffer of ", buffer_bytes, " bytes cannot hold one row (",
                  g_ * s, " bytes)");
    for (size_type r = 0; r < n_;) bounds_.push_back(r = std::min(n_, r + rows));
    max_rows_ = std::min(rows, n_);
    max_nnz_ = 0;
  } else {
    // a block's CSR (rows + 1 offsets) and CSC (g + 1 offsets) must fit a buffer
    const size_type per = s + size_type(sizeof(ordinal_type));
    size_type r0 = 0;
    max_rows_ = max_nnz_ = 0;
    while (r0 < n_) {
      size_type r1 = r0, nz = 0;
      while (r1 < n_) {
        const size_type add = row_map_(r1 + 1) - row_map_(r1);
        const size_type map = 8 * (std::max(r1 + 1 - r0, g_) + 1);
        if (map + (nz + add) * per > buffer_bytes) break;
        nz += add;
        ++r1;
      }
      if (r1 == r0)
        input_error("out-of-core X: a device buffer of ", buffer_bytes,
                    " bytes cannot hold row ", r0, " with its column map");
      bounds_.push_back(r1);
      max_rows_ = std::max(max_rows_, r1 - r0);
      max_nnz_ = std::max(max_nnz_, nz);
      r0 = r1;
    }
  }
}

template <class T>
void StreamedMatrix<T>::allocate_buffers() {
  device_bytes_ = 0;
  for (auto& b : buf_) {
    if (!sparse_) {
      b.xt = Matrix<T>(Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, "knmf::stream::xt"), g_,
                       max_rows_);
      device_bytes_ += g_ * max_rows_ * size_type(sizeof(T));
    } else {
      const size_type map = std::max(max_rows_, g_) + 1;
      b.map = Kokkos::View<size_type*, MemSpace>(
          Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, "knmf::stream::map"), map);
      b.idx = Kokkos::View<ordinal_type*, MemSpace>(
          Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, "knmf::stream::idx"), max_nnz_);
      b.val = Kokkos::View<T*, MemSpace>(
          Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, "knmf::stream::val"), max_nnz_);
      device_bytes_ += map * 8 + max_nnz_ * size_type(sizeof(T) + sizeof(ordinal_type));
    }
  }
  // the segment tables of each block's long rows (CSR pass) and long columns (CSC pass)
  seg_rows_.assign(size_t(num_blocks()), {});
  seg_csc_.assign(size_t(num_blocks()), {});
  if (!sparse_) return;
  for (int b = 0; b < num_blocks(); ++b) {
    const size_type r0 = bounds_[size_t(b)], r1 = bounds_[size_t(b) + 1];
    seg_rows_[size_t(b)] = detail::GatherSegments::build(&row_map_(r0), r1 - r0);
    seg_csc_[size_t(b)] = detail::GatherSegments::build(&csc_map_(size_type(b) * (g_ + 1)), g_);
    device_bytes_ += seg_rows_[size_t(b)].bytes() + seg_csc_[size_t(b)].bytes();
  }
}

/// Per block, the CSC of its rows (column offsets from 0; global row indices), filled in row
/// order so that each column lists its rows sorted: the same order as the in-core X^T.
template <class T>
void StreamedMatrix<T>::build_csc() {
  const int nb = num_blocks();
  csc_map_ = host_view<decltype(csc_map_)>("knmf::host::stream::csc_map", size_type(nb) * (g_ + 1));
  csc_rows_ = host_view<decltype(csc_rows_)>("knmf::host::stream::csc_rows", nnz_);
  csc_vals_ = host_view<decltype(csc_vals_)>("knmf::host::stream::csc_vals", nnz_);
  Kokkos::parallel_for(
      "knmf::stream::build_csc", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, nb),
      [&](const int b) {
        const size_type r0 = bounds_[size_t(b)], r1 = bounds_[size_t(b) + 1];
        const size_type base = row_map_(r0);
        detail::csr_block_to_csc(r1 - r0, g_, &row_map_(r0), cols_.data() + base, vals_.data() + base,
                                 r0, &csc_map_(size_type(b) * (g_ + 1)), csc_rows_.data() + base,
                                 csc_vals_.data() + base);
      });
}

template <class T>
void StreamedMatrix<T>::finalize(const std::string& source) {
  if (n_ <= 0 || g_ <= 0) input_error(source, ": X is empty (", n_, " cells x ", g_, " genes)");
  if (!sparse_) {
    stats_ = host_value_stats(dense_.data(), n_ * g_);
    const size_type g = g_;
    check_input_stats(stats_, n_, g_, source, [g](size_type p) { return std::make_pair(p / g, p % g); });
    if constexpr (std::is_same_v<T, float>) check_float32_scale(stats_, n_, g_, source);
    check_whole_x(stats_, double(std::numeric_limits<T>::epsilon()), source);
    return;
  }
  for (size_type p = 0; p < nnz_; ++p)
    if (cols_(p) < 0 || cols_(p) >= g_) {
      const size_type row = size_type(std::upper_bound(row_map_.data(), row_map_.data() + n_ + 1, p) -
                                      row_map_.data()) - 1;
      input_error(source, ": column index ", cols_(p), " at row ", row, " is outside [0, ", g_, ")");
    }
  stats_ = host_value_stats(vals_.data(), nnz_);
  check_input_stats(stats_, n_, g_, source, [&](size_type p) {
    const size_type row =
        size_type(std::upper_bound(row_map_.data(), row_map_.data() + n_ + 1, p) - row_map_.data()) - 1;
    return std::make_pair(row, size_type(cols_(p)));
  });
  if constexpr (std::is_same_v<T, float>) check_float32_scale(stats_, n_, g_, source);
  check_whole_x(stats_, double(std::numeric_limits<T>::epsilon()), source);
}

template <class T>
StreamedMatrix<T> StreamedMatrix<T>::from_host_dense(const ExecSpace& space, size_type n,
                                                     size_type g, const T* row_major,
                                                     size_type buffer_bytes,
                                                     const std::string& source) {
  StreamedMatrix m;
  m.space_ = space;
  m.n_ = n;
  m.g_ = g;
  m.nnz_ = n * g;
  m.dense_ = host_view<decltype(m.dense_)>("knmf::host::stream::dense", n * g);
  if (n * g > 0) std::memcpy(m.dense_.data(), row_major, size_t(n * g) * sizeof(T));
  m.finalize(source);
  m.plan_blocks(buffer_bytes);
  m.allocate_buffers();
  return m;
}

template <class T>
StreamedMatrix<T> StreamedMatrix<T>::from_host_csr(const ExecSpace& space, size_type n,
                                                   size_type g, const size_type* off,
                                                   const ordinal_type* cols, const T* values,
                                                   size_type buffer_bytes,
                                                   const std::string& source) {
  StreamedMatrix m;
  m.space_ = space;
  m.sparse_ = true;
  m.n_ = n;
  m.g_ = g;
  if (n <= 0 || g <= 0) input_error(source, ": X is empty (", n, " cells x ", g, " genes)");
  m.nnz_ = off[n];
  m.row_map_ = host_view<decltype(m.row_map_)>("knmf::host::stream::row_map", n + 1);
  for (size_type i = 0; i <= n; ++i) {
    if (i > 0 && off[i] < off[i - 1])
      input_error(source, ": row offsets decrease at row ", i - 1);
    m.row_map_(i) = off[i];
  }
  m.cols_ = host_view<decltype(m.cols_)>("knmf::host::stream::cols", m.nnz_);
  m.vals_ = host_view<decltype(m.vals_)>("knmf::host::stream::vals", m.nnz_);
  std::memcpy(m.cols_.data(), cols, size_t(m.nnz_) * sizeof(ordinal_type));
  std::memcpy(m.vals_.data(), values, size_t(m.nnz_) * sizeof(T));
  m.finalize(source);
  m.plan_blocks(buffer_bytes);
  m.build_csc();
  m.allocate_buffers();
  return m;
}

template <class T>
StreamedMatrix<T> StreamedMatrix<T>::load(const ExecSpace& space, const io::H5adReader& reader,
                                          bool sparse, size_type buffer_bytes) {
  Kokkos::Profiling::ScopedRegion region("knmf::X::load_streamed");
  const auto& info = reader.info();
  const std::string source = reader.path().string();
  StreamedMatrix m;
  m.space_ = space;
  m.sparse_ = sparse;
  m.n_ = info.n_obs;
  m.g_ = info.n_vars;
  if (m.n_ <= 0 || m.g_ <= 0) input_error(source, ": X is empty (", m.n_, " cells x ", m.g_, " genes)");
  const size_type stage_rows = std::max<size_type>(1, (size_type(64) << 20) / (m.g_ * 8));
  if (!sparse) {
    m.nnz_ = m.n_ * m.g_;
    m.dense_ = host_view<decltype(m.dense_)>("knmf::host::stream::dense", m.nnz_);
    for (size_type r0 = 0; r0 < m.n_; r0 += stage_rows) {
      const size_type r1 = std::min(m.n_, r0 + stage_rows);
      reader.read_dense_rows<T>(r0, r1, m.dense_.data() + r0 * m.g_, &m.fingerprint_);  // straight to its home
    }
  } else {
    m.row_map_ = host_view<decltype(m.row_map_)>("knmf::host::stream::row_map", m.n_ + 1);
    m.row_map_(0) = 0;
    for (size_type r0 = 0; r0 < m.n_; r0 += stage_rows) {
      const size_type r1 = std::min(m.n_, r0 + stage_rows);
      const auto counts = reader.row_nnz(r0, r1);
      for (size_type i = r0; i < r1; ++i) m.row_map_(i + 1) = m.row_map_(i) + counts[size_t(i - r0)];
    }
    m.nnz_ = m.row_map_(m.n_);
    m.cols_ = host_view<decltype(m.cols_)>("knmf::host::stream::cols", m.nnz_);
    m.vals_ = host_view<decltype(m.vals_)>("knmf::host::stream::vals", m.nnz_);
    io::CsrBlock<T> blk;
    for (size_type r0 = 0; r0 < m.n_; r0 += stage_rows) {
      const size_type r1 = std::min(m.n_, r0 + stage_rows);
      reader.read_csr_rows<T>(r0, r1, blk, &m.fingerprint_);
      const size_type base = m.row_map_(r0);
      std::memcpy(m.cols_.data() + base, blk.cols.data(), blk.cols.size() * sizeof(ordinal_type));
      std::memcpy(m.vals_.data() + base, blk.values.data(), blk.values.size() * sizeof(T));
    }
  }
  m.finalize(source);
  m.plan_blocks(buffer_bytes);
  if (sparse) m.build_csc();
  m.allocate_buffers();
  return m;
}

template <class T>
void StreamedMatrix<T>::upload(const ExecSpace& cs, int b, int bi, bool transposed) const {
  const size_type r0 = bounds_[size_t(b)], r1 = bounds_[size_t(b) + 1];
  auto& B = buf_[bi];
  using U = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  if (!sparse_) {
    Kokkos::View<const T**, Kokkos::LayoutLeft, PinnedHostSpace, U> src(dense_.data() + r0 * g_, g_, r1 - r0);
    Kokkos::deep_copy(cs, Kokkos::subview(B.xt, Kokkos::ALL, std::make_pair(size_type(0), r1 - r0)), src);
    return;
  }
  const size_type p0 = row_map_(r0), p1 = row_map_(r1), nz = p1 - p0;
  if (!transposed) {
    Kokkos::deep_copy(cs, Kokkos::subview(B.map, std::make_pair(size_type(0), r1 - r0 + 1)),
                      Kokkos::subview(row_map_, std::make_pair(r0, r1 + 1)));
    Kokkos::deep_copy(cs, Kokkos::subview(B.idx, std::make_pair(size_type(0), nz)),
                      Kokkos::subview(cols_, std::make_pair(p0, p1)));
    Kokkos::deep_copy(cs, Kokkos::subview(B.val, std::make_pair(size_type(0), nz)),
                      Kokkos::subview(vals_, std::make_pair(p0, p1)));
  } else {
    const size_type m0 = size_type(b) * (g_ + 1);
    Kokkos::deep_copy(cs, Kokkos::subview(B.map, std::make_pair(size_type(0), g_ + 1)),
                      Kokkos::subview(csc_map_, std::make_pair(m0, m0 + g_ + 1)));
    Kokkos::deep_copy(cs, Kokkos::subview(B.idx, std::make_pair(size_type(0), nz)),
                      Kokkos::subview(csc_rows_, std::make_pair(p0, p1)));
    Kokkos::deep_copy(cs, Kokkos::subview(B.val, std::make_pair(size_type(0), nz)),
                      Kokkos::subview(csc_vals_, std::make_pair(p0, p1)));
  }
}

template <class T>
StreamBlock<T> StreamedMatrix<T>::block_view(int b, int bi, bool transposed) const {
  StreamBlock<T> v;
  v.r0 = bounds_[size_t(b)];
  v.r1 = bounds_[size_t(b) + 1];
  const auto& B = buf_[bi];
  if (!sparse_) {
    v.xt = Matrix<T>(B.xt.data(), g_, v.rows());
    return v;
  }
  v.row_map = B.map;
  v.entries = B.idx;
  v.values = B.val;
  v.base = transposed ? 0 : row_map_(v.r0);
  v.segments = transposed ? seg_csc_[size_t(b)] : seg_rows_[size_t(b)];
  return v;
}

template class StreamedMatrix<float>;
template class StreamedMatrix<double>;

}  // namespace knmf
