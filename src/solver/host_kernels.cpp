#include "detail/host_kernels.hpp"
#include "detail/cd_step.hpp"
#include "detail/mu_value.hpp"

#include <type_traits>

#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__)
#define KNMF_X86_DISPATCH 1
#define KNMF_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#define KNMF_TARGET(isa) __attribute__((target(isa)))
#else
#define KNMF_X86_DISPATCH 0
#define KNMF_MULTIVERSION
#define KNMF_TARGET(isa)
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

/// The main block: NV vectors of VW values (GCC vector extensions, so the register block is
/// explicit: x broadcast once per entry, one multiply and one add per vector, no spills).
/// Same operations, same order per value as gather_block.
template <class T, int VW, int NV>
[[gnu::always_inline]] inline void gather_vblock(std::int64_t p0, std::int64_t p1,
                                                 const std::int32_t* __restrict__ entries,
                                                 const T* __restrict__ values,
                                                 const T* __restrict__ in, std::int64_t ld_in,
                                                 T* __restrict__ dst, std::int64_t rb,
                                                 bool accumulate) {
  typedef T vec __attribute__((vector_size(VW * sizeof(T)), aligned(sizeof(T))));
  vec acc[NV];
  for (int v = 0; v < NV; ++v) {
    if (accumulate)
      acc[v] = *reinterpret_cast<const vec*>(dst + rb + v * VW);
    else
      acc[v] = vec{};
  }
  constexpr int line = 64 / int(sizeof(T));  // values per cache line
  constexpr std::int64_t ahead = 6;          // entries prefetched ahead (random columns of in)
  for (std::int64_t p = p0; p < p1; ++p) {
    if (p + ahead < p1) {
      const T* next = in + std::int64_t(entries[p + ahead]) * ld_in + rb;
      for (int o = 0; o < VW * NV; o += line) __builtin_prefetch(next + o, 0, 3);
    }
    const vec x = vec{} + values[p];
    const T* __restrict__ src = in + std::int64_t(entries[p]) * ld_in + rb;
    for (int v = 0; v < NV; ++v) acc[v] += x * *reinterpret_cast<const vec*>(src + v * VW);
  }
  for (int v = 0; v < NV; ++v) *reinterpret_cast<vec*>(dst + rb + v * VW) = acc[v];
}

template <class T, int B>
[[gnu::always_inline]] inline void gather_tail(std::int64_t p0, std::int64_t p1,
                                               const std::int32_t* __restrict__ entries,
                                               const T* __restrict__ values, const T* __restrict__ in,
                                               std::int64_t ld_in, T* __restrict__ dst,
                                               std::int64_t rb, std::int64_t rows, bool accumulate) {
  if constexpr (B >= 1) {
    if (rb + B <= rows) {
      gather_block<T, B>(p0, p1, entries, values, in, ld_in, dst, rb, accumulate);
      rb += B;
    }
    gather_tail<T, B / 2>(p0, p1, entries, values, in, ld_in, dst, rb, rows, accumulate);
  }
}

/// Remainders of at least one vector: halving numbers of vectors.
template <class T, int VW, int NV>
[[gnu::always_inline]] inline void gather_vtail(std::int64_t p0, std::int64_t p1,
                                                const std::int32_t* __restrict__ entries,
                                                const T* __restrict__ values,
                                                const T* __restrict__ in, std::int64_t ld_in,
                                                T* __restrict__ dst, std::int64_t& rb,
                                                std::int64_t rows, bool accumulate) {
  if constexpr (NV >= 1) {
    if (rb + VW * NV <= rows) {
      gather_vblock<T, VW, NV>(p0, p1, entries, values, in, ld_in, dst, rb, accumulate);
      rb += VW * NV;
    }
    gather_vtail<T, VW, NV / 2>(p0, p1, entries, values, in, ld_in, dst, rb, rows, accumulate);
  }
}

