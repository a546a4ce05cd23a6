#pragma once
// Small synthetic runs for `knmf compare` tests: the same replicate spectra written as a knmf
// results file, as cNMF replicate files or as cNMF merged files, with optional perturbations.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/results/writer.hpp"
#include "knmf/random/random_state.hpp"
#include "knmf/solver/result.hpp"

namespace knmf::test {

/// A run's replicates: spectra (k x g) of every (k, iter) job, plus iterations and errors.
struct FakeRun {
  std::vector<std::string> genes;
  std::vector<int> ks;
  int n_iter = 0;
  std::int64_t seed = 14;
  std::map<std::pair<int, int>, std::vector<double>> spectra;
  std::map<std::pair<int, int>, int> iterations;
  std::map<std::pair<int, int>, double> final_error;

  std::int64_t g() const { return std::int64_t(genes.size()); }
};

/// Nonnegative spectra with distinct programs (each program peaks on its own genes), so the
/// Hungarian match is well defined; deterministic in (k, iter).
inline FakeRun make_fake_run(const std::vector<int>& ks, int n_iter, int g) {
  FakeRun r;
  for (int j = 0; j < g; ++j) r.genes.push_back("GENE" + std::to_string(j));
  r.ks = ks;
  r.n_iter = n_iter;
  for (int k : ks)
    for (int it = 0; it < n_iter; ++it) {
      std::mt19937_64 rng(std::uint64_t(k) * 1000 + std::uint64_t(it));
      std::uniform_real_distribution<double> u(0.0, 1.0);
      std::vector<double> H(size_t(k) * size_t(g));
      for (int t = 0; t < k; ++t)
        for (int j = 0; j < g; ++j)
          H[size_t(t) * size_t(g) + size_t(j)] = u(rng) * (j % k == t ? 10.0 : 0.5);
      r.spectra[{k, it}] = H;
      r.iterations[{k, it}] = 50 + it + k;
      r.final_error[{k, it}] = 100.0 + k + 0.25 * it;
    }
  return r;
}

/// The run record of `run`'s results file.
inline results::RunInfo run_info_of(const FakeRun& run) {
  results::RunInfo info;
  info.input = "fake.h5ad";
  info.n_cells = 7;
  info.genes = run.genes;
  info.ks = run.ks;
  info.n_iter = run.n_iter;
  info.seed = run.seed;
  info.dtype = knmf::Dtype::float64;
  info.batch_size = 1;
  return info;
}

/// Write `run` as a knmf results file (every job committed).
inline void write_results(const FakeRun& run, const std::filesystem::path& path) {
  const results::RunInfo info = run_info_of(run);
  results::ResultsWriteOptions wo;
  wo.fsync = false;
  auto w = results::ResultsWriter::create_or_resume(path, info, wo);
  for (const Job& j : w.pending()) {
    ReplicateResult res;
    res.job = j;
    res.n = info.n_cells;
    res.g = run.g();
    res.H = run.spectra.at({j.k, j.iter});
    res.n_iter = run.iterations.at({j.k, j.iter});
    res.error_at_init = 1000.0;
    res.final_error = run.final_error.at({j.k, j.iter});
    res.status = ReplicateStatus::converged;
    w.write(res);
  }
  w.finish();
}

/// The cNMF run folder `dir/name` with its cnmf_tmp/ (created).
inline std::filesystem::path cnmf_run_dir(const std::filesystem::path& dir, const std::string& name) {
  const auto run = dir / name;
  std::filesystem::create_directories(run / "cnmf_tmp");
  return run;
}

/// Write `run` as cNMF replicate files NAME.spectra.k_K.iter_R.df.npz in dir/name/cnmf_tmp.
/// `gene_order` (optional) gives the column order (positions into run.genes).
inline std::filesystem::path write_cnmf_replicates(const FakeRun& run, const std::filesystem::path& dir,
                                                   const std::string& name,
                                                   const std::vector<int>& gene_order = {}) {
  const auto rundir = cnmf_run_dir(dir, name);
  const io::CnmfPaths paths(dir.string(), name);
  const std::int64_t g = run.g();
  std::vector<int> order = gene_order;
  if (order.empty())
    for (int j = 0; j < g; ++j) order.push_back(j);
  std::vector<std::string> genes;
  for (int j : order) genes.push_back(run.genes[size_t(j)]);
  for (const auto& [key, H] : run.spectra) {
    const int k = key.first;
    std::vector<double> Hc(H.size());
    for (int t = 0; t < k; ++t)
      for (std::int64_t j = 0; j < g; ++j)
        Hc[size_t(t * g + j)] = H[size_t(t * g + order[size_t(j)])];
    io::write_cnmf_spectra(paths.iter_spectra(k, key.second), Hc.data(), k, g, genes);
  }
  return rundir;
}

/// Write `run` as cNMF merged files NAME.spectra.k_K.merged.df.npz (rows iter<r>_topic<t>),
/// rows in reverse order so that readers must go by the labels.
inline std::filesystem::path write_cnmf_merged(const FakeRun& run, const std::filesystem::path& dir,
                                               const std::string& name) {
  const auto rundir = cnmf_run_dir(dir, name);
  const io::CnmfPaths paths(dir.string(), name);
  const std::int64_t g = run.g();
  for (int k : run.ks) {
    io::DataFrame df;
    df.cols = g;
    for (const auto& gname : run.genes) df.columns.emplace_back(gname);
    for (int it = run.n_iter - 1; it >= 0; --it) {
      const auto& H = run.spectra.at({k, it});
      for (int t = k - 1; t >= 0; --t) {
        df.index.emplace_back("iter" + std::to_string(it) + "_topic" + std::to_string(t + 1));
        df.data.insert(df.data.end(), H.begin() + std::ptrdiff_t(t * g), H.begin() + std::ptrdiff_t((t + 1) * g));
        ++df.rows;
      }
    }
    io::write_df_npz(paths.merged_spectra(k), df);
  }
  return rundir;
}

/// Permute the programs (rows) of every job: row t of the result is row perm[t] of the input.
inline void permute_programs(FakeRun& run, const std::function<std::vector<int>(int k)>& perm) {
  const std::int64_t g = run.g();
  for (auto& [key, H] : run.spectra) {
    const int k = key.first;
    const std::vector<int> p = perm(k);
    std::vector<double> out(H.size());
    for (int t = 0; t < k; ++t)
      std::copy_n(H.begin() + std::ptrdiff_t(p[size_t(t)] * g), g, out.begin() + std::ptrdiff_t(t * g));
    H.swap(out);
  }
}

}  // namespace knmf::test
