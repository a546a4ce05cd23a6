#include "detail/host_kernels.hpp"
#include "detail/cd_step.hpp"
#include "detail/mu_value.hpp"

#include <type_traits>

#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

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
constexpr int cd_lanes_l = 8;  // columns per vector of lanes
constexpr int cd_kmax = 64;    // the lane sweeps' arrays: k above this takes cd_column
typedef double cd_lanes_t __attribute__((vector_size(cd_lanes_l * sizeof(double))));

/// The coordinate updates of NG groups of L columns, each group in the lanes of one vector
/// (each lane does exactly the scalar column's operations, in the same order: cd_column); the
/// NG groups' gradient sums side by side, so that their additions overlap. fl and nl hold the
/// columns' F and cd_num_l1(Num) by t; each lane's |pg| is summed in t order into pg.
/// Defined twice from one text: for the baseline ISA (the target clones) and inside an
/// AVX-512 target, where the step's vector comparisons become mask compares and blends
/// (KNMF_CD_STEP, cd_step.hpp, says why the step cannot be a function there).
#define KNMF_DEFINE_CD_LANES_SWEEP(NAME, ATTRIBUTES)                                          \
  template <class T, int NG>                                                                 \
  ATTRIBUTES [[gnu::always_inline]] inline void NAME(                                        \
      const double* __restrict__ Gl, int k, cd_lanes_t (*fl)[cd_kmax],                       \
      const cd_lanes_t (*nl)[cd_kmax], cd_lanes_t* pg) {                                     \
    typedef T tlanes __attribute__((vector_size(cd_lanes_l * sizeof(T))));                   \
    for (int q = 0; q < NG; ++q) pg[q] = cd_lanes_t{};                                       \
    for (int t = 0; t < k; ++t) {                                                            \
      const double* __restrict__ g = Gl + std::int64_t(t) * k;                               \
      cd_lanes_t grad[NG];                                                                   \
      for (int q = 0; q < NG; ++q) grad[q] = -nl[q][t];                                      \
      for (int s2 = 0; s2 < k; ++s2)                                                         \
        for (int q = 0; q < NG; ++q) grad[q] += g[s2] * fl[q][s2];                           \
      for (int q = 0; q < NG; ++q) {                                                         \
        KNMF_CD_STEP(cd_lanes_t, step, fl[q][t], grad[q], g[t])                              \
        pg[q] += step.violation;                                                             \
        if (step.update) {                                                                   \
          if constexpr (!std::is_same_v<T, double>) /* the scalar path stores f[t] in T */   \
            fl[q][t] = __builtin_convertvector(__builtin_convertvector(step.value, tlanes),  \
                                               cd_lanes_t);                                  \
          else                                                                               \
            fl[q][t] = step.value;                                                           \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }

KNMF_DEFINE_CD_LANES_SWEEP(cd_lanes_sweep, )

/// NG groups of L columns from column i: loaded into lanes value by value, swept
/// (cd_lanes_sweep), stored back; the columns' |pg| sums are added to viol in column order
/// (as cd_column does).
template <class T, int NG>
[[gnu::always_inline]] inline void cd_lane_groups(const double* __restrict__ Gl, double l1, int k,
                                                  T* __restrict__ F, const T* __restrict__ Num,
                                                  std::int64_t ld, std::int64_t row0,
                                                  std::int64_t i, double& viol) {
  constexpr int L = cd_lanes_l;
  cd_lanes_t fl[NG][cd_kmax], nl[NG][cd_kmax], pg[NG];
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
  cd_lanes_sweep<T, NG>(Gl, k, fl, nl, pg);
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
  if (k <= cd_kmax) {
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

#if KNMF_X86_DISPATCH
KNMF_DEFINE_CD_LANES_SWEEP(cd_lanes_sweep_512, KNMF_TARGET("avx512f"))

/// 8 x 8 transpose of doubles: r[l] (lanes by t) becomes r[t] (lanes by l); three rounds
/// of two-vector shuffles (GCC emits vunpck / vpermt2pd).
KNMF_TARGET("avx512f") [[gnu::always_inline]] inline void transpose8x8(cd_lanes_t* r) {
  typedef long long idx __attribute__((vector_size(64)));
  const idx lo = {0, 8, 2, 10, 4, 12, 6, 14}, hi = {1, 9, 3, 11, 5, 13, 7, 15};
  const idx i1 = {0, 1, 8, 9, 4, 5, 12, 13}, i2 = {2, 3, 10, 11, 6, 7, 14, 15};
  const idx i3 = {0, 1, 2, 3, 8, 9, 10, 11}, i4 = {4, 5, 6, 7, 12, 13, 14, 15};
  cd_lanes_t t[8], u[8];
  for (int j = 0; j < 4; ++j) {
    t[2 * j] = __builtin_shuffle(r[2 * j], r[2 * j + 1], lo);
    t[2 * j + 1] = __builtin_shuffle(r[2 * j], r[2 * j + 1], hi);
  }
  for (int j = 0; j < 2; ++j) {  // u: rows 4j..4j+3 of lanes {0, 4}, {2, 6}, {1, 5}, {3, 7}
    u[4 * j] = __builtin_shuffle(t[4 * j], t[4 * j + 2], i1);
    u[4 * j + 1] = __builtin_shuffle(t[4 * j], t[4 * j + 2], i2);
    u[4 * j + 2] = __builtin_shuffle(t[4 * j + 1], t[4 * j + 3], i1);
    u[4 * j + 3] = __builtin_shuffle(t[4 * j + 1], t[4 * j + 3], i2);
  }
  r[0] = __builtin_shuffle(u[0], u[4], i3);
  r[4] = __builtin_shuffle(u[0], u[4], i4);
  r[2] = __builtin_shuffle(u[1], u[5], i3);
  r[6] = __builtin_shuffle(u[1], u[5], i4);
  r[1] = __builtin_shuffle(u[2], u[6], i3);
  r[5] = __builtin_shuffle(u[2], u[6], i4);
  r[3] = __builtin_shuffle(u[3], u[7], i3);
  r[7] = __builtin_shuffle(u[3], u[7], i4);
}

/// Up to 8 consecutive values (mask m) of a column as doubles; Num's as cd_num_l1 (the same
/// IEEE operations per value, in T, as the scalar path).
KNMF_TARGET("avx512f") [[gnu::always_inline]] inline cd_lanes_t cd_load8(const double* p,
                                                                        __mmask8 m) {
  return cd_lanes_t(_mm512_maskz_loadu_pd(m, p));
}
typedef float cd_f8 __attribute__((vector_size(32)));
typedef float cd_f16 __attribute__((vector_size(64)));
KNMF_TARGET("avx512f") [[gnu::always_inline]] inline cd_f8 cd_low8(__m512 v) {
  const cd_f16 w = cd_f16(v);
  return __builtin_shufflevector(w, w, 0, 1, 2, 3, 4, 5, 6, 7);
}
KNMF_TARGET("avx512f") [[gnu::always_inline]] inline cd_lanes_t cd_load8(const float* p,
                                                                        __mmask8 m) {
  return __builtin_convertvector(cd_low8(_mm512_maskz_loadu_ps(__mmask16(m), p)), cd_lanes_t);
}
KNMF_TARGET("avx512f") [[gnu::always_inline]] inline cd_lanes_t cd_load8_num(const double* p,
                                                                            __mmask8 m,
                                                                            double l1) {
  return cd_lanes_t(_mm512_sub_pd(_mm512_maskz_loadu_pd(m, p), _mm512_set1_pd(l1)));
}
KNMF_TARGET("avx512f") [[gnu::always_inline]] inline cd_lanes_t cd_load8_num(const float* p,
                                                                            __mmask8 m,
                                                                            double l1) {
  const cd_f8 v = cd_low8(_mm512_maskz_loadu_ps(__mmask16(m), p)) - float(l1);
  return __builtin_convertvector(v, cd_lanes_t);
}
KNMF_TARGET("avx512f") [[gnu::always_inline]] inline void cd_store8(double* p, __mmask8 m,
                                                                   cd_lanes_t v) {
  _mm512_mask_storeu_pd(p, m, __m512d(v));
}
KNMF_TARGET("avx512f") [[gnu::always_inline]] inline void cd_store8(float* p, __mmask8 m,
                                                                   cd_lanes_t v) {
  const cd_f8 f = __builtin_convertvector(v, cd_f8);  // rounded to float, as T(value)
  _mm512_mask_storeu_ps(
      p, __mmask16(m),
      __m512(__builtin_shufflevector(f, f, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7)));
}

/// cd_lane_groups with AVX-512 loads and stores: each column's values for 8 values of t come
/// in one masked load (only the column's own values are read and written: the other slots'
/// values beside them belong to other tasks), 8 columns at a time transposed in registers into
/// lanes by t and back. The sweep itself is cd_lanes_sweep's, so the numbers are the same.
template <class T, int NG>
KNMF_TARGET("avx512f") [[gnu::always_inline]] inline void cd_lane_groups_512(
    const double* __restrict__ Gl, double l1, int k, T* __restrict__ F,
    const T* __restrict__ Num, std::int64_t ld, std::int64_t row0, std::int64_t i,
    double& viol) {
  constexpr int L = cd_lanes_l;
  cd_lanes_t fl[NG][cd_kmax], nl[NG][cd_kmax], pg[NG];
  for (int q = 0; q < NG; ++q)
    for (int c = 0; c * 8 < k; ++c) {
      const int kc = k - c * 8 < 8 ? k - c * 8 : 8;
      const __mmask8 m = __mmask8((1u << kc) - 1);
      cd_lanes_t rf[8], rn[8];
      for (int l = 0; l < L; ++l) {
        const std::int64_t e = (i + q * L + l) * ld + row0 + c * 8;
        __builtin_prefetch(F + e + NG * L * ld, 1, 3);  // the next groups' columns
        __builtin_prefetch(Num + e + NG * L * ld, 0, 3);
        rf[l] = cd_load8(F + e, m);
        rn[l] = cd_load8_num(Num + e, m, l1);
      }
      transpose8x8(rf);
      transpose8x8(rn);
      for (int j = 0; j < kc; ++j) {
        fl[q][c * 8 + j] = rf[j];
        nl[q][c * 8 + j] = rn[j];
      }
    }
  cd_lanes_sweep_512<T, NG>(Gl, k, fl, nl, pg);
  for (int q = 0; q < NG; ++q) {
    for (int c = 0; c * 8 < k; ++c) {
      const int kc = k - c * 8 < 8 ? k - c * 8 : 8;
      const __mmask8 m = __mmask8((1u << kc) - 1);
      cd_lanes_t r[8];
      for (int j = 0; j < 8; ++j) r[j] = j < kc ? fl[q][c * 8 + j] : cd_lanes_t{};
      transpose8x8(r);
      for (int l = 0; l < L; ++l) cd_store8(F + (i + q * L + l) * ld + row0 + c * 8, m, r[l]);
    }
    for (int l = 0; l < L; ++l) viol += pg[q][l];
  }
}

/// cd_impl on AVX-512: 4 groups of 8 columns at a time (measured on a Xeon with AVX-512:
/// 1.6-1.7x cd_impl's sweep at k = 5 and 8, where the value-by-value loads and stores took
/// about 40% of its time), then groups of 8, then one by one.
template <class T>
KNMF_TARGET("avx512f") [[gnu::always_inline]] inline double cd_impl_512(
    const double* __restrict__ Gl, double l1, int k, T* __restrict__ F,
    const T* __restrict__ Num, std::int64_t ld, std::int64_t row0, std::int64_t j0,
    std::int64_t j1) {
  double viol = 0.0;
  std::int64_t i = j0;
  if (k <= cd_kmax) {
    constexpr int NG = 4;
    for (; i + NG * 8 <= j1; i += NG * 8)
      cd_lane_groups_512<T, NG>(Gl, l1, k, F, Num, ld, row0, i, viol);
    for (; i + 8 <= j1; i += 8) cd_lane_groups_512<T, 1>(Gl, l1, k, F, Num, ld, row0, i, viol);
  }
  for (; i < j1; ++i) cd_column(Gl, l1, k, F + i * ld + row0, Num + i * ld + row0, viol);
  return viol;
}
#endif

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

namespace {
// The CD sweeps: cd_impl in every clone, and cd_impl_512 where AVX-512 is (host_cd_sweep
// below picks).
KNMF_MULTIVERSION
double cd_sweep_any(const double* Gl, double l1, int k, double* F, const double* Num,
                    std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1) {
  return cd_impl(Gl, l1, k, F, Num, ld, row0, j0, j1);
}

KNMF_MULTIVERSION
double cd_sweep_any(const double* Gl, double l1, int k, float* F, const float* Num,
                    std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1) {
  return cd_impl(Gl, l1, k, F, Num, ld, row0, j0, j1);
}

#if KNMF_X86_DISPATCH
KNMF_TARGET("avx512f")
double cd_sweep_512(const double* Gl, double l1, int k, double* F, const double* Num,
                    std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1) {
  return cd_impl_512(Gl, l1, k, F, Num, ld, row0, j0, j1);
}

KNMF_TARGET("avx512f")
double cd_sweep_512(const double* Gl, double l1, int k, float* F, const float* Num,
                    std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1) {
  return cd_impl_512(Gl, l1, k, F, Num, ld, row0, j0, j1);
}
#endif
}  // namespace

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

double host_cd_sweep(const double* Gl, double l1, int k, double* F, const double* Num,
                     std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1) {
#if KNMF_X86_DISPATCH
  if (vector_level() == 2) return cd_sweep_512(Gl, l1, k, F, Num, ld, row0, j0, j1);
#endif
  return cd_sweep_any(Gl, l1, k, F, Num, ld, row0, j0, j1);
}

double host_cd_sweep(const double* Gl, double l1, int k, float* F, const float* Num,
                     std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1) {
#if KNMF_X86_DISPATCH
  if (vector_level() == 2) return cd_sweep_512(Gl, l1, k, F, Num, ld, row0, j0, j1);
#endif
  return cd_sweep_any(Gl, l1, k, F, Num, ld, row0, j0, j1);
}

}  // namespace knmf::detail