template <class T, int VW, int NV>
[[gnu::always_inline]] inline void gather_impl(const std::int64_t* __restrict__ row_begin,
                        const std::int64_t* __restrict__ row_end, std::int64_t base,
                        const std::int32_t* __restrict__ entries, const T* __restrict__ values,
                        std::int64_t a0, std::int64_t a1, const T* __restrict__ in,
                        std::int64_t ld_in, T* __restrict__ out, std::int64_t ld_out,
                        std::int64_t rows, bool accumulate) {
  // row blocks outside, columns inside: the block of `in` that the columns gather from stays
  // in cache across the columns of the range
  constexpr int B = VW * NV;
  std::int64_t rb = 0;
  for (; rb + B <= rows; rb += B)
    for (std::int64_t a = a0; a < a1; ++a)
      gather_vblock<T, VW, NV>(row_begin[a] - base, row_end[a] - base, entries, values, in,
                               ld_in, out + a * ld_out, rb, accumulate);
  // the remainder (< B rows) in halving blocks: one pass per set bit of its size
  for (std::int64_t a = a0; a < a1; ++a) {
    const std::int64_t p0 = row_begin[a] - base, p1 = row_end[a] - base;
    T* __restrict__ dst = out + a * ld_out;
    std::int64_t r = rb;
    gather_vtail<T, VW, NV / 2>(p0, p1, entries, values, in, ld_in, dst, r, rows, accumulate);
    gather_tail<T, VW / 2>(p0, p1, entries, values, in, ld_in, dst, r, rows, accumulate);
  }
}

/// One column's sweep, scalar (the same operations in the same order as scikit-learn's loop).
template <class T>
[[gnu::always_inline]] inline void cd_column(const double* __restrict__ Gl, double l1, int k,
                                             T* __restrict__ f, const T* __restrict__ num,
                                             double& viol) {
  double column = 0.0;  // this column's |pg|, t in order; added to viol once
  for (int t = 0; t < k; ++t) {
    double grad = -cd_num_l1(num[t], l1);
    const double* __restrict__ g = Gl + std::int64_t(t) * k;
    for (int s2 = 0; s2 < k; ++s2) grad += g[s2] * double(f[s2]);
    const CdStep<double> step = cd_step(double(f[t]), grad, g[t]);
    column += step.violation;
    if (step.update) f[t] = T(step.value);
  }
  viol += column;
}

#if !defined(__CUDACC__)
/// NG groups of L columns, each group in the lanes of one vector (each lane does exactly the
/// scalar column's operations, in the same order); the NG groups' gradient sums side by side,
/// so that their additions overlap. Each lane sums its column's |pg| in t order; the columns'
/// sums are added to viol in column order (as cd_column does).
template <class T, int NG>
[[gnu::always_inline]] inline void cd_lane_groups(const double* __restrict__ Gl, double l1, int k,
                                                  T* __restrict__ F, const T* __restrict__ Num,
                                                  std::int64_t ld, std::int64_t row0,
                                                  std::int64_t i, double& viol) {
  constexpr int L = 8, KMAX = 64;
  typedef double lanes __attribute__((vector_size(L * sizeof(double))));
  typedef T tlanes __attribute__((vector_size(L * sizeof(T))));
  lanes fl[NG][KMAX], nl[NG][KMAX], pg[NG];
  for (int q = 0; q < NG; ++q)
    for (int l = 0; l < L; ++l) {
      const std::int64_t e = (i + q * L + l) * ld + row0;
      // the next groups' columns (a prefetch never faults)
      __builtin_prefetch(F + e + NG * L * ld, 1, 3);
      __builtin_prefetch(Num + e + NG * L * ld, 0, 3);
      if (k * sizeof(T) > 64) {
        __builtin_prefetch(F + e + NG * L * ld + 64 / sizeof(T), 1, 3);
        __builtin_prefetch(Num + e + NG * L * ld + 64 / sizeof(T), 0, 3);
      }
      for (int t = 0; t < k; ++t) {
        fl[q][t][l] = double(F[e + t]);
        nl[q][t][l] = cd_num_l1(Num[e + t], l1);
      }
    }
  for (int t = 0; t < k; ++t) {
    const double* __restrict__ g = Gl + std::int64_t(t) * k;
    lanes grad[NG];
    for (int q = 0; q < NG; ++q) grad[q] = -nl[q][t];
    if (t == 0)
      for (int q = 0; q < NG; ++q) pg[q] = lanes{};
    for (int s2 = 0; s2 < k; ++s2)
      for (int q = 0; q < NG; ++q) grad[q] += g[s2] * fl[q][s2];
    for (int q = 0; q < NG; ++q) {
      const CdStep<lanes> step = cd_step(fl[q][t], grad[q], g[t]);
      pg[q] += step.violation;
      if (step.update) {
        if constexpr (!std::is_same_v<T, double>)  // the scalar path stores f[t] in T
          fl[q][t] = __builtin_convertvector(__builtin_convertvector(step.value, tlanes), lanes);
        else
          fl[q][t] = step.value;
      }
    }
  }
  for (int q = 0; q < NG; ++q)
    for (int l = 0; l < L; ++l) {
      const std::int64_t e = (i + q * L + l) * ld + row0;
      for (int t = 0; t < k; ++t) F[e + t] = T(fl[q][t][l]);
      viol += pg[q][l];
    }
}
#endif

