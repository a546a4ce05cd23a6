#pragma once
/// \file
/// scikit-learn 1.2.1's NNDSVD initializations (internal): `_initialize_nmf(X, k,
/// init='nndsvd'|'nndsvda'|'nndsvdar', random_state=seed)` on top of `randomized_svd(X, k,
/// random_state=seed)` with its defaults (n_oversamples 10, n_iter 'auto', LU power
/// iterations, transpose 'auto', svd_flip).
///
/// X is reached only through the solver's two products (XOperand, x_operand.hpp):
///   X Z   (n x p) for a g x p Z   as P = H X^T with H = Z^T   (x_times_ht)
///   X^T Y (g x p) for an n x p Y  as Q = W X   with W = Y^T   (wt_times_x + reduce)
/// so dense, CSR and streamed X work alike. Everything else runs on the host in double
/// (LAPACK: dgetrf, dgeqrf + dorgqr, dgesdd; nndsvd.cpp). For float X the products are the
/// float products (inputs rounded to float) and the rest is double: scikit-learn computes in
/// float32 there, so the float result agrees only to about float32 accuracy (see
/// tests/solver/test_solver_nndsvd.cpp for the measured bound).

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>
#include <Kokkos_Profiling_ScopedRegion.hpp>

#include "knmf/core/error.hpp"
#include "knmf/core/host_access.hpp"
#include "knmf/random/random_state.hpp"
#include "knmf/solver/init.hpp"
#include "knmf/solver/options.hpp"
#include "x_operand.hpp"

