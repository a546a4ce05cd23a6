// Q = W X for sparse X, the product that needs X^T: knmf's gather over a second CSR copy of
// X^T (its CSC, built once) against the transposed SpMM on the CSR itself
// (KokkosSparse::spmv with mode "T"), on the same synthetic X, R*k right-hand sides.
//
//   knmf_bench_transpose [n] [g] [density] [rk]      defaults 100000 2000 0.05 80
// Prints one JSON object: seconds per product (median of 5) for each, and the CSC's build time.
#include <Kokkos_Core.hpp>
#include <KokkosSparse_CrsMatrix.hpp>
#include <KokkosSparse_spmv.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "bench_common.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/matrix/csr_matrix.hpp"
#include "solver/engine.hpp"

int main(int argc, char** argv) {
  knmf::ensure_blas_kernels(argc, argv);
  Kokkos::ScopeGuard guard(argc, argv);
  using namespace knmf;
  const size_type n = argc > 1 ? std::atoll(argv[1]) : 100000;
  const size_type g = argc > 2 ? std::atoll(argv[2]) : 2000;
  const double density = argc > 3 ? std::atof(argv[3]) : 0.05;
  const int rk = argc > 4 ? std::atoi(argv[4]) : 80;
  std::mt19937_64 rng(3);
  std::vector<size_type> off{0};
  std::vector<ordinal_type> cols;
  std::vector<float> vals;
  std::uniform_real_distribution<double> u(0, 1);
  for (size_type i = 0; i < n; ++i) {
    for (size_type j = 0; j < g; ++j)
      if (u(rng) < density) {
        cols.push_back(ordinal_type(j));
        vals.push_back(float(0.5 + u(rng)));
      }
    off.push_back(size_type(vals.size()));
  }
  Kokkos::Timer tb;
  auto X = CsrMatrix<float>::from_host(ExecSpace(), n, g, off.data(), cols.data(), vals.data());
  const double build = tb.seconds();  // includes the copy to the device and the validation
  Matrix<float> W("W", rk, n), Q("Q", rk, g);
  Kokkos::deep_copy(W, 0.5f);
  // KokkosSparse::spmv takes vectors as columns: W^T (n x rk) and Q^T (g x rk), LayoutLeft.
  Kokkos::View<float**, Kokkos::LayoutLeft, MemSpace> Wt("Wt", n, rk), Qt("Qt", g, rk);
  Kokkos::deep_copy(Wt, 0.5f);
  auto time = [&](auto f) {
    std::vector<double> t;
    for (int r = 0; r < 5; ++r) {
      Kokkos::fence();
      Kokkos::Timer tm;
      f();
      Kokkos::fence();
      t.push_back(tm.seconds());
    }
    std::sort(t.begin(), t.end());
    return t[2];
  };
  detail::GatherScratch<float> scratch;
  const double gather = time([&] { detail::wt_times_x(ExecSpace(), X, W, Q, scratch); });
  const double spmv_t = time([&] { KokkosSparse::spmv("T", 1.0f, X.x(), Wt, 0.0f, Qt); });
  std::printf("{\"n\": %lld, \"g\": %lld, \"nnz\": %lld, \"rk\": %d, \"csc_gather_seconds\": %.5g, "
              "\"spmv_transposed_seconds\": %.5g, \"build_seconds\": %.4g, \"threads\": %d}\n",
              (long long)n, (long long)g, (long long)X.nnz(), rk, gather, spmv_t, build,
              concurrency());
  return 0;
}