/// The sweep over columns [j0, j1). Columns are independent, so they run side by side in
/// vector lanes, 2 vectors of 8 at a time (then one, then one by one); the violation is each
/// column's |pg| summed in t order, the columns' sums added in column order.
template <class T>
[[gnu::always_inline]] inline double cd_impl(const double* __restrict__ Gl, double l1, int k,
                                             T* __restrict__ F, const T* __restrict__ Num,
                                             std::int64_t ld, std::int64_t row0, std::int64_t j0,
                                             std::int64_t j1) {
  double viol = 0.0;
  std::int64_t i = j0;
  // Not under nvcc: it rejects cd_step, a __host__ __device__ template, instantiated with a
  // vector type, and a CUDA build never runs the host sweeps (host_tuned_kernels is false
  // there); its columns all take the scalar path below.
#if !defined(__CUDACC__)
  constexpr int KMAX = 64;  // cd_lane_groups' arrays
  if (k <= KMAX) {
    constexpr int NG = 2;  // measured: 2 groups ~10% faster than 1, 4 no faster
    for (; i + NG * 8 <= j1; i += NG * 8) cd_lane_groups<T, NG>(Gl, l1, k, F, Num, ld, row0, i, viol);
    for (; i + 8 <= j1; i += 8) cd_lane_groups<T, 1>(Gl, l1, k, F, Num, ld, row0, i, viol);
  }
#endif
  for (; i < j1; ++i) {
    cd_column(Gl, l1, k, F + i * ld + row0, Num + i * ld + row0, viol);
  }
  return viol;
}

/// The Frobenius MU value of 8 consecutive t of one column: mu_value's operations lane by
/// lane, in T (the same IEEE operations as the scalar epilogue, so the same results).
template <class T>
[[gnu::always_inline]] inline void mu_values8(const double* __restrict__ den, const T* f,
                                              const T* num, T* out, double l1, double l2,
                                              bool add_eps, double eps) {
  typedef T tvec __attribute__((vector_size(8 * sizeof(T)), aligned(sizeof(T))));
  typedef double dvec __attribute__((vector_size(8 * sizeof(double)), aligned(sizeof(double))));
  const dvec dd = *reinterpret_cast<const dvec*>(den);
  const tvec fv = *reinterpret_cast<const tvec*>(f);
  const tvec nv = *reinterpret_cast<const tvec*>(num);
  tvec d = __builtin_convertvector(dd, tvec);
  if (l1 > 0) d += T(l1);
  if (l2 > 0) d = d + T(l2) * fv;
  if (add_eps)
    d += T(eps);
  else
    d = d == T(0) ? tvec{} + T(sklearn_epsilon) : d;
  *reinterpret_cast<tvec*>(out) = fv * (nv / d);
}

/// MU of C columns of one slot from column i, vectorized along t: each den(t) is
/// sum over s in order of double(F(s, i)) * G(s, t), starting from 0 (the scalar kernel's
/// operations and order; Gp is G with rows padded to NV * 8 values by zeros), C columns side by
/// side so that their C * NV accumulators hide the additions' latency.
template <class T, int NV, int C>
[[gnu::always_inline]] inline void mu_columns(const double* __restrict__ Gp, int k, const T* F,
                                              const T* Num, T* out, std::int64_t ld,
                                              std::int64_t row0, std::int64_t i, double l1,
                                              double l2, bool add_eps, double eps) {
  typedef double dvec __attribute__((vector_size(8 * sizeof(double))));
  dvec den[C][NV];
  for (int c = 0; c < C; ++c)
    for (int v = 0; v < NV; ++v) den[c][v] = dvec{};
  for (int s = 0; s < k; ++s) {
    dvec fs[C];
    for (int c = 0; c < C; ++c) fs[c] = dvec{} + double(F[(i + c) * ld + row0 + s]);
    const dvec* g = reinterpret_cast<const dvec*>(Gp + std::int64_t(s) * NV * 8);
    for (int v = 0; v < NV; ++v)
      for (int c = 0; c < C; ++c) den[c][v] += fs[c] * g[v];
  }
  for (int c = 0; c < C; ++c) {
    alignas(64) double dn[NV * 8];
    for (int v = 0; v < NV; ++v) *reinterpret_cast<dvec*>(dn + v * 8) = den[c][v];
    const std::int64_t e0 = (i + c) * ld + row0;
    int t = 0;
    for (; t + 8 <= k; t += 8)
      mu_values8(dn + t, F + e0 + t, Num + e0 + t, out + e0 + t, l1, l2, add_eps, eps);
    for (; t < k; ++t) out[e0 + t] = mu_value(dn[t], F[e0 + t], Num[e0 + t], l1, l2, add_eps, eps);
  }
}

