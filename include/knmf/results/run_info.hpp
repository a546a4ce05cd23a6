#pragma once
/// \file
/// knmf's native results file (HDF5): its schema, and the description of the run it records
/// (RunInfo). The writer (writer.hpp), the reader (reader.hpp) and the consensus outputs
/// (consensus_records.hpp) each have their header; docs/results-file.md is the long form.
///
/// Schema (format_version 3; version 2 is version 3 without input_absolute and
/// input_fingerprint, version 1 version 2 without /consensus and /k_selection; both are read
/// as well):
///
///   /                  attributes
///     format           str    "knmf-results"
///     format_version   int64  3 (1 or 2 in files of earlier knmf versions)
///     knmf_version, kokkos_version, backend, device   str    (the session that created it)
///     batch_size       int64  (the session that created it)
///     created          str    ISO 8601 UTC, e.g. "2024-05-01T12:34:56Z"
///     input            str    input path as given
///     input_absolute   str    that path made absolute (from the creating session's folder)
///     input_fingerprint str   X's content fingerprint, 16 hex digits (io/fingerprint.hpp:
///                      independent of dense/sparse storage, value type and chunking); ""
///                      when the creator did not read X (C++ callers that give none)
///     input_shape      int64[2]  (n cells, g genes)
///     ks               int64[m]  sorted, unique
///     n_iter, seed, max_iter, check_every        int64
///     tol, alpha_W, alpha_H, l1_ratio, eps       float64
///     solver ("cd"|"mu"), zero_guard ("replace-zero"|"add-eps"), dtype ("float"|"double"),
///     init ("random"|"nndsvd"|"nndsvda"|"nndsvdar"; absent in older files: "random"),
///     beta_loss ("frobenius", "kullback-leibler", "itakura-saito" or the number) str
///     save_usages      int64  0/1
///     complete         int64  0/1: set to 1 last, once every replicate is committed (never
///                             while a committed replicate is non_finite)
///   /genes             str[g]   variable-length UTF-8: the var index of the input
///   /jobs/k, /jobs/iter, /jobs/seed   int64[m * n_iter]: cNMF's job table, in its row order
///   /sessions          fixed-length UTF-8 str (512 bytes) [256]: one JSON object per session
///                      that opened the file for writing (started, knmf_version,
///                      kokkos_version, backend, device, batch_size, host, pid); "" = unused
///                      slot; after 256 sessions the last slot holds the latest one
///   /k_<k>             one group per k, attributes k, n_iter (int64), datasets:
///     spectra          float64 [n_iter, k, g]  chunks of one replicate
///     usages           float32|float64 (dtype) [n_iter, n, k]  only when save_usages
///     seeds            int64   [n_iter]
///     iterations       int32   [n_iter]
///     error_at_init, final_error, seconds   float64 [n_iter]
///     status           int8 enum [n_iter]: pending 0, converged 1, max_iter 2, non_finite 3
///     completed        uint8   [n_iter]: 1 once the replicate is committed
///   /consensus         (optional) consensus of `knmf consensus --results`:
///     cells            str[n]   obs names of X (the rows of every `usages`)
///     k_<k>/dt_<T>     one group per k and density threshold (T as cNMF writes it: 0_5);
///                      datasets spectra, usages, replicate_rows, local_density, cluster,
///                      and with TPM tpm_genes, spectra_tpm, spectra_score, starcat;
///                      attributes: the options and the stability and error (ConsensusRecord)
///   /k_selection       (optional) `knmf k-selection --results`: datasets k,
///                      local_density_threshold, silhouette, prediction_error [m]
///
/// A replicate's values count only when its `completed` flag is 1; the others hold zeros or
/// the data of an uncommitted write. A committed replicate of status non_finite is a failed
/// attempt, not a factorization: its data are what the solver reached (NaN/Inf, or factors
/// whose error could not be measured), and consensus, k selection and compare skip it.

#include <cstdint>
#include <string>
#include <vector>

#include "knmf/core/job.hpp"
#include "knmf/core/options.hpp"
#include "knmf/solver/options.hpp"
#include "knmf/solver/result.hpp"

namespace knmf::results {

/// The schema version this code writes; it reads every version from 1 to this one.
inline constexpr int results_format_version = 3;

/// State of one replicate, as stored in /k_<k>/status (an HDF5 int8 enum).
enum class ReplicateState : std::int8_t {
  pending = 0,    ///< not committed yet
  converged = 1,  ///< ReplicateStatus::converged
  max_iter = 2,   ///< ReplicateStatus::max_iter
  non_finite = 3  ///< ReplicateStatus::non_finite
};
ReplicateState to_state(ReplicateStatus s);
/// "pending", "converged", "max_iter", "non_finite".
std::string to_string(ReplicateState s);

/// What a run computes (compared on resume) and where it ran (recorded only).
struct RunInfo {
  // ---- the input: a resume must be given the same X (see ResultsWriter::create_or_resume) ----
  std::string input;               ///< input .h5ad path, as given
  std::string input_absolute;      ///< `input` made absolute ("" in files before format_version 3)
  /// X's content fingerprint (io/fingerprint.hpp, XFingerprint::text); "" when unknown (a
  /// file before format_version 3, or a run that has not read X).
  std::string input_fingerprint;

  // ---- the run: a resume must match all of these exactly ----
  std::int64_t n_cells = 0;        ///< n: rows (cells) of X
  std::vector<std::string> genes;  ///< var index of the input; g = genes.size()
  std::vector<int> ks;             ///< ranks; sorted and made unique by the writer
  int n_iter = 0;                  ///< replicates per k
  std::int64_t seed = 0;           ///< seed of the job table
  /// solver, tol, max_iter, check_every, alpha_W, alpha_H, l1_ratio, zero_guard, eps, init.
  /// `return_W` is not recorded: `save_usages` is.
  SolverOptions solver;
  Dtype dtype = Dtype::float32;         ///< precision of X and the solver (stored as "float"|"double")
  bool save_usages = false;             ///< store each replicate's usages W
  /// The job table in cNMF's row order (Job::index = row). Empty: the writer uses
  /// cnmf_job_table(ks, n_iter, seed).
  std::vector<Job> jobs;

  // ---- provenance: recorded, never compared (a run may resume elsewhere) ----
  std::string knmf_version;    ///< empty: knmf::version()
  std::string kokkos_version;  ///< empty: knmf::kokkos_version()
  std::string backend;         ///< empty: knmf::default_execution_space()
  std::string device;          ///< empty: knmf::device_description() once Kokkos is initialized
  int batch_size = 0;          ///< replicates solved together
  /// Reader: when the file was created (ISO 8601 UTC). The writer sets it on creation.
  std::string created;

  std::int64_t n_genes() const { return static_cast<std::int64_t>(genes.size()); }
};

/// The input file of the run `info` records, as a path to open from the current folder: the
/// absolute path (input_absolute) when that file exists, the very file the run read; else the
/// path as given (a relative one resolving from the current folder, e.g. after the run's
/// folder was moved). Callers still compare the content (input_fingerprint) where they read X.
std::string run_input_path(const RunInfo& info);

}  // namespace knmf::results
