#include "detail/host_kernels.hpp"
#include "detail/cd_step.hpp"
#include "detail/mu_value.hpp"

#include <type_traits>

#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__)
#define KNMF_X86_DISPATCH 1
#include <immintrin.h>
#else
#define KNMF_X86_DISPATCH 0
#endif

namespace knmf::detail {

// The kernels, once per vector width (host_kernels_isa.inc says why this way); the entry
// points below pick the width once, from the CPU's features.
namespace {
#if KNMF_X86_DISPATCH
namespace isa_avx512 {
#pragma GCC push_options
#pragma GCC target("avx512f")
#define KNMF_ISA 2
#include "host_kernels_isa.inc"
#undef KNMF_ISA
#pragma GCC pop_options
}  // namespace isa_avx512

namespace isa_avx2 {
#pragma GCC push_options
#pragma GCC target("avx2")
#define KNMF_ISA 1
#include "host_kernels_isa.inc"
#undef KNMF_ISA
#pragma GCC pop_options
}  // namespace isa_avx2
#endif

namespace isa_base {
#define KNMF_ISA 0
#include "host_kernels_isa.inc"
#undef KNMF_ISA
}  // namespace isa_base

int detected_vector_level() {
#if KNMF_X86_DISPATCH
  static const int level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 2;
    if (__builtin_cpu_supports("avx2")) return 1;
    return 0;
  }();
  return level;
#else
  return 0;
#endif
}

int vector_level_cap = 2;  // set_host_vector_level (tests); read by the entry points

int vector_level() {
  const int d = detected_vector_level();
  return d < vector_level_cap ? d : vector_level_cap;
}
}  // namespace

int host_vector_level() { return vector_level(); }

int set_host_vector_level(int level) {
  const int before = vector_level();
  vector_level_cap = level < 0 ? 0 : level;
  return before;
}

#if KNMF_X86_DISPATCH
#define KNMF_HOST_DISPATCH(CALL)                          \
  switch (vector_level()) {                               \
    case 2: return isa_avx512::CALL;                      \
    case 1: return isa_avx2::CALL;                        \
    default: return isa_base::CALL;                       \
  }
#else
#define KNMF_HOST_DISPATCH(CALL) return isa_base::CALL;
#endif

void host_gather_ranges(const std::int64_t* row_begin, const std::int64_t* row_end,
                        std::int64_t base, const std::int32_t* entries, const double* values,
                        std::int64_t a0, std::int64_t a1, const double* in, std::int64_t ld_in,
                        double* out, std::int64_t ld_out, std::int64_t rows, bool accumulate) {
  KNMF_HOST_DISPATCH(gather(row_begin, row_end, base, entries, values, a0, a1, in, ld_in, out,
                            ld_out, rows, accumulate))
}

void host_gather_ranges(const std::int64_t* row_begin, const std::int64_t* row_end,
                        std::int64_t base, const std::int32_t* entries, const float* values,
                        std::int64_t a0, std::int64_t a1, const float* in, std::int64_t ld_in,
                        float* out, std::int64_t ld_out, std::int64_t rows, bool accumulate) {
  KNMF_HOST_DISPATCH(gather(row_begin, row_end, base, entries, values, a0, a1, in, ld_in, out,
                            ld_out, rows, accumulate))
}

double host_cd_sweep(const double* Gl, double l1, int k, double* F, const double* Num,
                     std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1) {
  KNMF_HOST_DISPATCH(cd_sweep(Gl, l1, k, F, Num, ld, row0, j0, j1))
}

double host_cd_sweep(const double* Gl, double l1, int k, float* F, const float* Num,
                     std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1) {
  KNMF_HOST_DISPATCH(cd_sweep(Gl, l1, k, F, Num, ld, row0, j0, j1))
}

void host_mu_update(const double* G, int k, const double* F, const double* Num, double* out,
                    std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1,
                    double l1, double l2, bool add_eps, double eps) {
  KNMF_HOST_DISPATCH(mu_update(G, k, F, Num, out, ld, row0, j0, j1, l1, l2, add_eps, eps))
}

void host_mu_update(const double* G, int k, const float* F, const float* Num, float* out,
                    std::int64_t ld, std::int64_t row0, std::int64_t j0, std::int64_t j1,
                    double l1, double l2, bool add_eps, double eps) {
  KNMF_HOST_DISPATCH(mu_update(G, k, F, Num, out, ld, row0, j0, j1, l1, l2, add_eps, eps))
}

void host_slot_gram(int k, const double* F, std::int64_t ld, std::int64_t row0, std::int64_t j0,
                    std::int64_t j1, double* acc) {
  KNMF_HOST_DISPATCH(slot_gram(k, F, ld, row0, j0, j1, acc))
}

void host_slot_gram(int k, const float* F, std::int64_t ld, std::int64_t row0, std::int64_t j0,
                    std::int64_t j1, double* acc) {
  KNMF_HOST_DISPATCH(slot_gram(k, F, ld, row0, j0, j1, acc))
}

#undef KNMF_HOST_DISPATCH

}  // namespace knmf::detail