template <class T, int NV>
[[gnu::always_inline]] inline void mu_range(const double* __restrict__ Gp, int k, const T* F,
                                            const T* Num, T* out, std::int64_t ld,
                                            std::int64_t row0, std::int64_t j0, std::int64_t j1,
                                            double l1, double l2, bool add_eps, double eps) {
  constexpr int C = NV <= 2 ? 4 : NV <= 4 ? 2 : 1;
  constexpr std::int64_t PD = 16;  // columns prefetched ahead (a prefetch never faults)
  std::int64_t i = j0;
  for (; i + C <= j1; i += C) {
    for (int c = 0; c < C; ++c) {
      const std::int64_t e = (i + c + PD) * ld + row0;
      __builtin_prefetch(F + e, 0, 3);
      __builtin_prefetch(Num + e, 0, 3);
      if (k * sizeof(T) > 64) {
        __builtin_prefetch(F + e + 64 / sizeof(T), 0, 3);
        __builtin_prefetch(Num + e + 64 / sizeof(T), 0, 3);
      }
    }
    mu_columns<T, NV, C>(Gp, k, F, Num, out, ld, row0, i, l1, l2, add_eps, eps);
  }
  for (; i < j1; ++i) mu_columns<T, NV, 1>(Gp, k, F, Num, out, ld, row0, i, l1, l2, add_eps, eps);
}

/// MU of one slot over columns [j0, j1): per column, den(t) = sum_s F(s, i) G(s, t) in double
/// (s in order) and the epilogue mu_value, as the portable kernel computes them.
template <class T>
[[gnu::always_inline]] inline void mu_impl(const double* __restrict__ G, int k, const T* F,
                                           const T* Num, T* out, std::int64_t ld,
                                           std::int64_t row0, std::int64_t j0, std::int64_t j1,
                                           double l1, double l2, bool add_eps, double eps) {
  constexpr int KMAX = 64;
  if (k <= KMAX) {
    const int nv = (k + 7) / 8;
    alignas(64) double Gp[KMAX * KMAX];
    for (int s = 0; s < k; ++s)
      for (int t = 0; t < nv * 8; ++t) Gp[s * nv * 8 + t] = t < k ? G[s * k + t] : 0.0;
    switch (nv) {
#define KNMF_MU_NV(N) \
  case N: mu_range<T, N>(Gp, k, F, Num, out, ld, row0, j0, j1, l1, l2, add_eps, eps); return;
      KNMF_MU_NV(1) KNMF_MU_NV(2) KNMF_MU_NV(3) KNMF_MU_NV(4)
      KNMF_MU_NV(5) KNMF_MU_NV(6) KNMF_MU_NV(7) KNMF_MU_NV(8)
#undef KNMF_MU_NV
    }
  }
  for (std::int64_t i = j0; i < j1; ++i) {
    const T* f = F + i * ld + row0;
    for (int t = 0; t < k; ++t) {
      double den = 0.0;
      for (int s = 0; s < k; ++s) den += double(f[s]) * G[s * k + t];
      const std::int64_t e = i * ld + row0 + t;
      out[e] = mu_value(den, f[t], Num[e], l1, l2, add_eps, eps);
    }
  }
}

