#pragma once
/// \file
/// knmf's native results file (HDF5): every replicate of a `knmf factorize` run, written so
/// that a run killed at any moment can be resumed without losing committed replicates.
///
/// Schema (format_version 3; docs/results-file.md is the long form; version 2 is version 3
/// without input_absolute and input_fingerprint, version 1 version 2 without /consensus and
/// /k_selection; both are read as well):
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
///
/// Durability. Every object and every byte of raw storage is allocated when the file is
/// created (under a temporary name, renamed into place once closed). Afterwards a run only
/// overwrites raw data at fixed places: HDF5's metadata (object headers, chunk indices,
/// superblock) never changes until `finish()` rewrites the one value of `complete` in place.
/// A commit flushes the data, then writes and flushes the completion flags. So a process
/// killed at any moment leaves a file whose structure is the one created, whose flagged
/// replicates hold exactly their data, and whose `complete` is 0 unless finish() got to set
/// it. The format has no SWMR status flags (superblock version 0), so such a file opens in
/// any HDF5 reader, h5py included, without h5clear. Compression (gzip_level > 0) would make
/// chunk sizes change with each write, so it is applied once, by `finish()`, which rewrites
/// the completed file compressed under a temporary name and renames it into place.
///
/// Consensus outputs are added by update_results_file(), which builds a new file under a
/// temporary name (an HDF5 copy of every object, plus the new groups), syncs it, and renames
/// it over the original, which it only reads: a process killed at any moment leaves either
/// the old file, unchanged, or the new one, both whole.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "knmf/core/options.hpp"
#include "knmf/random/random_state.hpp"
#include "knmf/solver/options.hpp"
#include "knmf/solver/result.hpp"

namespace knmf::io {

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

/// The steps of the writer's durable-write protocol, reported to ResultsWriteOptions::on_step
/// (tests kill the process at each of them).
enum class WriteStep {
  created,        ///< a new file is complete under its temporary name, not renamed yet
  data_flushed,   ///< commit: the replicates' data is flushed; flags not written yet
  flags_written,  ///< commit: flags handed to HDF5, not flushed yet
  committed,      ///< commit: flags flushed; the replicates count as done
  completing,     ///< finish: every replicate is committed; `complete` not set yet
  completed,      ///< finish: `complete` = 1 is flushed (the file is about to close)
};

/// Options of ResultsWriter.
struct ResultsWriteOptions {
  /// 0..9: gzip level of spectra and usages, applied by finish() when the run completes.
  int gzip_level = 0;
  /// fsync the file after each flush (so that commits also survive a power cut, not just a
  /// killed process).
  bool fsync = true;
  /// Called at each WriteStep (tests, diagnostics); may throw to abandon the operation.
  std::function<void(WriteStep)> on_step;
};

/// Writes a results file replicate by replicate, resuming an interrupted run.
///
///   auto w = ResultsWriter::create_or_resume("out.h5", info);
///   for (const Job& j : w.pending()) { ...; w.write(result); if (...) w.commit(); }
///   w.finish();
///
/// Results written but not committed when the writer dies (or is destroyed) do not count:
/// they are pending in the next session. Not thread-safe: one thread per writer. The file is
/// locked (HDF5 file locking) against a second writer while open.
class ResultsWriter {
public:
  /// Create `path` (all groups and datasets allocated, every replicate pending) or, when it
  /// exists, resume it. InputError when: the output folder is missing or not writable; `path`
  /// exists but is not a knmf results file (it is never overwritten); it was written with
  /// other run options (the message names each differing option with its old and new value);
  /// it was computed on another X (below); `info` is invalid (no ks, n_iter < 1, ...). Records
  /// this session in /sessions.
  ///
  /// The input of a resume. The input path need not be the same text (`./a/in.h5ad` for
  /// `a/in.h5ad`, another working directory, a moved file): X is compared by content. When
  /// both the file and `info` have an input_fingerprint, they must be equal (InputError naming
  /// both paths and both fingerprints otherwise); when `info` has none (X not read: check(),
  /// or a run with nothing left to do), the content is not compared. A file without a
  /// fingerprint (written before format_version 3) is resumed when `info.input` is the file
  /// it records (the same path text, or the same file by identity, io::same_file), with a
  /// warning (warnings()) that its content cannot be checked; another file is refused.
  static ResultsWriter create_or_resume(const std::filesystem::path& path, const RunInfo& info,
                                        const ResultsWriteOptions& opts = {});

