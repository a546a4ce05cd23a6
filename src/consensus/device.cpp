// Device helpers of the consensus step: copies, squared norms, distance blocks, GEMMs.
#include "consensus/detail/device.hpp"

#include <KokkosBlas3_gemm.hpp>

#include "knmf/core/error.hpp"

namespace knmf::consensus::detail {

DMatrix upload_transposed(const ExecSpace& space, const HostRows& x, const std::string& label) {
  KNMF_ASSERT(size_type(x.values.size()) == x.rows * x.cols, "host matrix size");
  DMatrix xt = alloc_matrix(space, label, x.cols, x.rows);
  Kokkos::View<const double**, Kokkos::LayoutLeft, Kokkos::HostSpace,
               Kokkos::MemoryTraits<Kokkos::Unmanaged>>
      h(x.values.data(), x.cols, x.rows);
  Kokkos::deep_copy(space, xt, h);
  space.fence();
  return xt;
}

HostRows download_transposed(const ExecSpace& space, const DMatrix& f) {
  HostRows out;
  out.rows = size_type(f.extent(1));
  out.cols = size_type(f.extent(0));
  out.values.resize(size_t(out.rows * out.cols));
  Kokkos::View<double**, Kokkos::LayoutLeft, Kokkos::HostSpace,
               Kokkos::MemoryTraits<Kokkos::Unmanaged>>
      h(out.values.data(), out.cols, out.rows);
  Kokkos::deep_copy(space, h, f);
  space.fence();
  return out;
}

DVector upload(const ExecSpace& space, const std::vector<double>& v, const std::string& label) {
  DVector d = alloc_vector(space, label, size_type(v.size()));
  Kokkos::View<const double*, Kokkos::LayoutLeft, Kokkos::HostSpace,
               Kokkos::MemoryTraits<Kokkos::Unmanaged>>
      h(v.data(), v.size());
  Kokkos::deep_copy(space, d, h);
  space.fence();
  return d;
}

std::vector<double> download(const ExecSpace& space, const DVector& v) {
  std::vector<double> out(v.extent(0));
  Kokkos::View<double*, Kokkos::LayoutLeft, Kokkos::HostSpace,
               Kokkos::MemoryTraits<Kokkos::Unmanaged>>
      h(out.data(), out.size());
  Kokkos::deep_copy(space, h, v);
  space.fence();
  return out;
}

DVector column_sq_norms(const ExecSpace& space, const DMatrix& xt) {
  const size_type g = size_type(xt.extent(0)), n = size_type(xt.extent(1));
  DVector out = alloc_vector(space, "knmf::consensus::sq_norms", n);
  Kokkos::parallel_for(
      "knmf::consensus::sq_norms", Policy64(space, 0, n), KOKKOS_LAMBDA(const size_type i) {
        double s = 0.0;
        for (size_type f = 0; f < g; ++f) s += xt(f, i) * xt(f, i);
        out(i) = s;
      });
  return out;
}

namespace {
/// a * b = p + e exactly (Dekker's product; |a|, |b| far below overflow).
KOKKOS_INLINE_FUNCTION void two_product(double a, double b, double& p, double& e) {
  constexpr double split = 134217729.0;  // 2^27 + 1
  p = a * b;
  const double ca = split * a, cb = split * b;
  const double a1 = ca - (ca - a), a2 = a - a1;
  const double b1 = cb - (cb - b), b2 = b - b1;
  e = ((a1 * b1 - p) + a1 * b2 + a2 * b1) + a2 * b2;
}

/// Dot product of columns i and j of xt in twice the working precision (Ogita, Rump and
/// Oishi's Dot2), rounded once: the correctly rounded value in all but pathological cases.
KOKKOS_INLINE_FUNCTION double dot2(const DMatrix& xt, size_type i, size_type j) {
  const size_type g = size_type(xt.extent(0));
  double p = 0.0, s = 0.0;
  for (size_type f = 0; f < g; ++f) {
    double h, r;
    two_product(xt(f, i), xt(f, j), h, r);
    const double t = p + h;
    const double z = t - p;
    const double q = (p - (t - z)) + (h - z);
    p = t;
    s += q + r;
  }
  return p + s;
}
}  // namespace

void distances_from_gram(const ExecSpace& space, const DMatrix& G, const DVector& sq_norms,
                         size_type b0, bool zero_diagonal, bool squared, const DMatrix& xt,
                         double refine_below) {
  const size_type B = size_type(G.extent(0)), n = size_type(G.extent(1));
  const bool refine = xt.extent(1) > 0 && refine_below > 0.0;
  Kokkos::parallel_for(
      "knmf::consensus::distances", Policy64(space, 0, B * n), KOKKOS_LAMBDA(const size_type e) {
        const size_type i = e % B, j = e / B;
        // scikit-learn: distances = -2 X Y^T; distances += XX; distances += YY; max(., 0)
        double d = (-2.0 * G(i, j) + sq_norms(b0 + i)) + sq_norms(j);
        if (refine && d < refine_below && b0 + i != j)
          d = (-2.0 * dot2(xt, b0 + i, j) + sq_norms(b0 + i)) + sq_norms(j);
        d = d > 0.0 ? d : 0.0;
        if (zero_diagonal && b0 + i == j) d = 0.0;
        G(i, j) = squared ? d : Kokkos::sqrt(d);
      });
}

void gemm_tn(const ExecSpace& space, const DMatrix& A, const DMatrix& B, const DMatrix& G) {
  KokkosBlas::gemm(space, "T", "N", 1.0, A, B, 0.0, G);
}

void gemm_nn(const ExecSpace& space, const DMatrix& A, const DMatrix& B, const DMatrix& C) {
  KokkosBlas::gemm(space, "N", "N", 1.0, A, B, 0.0, C);
}

}  // namespace knmf::consensus::detail
