// Time per iteration of the batched solver on a synthetic X in any device format, with peak
// memory: the instrument behind perf/RESULTS.md's sparse/dense/out-of-core/scaling tables.
//
//   knmf_bench_iteration --n N --g G --density D --R R --k K [--dtype float|double]
//       [--format dense|sparse|streamed-dense|streamed-sparse] [--blocks B] [--solver mu|cd]
//       [--iters A,B] [--repeats N] [--beta-loss frobenius|kullback-leibler|NUMBER]
//       [--dense-genes D]   (the first D genes present in every cell: long rows of X^T)
// Prints one JSON object: seconds per iteration (median over repeats of (t(B) - t(A)) / (B - A),
// so init and copies cancel), GFLOP/s of the two products (dense: 4 n g R k; sparse:
// 4 nnz R k), bytes of X on the device, peak RSS.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/matrix/csr_matrix.hpp"
#include "knmf/matrix/streamed_matrix.hpp"
#include "knmf/solver/nmf.hpp"

namespace {
using namespace knmf;

struct Args {
  size_type n = 20000, g = 2000;
  double density = 0.05;
  int R = 4, k = 20;
  std::string dtype = "float", format = "sparse", solver = "mu", iters = "2,6";
  std::string beta_loss = "frobenius";
  int blocks = 4, repeats = 3;
  size_type dense_genes = 0;
};

/// Row i of a synthetic X: about density * g entries at random columns, values from 10
/// planted programs (cell i mixes programs i % 10 and (i / 10) % 10). Deterministic.
template <class T>
void make_row(size_type i, size_type g, double density, size_type dense_genes,
              std::vector<ordinal_type>& cols, std::vector<T>& vals) {
  std::mt19937_64 rng(0x9e3779b97f4a7c15ULL ^ std::uint64_t(i));
  std::uniform_real_distribution<double> u(0.0, 1.0);
  cols.clear();
  vals.clear();
  const int a = int(i % 10), b = int((i / 10) % 10);
  if (density >= 1.0) {
    for (size_type j = 0; j < g; ++j) cols.push_back(ordinal_type(j));
  } else {
    for (size_type j = 0; j < dense_genes && j < g; ++j) cols.push_back(ordinal_type(j));
    const double lq = std::log1p(-density);
    for (double j = std::floor(std::log(1.0 - u(rng)) / lq); j < double(g);
         j += 1.0 + std::floor(std::log(1.0 - u(rng)) / lq))
      if (j >= double(dense_genes)) cols.push_back(ordinal_type(j));
  }
  for (auto j : cols) {
    const int p = int(j % 10);
    vals.push_back(T(((p == a ? 2.0 : 0.0) + (p == b ? 1.0 : 0.0) + 0.2) * (0.5 + u(rng))));
  }
}

template <class T>
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class T, class XMat>
void time_solver(const Args& a, const XMat& X, size_type nnz, double x_bytes) {
  SolverOptions o;
  o.solver = parse_solver(a.solver);
  o.beta_loss = parse_beta_loss(a.beta_loss);
  o.tol = 0;
  int i0 = 2, i1 = 6;
  std::sscanf(a.iters.c_str(), "%d,%d", &i0, &i1);
  std::vector<Job> jobs;
  for (int r = 0; r < a.R; ++r) jobs.push_back(Job{a.k, r, 100 + r, r});
  auto run = [&](int iters) {
    o.max_iter = iters;
    Kokkos::fence();
    Kokkos::Timer t;
    factorize(ExecSpace(), X, jobs, a.R, o);
    Kokkos::fence();
    return t.seconds();
  };
  std::vector<double> per;
  for (int rep = 0; rep < a.repeats; ++rep) per.push_back((run(i1) - run(i0)) / (i1 - i0));
  const double s = median<T>(per);
  const bool dense = a.format.find("dense") != std::string::npos;
  const double flops = 4.0 * double(a.R) * a.k * (dense ? double(a.n) * double(a.g) : double(nnz));
  std::printf(
      "{\"n\": %lld, \"g\": %lld, \"density\": %.4f, \"nnz\": %lld, \"R\": %d, \"k\": %d, "
      "\"dense_genes\": %lld, \"dtype\": \"%s\", \"format\": \"%s\", \"solver\": \"%s\", \"beta_loss\": \"%s\", \"blocks\": %d, "
      "\"seconds_per_iteration\": %.6g, \"gflops\": %.4g, \"x_device_bytes\": %.0f, "
      "\"peak_rss_bytes\": %.0f, \"threads\": %d, \"blas\": \"%s\"}\n",
      (long long)a.n, (long long)a.g, double(nnz) / (double(a.n) * a.g), (long long)nnz, a.R,
      a.k, (long long)a.dense_genes, a.dtype.c_str(), a.format.c_str(), a.solver.c_str(), a.beta_loss.c_str(), a.blocks, s, flops / s * 1e-9,
      x_bytes, bench::peak_rss_bytes(), concurrency(), blas_core().c_str());
}

template <class T>
void run(const Args& a) {
  std::vector<ordinal_type> cols;
  std::vector<T> vals;
  // count entries first (rows are regenerated when filled: no full host copy)
  size_type nnz = 0;
  std::vector<size_type> row_nnz(size_t(a.n));
  for (size_type i = 0; i < a.n; ++i) {
    make_row<T>(i, a.g, a.density, a.dense_genes, cols, vals);
    row_nnz[size_t(i)] = size_type(cols.size());
    nnz += row_nnz[size_t(i)];
  }
  ExecSpace space;
  const size_type block_rows = 8192;
  if (a.format == "sparse") {
    CsrMatrix<T> X(space, a.n, a.g, nnz);
    std::vector<size_type> off;
    std::vector<ordinal_type> bc;
    std::vector<T> bv;
    for (size_type r0 = 0; r0 < a.n; r0 += block_rows) {
      const size_type r1 = std::min(a.n, r0 + block_rows);
      off.assign(1, 0);
      bc.clear();
      bv.clear();
      for (size_type i = r0; i < r1; ++i) {
        make_row<T>(i, a.g, a.density, a.dense_genes, cols, vals);
        bc.insert(bc.end(), cols.begin(), cols.end());
        bv.insert(bv.end(), vals.begin(), vals.end());
        off.push_back(size_type(bv.size()));
      }
      X.set_rows(r0, r1, off.data(), bc.data(), bv.data());
    }
    X.finalize("synthetic");
    time_solver<T>(a, X, nnz, double(X.bytes()));
  } else if (a.format == "dense") {
    DenseMatrix<T> X(space, a.n, a.g);
    std::vector<T> rows;
    for (size_type r0 = 0; r0 < a.n; r0 += block_rows) {
      const size_type r1 = std::min(a.n, r0 + block_rows);
      rows.assign(size_t((r1 - r0) * a.g), T(0));
      for (size_type i = r0; i < r1; ++i) {
        make_row<T>(i, a.g, a.density, a.dense_genes, cols, vals);
        for (size_t p = 0; p < cols.size(); ++p) rows[size_t((i - r0) * a.g + cols[p])] = vals[p];
      }
      X.set_rows(r0, r1, rows.data());
    }
    X.finalize("synthetic");
    time_solver<T>(a, X, nnz, double(X.bytes()));
  } else {
    // streamed: host copy, split into about `blocks` row blocks
    const bool sparse = a.format == "streamed-sparse";
    std::vector<size_type> off{0};
    std::vector<ordinal_type> ac;
    std::vector<T> av;
    std::vector<T> dense;
    if (!sparse) dense.assign(size_t(a.n * a.g), T(0));
    for (size_type i = 0; i < a.n; ++i) {
      make_row<T>(i, a.g, a.density, a.dense_genes, cols, vals);
      if (sparse) {
        ac.insert(ac.end(), cols.begin(), cols.end());
        av.insert(av.end(), vals.begin(), vals.end());
        off.push_back(size_type(av.size()));
      } else {
        for (size_t p = 0; p < cols.size(); ++p) dense[size_t(i * a.g + cols[p])] = vals[p];
      }
    }
    const size_type per = size_type(sizeof(T));
    const size_type buffer =
        sparse ? 8 * (a.g + 1) + (per + 4) * (nnz / a.blocks + 2 * a.g) + 8 * (a.n / a.blocks + 2)
               : ((a.n + a.blocks - 1) / a.blocks) * a.g * per;
    auto X = sparse ? StreamedMatrix<T>::from_host_csr(space, a.n, a.g, off.data(), ac.data(),
                                                        av.data(), buffer)
                    : StreamedMatrix<T>::from_host_dense(space, a.n, a.g, dense.data(), buffer);
    Args b = a;
    b.blocks = X.num_blocks();
    time_solver<T>(b, X, nnz, double(X.device_bytes()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  knmf::ensure_blas_kernels(argc, argv);
  Kokkos::ScopeGuard guard(argc, argv);
  Args a;
  CLI::App app{"knmf iteration benchmark"};
  app.add_option("--n", a.n);
  app.add_option("--g", a.g);
  app.add_option("--density", a.density);
  app.add_option("--R", a.R);
  app.add_option("--k", a.k);
  app.add_option("--dtype", a.dtype);
  app.add_option("--format", a.format);
  app.add_option("--solver", a.solver);
  app.add_option("--beta-loss", a.beta_loss);
  app.add_option("--iters", a.iters);
  app.add_option("--blocks", a.blocks);
  app.add_option("--repeats", a.repeats);
  app.add_option("--dense-genes", a.dense_genes, "the first D genes in every cell");
  CLI11_PARSE(app, argc, argv);
  if (a.dtype == "double")
    run<double>(a);
  else
    run<float>(a);
  return 0;
}
