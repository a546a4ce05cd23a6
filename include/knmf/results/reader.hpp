#pragma once
/// \file
/// ResultsReader: reads knmf's results file (run_info.hpp: the schema), the replicates of a
/// run and its consensus outputs (consensus_records.hpp).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "knmf/results/consensus_records.hpp"
#include "knmf/results/run_info.hpp"

namespace knmf::results {

/// Per-replicate values of one k, indexed by replicate (iter).
struct ReplicateTable {
  std::vector<std::int64_t> seeds;
  std::vector<std::int32_t> iterations;
  std::vector<double> error_at_init;
  std::vector<double> final_error;
  std::vector<ReplicateState> status;
  std::vector<double> seconds;
  std::vector<std::uint8_t> completed;
};

/// Reads a results file. Opening checks the schema (metadata only); data is read on demand,
/// per k or per replicate. Opening does not lock the file, so a file that a writer has open
/// can be read too: its structure never changes during a run, and `completed` tells which
/// replicates are there. Not thread-safe.
class ResultsReader {
public:
  /// InputError when `path` is missing, not HDF5, not a knmf results file, of a newer
  /// format_version, or lacks an object of the schema (naming it).
  static ResultsReader open(const std::filesystem::path& path);

  ResultsReader(ResultsReader&&) noexcept;
  ResultsReader& operator=(ResultsReader&&) noexcept;
  ~ResultsReader();

  const std::filesystem::path& path() const;
  /// Run options, genes, job table and the creating session's provenance.
  const RunInfo& info() const;
  /// The sessions that wrote the file, oldest first (JSON objects).
  std::vector<std::string> sessions() const;
  /// The `complete` attribute (as of open()).
  bool complete() const;

  const std::vector<int>& ks() const;
  int n_iter() const;
  std::int64_t n_cells() const;
  std::int64_t n_genes() const;
  bool has_usages() const;

  /// The table of every replicate of `k`.
  ReplicateTable table(int k) const;
  /// The completion flags of `k` (cheaper than table()).
  std::vector<std::uint8_t> completed(int k) const;
  /// Spectra of every replicate of `k`: n_iter x k x g, row-major.
  std::vector<double> spectra(int k) const;
  /// Spectra of one replicate: k x g, row-major.
  std::vector<double> spectra(int k, int iter) const;
  /// Usages of one replicate: n x k, row-major (InputError when the run did not save usages).
  std::vector<double> usages(int k, int iter) const;

  /// The file's format_version (1 or 2).
  int format_version() const;
  /// The consensus groups in the file, by k then threshold (empty for version-1 files).
  std::vector<ConsensusKey> consensus_list() const;
  /// True when /consensus/k_<k>/dt_<T> exists (T = density_threshold_string(threshold)).
  bool has_consensus(int k, double local_density_threshold) const;
  /// The consensus of k at that threshold (InputError naming what exists when absent).
  ConsensusRecord consensus(int k, double local_density_threshold) const;
  /// /consensus/cells: the obs names the consensus usages refer to (empty when absent).
  std::vector<std::string> consensus_cells() const;
  /// /k_selection, when present.
  std::optional<KSelectionTable> k_selection() const;

private:
  struct Impl;
  explicit ResultsReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace knmf::results