  /// What create_or_resume(path, info) would find, read without writing anything: the jobs
  /// it would leave pending, in job-table order (every job when `path` does not exist yet).
  /// InputError in the cases create_or_resume refuses (see there), and when `path` exists but
  /// is not writable. A run checks its results file with this before it reads its input, and
  /// creates or resumes it once the input is read and valid: a run that stops on a bad input
  /// leaves no file behind.
  static std::vector<Job> check(const std::filesystem::path& path, const RunInfo& info);

  ResultsWriter(ResultsWriter&&) noexcept;
  ResultsWriter& operator=(ResultsWriter&&) noexcept;
  /// Closes the file; results written since the last commit stay uncommitted.
  ~ResultsWriter();

  const std::filesystem::path& path() const;
  /// The run as recorded (ks sorted, job table filled in).
  const RunInfo& info() const;
  /// True when the file existed (this session resumes it).
  bool resumed() const;
  /// What the resume could not check, one line each (e.g. the input of a file that records
  /// no fingerprint); empty for a new file.
  const std::vector<std::string>& warnings() const;

  /// Jobs neither committed nor written since the last commit, in job-table order.
  std::vector<Job> pending() const;
  /// True when the job's replicate is committed. InputError if `job` is not in the table.
  bool done(const Job& job) const;
  /// Number of committed replicates.
  std::int64_t n_done() const;
  /// Committed replicates that are not valid factorizations (status non_finite), in job-table
  /// order. They are not pending (a resume does not run them again: the same X, seed and
  /// options give the same result), and while there are any the file is never complete.
  std::vector<Job> failed() const;

