// Time per iteration of the batched solver on a synthetic X in any device format, with peak
// memory: the instrument behind perf/RESULTS.md's sparse/dense/out-of-core/scaling tables.
//
//   knmf_bench_iteration --n N --g G --density D --R R --k K [--dtype float|double]
//       [--format dense|sparse|streamed-dense|streamed-sparse] [--blocks B] [--solver mu|cd]
//       [--iters A,B] [--repeats N] [--beta-loss frobenius|kullback-leibler|NUMBER]
//       [--dense-genes D]   (the first D genes present in every cell: long rows of X^T)
//       [--kernels]         (time per kernel and per profiling region, kernel_times.hpp)
// Prints one JSON object: seconds per iteration (median over repeats of (t(B) - t(A)) / (B - A),
// so init and copies cancel), GFLOP/s of the two products (dense: 4 n g R k; sparse:
// 4 nnz R k), bytes of X on the device, peak RSS. With --kernels also, per kernel and per
// region path, seconds per iteration the same way (each path's median over the repeats of
// its (time in run B - time in run A) / (B - A)), and "unattributed_seconds": seconds per
// iteration minus the top-level entries (time outside every region and kernel), and each
// repeat's figures ("..._by_repeat", in repeat order; 0 where a path was absent). The timings
// are of the same runs, so seconds_per_iteration includes the callbacks' cost (a few
// microseconds per kernel; compare a run without --kernels).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "kernel_times.hpp"
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
  bool kernels = false;
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
  // --kernels: per path, (time in run(i1) - time in run(i0)) / (i1 - i0) of each repeat
  std::map<std::string, std::vector<double>> kernel_per, region_per;
  if (a.kernels) bench::install_kernel_timer();
  for (int rep = 0; rep < a.repeats; ++rep) {
    (void)bench::take_kernel_times();
    const double t1 = run(i1);
    const bench::KernelTimes k1 = bench::take_kernel_times();
    const double t0 = run(i0);
    const bench::KernelTimes k0 = bench::take_kernel_times();
    per.push_back((t1 - t0) / (i1 - i0));
    if (!a.kernels) continue;
    auto diff = [&](const std::map<std::string, double>& m1, const std::map<std::string, double>& m0,
                    std::map<std::string, std::vector<double>>& out) {
      std::map<std::string, double> d;
      for (const auto& [key, v] : m1) d[key] += v;
      for (const auto& [key, v] : m0) d[key] -= v;
      for (const auto& [key, v] : d) {
        auto& values = out[key];
        values.resize(size_t(rep), 0.0);  // 0 for the repeats it was absent from
        values.push_back(v / (i1 - i0));
      }
    };
    diff(k1.kernels, k0.kernels, kernel_per);
    diff(k1.regions, k0.regions, region_per);
  }
  const double s = median<T>(per);
  std::string kernel_json;
  if (a.kernels) {
    double top = 0.0;
    auto object = [&](std::map<std::string, std::vector<double>>& m) {
      std::string out = "{";
      for (auto& [key, v] : m) {
        v.resize(size_t(a.repeats), 0.0);  // absent from the last repeats
        const double med = median<T>(v);
        if (key.find('/') == std::string::npos) top += med;
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6g", med);
        out += (out.size() > 1 ? ", " : "") + bench::json_string(key) + ": " + buf;
      }
      return out + "}";
    };
    // each repeat's values too: a path's exclusive time (a region less its children) is
    // then the difference of one repeat's figures, not of medians taken apart
    auto array = [](const std::vector<double>& v) {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s%.6g", i ? ", " : "", v[i]);
        out += buf;
      }
      return out + "]";
    };
    auto by_repeat = [&](const std::map<std::string, std::vector<double>>& m) {
      std::string out = "{";
      for (const auto& [key, v] : m)
        out += (out.size() > 1 ? ", " : "") + bench::json_string(key) + ": " + array(v);
      return out + "}";
    };
    const std::string kj = object(kernel_per), rj = object(region_per);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", s - top);
    kernel_json = ", \"kernel_seconds\": " + kj + ", \"region_seconds\": " + rj +
                  ", \"unattributed_seconds\": " + buf + ", \"kernel_seconds_by_repeat\": " +
                  by_repeat(kernel_per) + ", \"region_seconds_by_repeat\": " +
                  by_repeat(region_per) + ", \"seconds_per_iteration_by_repeat\": " + array(per);
  }
  const bool dense = a.format.find("dense") != std::string::npos;
  const double flops = 4.0 * double(a.R) * a.k * (dense ? double(a.n) * double(a.g) : double(nnz));
  std::printf(
      "{\"n\": %lld, \"g\": %lld, \"density\": %.4f, \"nnz\": %lld, \"R\": %d, \"k\": %d, "
      "\"dense_genes\": %lld, \"iters\": \"%s\", \"repeats\": %d, \"dtype\": \"%s\", \"format\": \"%s\", \"solver\": \"%s\", \"beta_loss\": \"%s\", \"blocks\": %d, "
      "\"seconds_per_iteration\": %.6g, \"gflops\": %.4g, \"x_device_bytes\": %.0f, "
      "\"peak_rss_bytes\": %.0f, \"threads\": %d, \"blas\": \"%s\"%s}\n",
      (long long)a.n, (long long)a.g, double(nnz) / (double(a.n) * a.g), (long long)nnz, a.R,
      a.k, (long long)a.dense_genes, a.iters.c_str(), a.repeats, a.dtype.c_str(), a.format.c_str(), a.solver.c_str(), a.beta_loss.c_str(), a.blocks, s, flops / s * 1e-9,
      x_bytes, bench::peak_rss_bytes(), concurrency(), blas_core().c_str(), kernel_json.c_str());
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
  app.add_flag("--kernels", a.kernels, "time per kernel and per profiling region");
  CLI11_PARSE(app, argc, argv);
  if (a.dtype == "double")
    run<double>(a);
  else
    run<float>(a);
  return 0;
}
