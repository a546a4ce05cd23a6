#pragma once
/// \file
/// Host (OpenMP/Serial) inner loops of the sparse products, the updates and the Grams, compiled
/// once per x86-64 vector width (AVX-512, AVX2, baseline: host_kernels_isa.inc under
/// `#pragma GCC target`) and chosen at run time from the CPU's features, so a portable build
/// still uses the CPU's vector units. No FMA contraction (ISO C++ mode), so every width
/// computes the same sums in the same order.

#include <cstdint>

namespace knmf::detail {

/// The vector width the host kernels below use: 2 AVX-512, 1 AVX2, 0 the baseline.
int host_vector_level();
/// Caps the width at `level` (at most what the CPU has) and returns the width used before:
/// for tests, which check that every width computes the same numbers. Not thread-safe: call
/// it while no kernel runs.
int set_host_vector_level(int level);

/// For output columns a in [a0, a1): out[:, a] = [out[:, a] +] sum_p values[p] * in[:, entries[p]]
/// over p in [row_begin[a] - base, row_end[a] - base), in p order; `rows` values per column,
/// columns at strides ld_in / ld_out. A row split into consecutive ranges, the later ones
/// accumulated, gives the whole row's sums exactly (the partial sum is kept in T).
void host_gather_ranges(const std::int64_t* row_begin, const std::int64_t* row_end,
                        std::int64_t base, const std::int32_t* entries, const double* values,
                        std::int64_t a0, std::int64_t a1, const double* in, std::int64_t ld_in,
                        double* out, std::int64_t ld_out, std::int64_t rows, bool accumulate);
void host_gather_ranges(const std::int64_t* row_begin, const std::int64_t* row_end,
                        std::int64_t base, const std::int32_t* entries, const float* values,
                        std::int64_t a0, std::int64_t a1, const float* in, std::int64_t ld_in,
                        float* out, std::int64_t ld_out, std::int64_t rows, bool accumulate);

/// One coordinate-descent sweep (scikit-learn's _update_cdnmf_fast, permutation 0..k-1) over
/// columns [j0, j1) of one slot: F and Num hold the slot's k values of column i at
/// F + i * ld + row0; Gl is the slot's k x k Gram with l2 already on its diagonal (row-major).
/// Each coordinate's step is cd_step (cd_step.hpp, as the portable kernel's).
/// Returns the sum of |projected gradient|: each column's in t order, the columns' sums added in
/// column order.
double host_cd_sweep(const double* Gl, double l1, int k, double* F, const double* Num,
                     std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1);
double host_cd_sweep(const double* Gl, double l1, int k, float* F, const float* Num,
                     std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1);

/// Frobenius MU of one slot over columns [j0, j1): for every column i and t < k,
///   den = sum_s F(row0 + s, i) G(s, t)      (double, s in order; G row-major k x k)
///   out(row0 + t, i) = mu_value(den, F, Num, ...)   (mu_value.hpp, as the portable kernel)
/// `out` may alias `Num`.
void host_mu_update(const double* G, int k, const double* F, const double* Num, double* out,
                    std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1,
                    double l1, double l2, bool add_eps, double eps);
void host_mu_update(const double* G, int k, const float* F, const float* Num, float* out,
                    std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1,
                    double l1, double l2, bool add_eps, double eps);

/// One slot's Gram over columns [j0, j1): acc (k x k, row-major, both triangles) =
/// sum over i in order of double(F(row0 + s, i)) * double(F(row0 + t, i)).
void host_slot_gram(int k, const double* F, std::int64_t ld, std::int64_t row0, std::int64_t j0,
                    std::int64_t j1, double* acc);
void host_slot_gram(int k, const float* F, std::int64_t ld, std::int64_t row0, std::int64_t j0,
                    std::int64_t j1, double* acc);

}  // namespace knmf::detail
