#pragma once
/// \file
/// Where a run's finished replicates go (internal). A ResultSink is one destination: the
/// native results file (committed every batch's worth of replicates or 30 s), a cNMF spectra
/// file per replicate, the --log-json lines. A ResultStore chooses its sinks once, when it is
/// made, from the run's configuration and this process's role, and counts each k's outcomes
/// (the failed replicates the run reports).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "knmf/core/job.hpp"
#include "knmf/solver/result.hpp"

namespace knmf {
struct FactorizeConfig;
struct FactorizeSummary;
}  // namespace knmf

namespace knmf::detail {

struct RunPlan;

/// One destination of finished replicates.
class ResultSink {
public:
  virtual ~ResultSink() = default;
  /// Makes the destination, once X is read and valid. `x_fingerprint`: X's content
  /// fingerprint (io/fingerprint.hpp; "" when unknown). `computing`: false for a run with
  /// nothing to compute, which opens only what records the whole run (the results file: it is
  /// still checked against X, and may be marked complete).
  virtual void open(const std::string& x_fingerprint, bool computing) = 0;
  /// Replicates an earlier run recorded as failed (a resumed results file), once opened.
  virtual std::vector<Job> recorded_failures() const { return {}; }
  /// A k starts, `R` replicates per batch.
  virtual void begin_k(int /*R*/) {}
  virtual void store(const ReplicateResult& r) = 0;
  virtual void end_k() {}
  /// Marks the destination complete when it holds the whole run and nothing failed; true if so.
  virtual bool finish() { return false; }
};

/// Native mode, on the process that writes: the results file the plan checked (plan.results,
/// created or resumed by open()). Committed every `R` replicates (begin_k) or 30 s, and at
/// the end of each k.
std::unique_ptr<ResultSink> results_file_sink(RunPlan& plan);
/// cNMF mode: a spectra file per replicate in the run directory, none for a failed
/// (non_finite) replicate (cNMF would take it for a completed one).
std::unique_ptr<ResultSink> cnmf_spectra_sink(const RunPlan& plan, std::vector<std::string> genes);
/// --log-json FILE: one JSON object per replicate, flushed as written; the file is made
/// (truncated) by open() of a run that computes. A write that fails (a full disk) throws the
/// InputError "cannot write FILE" with its errno.
std::unique_ptr<ResultSink> json_log_sink(const std::string& path);

/// Stores finished replicates in the sinks chosen when it is made, and counts each k's
/// outcomes for report_failures.
class ResultStore {
public:
  /// The sinks, from the configuration: the results file (native mode, on the process that
  /// writes it: plan.results_info), the spectra files (cNMF mode), the --log-json lines
  /// (c.log_json; an MPI run clears it on the ranks that do not write).
  ResultStore(const FactorizeConfig& c, RunPlan& plan, std::vector<std::string> genes);
  /// The first write of a run, once X is read and valid: every sink opened, with X's content
  /// fingerprint (io/fingerprint.hpp; "" when unknown).
  void open(const std::string& x_fingerprint);
  /// A run with nothing to run: the results file alone, with X's fingerprint when known
  /// (x_fingerprint_of: a complete results file is still checked against X's content).
  void open_results_only(const std::string& x_fingerprint = "");
  void begin_k(int R);
  /// A replicate this process computed: every sink.
  void store(const ReplicateResult& r);
  /// A replicate another process computed and sent here (the MPI writer): the sinks of the
  /// whole run (the results file, the --log-json lines), not the spectra files, which the
  /// process that computed it wrote.
  void store_received(const ReplicateResult& r);
  void end_k();
  /// Marks the results file complete when nothing is pending and nothing failed; true if so.
  bool finish();
  /// The failed (non_finite) replicates stored by this run and, native mode, those the
  /// results file already recorded when opened: sum.jobs_failed and sum.failure. `x_max`:
  /// X's largest value (0 when X was not read), X n x g.
  void report_failures(FactorizeSummary& sum, const FactorizeConfig& c, double x_max,
                       std::int64_t n, std::int64_t g) const;

private:
  void open_sinks(const std::string& x_fingerprint, bool computing);
  void count(const ReplicateResult& r);

  std::vector<std::unique_ptr<ResultSink>> sinks_;  ///< in the order they are written
  std::vector<ResultSink*> own_, received_;         ///< store(), store_received()
  bool opened_ = false;
  struct KOutcome {
    std::int64_t ran = 0, failed = 0, failed_before = 0;  ///< this run's; recorded before
  };
  std::map<int, KOutcome> outcomes_;  ///< by k
};

}  // namespace knmf::detail