  /// Write one replicate's data and table entries (not yet counted: see commit()).
  /// InputError when its job is not in the table, is already committed (committed data is
  /// never overwritten), or its shapes do not match the run (H: k x g; W: n x k when
  /// save_usages).
  void write(const ReplicateResult& result);
  /// Durably record every replicate written since the last commit: flush their data, then
  /// write and flush their completion flags (each flush followed by fsync when asked).
  void commit();
  /// Commit, then, when every replicate is committed and none is non_finite (failed()), set
  /// `complete` = 1 (compressing first when gzip_level > 0). Closes the file in either case;
  /// returns whether it is complete.
  bool finish();

private:
  struct Impl;
  explicit ResultsWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

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

// ---- consensus outputs (format_version 2) ---------------------------------------------------

/// How a consensus (or a k-selection) was computed: recorded as attributes of its group.
struct ConsensusSettings {
  double local_density_threshold = 0.5;  ///< keep replicate spectra with density below this
  double local_neighborhood_size = 0.30; ///< neighbours as a fraction of the replicates
  int kmeans_n_init = 10;                ///< k-means restarts
  std::int64_t kmeans_seed = 1;          ///< k-means random_state
  int kmeans_max_iter = 300;
  double kmeans_tol = 1e-4;
  /// The usage refit's solver: solver, tol, max_iter, alpha_W, alpha_H, l1_ratio are recorded.
  SolverOptions refit;
  std::string counts;                    ///< X (.h5ad) the usages were refitted on
  std::string tpm;                       ///< TPM (.h5ad) of the TPM outputs; "" when none
  // provenance: filled in by update_results_file() when empty
  std::string created;                   ///< ISO 8601 UTC
  std::string knmf_version, kokkos_version, backend, device;
};

/// The consensus of one k at one density threshold: /consensus/k_<k>/dt_<T>.
/// Matrices are row-major; g = the run's genes (/genes), n = its cells.
struct ConsensusRecord {
  int k = 0;
  ConsensusSettings settings;
  int n_neighbors = 0;            ///< neighbours of the local density
  double silhouette = 0.0;        ///< stability (NaN when undefined)
  double prediction_error = 0.0;  ///< ||X - W H||_F^2 of the usage refit on X
  int refit_n_iter = 0;           ///< iterations of that refit
  ReplicateState refit_status = ReplicateState::pending;  ///< its outcome
  /// The non-zero replicate spectra, as rows of the run's stacked spectra of k
  /// (row = iter * k + topic - 1, i.e. /k_<k>/spectra reshaped to (n_iter * k, g)).
  std::vector<std::int64_t> replicate_rows;
  std::vector<double> local_density;  ///< of each replicate_rows entry
  /// Program (1..k, as numbered in `spectra`) each replicate_rows entry was clustered
  /// into; 0 when the density filter dropped it.
  std::vector<std::int32_t> cluster;
  std::vector<double> spectra;        ///< k x g consensus spectra (rows sum to 1); float64
  std::vector<double> usages;         ///< n x k usages (cNMF's usages file)
  /// usages and spectra_tpm are float32 numbers, stored as float32 (as cNMF stores them
  /// when its TPM matrix is float32).
  bool float32 = false;
  bool has_tpm = false;               ///< the TPM outputs below are present
  std::vector<std::string> tpm_genes; ///< gt genes of the TPM matrix
  std::vector<double> spectra_tpm;    ///< k x gt (cNMF's gene_spectra_tpm)
  std::vector<double> spectra_score;  ///< k x gt (gene_spectra_score); float64
  std::vector<double> starcat;        ///< k x g (starcat_spectra); float64
};

/// cNMF's k-selection statistics: /k_selection (one row per k).
struct KSelectionTable {
  ConsensusSettings settings;  ///< the threshold is recorded, not applied (as cNMF)
  std::vector<int> k;
  std::vector<double> local_density_threshold, silhouette, prediction_error;
};

/// Which consensus groups a file holds.
struct ConsensusKey {
  int k = 0;
  double local_density_threshold = 0.0;
  std::string group;  ///< "/consensus/k_7/dt_0_5"
};

/// The path of the consensus group of k at a density threshold: "/consensus/k_7/dt_0_5"
/// (the threshold as cNMF writes it in file names, io::density_threshold_string).
std::string consensus_group(int k, double local_density_threshold);

/// What update_results_file() adds; each entry replaces the group of the same name.
struct ResultsAdditions {
  std::vector<ConsensusRecord> consensus;  ///< each replaces /consensus/k_<k>/dt_<T>
  /// obs names of X (n of them) for /consensus/cells; empty: kept as they are (required
  /// when the file has none yet and `consensus` is not empty).
  std::vector<std::string> cells;
  std::optional<KSelectionTable> k_selection;  ///< replaces /k_selection
};

/// Steps of update_results_file(), reported to ResultsUpdateOptions::on_step (kill tests).
enum class UpdateStep {
  copied,   ///< the new file is whole under its temporary name and synced, not renamed yet
  renamed,  ///< it replaced the original (and the folder is synced)
};

struct ResultsUpdateOptions {
  /// Called at each UpdateStep; may throw to abandon the update (before `renamed`: the
  /// original stays as it was).
  std::function<void(UpdateStep)> on_step;
};

/// Add consensus outputs (and/or the k-selection table) to the results file `path`,
/// replacing groups of the same k and threshold. The file is rebuilt under a temporary name
/// in its folder (every object copied, the additions written, format_version raised to 2
/// where it was 1),
/// synced and renamed over `path`. The original is only read, under an exclusive flock()
/// (the lock HDF5 takes for writing): a `knmf factorize` resumed meanwhile is refused, and
/// while one writes the file the update is refused. Killed at any moment, `path` is the old
/// file (unchanged, byte for byte) or the new one, never a mix (a stray temporary
/// `.NAME.knmf-tmp-*` may be left, and the next writer removes it). Needs free space for a second copy of the file. Open
/// ResultsReaders (any process) keep reading the file they opened.
/// InputError (naming the file and the value) when the file is not a results file, is
/// locked, its folder is not writable, or an addition does not fit the run (k not a k of the
/// run, wrong shapes, a threshold outside (0, 2], the same group twice).
void update_results_file(const std::filesystem::path& path, const ResultsAdditions& additions,
                         const ResultsUpdateOptions& opts = {});

/// Check, before long work, that update_results_file(path, ...) can run now: `path` is a
/// knmf results file of a version this knmf reads, no process holds it open for writing
/// (HDF5 file lock), and its folder accepts new files. InputError naming the file and the
/// reason otherwise. Changes nothing.
void check_results_updatable(const std::filesystem::path& path);

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

}  // namespace knmf::io
