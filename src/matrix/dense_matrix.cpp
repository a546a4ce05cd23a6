#include "knmf/matrix/dense_matrix.hpp"

#include <Kokkos_Profiling_ScopedRegion.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

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

// Why max|X|^2 * max(n, g) <= 2^-24 FLT_MAX. In float32 the solver forms X H^T (sums over the
// g genes), W^T X (over the n cells), the Grams H H^T and W^T W, and multiplies a factor by
// them (MU: W * (X H^T), H * (W^T X); CD: the gradients). scikit-learn's init starts W and H
// at sqrt(mean(X) / k), and a fit keeps the products W_it H_tj of the order of X's values, so
// e.g. W_it (X H^T)_it = sum_j X_ij (W_it H_tj) is bounded by about g max|X|^2, and likewise
// with n for H: max|X|^2 max(n, g) is the scale of the largest float32 quantities. 2^-24 of
// FLT_MAX (about 2e31) leaves room for the sums over the k components (up to 2^10) and for
// W and H drifting apart in scale while they iterate (2^14). The sums of X itself (||X||^2,
// mean) are double and are not limited. The limit is far from any count matrix: with 2.4
// million cells max|X| may reach 2.9e12, with 20000 cells 3e13. Beyond it a float32 run
// would end with every replicate non-finite; double has the range (1e308) for such an X.
double float32_scale_limit() {
  return double(std::numeric_limits<float>::max()) * 0x1p-24;
}

void check_float32_scale(const ValueStats& s, size_type n, size_type g, const std::string& source) {
  if (s.max_pos < 0) return;
  const double m = std::fabs(s.max_value);
  const double scale = m * m * double(std::max(n, g));
  if (scale <= float32_scale_limit()) return;
  char v[192];
  std::snprintf(v, sizeof v, "%.3g, beyond what float32 arithmetic can hold (max|X|^2 x "
                "max(cells, genes) = %.3g > %.3g", m, scale, float32_scale_limit());
  input_error(source, ": X's values reach ", v,
              ", 2^-24 of the float32 maximum); use --dtype double or rescale X");
}

void check_whole_x(const ValueStats& s, double eps, const std::string& source) {
  // An X of zeros (none stored, or all stored values 0) has the exact factorization W = H = 0
  // and no programs: scikit-learn would return it, but a cNMF run over it is a mistake (an
  // empty selection of cells or genes), so it is refused like any other unusable input.
  // (max_value: the largest finite value; ||X||^2 may be Inf or NaN for an X of huge values,
  // which the run reports as non-finite replicates)
  if (!(s.max_value > 0.0))
    input_error(source, ": X has no nonzero value (", s.count,
                " stored, all 0): there is nothing to factorize");
  if (s.max_pos < 0 || !(s.norm2_rest > 0.0) || s.norm2_rest > 16.0 * eps * s.norm2) return;
  char v[224];
  std::snprintf(v, sizeof v, "%.3g carries all of ||X||^2 = %.3g: the squares of its other "
                "%lld values sum to %.3g, below the rounding of ||X||^2", s.max_value,
                s.norm2, (long long)(s.count - 1), s.norm2_rest);
  input_error(source, ": X's largest value ", v, " (", eps < 1e-10 ? "double" : "float32",
              "), so they cannot influence a factorization; clean or rescale X");
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
