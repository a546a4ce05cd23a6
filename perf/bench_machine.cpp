// The machine figures of the roofline model (perf/gpu_projection.py, perf/studies/roofline.md),
// measured with the project's own threads (Kokkos' OpenMP pool, as the solver runs):
//
//   knmf_bench_machine [--quick] [--isa avx2|scalar]
//
// * Bandwidth, STREAM-like, over a sweep of footprints (the three arrays together, 1.5 MiB to
//   1.5 GiB, x4 apart; --quick: to 384 MiB), the largest far beyond the last-level cache:
//   triad a[i] = b[i] + s c[i] counted as 3 x 8 bytes per element (STREAM's count: the
//   write-allocate read of a is not counted), copy a[i] = b[i] (2 x 8) and read sum += a[i]
//   (1 x 8), doubles; median and best of the repeats. Every array is first touched by the
//   thread that later streams it.
// * Arithmetic peak, in double and float: each thread runs 16 independent multiply-add chains
//   of the widest vectors this CPU has (AVX-512, else AVX2, else scalar; --isa: narrower ones),
//   in registers, once as a separate multiply and add (what knmf's kernels compile to: it
//   builds with -ffp-contract=off) and once as fused multiply-adds (_mm*_fmadd_*); 2 flops
//   per multiply-add either way.
// Prints one JSON object.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#include <immintrin.h>
#define KNMF_BENCH_X86 1
#else
#define KNMF_BENCH_X86 0
#endif

namespace {

using Space = Kokkos::DefaultHostExecutionSpace;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Stat {
  double median = 0, best = 0;
};

Stat stat_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return Stat{v[v.size() / 2], v.back()};
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto p = line.find(':');
      return p == std::string::npos ? line : line.substr(p + 2);
    }
  return "unknown";
}

// ------------------------------------------------------------------------------ bandwidth

struct Bandwidth {
  double footprint_bytes;  ///< the three arrays
  Stat triad, copy, read;  ///< GB/s
};

Bandwidth stream(std::int64_t n, int repeats) {
  using Policy = Kokkos::RangePolicy<Space, Kokkos::Schedule<Kokkos::Static>,
                                     Kokkos::IndexType<std::int64_t>>;
  // plain arrays, first touched in parallel by the threads that stream them
  double* a = static_cast<double*>(std::aligned_alloc(64, size_t(n) * 8 + 64));
  double* b = static_cast<double*>(std::aligned_alloc(64, size_t(n) * 8 + 64));
  double* c = static_cast<double*>(std::aligned_alloc(64, size_t(n) * 8 + 64));
  Kokkos::parallel_for("bench_machine::touch", Policy(0, n), [=](const std::int64_t i) {
    a[i] = 1.0;
    b[i] = 2.0;
    c[i] = 0.5;
  });
  const double s = 0.999;
  std::vector<double> triad, copy, read;
  double sink = 0.0;
  for (int rep = 0; rep < repeats + 1; ++rep) {  // the first round warms up, untimed
    auto t0 = Clock::now();
    Kokkos::parallel_for("bench_machine::triad", Policy(0, n),
                         [=](const std::int64_t i) { a[i] = b[i] + s * c[i]; });
    const double tt = seconds_since(t0);
    t0 = Clock::now();
    Kokkos::parallel_for("bench_machine::copy", Policy(0, n),
                         [=](const std::int64_t i) { c[i] = a[i]; });
    const double tc = seconds_since(t0);
    t0 = Clock::now();
    double sum = 0.0;
    // 16 values per index, summed as a tree (independent adds, vectorizable): one add chain
    // per 16 values, so the read is not latency-bound on the accumulator
    Kokkos::parallel_reduce(
        "bench_machine::read", Policy(0, n / 16),
        [=](const std::int64_t i, double& acc) {
          const double* p = b + 16 * i;
          double s8[8];
          for (int l = 0; l < 8; ++l) s8[l] = p[l] + p[l + 8];
          acc += ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));
        },
        sum);
    const double tr = seconds_since(t0);
    sink += sum;
    if (rep == 0) continue;
    triad.push_back(24.0 * double(n) / tt * 1e-9);
    copy.push_back(16.0 * double(n) / tc * 1e-9);
    read.push_back(8.0 * double(n) / tr * 1e-9);
  }
  std::free(a);
  std::free(b);
  std::free(c);
  if (sink == 42.0) std::printf(" ");  // keeps the reduction
  return Bandwidth{24.0 * double(n), stat_of(triad), stat_of(copy), stat_of(read)};
}

