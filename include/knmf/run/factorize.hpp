#pragma once
/// \file
/// `knmf factorize` as a library call: a run configuration (plain struct, filled by the
/// driver's CLI or by C++), and the run itself: read X once, plan batches from the memory
/// model, run every pending job through the batched solver, write results as they finish.

#include <cstdint>
#include <iosfwd>
#include <functional>
#include <string>
#include <vector>

#include "knmf/core/options.hpp"
#include "knmf/solver/options.hpp"

namespace knmf {

/// Where a run stands, as its progress hook sees it: after every iteration of a batch, and
/// when a replicate finishes.
struct RunProgress {
  /// What the call reports.
  enum class Event {
    iteration,  ///< an iteration of the batch of k finished (`running` replicates in it)
    finished,   ///< a replicate of k finished (`done` and `iterations` count it; `running` 0)
  };
  int k = 0;                 ///< the k being factorized
  std::int64_t done = 0;     ///< replicates finished in this run so far
  std::int64_t total = 0;    ///< replicates this run computes (skipped ones not counted)
  int running = 0;           ///< replicates in the batch now
  double seconds = 0.0;      ///< since the run started
  std::int64_t iterations = 0;  ///< iterations of the `done` finished replicates, summed
  Event event = Event::iteration;
};

struct FactorizeConfig {
  // ---- cNMF mode: a drop-in for `cnmf factorize` in a run directory made by `cnmf prepare`
  std::string output_dir;        ///< --output-dir
  std::string name;              ///< --name
  int worker_index = 0;          ///< --worker-index
  int total_workers = 1;         ///< --total-workers
  bool skip_completed = false;   ///< --skip-completed-runs

  // ---- native mode: an .h5ad of the user's own and one HDF5 results file
  std::string input;             ///< INPUT.h5ad
  std::string results;           ///< -o RESULTS.h5
  std::vector<int> ks;           ///< -k
  int n_iter = 100;              ///< --n-iter (replicates per k)
  std::int64_t seed = 14;        ///< --seed (cNMF's default)
  bool save_usages = false;      ///< --save-usages

  // ---- both modes
  SolverOptions solver;          ///< cNMF mode: from the run's yaml, then the overrides below
  bool solver_set = false;       ///< --solver given (cNMF mode: overrides the yaml)
  Dtype dtype = Dtype::float64;  ///< --dtype float|double
  XFormat format = XFormat::automatic;  ///< --format auto|dense|sparse (X on the device)
  int batch = 0;                 ///< --batch N (0 = auto from the memory model)
  std::int64_t device_memory_limit = 0;  ///< --device-memory-limit BYTES (0 = none)
  bool quiet = false;            ///< --quiet
  std::string log_json;          ///< --log-json FILE: one JSON object per finished replicate
  double progress_seconds = 5.0; ///< the driver's progress line period (on_progress)
  /// The progress and cancellation hook: called after every iteration of a batch and when a
  /// replicate finishes (RunProgress::Event), with where the run stands (k, replicates
  /// finished of the run's total and their iterations, replicates running, seconds). The
  /// library prints no progress line: the driver's hook does (k, done/total, mean
  /// iterations, rate, ETA every progress_seconds, and when the last replicate finishes).
  /// Returning false from an `iteration` call stops the run cleanly there (a `finished`
  /// call's return is not used: the next iteration's call decides): replicates
  /// finished so far are committed (a native run's results file resumes from them; cNMF mode
  /// wrote their spectra files), those still running are dropped, and the summary says
  /// `cancelled`. The driver's Ctrl-C uses it. An MPI run (knmf/mpi/run.hpp) calls it on
  /// rank 0 only, for every replicate of the run, and cannot be stopped by it (ranks stop
  /// together or not at all): a hook that returns false there is a LogicError (rank 0 reports
  /// it and the run aborts).
  std::function<bool(const RunProgress&)> on_progress;

  bool cnmf_mode() const { return !output_dir.empty() || !name.empty(); }
  /// Throws InputError naming the option when the configuration is inconsistent.
  void validate() const;
};

/// Density below which a sparse X is kept sparse on the device: the measured crossover of the
/// sparse gathers against dense GEMM on the CPU (MU, fp32, 200,000 x 2,000, R k = 80), set from
/// a run of 2026-11-29 (time ratio 0.99 at 20%, 1.62 at 35%); perf/RESULTS.md section 2 holds
/// the latest run (`perf/run.sh --only sparse`), which put it lower, at 13%.
inline constexpr double sparse_density_crossover = 0.20;

/// The device format chosen for X and why (one line for the plan).
struct FormatChoice {
  bool sparse = false;
  std::string reason;
};
/// Bytes are those of each format on the device.
FormatChoice choose_format(XFormat requested, bool file_is_sparse, double density,
                           std::int64_t dense_bytes, std::int64_t sparse_bytes,
                           std::int64_t budget);

struct FactorizeSummary {
  std::int64_t jobs_total = 0;     ///< jobs of this worker / run
  std::int64_t jobs_skipped = 0;   ///< already completed before this run
  std::int64_t jobs_run = 0;
  double seconds = 0.0;
  std::int64_t peak_device_bytes = 0;
  /// Replicates that are not valid factorizations (status non_finite): this run's, and in
  /// native mode those the resumed results file records (they are not run again). Such a
  /// run's results file is not complete and cNMF mode wrote no spectra file for them.
  std::int64_t jobs_failed = 0;
  /// When jobs_failed > 0: one line saying how many replicates failed, for which k and why.
  std::string failure;
  /// The progress hook returned false: the run stopped early (jobs_run replicates finished).
  bool cancelled = false;
  /// The device format the plan chose for X and why (as the plan line says it); reason empty
  /// when nothing ran (every job already complete). x_streamed: X did not fit device memory
  /// next to the factors and was streamed from host memory.
  FormatChoice x_format;
  bool x_streamed = false;
};

/// Run `knmf factorize`. The plan and the summary go to `log` (stderr in the driver), progress
/// to `config.on_progress`. A run in which replicates failed returns normally with
/// `jobs_failed` and `failure` set (the driver exits 1 with that line): check them.
FactorizeSummary run_factorize(const FactorizeConfig& config, std::ostream& log);

}  // namespace knmf
