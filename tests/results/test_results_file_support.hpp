#pragma once
// A synthetic run for the results-file tests and their kill helper: RunInfo and, for each job,
// a deterministic ReplicateResult (a function of the job alone, so any process can rebuild
// the values a replicate must hold).

#include <cstdint>
#include <string>
#include <vector>

#include "knmf/results/consensus_records.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/random/random_state.hpp"
#include "knmf/solver/result.hpp"

namespace knmf::test {

struct SyntheticRun {
  int n_iter = 6;
  std::int64_t n_cells = 30;
  std::int64_t n_genes = 40;
  bool save_usages = true;
  Dtype dtype = Dtype::float32;
};

inline results::RunInfo synthetic_info(const SyntheticRun& s) {
  results::RunInfo info;
  info.input = "data/synthetic.h5ad";
  info.input_absolute = "/data/synthetic.h5ad";
  info.input_fingerprint = "0123456789abcdef";
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
inline ReplicateResult synthetic_result(const results::RunInfo& info, const Job& job) {
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
  // valid factorizations only: a non_finite replicate keeps the file from being complete
  // (test_results_failed.cpp)
  const ReplicateStatus states[] = {ReplicateStatus::converged, ReplicateStatus::max_iter};
  r.status = states[job.iter % 2];
  r.seconds = 0.25 * job.iter + job.k;
  return r;
}

/// The usages as the file stores them (float32 when dtype is float).
inline std::vector<double> stored_usages(const results::RunInfo& info, const ReplicateResult& r) {
  std::vector<double> w = r.W;
  if (info.dtype == Dtype::float32)
    for (auto& v : w) v = static_cast<double>(static_cast<float>(v));
  return w;
}

/// A consensus record of k at threshold `dt` that fits the run `info`, its values a
/// function of (k, dt, version) alone. `float32`: usages and TPM spectra are float32 numbers.
inline results::ConsensusRecord synthetic_consensus(const results::RunInfo& info, int k, double dt, int version,
                                               bool tpm, bool float32 = false) {
  results::ConsensusRecord r;
  r.k = k;
  r.settings.local_density_threshold = dt;
  r.settings.local_neighborhood_size = 0.25 + 0.01 * version;
  r.settings.kmeans_seed = 100 + version;
  r.settings.kmeans_n_init = 3 + version;
  r.settings.refit = info.solver;
  r.settings.counts = info.input;
  r.settings.tpm = tpm ? "data/tpm.h5ad" : "";
  RandomState rs(static_cast<std::uint32_t>(1000 * k + 7 * version + static_cast<int>(100 * dt)));
  auto value = [&rs] { return rs.random_sample(); };
  auto f32 = [float32](double x) { return float32 ? static_cast<double>(static_cast<float>(x)) : x; };
  r.n_neighbors = 2 + version;
  r.silhouette = value();
  r.prediction_error = 1000.0 * value();
  r.refit_n_iter = 10 + version;
  r.refit_status = version % 2 ? results::ReplicateState::converged : results::ReplicateState::max_iter;
  const std::int64_t rows = static_cast<std::int64_t>(info.n_iter) * k;
  for (std::int64_t row = 0; row < rows; ++row) {
    if (row % 5 == 3) continue;  // a dead component
    r.replicate_rows.push_back(row);
    r.local_density.push_back(0.6 * value());
    r.cluster.push_back(r.local_density.back() < dt ? static_cast<std::int32_t>(1 + row % k) : 0);
  }
  const auto g = static_cast<std::size_t>(info.n_genes());
  const auto n = static_cast<std::size_t>(info.n_cells);
  const auto kk = static_cast<std::size_t>(k);
  r.spectra.resize(kk * g);
  for (auto& v : r.spectra) v = value();
  r.usages.resize(n * kk);
  for (auto& v : r.usages) v = f32(10.0 * value());
  r.float32 = float32;
  r.has_tpm = tpm;
  if (tpm) {
    for (std::size_t j = 0; j < g + 3; ++j) r.tpm_genes.push_back("T" + std::to_string(j) + (j == 2 ? "\xc3\xa9" : ""));
    r.spectra_tpm.resize(kk * (g + 3));
    for (auto& v : r.spectra_tpm) v = f32(1e4 * value());
    r.spectra_score.resize(kk * (g + 3));
    for (auto& v : r.spectra_score) v = value() - 0.5;
    r.starcat.resize(kk * g);
    for (auto& v : r.starcat) v = value();
  }
  return r;
}

/// A k-selection table for every k of the run, a function of `version` alone.
inline results::KSelectionTable synthetic_k_selection(const results::RunInfo& info, int version) {
  results::KSelectionTable t;
  t.settings.local_density_threshold = 0.5;
  t.settings.refit = info.solver;
  t.settings.counts = info.input;
  RandomState rs(static_cast<std::uint32_t>(77 + version));
  for (int k : info.ks) {
    t.k.push_back(k);
    t.local_density_threshold.push_back(0.5);
    t.silhouette.push_back(rs.random_sample());
    t.prediction_error.push_back(1000.0 * rs.random_sample() + version);
  }
  return t;
}

/// The additions of the kill tests' update number `version`: consensus of k = 3 (with
/// float32 TPM outputs) and k = 5 at threshold 0.5, the cell names and the k-selection table.
inline results::ResultsAdditions synthetic_update(const results::RunInfo& info, int version) {
  results::ResultsAdditions add;
  add.consensus = {synthetic_consensus(info, 3, 0.5, version, true, true),
                   synthetic_consensus(info, 5, 0.5, version, false)};
  for (std::int64_t i = 0; i < info.n_cells; ++i) add.cells.push_back("cell-" + std::to_string(i));
  add.k_selection = synthetic_k_selection(info, version);
  return add;
}

}  // namespace knmf::test
