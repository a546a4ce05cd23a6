#include "knmf/core/host_access.hpp"
#include "knmf/matrix/csr_matrix.hpp"

#include <algorithm>
#include <limits>
#include <vector>
#include <Kokkos_Profiling_ScopedRegion.hpp>

#include "knmf/core/compat.hpp"
#include "knmf/core/error.hpp"
#include "knmf/core/kernel_set.hpp"
#include "knmf/matrix/dense_matrix.hpp"

namespace knmf {

using Policy64 = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<size_type>>;

template <class T>
CsrMatrix<T>::CsrMatrix(const ExecSpace& space, size_type n, size_type g, size_type nnz)
    : space_(space), n_(n), g_(g), nnz_(nnz) {
  if (n < 0 || g < 0 || nnz < 0) input_error("X: invalid sparse shape ", n, " x ", g, ", nnz ", nnz);
  if (n > std::numeric_limits<ordinal_type>::max() || g > std::numeric_limits<ordinal_type>::max())
    input_error("X: ", n, " x ", g, " is too large: at most 2^31 - 1 cells and genes");
  row_map_ = row_map_type(Kokkos::view_alloc(space, "knmf::X::row_map"), n + 1);
  cols_ = index_type(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::X::cols"), nnz);
  values_ = values_type(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::X::values"), nnz);
}

template <class T>
CsrMatrix<T> CsrMatrix<T>::from_host(const ExecSpace& space, size_type n, size_type g,
                                     const size_type* row_offsets, const ordinal_type* cols,
                                     const T* values, const std::string& source) {
  if (n <= 0 || g <= 0) input_error(source, ": X is empty (", n, " cells x ", g, " genes)");
  if (row_offsets[0] != 0) input_error(source, ": row offsets must start at 0, not ", row_offsets[0]);
  CsrMatrix<T> m(space, n, g, row_offsets[n]);
  m.set_rows(0, n, row_offsets, cols, values);
  m.finalize(source);
  return m;
}

template <class T>
void CsrMatrix<T>::set_rows(size_type r0, size_type r1, const size_type* local, const ordinal_type* cols,
                            const T* values) {
  KNMF_ASSERT(r0 == filled_rows_ && r1 >= r0 && r1 <= n_, "rows must arrive in order");
  const size_type rows = r1 - r0;
  if (rows == 0) return;
  size_type base = 0;
  if (r0 > 0) {
    auto last = Kokkos::subview(row_map_, r0);
    auto h = host_copy(last);
    base = h();
  }
  const size_type cnt = local[rows];
  if (local[0] != 0 || base + cnt > nnz_)
    input_error("X: sparse block of rows ", r0, "..", r1, " has inconsistent offsets (",
                local[0], " .. ", cnt, " from ", base, ", nnz ", nnz_, ")");
  std::vector<size_type> global(static_cast<size_t>(rows));
  for (size_type i = 0; i < rows; ++i) {
    if (local[i + 1] < local[i])
      input_error("X: row offsets decrease at row ", r0 + i, " (", local[i], " > ", local[i + 1], ")");
    global[size_t(i)] = base + local[i + 1];
  }
  using HostU = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  Kokkos::deep_copy(space_, Kokkos::subview(row_map_, std::make_pair(r0 + 1, r1 + 1)),
                    Kokkos::View<const size_type*, Kokkos::HostSpace, HostU>(global.data(), rows));
  Kokkos::deep_copy(space_, Kokkos::subview(cols_, std::make_pair(base, base + cnt)),
                    Kokkos::View<const ordinal_type*, Kokkos::HostSpace, HostU>(cols, cnt));
  Kokkos::deep_copy(space_, Kokkos::subview(values_, std::make_pair(base, base + cnt)),
                    Kokkos::View<const T*, Kokkos::HostSpace, HostU>(values, cnt));
  space_.fence();
  filled_rows_ = r1;
}

namespace {

/// X^T of a CSR matrix, deterministically: rows are cut into B blocks; each block counts its
/// entries per column, the counts give every (column, block) its own output range, and each
/// block fills its ranges in row order. Entries of a column therefore come out sorted by row.
template <class T>
void transpose(const ExecSpace& space, size_type n, size_type g, size_type nnz,
               const Kokkos::View<size_type*, MemSpace>& row_map,
               const Kokkos::View<ordinal_type*, MemSpace>& cols,
               const Kokkos::View<T*, MemSpace>& values, Kokkos::View<size_type*, MemSpace>& t_map,
               Kokkos::View<ordinal_type*, MemSpace>& t_rows, Kokkos::View<T*, MemSpace>& t_vals) {
  Kokkos::Profiling::ScopedRegion region("knmf::X::transpose");
  const size_type max_counts = size_type(8) << 20;  // 64 MB of block counters at most
  const size_type B = std::max<size_type>(1, std::min<size_type>({n, 1024, max_counts / std::max<size_type>(g, 1)}));
  Kokkos::View<size_type**, Kokkos::LayoutRight, MemSpace> counts(
      Kokkos::view_alloc(space, "knmf::X::transpose::counts"), B, g);
  auto block_begin = KOKKOS_LAMBDA(size_type b) { return b * n / B; };
  Kokkos::parallel_for(
      "knmf::X::transpose::count", Policy64(space, 0, B), KOKKOS_LAMBDA(const size_type b) {
        const size_type i1 = block_begin(b + 1);
        for (size_type i = block_begin(b); i < i1; ++i)
          for (size_type p = row_map(i); p < row_map(i + 1); ++p) ++counts(b, cols(p));
      });
  t_map = Kokkos::View<size_type*, MemSpace>(Kokkos::view_alloc(space, "knmf::Xt::row_map"), g + 1);
  Kokkos::parallel_for(
      "knmf::X::transpose::column_sizes", Policy64(space, 0, g), KOKKOS_LAMBDA(const size_type j) {
        size_type s = 0;
        for (size_type b = 0; b < B; ++b) s += counts(b, j);
        t_map(j + 1) = s;
      });
  Kokkos::parallel_scan(
      "knmf::X::transpose::scan", Policy64(space, 0, g + 1),
      KOKKOS_LAMBDA(const size_type j, size_type& acc, const bool final) {
        const size_type v = t_map(j);
        acc += v;
        if (final) t_map(j) = acc;
      });
  Kokkos::parallel_for(
      "knmf::X::transpose::offsets", Policy64(space, 0, g), KOKKOS_LAMBDA(const size_type j) {
        size_type at = t_map(j);
        for (size_type b = 0; b < B; ++b) {
          const size_type c = counts(b, j);
          counts(b, j) = at;
          at += c;
        }
      });
  t_rows = Kokkos::View<ordinal_type*, MemSpace>(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::Xt::cols"), nnz);
  t_vals = Kokkos::View<T*, MemSpace>(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::Xt::values"), nnz);
  auto tr = t_rows;
  auto tv = t_vals;
  Kokkos::parallel_for(
      "knmf::X::transpose::fill", Policy64(space, 0, B), KOKKOS_LAMBDA(const size_type b) {
        const size_type i1 = block_begin(b + 1);
        for (size_type i = block_begin(b); i < i1; ++i)
          for (size_type p = row_map(i); p < row_map(i + 1); ++p) {
            const size_type q = counts(b, cols(p))++;
            tr(q) = ordinal_type(i);
            tv(q) = values(p);
          }
      });
  space.fence();
}

/// The segment table of a graph's long rows (empty, and no host copy, when none is long).
detail::GatherSegments long_row_segments(const ExecSpace& space,
                                         const Kokkos::View<size_type*, MemSpace>& row_map,
                                         size_type rows) {
  size_type longest = 0;
  Kokkos::parallel_reduce(
      "knmf::X::longest_row", Policy64(space, 0, rows),
      KOKKOS_LAMBDA(const size_type i, size_type& m) {
        const size_type len = row_map(i + 1) - row_map(i);
        if (len > m) m = len;
      },
      Kokkos::Max<size_type>(longest));
  if (longest <= detail::gather_segment_entries) return {};
  const auto h = host_copy(row_map);
  return detail::GatherSegments::build(h.data(), rows);
}

/// Blocks of the cell-block table of an n-cell matrix (0: no table).
size_type cell_blocks(size_type n) {
  constexpr size_type B = detail::gather_cell_block;
  return host_tuned_kernels && n > B ? (n + B - 1) / B : 0;
}

/// The cell-block table of a CSC graph (CsrMatrix::xt_cell_blocks): one thread per gene
/// walks its entries (cells in order) once.
Kokkos::View<size_type*, MemSpace> cell_block_table(const ExecSpace& space,
                                                    const Kokkos::View<size_type*, MemSpace>& t_map,
                                                    const Kokkos::View<ordinal_type*, MemSpace>& t_rows,
                                                    size_type n, size_type g) {
  constexpr size_type B = detail::gather_cell_block;
  const size_type blocks = cell_blocks(n);
  if (blocks == 0) return {};
  Kokkos::View<size_type*, MemSpace> table(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::Xt::cell_blocks"),
      (blocks + 1) * g);
  Kokkos::parallel_for(
      "knmf::Xt::cell_blocks", Policy64(space, 0, g), KOKKOS_LAMBDA(const size_type j) {
        size_type p = t_map(j);
        const size_type end = t_map(j + 1);
        for (size_type b = 0; b < blocks; ++b) {
          table(b * g + j) = p;
          while (p < end && size_type(t_rows(p)) < (b + 1) * B) ++p;
        }
        table(blocks * g + j) = end;
      });
  space.fence();
  return table;
}

}  // namespace

template <class T>
size_type CsrMatrix<T>::cell_block_bytes(size_type n, size_type g) {
  const size_type blocks = cell_blocks(n);
  return blocks == 0 ? 0 : (blocks + 1) * g * size_type(sizeof(size_type));
}

template <class T>
void CsrMatrix<T>::finalize(const std::string& source, size_type chunk, bool allow_empty) {
  Kokkos::Profiling::ScopedRegion region("knmf::X::finalize");
  if (g_ <= 0 || (n_ <= 0 && !allow_empty))
    input_error(source, ": X is empty (", n_, " cells x ", g_, " genes)");
  KNMF_ASSERT(filled_rows_ == n_, "not every row was set");
  {
    auto last = host_copy(Kokkos::subview(row_map_, n_));
    if (last() != nnz_)
      input_error(source, ": the rows hold ", last(), " entries but nnz is ", nnz_);
  }
  // column indices in range
  const size_type g = g_;
  auto cols = cols_;
  size_type first_bad = nnz_;
  Kokkos::parallel_reduce(
      "knmf::X::check_columns", Policy64(space_, 0, nnz_),
      KOKKOS_LAMBDA(const size_type p, size_type& m) {
        if ((cols(p) < 0 || cols(p) >= g) && p < m) m = p;
      },
      Kokkos::Min<size_type>(first_bad));
  auto where = [&](size_type p) {
    auto rm = host_copy(row_map_);
    const size_type* begin = rm.data();
    const size_type row = size_type(std::upper_bound(begin, begin + n_ + 1, p) - begin) - 1;
    auto c = host_copy(Kokkos::subview(cols_, p));
    return std::make_pair(row, size_type(c()));
  };
  if (first_bad < nnz_) {
    auto [r, c] = where(first_bad);
    input_error(source, ": column index ", c, " at row ", r, " is outside [0, ", g_, ")");
  }
  stats_ = value_stats(space_, values_.data(), nnz_, chunk);
  if (n_ > 0) check_input_stats(stats_, n_, g_, source, where);
  x_ = crs_type("knmf::X", ordinal_type(n_), ordinal_type(g_), nnz_, values_, row_map_, cols_);
  row_map_type t_map;
  index_type t_rows;
  values_type t_vals;
  transpose<T>(space_, n_, g_, nnz_, row_map_, cols_, values_, t_map, t_rows, t_vals);
  xt_ = crs_type("knmf::Xt", ordinal_type(g_), ordinal_type(n_), nnz_, t_vals, t_map, t_rows);
  x_segments_ = long_row_segments(space_, row_map_, n_);
  xt_segments_ = long_row_segments(space_, t_map, g_);
  xt_blocks_ = cell_block_table(space_, t_map, t_rows, n_, g_);
}

template class CsrMatrix<float>;
template class CsrMatrix<double>;

}  // namespace knmf