/// Rows [s0, s0 + SB) of a slot's Gram, vectors [v0, v0 + M) of t (8 values each), over the
/// columns of a block converted to double (`cols`: `count` columns of `stride` values each,
/// zero past k): a[s][v] += col[s] * col[t], columns in order, SB * M accumulators in registers,
/// loaded from and stored to the padded accumulator `accp` (rows of `stride` values).
template <int SB, int M>
[[gnu::always_inline]] inline void gram_tile(int s0, int v0, int stride,
                                             const double* __restrict__ cols, int count,
                                             double* __restrict__ accp) {
  typedef double dvec __attribute__((vector_size(8 * sizeof(double))));
  dvec a[SB][M];
  for (int r = 0; r < SB; ++r)
    for (int m = 0; m < M; ++m)
      a[r][m] = *reinterpret_cast<const dvec*>(accp + (s0 + r) * stride + (v0 + m) * 8);
  for (int i = 0; i < count; ++i) {
    const double* col = cols + std::int64_t(i) * stride;
    dvec c[M];
    for (int m = 0; m < M; ++m) c[m] = *reinterpret_cast<const dvec*>(col + (v0 + m) * 8);
    for (int r = 0; r < SB; ++r) {
      const dvec fs = dvec{} + col[s0 + r];
      for (int m = 0; m < M; ++m) a[r][m] += fs * c[m];
    }
  }
  for (int r = 0; r < SB; ++r)
    for (int m = 0; m < M; ++m)
      *reinterpret_cast<dvec*>(accp + (s0 + r) * stride + (v0 + m) * 8) = a[r][m];
}

template <int SB>
[[gnu::always_inline]] inline void gram_rows(int s0, int nv, const double* cols, int count,
                                             double* accp) {
  const int v0 = s0 / 8;  // the vectors of t from the one holding s0: the upper triangle
  switch (nv - v0) {
#define KNMF_GRAM_M(N) \
  case N: gram_tile<SB, N>(s0, v0, nv * 8, cols, count, accp); break;
    KNMF_GRAM_M(1) KNMF_GRAM_M(2) KNMF_GRAM_M(3) KNMF_GRAM_M(4)
    KNMF_GRAM_M(5) KNMF_GRAM_M(6) KNMF_GRAM_M(7) KNMF_GRAM_M(8)
#undef KNMF_GRAM_M
  }
}

/// A slot's Gram over a column range: acc (k x k, row-major, both triangles) =
/// sum over i in order of double(F(s, i)) * double(F(t, i)). The columns in blocks of IB,
/// each block converted to double once (zero-padded to whole vectors, in L1), then the upper
/// triangle in register tiles (4 rows of s by the vectors of t from the one holding s); the
/// lower triangle is the same products (f_s f_t and f_t f_s are one IEEE product), mirrored.
template <class T>
[[gnu::always_inline]] inline void gram_impl(int k, const T* __restrict__ F, std::int64_t ld,
                                             std::int64_t row0, std::int64_t j0, std::int64_t j1,
                                             double* __restrict__ acc) {
  constexpr int KMAX = 64, SB = 4, IB = 64;
  if (k > KMAX) {
    for (int p = 0; p < k * k; ++p) acc[p] = 0.0;
    for (std::int64_t i = j0; i < j1; ++i) {
      const T* col = F + i * ld + row0;
      for (int s = 0; s < k; ++s) {
        const double fs = double(col[s]);
        for (int t = 0; t < k; ++t) acc[s * k + t] += fs * double(col[t]);
      }
    }
    return;
  }
  const int nv = (k + 7) / 8, stride = nv * 8;
  alignas(64) double accp[KMAX * KMAX];
  alignas(64) double block[IB * KMAX];
  for (int p = 0; p < k * stride; ++p) accp[p] = 0.0;
  for (std::int64_t i0 = j0; i0 < j1; i0 += IB) {
    const int count = int(i0 + IB < j1 ? IB : j1 - i0);
    for (int c = 0; c < count; ++c) {
      const T* col = F + (i0 + c) * ld + row0;
      // the slot's values of a column further on (a prefetch never faults)
      __builtin_prefetch(col + 2 * IB * ld, 0, 3);
      __builtin_prefetch(col + 2 * IB * ld + 64 / sizeof(T), 0, 3);
      double* dst = block + c * stride;
      for (int t = 0; t < k; ++t) dst[t] = double(col[t]);
      for (int t = k; t < stride; ++t) dst[t] = 0.0;
    }
    int s0 = 0;
    for (; s0 + SB <= k; s0 += SB) gram_rows<SB>(s0, nv, block, count, accp);
    for (; s0 < k; ++s0) gram_rows<1>(s0, nv, block, count, accp);
  }
  for (int s = 0; s < k; ++s)
    for (int t = 0; t < k; ++t)
      acc[s * k + t] = t >= s ? accp[s * stride + t] : accp[t * stride + s];
}

}  // namespace

