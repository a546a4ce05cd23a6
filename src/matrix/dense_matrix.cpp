#include "knmf/matrix/dense_matrix.hpp"

#include <Kokkos_Profiling_ScopedRegion.hpp>

#include "knmf/core/compat.hpp"
#include "knmf/core/error.hpp"

namespace knmf {

void check_input_stats(const ValueStats& s, size_type n, size_type g, const std::string& source,
                       const std::function<std::pair<size_type, size_type>(size_type)>& where) {
  if (n <= 0 || g <= 0)
    input_error(source, ": X is empty (", n, " cells x ", g, " genes)");
  if (s.nonfinite > 0) {
    auto [r, c] = where(s.first_nonfinite_pos);
    input_error(source, ": X has ", s.nonfinite, " non-finite value(s); the first is ",
                s.first_nonfinite_value, " at row ", r, ", column ", c);
  }
  if (s.min_pos >= 0 && s.min_value < 0) {
    auto [r, c] = where(s.min_pos);
    input_error(source, ": X has negative values (min ", s.min_value, " at row ", r,
                ", column ", c, "); NMF needs non-negative input");
  }
}

template <class T>
DenseMatrix<T>::DenseMatrix(const ExecSpace& space, size_type n, size_type g)
    : space_(space), n_(n), g_(g) {
  if (n < 0 || g < 0) input_error("X: invalid shape ", n, " x ", g);
  xt_ = Matrix<T>(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::X::xt"), g, n);
}

template <class T>
DenseMatrix<T> DenseMatrix<T>::from_host(const ExecSpace& space, size_type n, size_type g,
                                         const T* row_major, const std::string& source) {
  DenseMatrix<T> m(space, n, g);
  m.set_rows(0, n, row_major);
  m.finalize(source);
  return m;
}

template <class T>
void DenseMatrix<T>::set_rows(size_type r0, size_type r1, const T* row_major) {
  KNMF_ASSERT(0 <= r0 && r0 <= r1 && r1 <= n_, "row range out of bounds");
  if (r1 == r0) return;
  Kokkos::View<const T**, Kokkos::LayoutLeft, Kokkos::HostSpace,
               Kokkos::MemoryTraits<Kokkos::Unmanaged>>
      src(row_major, g_, r1 - r0);
  auto dst = Kokkos::subview(xt_, Kokkos::ALL, std::make_pair(r0, r1));
  Kokkos::deep_copy(space_, dst, src);
  space_.fence();
}

template <class T>
void DenseMatrix<T>::finalize(const std::string& source, size_type chunk, bool allow_empty) {
  Kokkos::Profiling::ScopedRegion region("knmf::X::finalize");
  stats_ = value_stats(space_, xt_.data(), n_ * g_, chunk);
  const size_type g = g_;
  if (allow_empty && n_ == 0) return;
  check_input_stats(stats_, n_, g_, source,
                    [g](size_type p) { return std::make_pair(p / g, p % g); });
}

template class DenseMatrix<float>;
template class DenseMatrix<double>;

}  // namespace knmf
