// Peak memory of a batched run against the memory model of issue 3:
//   model = (X + 3 n (R k) + 4 (R k) g) * sizeof(T)
//   knmf_bench_memory [n] [g] [R] [k] [iters] [float|double] [mu|cd]
// defaults: 200000 2000 8 20 5 float mu. Prints peak RSS (the OpenMP backend keeps every
// "device" allocation in host memory, so RSS is the device footprint plus the process).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench_common.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/solver/nmf.hpp"

namespace {
template <class T>
int run(knmf::size_type n, knmf::size_type g, int R, int k, int iters, knmf::SolverKind s) {
  using namespace knmf;
  const double base = bench::current_rss_bytes();
  auto X = bench::device_random_matrix<T>(n, g, 7);
  SolverOptions o;
  o.solver = s;
  o.tol = 0;
  o.max_iter = iters;
  std::vector<Job> jobs;
  for (int r = 0; r < R; ++r) jobs.push_back(Job{k, r, 1 + r, r});
  Kokkos::Timer t;
  auto res = factorize(ExecSpace(), X, jobs, R, o);
  const double secs = t.seconds();
  const double peak = bench::peak_rss_bytes();
  const double rk = double(R) * k;
  const double model = (double(n) * g + 3.0 * n * rk + 4.0 * rk * g) * sizeof(T);
  std::printf("context: %s\n", bench::context_line().c_str());
  std::printf("n=%lld g=%lld R=%d k=%d %s %s iters=%d: %.2f s\n", (long long)n, (long long)g, R, k,
              sizeof(T) == 4 ? "fp32" : "fp64", to_string(s).c_str(), iters, secs);
  std::printf("peak RSS %.3f GB (process baseline before X %.3f GB)\n", peak / 1e9, base / 1e9);
  std::printf("model (X + 3 n Rk + 4 Rk g) * %zu B = %.3f GB; peak / model = %.3f; "
              "(peak - baseline) / model = %.3f\n",
              sizeof(T), model / 1e9, peak / model, (peak - base) / model);
  return res.size() == size_t(R) ? 0 : 1;
}
}  // namespace

int main(int argc, char** argv) {
  knmf::ensure_blas_kernels(argc, argv);
  Kokkos::ScopeGuard guard(argc, argv);
  const long long n = argc > 1 ? std::atoll(argv[1]) : 200000;
  const long long g = argc > 2 ? std::atoll(argv[2]) : 2000;
  const int R = argc > 3 ? std::atoi(argv[3]) : 8;
  const int k = argc > 4 ? std::atoi(argv[4]) : 20;
  const int iters = argc > 5 ? std::atoi(argv[5]) : 5;
  const std::string dtype = argc > 6 ? argv[6] : "float";
  const auto solver = knmf::parse_solver(argc > 7 ? argv[7] : "mu");
  return dtype == "double" ? run<double>(n, g, R, k, iters, solver)
                           : run<float>(n, g, R, k, iters, solver);
}