KNMF_MULTIVERSION
void host_mu_update(const double* G, int k, const double* F, const double* Num, double* out,
                    std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1,
                    double l1, double l2, bool add_eps, double eps) {
  mu_impl(G, k, F, Num, out, ld, row0, j0, j1, l1, l2, add_eps, eps);
}

KNMF_MULTIVERSION
void host_mu_update(const double* G, int k, const float* F, const float* Num, float* out,
                    std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1,
                    double l1, double l2, bool add_eps, double eps) {
  mu_impl(G, k, F, Num, out, ld, row0, j0, j1, l1, l2, add_eps, eps);
}

KNMF_MULTIVERSION
void host_slot_gram(int k, const double* F, std::int64_t ld, std::int64_t row0, std::int64_t j0,
                    std::int64_t j1, double* acc) {
  gram_impl(k, F, ld, row0, j0, j1, acc);
}

KNMF_MULTIVERSION
void host_slot_gram(int k, const float* F, std::int64_t ld, std::int64_t row0, std::int64_t j0,
                    std::int64_t j1, double* acc) {
  gram_impl(k, F, ld, row0, j0, j1, acc);
}

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

// The gathers: one variant per vector width with a register block to match (32 zmm, 16 ymm,
// 16 xmm registers), chosen once from the CPU's features.
#define KNMF_GATHER_VARIANT(NAME, ISA, T, VW, NV)                                                 \
  KNMF_TARGET(ISA)                                                                                 \
  void NAME(const std::int64_t* row_begin, const std::int64_t* row_end, std::int64_t base,        \
            const std::int32_t* entries, const T* values, std::int64_t a0, std::int64_t a1,        \
            const T* in, std::int64_t ld_in, T* out, std::int64_t ld_out, std::int64_t rows,       \
            bool accumulate) {                                                                     \
    gather_impl<T, VW, NV>(row_begin, row_end, base, entries, values, a0, a1, in, ld_in, out,      \
                           ld_out, rows, accumulate);                                              \
  }

namespace {
#if KNMF_X86_DISPATCH
KNMF_GATHER_VARIANT(gather_d512, "avx512f", double, 8, 8)
KNMF_GATHER_VARIANT(gather_f512, "avx512f", float, 16, 8)
KNMF_GATHER_VARIANT(gather_d256, "avx2", double, 4, 8)
KNMF_GATHER_VARIANT(gather_f256, "avx2", float, 8, 8)
#endif
KNMF_GATHER_VARIANT(gather_dbase, "default", double, 2, 4)
KNMF_GATHER_VARIANT(gather_fbase, "default", float, 4, 4)

#if KNMF_X86_DISPATCH
int vector_level() {
  static const int level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 2;
    if (__builtin_cpu_supports("avx2")) return 1;
    return 0;
  }();
  return level;
}
// the variant for this CPU's widest vectors
#define KNMF_PICK_GATHER(v512, v256, base) \
  (vector_level() == 2 ? v512 : vector_level() == 1 ? v256 : base)
#else
#define KNMF_PICK_GATHER(v512, v256, base) base
#endif
}  // namespace

void host_gather_ranges(const std::int64_t* row_begin, const std::int64_t* row_end,
                        std::int64_t base, const std::int32_t* entries, const double* values,
                        std::int64_t a0, std::int64_t a1, const double* in, std::int64_t ld_in,
                        double* out, std::int64_t ld_out, std::int64_t rows, bool accumulate) {
  KNMF_PICK_GATHER(gather_d512, gather_d256, gather_dbase)
  (row_begin, row_end, base, entries, values, a0, a1, in, ld_in, out, ld_out, rows, accumulate);
}

void host_gather_ranges(const std::int64_t* row_begin, const std::int64_t* row_end,
                        std::int64_t base, const std::int32_t* entries, const float* values,
                        std::int64_t a0, std::int64_t a1, const float* in, std::int64_t ld_in,
                        float* out, std::int64_t ld_out, std::int64_t rows, bool accumulate) {
  KNMF_PICK_GATHER(gather_f512, gather_f256, gather_fbase)
  (row_begin, row_end, base, entries, values, a0, a1, in, ld_in, out, ld_out, rows, accumulate);
}

}  // namespace knmf::detail
