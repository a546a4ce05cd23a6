// Streamed CSR block products (see consensus/detail/stream.hpp).
#include "consensus/detail/stream.hpp"

#include "knmf/core/error.hpp"
#include "matrix/block_csc.hpp"
#include "solver/engine.hpp"

namespace knmf::consensus::detail {

namespace {
template <class V, class T>
void ensure_and_copy(const ExecSpace& space, V& dst, const std::vector<T>& src, const char* label) {
  if (dst.extent(0) < src.size())
    dst = V(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string(label)),
            src.size() + src.size() / 4 + 16);
  if (src.empty()) return;
  Kokkos::View<const typename V::value_type*, Kokkos::HostSpace,
               Kokkos::MemoryTraits<Kokkos::Unmanaged>>
      h(reinterpret_cast<const typename V::value_type*>(src.data()), src.size());
  auto d = Kokkos::subview(dst, std::make_pair(size_t(0), src.size()));
  Kokkos::deep_copy(space, d, h);
}
}  // namespace

DeviceBlock::DeviceBlock(const ExecSpace& space)
    : scratch(std::make_unique<knmf::detail::GatherScratch<double>>()), space_(space) {}
DeviceBlock::~DeviceBlock() = default;

void DeviceBlock::upload(const io::CsrBlock<double>& b, bool csr, bool csc) {
  static_assert(sizeof(std::int64_t) == sizeof(size_type), "64-bit offsets");
  row_begin = b.row_begin;
  rows = b.rows();
  ncols = b.ncols;
  nnz = b.nnz();
  if (csr) {
    ensure_and_copy(space_, row_ptr, b.row_offsets, "knmf::consensus::row_ptr");
    ensure_and_copy(space_, col, b.cols, "knmf::consensus::col");
    ensure_and_copy(space_, val, b.values, "knmf::consensus::val");
    row_segments = knmf::detail::GatherSegments::build(b.row_offsets.data(), rows);
  }
  if (csc) {
    for (auto c : b.cols)
      if (c < 0 || c >= ncols) input_error("CSR block: column index ", c, " out of range [0, ", ncols, ")");
    h_col_ptr_.resize(size_t(ncols + 1));
    h_row_idx_.resize(static_cast<size_t>(nnz));
    h_cval_.resize(static_cast<size_t>(nnz));
    knmf::detail::csr_block_to_csc(rows, ncols, b.row_offsets.data(), b.cols.data(), b.values.data(),
                                   size_type(0), h_col_ptr_.data(), h_row_idx_.data(), h_cval_.data());
    ensure_and_copy(space_, col_ptr, h_col_ptr_, "knmf::consensus::col_ptr");
    ensure_and_copy(space_, row_idx, h_row_idx_, "knmf::consensus::row_idx");
    ensure_and_copy(space_, cval, h_cval_, "knmf::consensus::cval");
    col_segments = knmf::detail::GatherSegments::build(h_col_ptr_.data(), ncols);
  }
  space_.fence();  // the host buffers may change after this call
}

void block_times_ht(const ExecSpace& space, const DeviceBlock& b, const DMatrix& H,
                    const Kokkos::View<int*, MemSpace>& map, const DVector& scale, const DMatrix& P) {
  const int k = int(H.extent(0));
  const size_type rows = b.rows, r0 = b.row_begin;
  const bool has_map = map.extent(0) > 0, has_scale = scale.extent(0) > 0;
  if (!has_map && !has_scale) {
    const DMatrix Pb(Kokkos::subview(P, Kokkos::ALL, std::make_pair(r0, r0 + rows)));
    knmf::detail::spmm_gather(space, b.row_ptr, 0, b.col, b.val, H, Pb, false, b.row_segments,
                              *b.scratch);
    return;
  }
  auto row_ptr = b.row_ptr;
  auto col = b.col;
  auto val = b.val;
  Kokkos::parallel_for(
      "knmf::consensus::block_times_ht", Policy64(space, 0, rows * k),
      KOKKOS_LAMBDA(const size_type e) {
        const int t = int(e % k);
        const size_type i = e / k;
        double acc = 0.0;
        for (size_type p = row_ptr(i); p < row_ptr(i + 1); ++p) {
          const int c = col(p);
          const int m = has_map ? map(c) : c;
          if (m < 0) continue;
          const double v = has_scale ? val(p) * scale(c) : val(p);
          acc += v * H(t, m);
        }
        P(t, r0 + i) = acc;
      });
}

void accumulate_ut_block(const ExecSpace& space, const DeviceBlock& b, const DMatrix& U,
                         const DMatrix& Q) {
  const DMatrix Ub(Kokkos::subview(U, Kokkos::ALL, std::make_pair(b.row_begin, b.row_begin + b.rows)));
  const DMatrix Qb(Kokkos::subview(Q, Kokkos::ALL, std::make_pair(size_type(0), b.ncols)));
  knmf::detail::spmm_gather(space, b.col_ptr, 0, b.row_idx, b.cval, Ub, Qb, true, b.col_segments,
                            *b.scratch);
}

DMatrix upload_rows(const ExecSpace& space, const HostRows& x, const std::string& label) {
  HostRows t{x.cols, x.rows, std::vector<double>(x.values.size())};
  for (size_type r = 0; r < x.rows; ++r)
    for (size_type c = 0; c < x.cols; ++c) t.values[size_t(c * x.rows + r)] = x.values[size_t(r * x.cols + c)];
  return upload_transposed(space, t, label);
}

}  // namespace knmf::consensus::detail
