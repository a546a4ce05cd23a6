#include "detail/host_kernels.hpp"

#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__)
#define KNMF_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KNMF_MULTIVERSION
#endif

namespace knmf::detail {

namespace {

/// Rows [rb, rb + B) of output column a, accumulated in registers over the row of A.
template <class T, int B>
[[gnu::always_inline]] inline void gather_block(std::int64_t p0, std::int64_t p1, const std::int32_t* __restrict__ entries,
                         const T* __restrict__ values, const T* __restrict__ in, std::int64_t ld_in,
                         T* __restrict__ dst, std::int64_t rb, bool accumulate) {
  T acc[B];
  if (accumulate) {
    for (int r = 0; r < B; ++r) acc[r] = dst[rb + r];
  } else {
    for (int r = 0; r < B; ++r) acc[r] = T(0);
  }
  for (std::int64_t p = p0; p < p1; ++p) {
    const T x = values[p];
    const T* __restrict__ src = in + std::int64_t(entries[p]) * ld_in + rb;
    for (int r = 0; r < B; ++r) acc[r] += x * src[r];
  }
  for (int r = 0; r < B; ++r) dst[rb + r] = acc[r];
}

template <class T, int B>
[[gnu::always_inline]] inline void gather_impl(const std::int64_t* __restrict__ row_map, std::int64_t base,
                        const std::int32_t* __restrict__ entries, const T* __restrict__ values,
                        std::int64_t a0, std::int64_t a1, const T* __restrict__ in,
                        std::int64_t ld_in, T* __restrict__ out, std::int64_t ld_out,
                        std::int64_t rows, bool accumulate) {
  for (std::int64_t a = a0; a < a1; ++a) {
    const std::int64_t p0 = row_map[a] - base, p1 = row_map[a + 1] - base;
    T* __restrict__ dst = out + a * ld_out;
    std::int64_t rb = 0;
    for (; rb + B <= rows; rb += B) gather_block<T, B>(p0, p1, entries, values, in, ld_in, dst, rb, accumulate);
    // the remainder in halving blocks: at most log2(B) more passes over the row
    if (rb + B / 2 <= rows) {
      gather_block<T, B / 2>(p0, p1, entries, values, in, ld_in, dst, rb, accumulate);
      rb += B / 2;
    }
    if (rb + B / 4 <= rows) {
      gather_block<T, B / 4>(p0, p1, entries, values, in, ld_in, dst, rb, accumulate);
      rb += B / 4;
    }
    if (rb + B / 8 <= rows) {
      gather_block<T, B / 8>(p0, p1, entries, values, in, ld_in, dst, rb, accumulate);
      rb += B / 8;
    }
    if (rb + 2 <= rows) {
      gather_block<T, 2>(p0, p1, entries, values, in, ld_in, dst, rb, accumulate);
      rb += 2;
    }
    if (rb < rows) gather_block<T, 1>(p0, p1, entries, values, in, ld_in, dst, rb, accumulate);
  }
}

/// One column's sweep, scalar (the same operations in the same order as scikit-learn's loop).
template <class T>
[[gnu::always_inline]] inline void cd_column(const double* __restrict__ Gl, double l1, int k,
                                             T* __restrict__ f, const T* __restrict__ num,
                                             double* __restrict__ pgs) {
  for (int t = 0; t < k; ++t) {
    const T xht = T(num[t] - T(l1));
    double grad = -double(xht);
    const double* __restrict__ g = Gl + std::int64_t(t) * k;
    for (int s2 = 0; s2 < k; ++s2) grad += g[s2] * double(f[s2]);
    const T w = f[t];
    const double pg = (w == T(0)) ? (grad < 0.0 ? grad : 0.0) : grad;
    pgs[t] = pg < 0 ? -pg : pg;
    const double hess = g[t];
    if (hess != 0.0) {
      const double nw = double(w) - grad / hess;
      f[t] = T(nw > 0.0 ? nw : 0.0);
    }
  }
}

/// The sweep over columns [j0, j1). Columns are independent, so L of them run side by side in
/// vector lanes (each lane does exactly the scalar column's operations, in the same order);
/// the violation is summed afterwards in (column, t) order.
template <class T>
[[gnu::always_inline]] inline double cd_impl(const double* __restrict__ Gl, double l1, int k,
                                             T* __restrict__ F, const T* __restrict__ Num,
                                             std::int64_t ld, std::int64_t row0, std::int64_t j0,
                                             std::int64_t j1) {
  constexpr int L = 8, KMAX = 64;
  double viol = 0.0;
  double pgs[L * KMAX];
  std::int64_t i = j0;
  if (k <= KMAX) {
    for (; i + L <= j1; i += L) {
      double fl[KMAX][L], nl[KMAX][L];
      for (int l = 0; l < L; ++l)
        for (int t = 0; t < k; ++t) {
          fl[t][l] = double(F[(i + l) * ld + row0 + t]);
          nl[t][l] = double(T(Num[(i + l) * ld + row0 + t] - T(l1)));
        }
      for (int t = 0; t < k; ++t) {
        const double* __restrict__ g = Gl + std::int64_t(t) * k;
        double grad[L];
        for (int l = 0; l < L; ++l) grad[l] = -nl[t][l];
        for (int s2 = 0; s2 < k; ++s2)
          for (int l = 0; l < L; ++l) grad[l] += g[s2] * fl[s2][l];
        const double hess = g[t];
        for (int l = 0; l < L; ++l) {
          const double w = fl[t][l];
          const double pg = (w == 0.0) ? (grad[l] < 0.0 ? grad[l] : 0.0) : grad[l];
          pgs[l * KMAX + t] = pg < 0 ? -pg : pg;
          const double nw = w - grad[l] / hess;
          // T(...) rounds as the scalar path stores f[t] in T
          fl[t][l] = hess != 0.0 ? double(T(nw > 0.0 ? nw : 0.0)) : w;
        }
      }
      for (int l = 0; l < L; ++l) {
        for (int t = 0; t < k; ++t) {
          F[(i + l) * ld + row0 + t] = T(fl[t][l]);
          viol += pgs[l * KMAX + t];
        }
      }
    }
  }
  for (; i < j1; ++i) {
    cd_column(Gl, l1, k, F + i * ld + row0, Num + i * ld + row0, pgs);
    for (int t = 0; t < k; ++t) viol += pgs[t];
  }
  return viol;
}

}  // namespace

KNMF_MULTIVERSION
double host_cd_sweep(const double* Gl, double l1, int k, double* F, const double* Num,
                     std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1) {
  return cd_impl(Gl, l1, k, F, Num, ld, row0, j0, j1);
}

KNMF_MULTIVERSION
double host_cd_sweep(const double* Gl, double l1, int k, float* F, const float* Num,
                     std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1) {
  return cd_impl(Gl, l1, k, F, Num, ld, row0, j0, j1);
}

KNMF_MULTIVERSION
void host_gather(const std::int64_t* row_map, std::int64_t base, const std::int32_t* entries,
                 const double* values, std::int64_t a0, std::int64_t a1, const double* in,
                 std::int64_t ld_in, double* out, std::int64_t ld_out, std::int64_t rows,
                 bool accumulate) {
  gather_impl<double, 16>(row_map, base, entries, values, a0, a1, in, ld_in, out, ld_out, rows,
                          accumulate);
}

KNMF_MULTIVERSION
void host_gather(const std::int64_t* row_map, std::int64_t base, const std::int32_t* entries,
                 const float* values, std::int64_t a0, std::int64_t a1, const float* in,
                 std::int64_t ld_in, float* out, std::int64_t ld_out, std::int64_t rows,
                 bool accumulate) {
  gather_impl<float, 32>(row_map, base, entries, values, a0, a1, in, ld_in, out, ld_out, rows,
                         accumulate);
}

}  // namespace knmf::detail
