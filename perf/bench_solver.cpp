// One MU / CD iteration of the batched solver against the two GEMMs it is made of.
//
//   knmf_bench_solver [--benchmark_filter=...]       (Google Benchmark flags)
//
// Shapes: n in {20000, 100000}, g = 2000, R*k in {40 (R=4,k=10), 200 (R=10,k=20)}, and at
// n = 20000 also R*k = 480 (R=8,k=60) and 800 (R=8,k=100), the large-k paths; fp32/fp64.
// Counters: GFLOPs = 4 n g (R k) / seconds per iteration (the two products with X, which is
// the useful work of an iteration); the Gemm benchmarks time exactly those two products
// through KokkosBlas::gemm, each in the faster of its two orientations (C or C^T), so "iteration GFLOP/s / GEMM GFLOP/s" is the fraction of the
// GEMM roofline an iteration reaches.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <memory>
#include <KokkosBlas3_gemm.hpp>

#include "bench_common.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/core/compat.hpp"
#include "knmf/solver/nmf.hpp"

namespace {
using namespace knmf;
constexpr size_type kGenes = 2000;

template <class T>
std::map<size_type, std::unique_ptr<DenseMatrix<T>>>& matrix_cache() {
  static std::map<size_type, std::unique_ptr<DenseMatrix<T>>> cache;
  return cache;
}

template <class T>
const DenseMatrix<T>& cached_matrix(size_type n) {
  auto& cache = matrix_cache<T>();
  auto& p = cache[n];
  if (!p) {
    cache.clear();  // keep one X in memory at a time
    auto& q = cache[n];
    q = std::make_unique<DenseMatrix<T>>(bench::device_random_matrix<T>(n, kGenes, 42));
    return *q;
  }
  return *p;
}

void shape_from_rk(int rk, int& R, int& k) {
  if (rk == 40) {
    R = 4;
    k = 10;
  } else if (rk == 200) {
    R = 10;
    k = 20;
  } else if (rk == 480 || rk == 800) {
    R = 8;
    k = rk / 8;
  } else {
    k = 20;
    R = rk / k;
  }
}

double flops_per_iteration(size_type n, int rk) { return 4.0 * double(n) * double(kGenes) * rk; }

template <class T>
void BM_Gemm(benchmark::State& state) {
  const size_type n = state.range(0);
  const int rk = int(state.range(1));
  const auto& X = cached_matrix<T>(n);
  ExecSpace space;
  Matrix<T> H("H", rk, kGenes), Q("Q", rk, kGenes), W("W", rk, n), P("P", rk, n);
  Matrix<T> Pt("Pt", n, rk), Qt("Qt", kGenes, rk);
  Kokkos::deep_copy(H, T(0.5));
  Kokkos::deep_copy(W, T(0.25));
  const auto timed = [&](auto&& f) {
    Kokkos::fence();
    Kokkos::Timer t;
    f();
    Kokkos::fence();
    return t.seconds();
  };
  for (auto _ : state) {
    // each product in both orientations (P or P^T, Q or Q^T): the faster of the two is the
    // BLAS's best for that shape, whichever one knmf uses
    const double p = std::min(
        timed([&] { KokkosBlas::gemm(space, "N", "N", T(1), H, X.xt(), T(0), P); }),
        timed([&] { KokkosBlas::gemm(space, "T", "T", T(1), X.xt(), H, T(0), Pt); }));
    const double q = std::min(
        timed([&] { KokkosBlas::gemm(space, "N", "T", T(1), W, X.xt(), T(0), Q); }),
        timed([&] { KokkosBlas::gemm(space, "N", "T", T(1), X.xt(), W, T(0), Qt); }));
    state.SetIterationTime(p + q);
  }
  state.counters["GFLOPs"] = benchmark::Counter(flops_per_iteration(n, rk) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

template <class T, SolverKind S>
void BM_Iteration(benchmark::State& state) {
  const size_type n = state.range(0);
  const int rk = int(state.range(1));
  int R, k;
  shape_from_rk(rk, R, k);
  const auto& X = cached_matrix<T>(n);
  SolverOptions o;
  o.solver = S;
  o.tol = 0;  // fixed iteration count
  std::vector<Job> jobs;
  for (int r = 0; r < R; ++r) jobs.push_back(Job{k, r, 100 + r, r});
  auto run = [&](int iters) {
    o.max_iter = iters;
    Kokkos::fence();
    Kokkos::Timer t;
    factorize(ExecSpace(), X, jobs, R, o);
    Kokkos::fence();
    return t.seconds();
  };
  // Per-iteration time by difference, so that init (host RNG) and result copies cancel; 10
  // iterations apart, so that their jitter (on a GPU, tens of ms against iterations of about
  // 1 ms; the first H200 run, 2026-12-04, at 1 and 4 gave a negative difference) does not.
  const int a = 2, b = 12;
  for (auto _ : state) {
    const double ta = run(a), tb = run(b);
    state.SetIterationTime((tb - ta) / (b - a));
  }
  state.counters["GFLOPs"] = benchmark::Counter(flops_per_iteration(n, rk) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.counters["R"] = R;
  state.counters["k"] = k;
}

void shapes(benchmark::internal::Benchmark* b) {
  for (long n : {20000L, 100000L})
    for (long rk : {40L, 200L}) b->Args({n, rk});
  for (long rk : {480L, 800L}) b->Args({20000L, rk});
  b->UseManualTime()->Iterations(1)->Repetitions(5)->ReportAggregatesOnly(true)->Unit(
      benchmark::kMillisecond);
}

BENCHMARK_TEMPLATE(BM_Gemm, float)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_Iteration, float, SolverKind::mu)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_Iteration, float, SolverKind::cd)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_Gemm, double)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_Iteration, double, SolverKind::mu)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_Iteration, double, SolverKind::cd)->Apply(shapes);

}  // namespace

int main(int argc, char** argv) {
  knmf::ensure_blas_kernels(argc, argv);
  Kokkos::ScopeGuard guard(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("knmf", knmf::bench::context_line());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  matrix_cache<float>().clear();  // Views must die before Kokkos::finalize
  matrix_cache<double>().clear();
  return 0;
}