// ------------------------------------------------------------------------------ peak

constexpr int chains = 16;

// One thread's loop: `iters` rounds of `chains` independent vector multiply-adds; returns a
// value that depends on every chain (so nothing is optimized away).
#define KNMF_PEAK_KERNEL(NAME, ISA, VEC, SET1, MUL, ADD, FMA, STORE, SCALAR, WIDTH, FUSED)     \
  __attribute__((target(ISA))) double NAME(std::int64_t iters) {                              \
    VEC acc[chains];                                                                          \
    for (int j = 0; j < chains; ++j) acc[j] = SET1(SCALAR(1.0 + 0.01 * j));                   \
    const VEC m = SET1(SCALAR(0.999999)), d = SET1(SCALAR(1e-3));                             \
    for (std::int64_t it = 0; it < iters; ++it) {                                             \
      for (int j = 0; j < chains; ++j) {                                                      \
        if (FUSED)                                                                            \
          acc[j] = FMA(acc[j], m, d);                                                         \
        else                                                                                  \
          acc[j] = ADD(MUL(acc[j], m), d);                                                    \
      }                                                                                       \
    }                                                                                         \
    SCALAR out[WIDTH];                                                                        \
    double total = 0.0;                                                                       \
    for (int j = 0; j < chains; ++j) {                                                        \
      STORE(out, acc[j]);                                                                     \
      for (int l = 0; l < WIDTH; ++l) total += double(out[l]);                                \
    }                                                                                         \
    return total;                                                                             \
  }

#if KNMF_BENCH_X86
KNMF_PEAK_KERNEL(d512_muladd, "avx512f", __m512d, _mm512_set1_pd, _mm512_mul_pd, _mm512_add_pd,
                 _mm512_fmadd_pd, _mm512_storeu_pd, double, 8, false)
KNMF_PEAK_KERNEL(d512_fma, "avx512f", __m512d, _mm512_set1_pd, _mm512_mul_pd, _mm512_add_pd,
                 _mm512_fmadd_pd, _mm512_storeu_pd, double, 8, true)
KNMF_PEAK_KERNEL(f512_muladd, "avx512f", __m512, _mm512_set1_ps, _mm512_mul_ps, _mm512_add_ps,
                 _mm512_fmadd_ps, _mm512_storeu_ps, float, 16, false)
KNMF_PEAK_KERNEL(f512_fma, "avx512f", __m512, _mm512_set1_ps, _mm512_mul_ps, _mm512_add_ps,
                 _mm512_fmadd_ps, _mm512_storeu_ps, float, 16, true)
KNMF_PEAK_KERNEL(d256_muladd, "avx2,fma", __m256d, _mm256_set1_pd, _mm256_mul_pd, _mm256_add_pd,
                 _mm256_fmadd_pd, _mm256_storeu_pd, double, 4, false)
KNMF_PEAK_KERNEL(d256_fma, "avx2,fma", __m256d, _mm256_set1_pd, _mm256_mul_pd, _mm256_add_pd,
                 _mm256_fmadd_pd, _mm256_storeu_pd, double, 4, true)
KNMF_PEAK_KERNEL(f256_muladd, "avx2,fma", __m256, _mm256_set1_ps, _mm256_mul_ps, _mm256_add_ps,
                 _mm256_fmadd_ps, _mm256_storeu_ps, float, 8, false)
KNMF_PEAK_KERNEL(f256_fma, "avx2,fma", __m256, _mm256_set1_ps, _mm256_mul_ps, _mm256_add_ps,
                 _mm256_fmadd_ps, _mm256_storeu_ps, float, 8, true)
#endif

// the portable fallback (scalar C++; GCC vectorizes nothing here, chains only)
template <class T, bool Fused>
double scalar_kernel(std::int64_t iters) {
  T acc[chains];
  for (int j = 0; j < chains; ++j) acc[j] = T(1.0 + 0.01 * j);
  const T m = T(0.999999), d = T(1e-3);
  for (std::int64_t it = 0; it < iters; ++it) {
    for (int j = 0; j < chains; ++j) acc[j] = Fused ? std::fma(acc[j], m, d) : acc[j] * m + d;
  }
  double total = 0.0;
  for (int j = 0; j < chains; ++j) total += double(acc[j]);
  return total;
}

