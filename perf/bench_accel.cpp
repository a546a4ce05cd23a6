// Accelerated coordinate descent (--inner-sweeps) against scikit-learn's CD (the exact mode),
// job by job, side by side in one process: the instrument behind perf/studies/accelerated-cd.md.
//
//   knmf_bench_accel (--input norm_counts.h5ad | --n N --g G) (-k 5,6,7
//       [--jobs J] [--seed S] | --job-table nmf_params.df.npz) [--dtype float|double]
//       [--format sparse|dense] [--solver cd|mu] [--sweeps auto|N] [--alpha A] [--eps E] [--tol T]
//       [--reach F] [--no-plain]
// For every job (k, seed): the exact mode (tol T, as cNMF runs it) gives its iterations, final
// objective F_exact and wall seconds; the accelerated mode runs once, traced
// (SolverOptions::record_trace), with tol 0 for up to F times the exact mode's iterations. Its
// trace gives, without another run (the trajectory does not depend on tol):
//   * where CD's rule at tol T stops it (the accelerated mode as a user runs it), and there its
//     products, sweeps, objective and seconds;
//   * the first iteration whose objective is at or below F_exact ("reach");
//   * where other stopping rules would stop it: CD's at tol 1e-3 and 1e-5, and MU's (every 10
//     iterations, (previous error - error) / initial error < tol) at 1e-4, 1e-5 and 1e-6.
// Then (unless --no-plain) the accelerated mode once more as a user runs it, untraced, for its
// wall seconds (and a check that it stops where the trace says). Products = 2 per iteration.
// Prints one JSON object per job and a summary line.
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
  std::string input, dtype = "double", format = "sparse", sweeps = "auto", ks = "7", job_table,
      solver = "cd";
  size_type n = 20000, g = 2000;
  int jobs = 4;
  std::int64_t seed = 14;
  double alpha = 0.5, eps = 0.1, tol = 1e-4, reach = 4.0;
  bool plain = true;
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
  exact.solver = parse_solver(a.solver);
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
  auto obj = [](double err) { return 0.5 * err * err; };
  auto num = [](bool ok, double v, const char* fmt) {
    if (!ok) return std::string("null");
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, v);
    return std::string(buf);
  };
  for (const Job& j : jobs) {
    const auto e = one(exact, j);
    auto o = acc;
    o.tol = 0.0;
    o.max_iter = std::max(2, int(a.reach * e.n_iter));
    o.record_trace = true;
    const auto f = one(o, j);
    const auto& tr = f.trace;
    // CD's rule at tol: the first iteration whose violation is <= tol x the first one's
    auto cd_stop = [&](double tol) {
      for (size_t i = 0; i < tr.size(); ++i)
        if (tr[i].value / tr[0].value <= tol) return long(i);
      return -1L;
    };
    // MU's rule at tol (scikit-learn): every 10 iterations, (previous - error) / initial < tol
    auto mu_stop = [&](double tol) {
      double prev = f.error_at_init;
      for (size_t i = 9; i < tr.size(); i += 10) {
        if ((prev - tr[i].error) / f.error_at_init < tol) return long(i);
        prev = tr[i].error;
      }
      return -1L;
    };
    long reach = -1;
    for (size_t i = 0; i < tr.size() && reach < 0; ++i)
      if (tr[i].error <= e.final_error) reach = long(i);
    const long stop = cd_stop(a.tol);
    auto at = [&](long i, const char* what) {
      if (i < 0) return std::string("null");
      const auto& p = tr[size_t(i)];
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    "{\"rule\": \"%s\", \"iter\": %d, \"products\": %d, \"sweeps\": %lld, "
                    "\"objective_rel\": %.6e, \"s\": %.4f}",
                    what, p.iter, 2 * p.iter, (long long)p.sweeps,
                    obj(p.error) / obj(e.final_error) - 1.0, p.seconds);
      return std::string(buf);
    };
    std::string rules = "[" + at(cd_stop(1e-3), "cd 1e-3") + ", " + at(cd_stop(1e-5), "cd 1e-5") +
                        ", " + at(mu_stop(1e-4), "mu 1e-4") + ", " + at(mu_stop(1e-5), "mu 1e-5") +
                        ", " + at(mu_stop(1e-6), "mu 1e-6") + "]";
    const bool stopped = stop >= 0, reached = reach >= 0;
    // the accelerated mode as a user runs it (tol, untraced): its wall time without the trace's
    // per-iteration error, and a check that the trace's stop is the run's
    double plain_s = -1.0;
    int plain_iter = -1;
    double plain_obj = 0.0;
    std::int64_t plain_sweeps = 0;
    if (a.plain) {
      const auto u = one(acc, j);
      plain_s = u.seconds;
      plain_iter = u.n_iter;
      plain_obj = obj(u.final_error);
      plain_sweeps = u.n_sweeps;
      if (stopped && (u.n_iter != tr[size_t(stop)].iter || u.final_error != tr[size_t(stop)].error))
        std::fprintf(stderr, "bench_accel: job k %d seed %lld: the untraced run stopped at %d "
                     "iterations, the trace at %d\n", j.k, (long long)j.seed, u.n_iter,
                     tr[size_t(stop)].iter);
    }
    const auto& ps = stopped ? tr[size_t(stop)] : tr.back();
    std::printf("{\"k\": %d, \"seed\": %lld, \"exact_iter\": %d, \"exact_products\": %d, "
                "\"exact_objective\": %.12g, \"exact_s\": %.4f, \"accel_iter\": %s, "
                "\"accel_products\": %s, \"accel_sweeps\": %s, \"accel_objective\": %s, "
                "\"accel_s\": %s, \"reach_iter\": %s, \"reach_products\": %s, "
                "\"reach_sweeps\": %s, \"reach_s\": %s, \"traced_iter\": %d, \"accel_plain_s\": %s, "
                "\"accel_plain_iter\": %s, \"accel_plain_sweeps\": %s, \"accel_plain_objective\": %s, "
                "\"rules\": %s}\n",
                j.k, (long long)j.seed, e.n_iter, 2 * e.n_iter, obj(e.final_error), e.seconds,
                num(stopped, ps.iter, "%.0f").c_str(), num(stopped, 2 * ps.iter, "%.0f").c_str(),
                num(stopped, double(ps.sweeps), "%.0f").c_str(),
                num(stopped, obj(ps.error), "%.12g").c_str(), num(stopped, ps.seconds, "%.4f").c_str(),
                num(reached, reached ? tr[size_t(reach)].iter : 0, "%.0f").c_str(),
                num(reached, reached ? 2 * tr[size_t(reach)].iter : 0, "%.0f").c_str(),
                num(reached, reached ? double(tr[size_t(reach)].sweeps) : 0, "%.0f").c_str(),
                num(reached, reached ? tr[size_t(reach)].seconds : 0, "%.4f").c_str(), f.n_iter,
                num(plain_s >= 0, plain_s, "%.4f").c_str(), num(plain_iter >= 0, plain_iter, "%.0f").c_str(),
                num(plain_iter >= 0, double(plain_sweeps), "%.0f").c_str(),
                num(plain_iter >= 0, plain_obj, "%.12g").c_str(), rules.c_str());
    std::fflush(stdout);
    if (stopped || plain_iter > 0) {
      prod_ratio.push_back(double(e.n_iter) / double(plain_iter > 0 ? plain_iter : ps.iter));
      time_ratio.push_back(e.seconds / (plain_s >= 0 ? plain_s : ps.seconds));
      obj_ratio.push_back((plain_iter > 0 ? plain_obj : obj(ps.error)) / obj(e.final_error));
    }
    if (reached) reach_ratio.push_back(double(e.n_iter) / double(tr[size_t(reach)].iter));
  }
  std::printf("{\"summary\": true, \"jobs\": %zu, \"stopped\": %zu, "
              "\"median_exact_over_accel_products\": %.3f, "
              "\"median_exact_over_accel_seconds\": %.3f, \"median_accel_over_exact_objective\": "
              "%.8f, \"median_exact_over_reach_products\": %.3f, \"reached\": %zu, "
              "\"context\": \"%s\"}\n",
              jobs.size(), prod_ratio.size(), median(prod_ratio), median(time_ratio),
              median(obj_ratio), median(reach_ratio), reach_ratio.size(),
              bench::context_line().c_str());
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
  app.add_option("--input", a.input, "norm_counts .h5ad (default: a synthetic dense X, bench_common: each cell mixes 2 of 10 planted programs)");
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
  app.add_option("--solver", a.solver, "cd or mu (both modes)");
  app.add_option("--reach", a.reach, "trace the accelerated mode for up to this many times the "
                                      "exact mode's iterations");
  app.add_flag("!--no-plain", a.plain, "skip the untraced accelerated run (its wall time)");
  CLI11_PARSE(app, argc, argv);
  return a.dtype == "float" ? dispatch<float>(a) : dispatch<double>(a);
}