namespace knmf::detail {

// ---- host dense linear algebra (nndsvd.cpp); matrices are column-major doubles -------------

/// scipy.linalg.lu(A, permute_l=True)[0] of the m x p matrix A: P L, m x min(m, p).
std::vector<double> lu_permuted_l(std::vector<double> A, size_type m, size_type p);
/// scipy.linalg.qr(A, mode='economic')[0] of the m x p matrix A: Q, m x min(m, p).
std::vector<double> qr_economic_q(std::vector<double> A, size_type m, size_type p);
/// scipy.linalg.svd(B, full_matrices=False, lapack_driver='gesdd') of the r x c matrix B
/// (r <= c): U (r x r), s (r), Vt (r x c).
struct ThinSvd {
  std::vector<double> U, s, Vt;
};
ThinSvd svd_gesdd(std::vector<double> B, size_type r, size_type c);
/// C = A B for A (m x p) and B (p x q).
std::vector<double> host_gemm(const std::vector<double>& A, const std::vector<double>& B,
                              size_type m, size_type p, size_type q);

/// The rank-k truncated SVD of X that randomized_svd returns: U (n x k, column-major), s (k),
/// V (k x g, column-major).
struct TruncatedSvd {
  std::vector<double> U, s, V;
};

/// randomized_svd's result from the two products (the host part of it): `x_z(Z, p)` returns
/// X Z for a g x p Z, `xt_y(Y, p)` returns X^T Y for an n x p Y, both column-major.
template <class XZ, class XtY>
TruncatedSvd randomized_svd(size_type n, size_type g, int k, std::int64_t seed, bool round_float,
                            const XZ& x_z, const XtY& xt_y) {
  const size_type l = size_type(k) + 10;  // n_oversamples
  const int n_iter = double(k) < 0.1 * double(std::min(n, g)) ? 7 : 4;
  const bool transpose = n < g;
  // M = X (n x g), or X^T (g x n) when transposed; the range finder works on M.
  const size_type m = transpose ? g : n, c = transpose ? n : g;
  auto apply_m = [&](const std::vector<double>& Z, size_type p) {
    return transpose ? xt_y(Z, p) : x_z(Z, p);
  };
  auto apply_mt = [&](const std::vector<double>& Y, size_type p) {
    return transpose ? x_z(Y, p) : xt_y(Y, p);
  };
  // Q = random_state.normal(size=(c, l)) in C order, cast to X's dtype
  RandomState rs(seed);
  std::vector<double> Q(size_t(c * l));
  for (size_type i = 0; i < c; ++i)
    for (size_type j = 0; j < l; ++j) {
      const double z = rs.standard_normal();
      Q[size_t(i + j * c)] = round_float ? double(float(z)) : z;
    }
  size_type p = l;
  for (int it = 0; it < n_iter; ++it) {
    auto Y = lu_permuted_l(apply_m(Q, p), m, p);
    p = std::min(m, p);
    Q = lu_permuted_l(apply_mt(Y, p), c, p);
    p = std::min(c, p);
  }
  Q = qr_economic_q(apply_m(Q, p), m, p);
  p = std::min(m, p);
  // B = Q^T M (p x c) = (M^T Q)^T
  const auto Z = apply_mt(Q, p);
  std::vector<double> B(size_t(p * c));
  for (size_type a = 0; a < p; ++a)
    for (size_type b = 0; b < c; ++b) B[size_t(a + b * p)] = Z[size_t(b + a * c)];
  auto svd = svd_gesdd(std::move(B), p, c);
  auto U = host_gemm(Q, svd.U, m, p, p);  // m x p
  auto& Vt = svd.Vt;                      // p x c
  // svd_flip: on the columns of U unless transposed, then on the rows of Vt
  for (size_type j = 0; j < p; ++j) {
    size_type best = 0;
    double sign = 0;
    if (!transpose) {
      for (size_type i = 1; i < m; ++i)
        if (std::abs(U[size_t(i + j * m)]) > std::abs(U[size_t(best + j * m)])) best = i;
      const double v = U[size_t(best + j * m)];
      sign = double((v > 0) - (v < 0));
    } else {
      for (size_type b = 1; b < c; ++b)
        if (std::abs(Vt[size_t(j + b * p)]) > std::abs(Vt[size_t(j + best * p)])) best = b;
      const double v = Vt[size_t(j + best * p)];
      sign = double((v > 0) - (v < 0));
    }
    for (size_type i = 0; i < m; ++i) U[size_t(i + j * m)] *= sign;
    for (size_type b = 0; b < c; ++b) Vt[size_t(j + b * p)] *= sign;
  }
  TruncatedSvd out;
  out.s.assign(svd.s.begin(), svd.s.begin() + k);
  out.U.resize(size_t(n * k));
  out.V.resize(size_t(k * g));
  for (size_type j = 0; j < k; ++j) {
    if (!transpose) {
      for (size_type i = 0; i < n; ++i) out.U[size_t(i + j * n)] = U[size_t(i + j * m)];
      for (size_type b = 0; b < g; ++b) out.V[size_t(j + b * k)] = Vt[size_t(j + b * p)];
    } else {  // U = Vt[:k].T, V = U[:, :k].T
      for (size_type i = 0; i < n; ++i) out.U[size_t(i + j * n)] = Vt[size_t(j + i * p)];
      for (size_type b = 0; b < g; ++b) out.V[size_t(j + b * k)] = U[size_t(b + j * m)];
    }
  }
  return out;
}

/// `_initialize_nmf`'s construction from the truncated SVD: W0 (n x k) and H0 (k x g) row-major,
/// in T (as scikit-learn, whose arrays have X's dtype), with the zero fill of `kind`.
template <class T>
void nndsvd_from_svd(const TruncatedSvd& svd, size_type n, size_type g, int k, InitKind kind,
                     std::int64_t seed, double mean, T* H, T* W) {
  const auto& U = svd.U;
  const auto& V = svd.V;
  auto Uat = [&](size_type i, size_type j) { return U[size_t(i + j * n)]; };
  auto Vat = [&](size_type j, size_type b) { return V[size_t(j + b * size_type(k))]; };
  const double s0 = std::sqrt(svd.s[0]);
  for (size_type i = 0; i < n; ++i) W[i * k] = T(s0 * std::abs(Uat(i, 0)));
  for (size_type b = 0; b < g; ++b) H[b] = T(s0 * std::abs(Vat(0, b)));
  for (size_type j = 1; j < k; ++j) {
    double xp = 0, xn = 0, yp = 0, yn = 0;  // squared norms of the parts
    for (size_type i = 0; i < n; ++i) {
      const double v = Uat(i, j);
      if (v > 0) xp += v * v;
      else xn += v * v;
    }
    for (size_type b = 0; b < g; ++b) {
      const double v = Vat(j, b);
      if (v > 0) yp += v * v;
      else yn += v * v;
    }
    const double xpn = std::sqrt(xp), xnn = std::sqrt(xn), ypn = std::sqrt(yp), ynn = std::sqrt(yn);
    const double mp = xpn * ypn, mn = xnn * ynn;
    const bool positive = mp > mn;
    const double xnrm = positive ? xpn : xnn, ynrm = positive ? ypn : ynn;
    const double lbd = std::sqrt(svd.s[size_t(j)] * (positive ? mp : mn));
    // x_p / ||x_p|| (or the negative part's magnitude); a zero part gives 0, not NaN
    auto part = [&](double v, double nrm) {
      const double keep = positive ? std::max(v, 0.0) : std::abs(std::min(v, 0.0));
      return nrm > 0 ? lbd * (keep / nrm) : 0.0;
    };
    for (size_type i = 0; i < n; ++i) W[i * k + j] = T(part(Uat(i, j), xnrm));
    for (size_type b = 0; b < g; ++b) H[j * g + b] = T(part(Vat(j, b), ynrm));
  }
  const size_type nw = n * k, nh = size_type(k) * g;
  const T eps = T(1e-6);
  for (size_type e = 0; e < nw; ++e)
    if (W[e] < eps) W[e] = T(0);
  for (size_type e = 0; e < nh; ++e)
    if (H[e] < eps) H[e] = T(0);
  if (kind == InitKind::nndsvda) {
    const T avg = T(mean);
    for (size_type e = 0; e < nw; ++e)
      if (W[e] == T(0)) W[e] = avg;
    for (size_type e = 0; e < nh; ++e)
      if (H[e] == T(0)) H[e] = avg;
  } else if (kind == InitKind::nndsvdar) {
    // a fresh RandomState(seed) (check_random_state of the int): W's zeros in C order, then H's
    RandomState rs(seed);
    const double avg = double(T(mean));
    for (size_type e = 0; e < nw; ++e)
      if (W[e] == T(0)) W[e] = T(std::abs(avg * rs.standard_normal() / 100.0));
    for (size_type e = 0; e < nh; ++e)
      if (H[e] == T(0)) H[e] = T(std::abs(avg * rs.standard_normal() / 100.0));
  }
}

/// W0 (n x k) and H0 (k x g), row-major, of `_initialize_nmf(X, k, init=kind,
/// random_state=seed)` for kind != random, through X's products on `space`.
template <class T>
void nndsvd_init(const ExecSpace& space, const XOperand<T>& X, int k, std::int64_t seed,
                 InitKind kind, double mean, T* H_row_major, T* W_row_major) {
  KNMF_ASSERT(X.whole_matrix(), "NNDSVD needs every row of X (see BatchRunner)");
  KNMF_ASSERT(kind != InitKind::random, "nndsvd_init called for init='random'");
  Kokkos::Profiling::ScopedRegion region("knmf::solver::nndsvd_init");
  const size_type n = X.rows(), g = X.cols();
  if (k < 1 || size_type(k) > std::min(n, g))
    input_error("--init ", to_string(kind), ": k = ", k,
                " is invalid: it must lie in [1, min(cells, genes)] = [1, ", std::min(n, g), "]");
  if (size_type(k) + 10 > size_type(INT32_MAX) || std::max(n, g) > size_type(INT32_MAX) / (k + 10))
    input_error("--init ", to_string(kind), ": X (", n, " x ", g,
                ") is too large for the host LAPACK's 32-bit indices; use --init random");
  // One product with X of a column-major `in` x p matrix Y, in the solver's layout: Y^T
  // (p x in) goes to the device, `product(Yt, Out)` fills Out (p x out), and Out^T comes back
  // column-major (out x p).
  auto through_x = [&](const std::vector<double>& Y, size_type p, size_type in, size_type out,
                       const auto& product) {
    Matrix<T> Yt(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::nndsvd::Yt"), p, in);
    Matrix<T> Out(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::nndsvd::out"), p, out);
    auto h = host_mirror(Yt);
    for (size_type i = 0; i < in; ++i)
      for (size_type j = 0; j < p; ++j) h(j, i) = T(Y[size_t(i + j * in)]);
    Kokkos::deep_copy(space, Yt, h);
    product(Yt, Out);
    auto out_h = host_mirror(Out);
    Kokkos::deep_copy(space, out_h, Out);
    space.fence();
    std::vector<double> result(size_t(out * p));
    for (size_type i = 0; i < out; ++i)
      for (size_type j = 0; j < p; ++j) result[size_t(i + j * out)] = double(out_h(j, i));
    return result;
  };
  GatherScratch<T> scratch;  // the sparse gather's partials, reused by every product below
  // X Z for a g x p Z: P = H X^T with H = Z^T (p x g)
  auto x_z = [&](const std::vector<double>& Z, size_type p) {
    return through_x(Z, p, g, n, [&](const Matrix<T>& Zt, const Matrix<T>& P) {
      X.x_times_ht(space, Zt, P, scratch);
    });
  };
  // X^T Y for an n x p Y: Q = W X with W = Y^T (p x n), summed over row blocks
  auto xt_y = [&](const std::vector<double>& Y, size_type p) {
    return through_x(Y, p, n, g, [&](const Matrix<T>& Yt, const Matrix<T>& Q) {
      X.wt_times_x(space, Yt, Q, scratch);
      X.reduce(space, Q);
    });
  };
  const auto svd = randomized_svd(n, g, k, seed, std::is_same_v<T, float>, x_z, xt_y);
  nndsvd_from_svd<T>(svd, n, g, k, kind, seed, mean, H_row_major, W_row_major);
}

}  // namespace knmf::detail
