#pragma once
// A synthetic run for the results-file tests and their kill helper: RunInfo and, for each job,
// a deterministic ReplicateResult (a function of the job alone, so any process can rebuild
// the values a replicate must hold).

#include <cstdint>
#include <string>
#include <vector>

#include "knmf/io/results_file.hpp"
#include "knmf/random/random_state.hpp"
#include "knmf/solver/result.hpp"

namespace knmf::test {

struct SyntheticRun {
  int n_iter = 6;
  std::int64_t n_cells = 30;
  std::int64_t n_genes = 40;
  bool save_usages = true;
  std::string dtype = "float";
};

inline io::RunInfo synthetic_info(const SyntheticRun& s) {
  io::RunInfo info;
  info.input = "data/synthetic.h5ad";
  info.n_cells = s.n_cells;
  for (std::int64_t j = 0; j < s.n_genes; ++j)
    info.genes.push_back(j == 1 ? "G\xc3\xa8ne-1" : "G" + std::to_string(j));  // one non-ASCII name
  info.ks = {5, 3, 4};  // the writer sorts them
  info.n_iter = s.n_iter;
  info.seed = 14;
  info.solver.solver = SolverKind::mu;
  info.solver.tol = 1e-4;
  info.solver.max_iter = 400;
  info.solver.alpha_W = 0.25;
  info.dtype = s.dtype;
  info.save_usages = s.save_usages;
  info.batch_size = 8;
  info.device = "test device";
  return info;
}

/// The replicate a run "computes" for `job`: values drawn from RandomState(job.seed), with
/// exact zeros as NMF produces them, and table entries that differ from one job to another.
inline ReplicateResult synthetic_result(const io::RunInfo& info, const Job& job) {
  ReplicateResult r;
  r.job = job;
  r.n = info.n_cells;
  r.g = info.n_genes();
  RandomState rs(job.seed);
  auto value = [&rs] {
    const double u = rs.random_sample();
    return u < 0.2 ? 0.0 : 5.0 * rs.random_sample();
  };
  r.H.resize(static_cast<std::size_t>(job.k * r.g));
  for (auto& v : r.H) v = value();
  if (info.save_usages) {
    r.W.resize(static_cast<std::size_t>(job.k * r.n));
    for (auto& v : r.W) v = value();
  }
  r.n_iter = 1 + static_cast<int>(job.seed % 397);
  r.error_at_init = 100.0 + rs.random_sample();
  r.final_error = rs.random_sample();
  const ReplicateStatus states[] = {ReplicateStatus::converged, ReplicateStatus::max_iter,
                                    ReplicateStatus::non_finite};
  r.status = states[job.iter % 3];
  r.seconds = 0.25 * job.iter + job.k;
  return r;
}

/// The usages as the file stores them (float32 when dtype is float).
inline std::vector<double> stored_usages(const io::RunInfo& info, const ReplicateResult& r) {
  std::vector<double> w = r.W;
  if (info.dtype == "float")
    for (auto& v : w) v = static_cast<double>(static_cast<float>(v));
  return w;
}

}  // namespace knmf::test
