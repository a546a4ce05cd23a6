// Accelerated coordinate descent (--inner-sweeps) against scikit-learn's CD (the exact mode),
// job by job, side by side in one process: the instrument behind perf/RESULTS.md section 11.
//
//   knmf_bench_accel (--input norm_counts.h5ad | --n N --g G) (-k 5,6,7 [--jobs J] [--seed S] |
//       --job-table nmf_params.df.npz)
//       [--dtype float|double] [--format sparse|dense] [--sweeps auto|N] [--alpha A] [--eps E]
//       [--tol T]
// For every job (k, seed): the exact mode (tol T, as cNMF runs it) gives its iterations and
// final objective F_exact; the accelerated mode with the same tol gives its own; and the
// accelerated mode's products with X to reach F_exact (the fewest iterations t, tol 0, whose
// final objective is <= F_exact, by doubling then bisection; 2 products per iteration).
// Prints one JSON object per job and a summary line with the medians.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/csr_matrix.hpp"
#include "knmf/matrix/load.hpp"
#include "knmf/solver/nmf.hpp"

namespace {
using namespace knmf;

struct Args {
  std::string input, dtype = "double", format = "sparse", sweeps = "auto", ks = "7", job_table;
  size_type n = 20000, g = 2000;
  int jobs = 4;
  std::int64_t seed = 14;
  double alpha = 0.5, eps = 0.1, tol = 1e-4;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

template <class XMat>
int run(const XMat& X, const Args& a) {
  std::vector<int> ks;
  {
    std::stringstream ss(a.ks);
    std::string t;
    while (std::getline(ss, t, ',')) ks.push_back(std::stoi(t));
  }
  SolverOptions exact;
  exact.tol = a.tol;
  SolverOptions acc = exact;
  acc.inner_sweeps = parse_inner_sweeps(a.sweeps, "--sweeps");
  acc.inner_alpha = a.alpha;
  acc.inner_eps = a.eps;
  auto one = [&](const SolverOptions& o, const Job& j) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = factorize(ExecSpace(), X, {j}, 1, o)[0];
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  std::vector<Job> jobs;
  if (!a.job_table.empty()) {
    jobs = io::read_cnmf_job_table(a.job_table);
  } else {
    for (int k : ks)
      for (int i = 0; i < a.jobs; ++i) jobs.push_back(Job{k, i, a.seed + 7919 * i + 104729 * k, i});
  }
  std::vector<double> prod_ratio, time_ratio, obj_ratio, reach_ratio;
  for (const Job& j : jobs) {
    {
      const int k = j.k;
      const auto e = one(exact, j);
      const auto f = one(acc, j);
      // fewest accelerated iterations (tol 0) reaching the exact mode's objective
      auto at = [&](int t) {
        auto o = acc;
        o.tol = 0.0;
        o.max_iter = t;
        return one(o, j);
      };
      int hi = 1;
      while (hi < 4 * e.n_iter && at(hi).final_error > e.final_error) hi *= 2;
      int lo = hi / 2;  // at(lo) does not reach it (or lo = 0)
      const bool reached = at(hi).final_error <= e.final_error;
      while (reached && hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        (at(mid).final_error <= e.final_error ? hi : lo) = mid;
      }
      const auto r = at(hi);
      std::printf("{\"k\": %d, \"seed\": %lld, \"exact_iter\": %d, \"exact_products\": %d, "
                  "\"exact_objective\": %.12g, \"exact_s\": %.4f, \"accel_iter\": %d, "
                  "\"accel_products\": %d, \"accel_sweeps\": %lld, \"accel_objective\": %.12g, "
                  "\"accel_s\": %.4f, \"reach_iter\": %s, \"reach_products\": %s, "
                  "\"reach_sweeps\": %lld, \"reach_s\": %.4f}\n",
                  k, (long long)j.seed, e.n_iter, 2 * e.n_iter, 0.5 * e.final_error * e.final_error,
                  e.seconds, f.n_iter, 2 * f.n_iter, (long long)f.n_sweeps,
                  0.5 * f.final_error * f.final_error, f.seconds,
                  reached ? std::to_string(hi).c_str() : "null",
                  reached ? std::to_string(2 * hi).c_str() : "null", (long long)r.n_sweeps,
                  r.seconds);
      prod_ratio.push_back(double(e.n_iter) / double(f.n_iter));
      time_ratio.push_back(e.seconds / f.seconds);
      obj_ratio.push_back((f.final_error * f.final_error) / (e.final_error * e.final_error));
      if (reached) reach_ratio.push_back(double(e.n_iter) / double(hi));
    }
  }
  std::printf("{\"summary\": true, \"jobs\": %zu, \"median_exact_over_accel_products\": %.3f, "
              "\"median_exact_over_accel_seconds\": %.3f, \"median_accel_over_exact_objective\": "
              "%.8f, \"median_exact_over_reach_products\": %.3f, \"reached\": %zu, "
              "\"context\": \"%s\"}\n",
              prod_ratio.size(), median(prod_ratio), median(time_ratio), median(obj_ratio),
              median(reach_ratio), reach_ratio.size(), bench::context_line().c_str());
  return 0;
}

template <class T>
int dispatch(const Args& a) {
  if (!a.input.empty()) {
    auto reader = io::H5adReader::open(a.input);
    if (a.format == "dense") return run(load_dense<T>(ExecSpace(), reader), a);
    return run(load_csr<T>(ExecSpace(), reader), a);
  }
  return run(bench::device_random_matrix<T>(a.n, a.g, 42), a);
}

}  // namespace

int main(int argc, char** argv) {
  knmf::ensure_blas_kernels(argc, argv);
  Kokkos::ScopeGuard guard(argc, argv);
  Args a;
  CLI::App app("accelerated CD against the exact mode");
  app.add_option("--input", a.input, "norm_counts .h5ad (default: a synthetic dense X)");
  app.add_option("--n", a.n, "synthetic rows");
  app.add_option("--g", a.g, "synthetic columns");
  app.add_option("-k", a.ks, "k values, comma-separated");
  app.add_option("--job-table", a.job_table, "cNMF's nmf_params.df.npz: its jobs (k, seed)");
  app.add_option("--jobs", a.jobs, "jobs per k");
  app.add_option("--seed", a.seed, "seed base");
  app.add_option("--dtype", a.dtype, "float or double");
  app.add_option("--format", a.format, "sparse or dense (with --input)");
  app.add_option("--sweeps", a.sweeps, "--inner-sweeps of the accelerated mode");
  app.add_option("--alpha", a.alpha, "--inner-alpha");
  app.add_option("--eps", a.eps, "--inner-eps");
  app.add_option("--tol", a.tol, "tol of both modes");
  CLI11_PARSE(app, argc, argv);
  return a.dtype == "float" ? dispatch<float>(a) : dispatch<double>(a);
}