using PeakKernel = double (*)(std::int64_t);

struct PeakSet {
  std::string isa;
  int double_lanes = 1, float_lanes = 1;
  PeakKernel d_muladd, d_fma, f_muladd, f_fma;
};

PeakSet peak_set(const std::string& isa) {
#if KNMF_BENCH_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && (isa.empty() || isa == "avx512f"))
    return PeakSet{"avx512f", 8, 16, d512_muladd, d512_fma, f512_muladd, f512_fma};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && isa != "scalar")
    return PeakSet{"avx2", 4, 8, d256_muladd, d256_fma, f256_muladd, f256_fma};
#else
  (void)isa;
#endif
  return PeakSet{"scalar", 1, 1, scalar_kernel<double, false>, scalar_kernel<double, true>,
                 scalar_kernel<float, false>, scalar_kernel<float, true>};
}

/// GFLOP/s of `kernel` on every thread of the pool at once (2 flops per multiply-add).
Stat peak(PeakKernel kernel, int lanes, int repeats, std::int64_t iters) {
  const int threads = Space().concurrency();
  std::vector<double> rates;
  std::vector<double> sinks(size_t(threads), 0.0);
  double* sink = sinks.data();
  for (int rep = 0; rep < repeats + 1; ++rep) {
    const auto t0 = Clock::now();
    Kokkos::parallel_for(
        "bench_machine::peak",
        Kokkos::RangePolicy<Space, Kokkos::Schedule<Kokkos::Static>>(0, threads),
        [=](const int t) { sink[t] += kernel(iters); });
    const double s = seconds_since(t0);
    if (rep > 0) rates.push_back(2.0 * chains * lanes * double(iters) * threads / s * 1e-9);
  }
  double total = 0.0;
  for (double v : sinks) total += v;
  if (total == 42.0) std::printf(" ");
  return stat_of(rates);
}

void print_stat(const char* name, const Stat& s, const char* tail) {
  std::printf("\"%s\": {\"median\": %.4g, \"best\": %.4g}%s", name, s.median, s.best, tail);
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  bool quick = false;
  std::string isa;  // --isa avx2|scalar: the peak of narrower vectors than the CPU's widest
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--isa") == 0 && i + 1 < argc) isa = argv[++i];
  }
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("{\"cpu\": \"%s\", \"threads\": %d, \"openblas_coretype\": \"%s\", ",
              cpu_model().c_str(), Space().concurrency(), coretype ? coretype : "");
  // footprints (three arrays of doubles) from 1.5 MiB to 1.5 GiB, x4 apart
  std::vector<std::int64_t> sizes;
  for (std::int64_t n = std::int64_t(1) << 16; n <= (std::int64_t(1) << (quick ? 24 : 27)); n *= 4)
    sizes.push_back(n);
  std::printf("\"bandwidth_gbs\": [");
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::int64_t n = sizes[i];
    // about 6 GB streamed per variant at every size (at least 5 repeats)
    const int repeats = int(std::max<std::int64_t>(5, std::min<std::int64_t>(
                                                          2000, (std::int64_t(quick ? 1 : 6) << 30) / (24 * n))));
    const Bandwidth b = stream(n, repeats);
    std::printf("%s{\"footprint_bytes\": %.0f, \"repeats\": %d, ", i ? ", " : "",
                b.footprint_bytes, repeats);
    print_stat("triad", b.triad, ", ");
    print_stat("copy", b.copy, ", ");
    print_stat("read", b.read, "}");
    std::fflush(stdout);
  }
  std::printf("], ");
  const PeakSet p = peak_set(isa);
  const std::int64_t iters = quick ? 2000000 : 20000000;
  const int repeats = quick ? 3 : 7;
  std::printf("\"peak_isa\": \"%s\", \"peak_chains\": %d, \"peak_gflops\": {", p.isa.c_str(),
              chains);
  print_stat("double_muladd", peak(p.d_muladd, p.double_lanes, repeats, iters), ", ");
  print_stat("double_fma", peak(p.d_fma, p.double_lanes, repeats, iters), ", ");
  print_stat("float_muladd", peak(p.f_muladd, p.float_lanes, repeats, iters), ", ");
  print_stat("float_fma", peak(p.f_fma, p.float_lanes, repeats, iters), "}}\n");
  return 0;
}
