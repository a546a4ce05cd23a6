#pragma once
/// \file
/// The pieces of `knmf factorize` shared by the single-process run (src/run/) and the MPI
/// runs (src/mpi/): the run plan, where results are stored, and the job channel through which
/// a process gets its jobs and reports finished replicates.

#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/results/results_file.hpp"
#include "knmf/run/factorize.hpp"
#include "knmf/run/memory.hpp"
#include "knmf/solver/nmf.hpp"
#include "progress.hpp"

namespace knmf::detail {

/// Everything a run needs besides X: the jobs, the solver options, where results go.
struct RunPlan {
  std::string x_path;
  std::vector<Job> jobs;  ///< pending jobs, in job-table order
  std::int64_t total = 0, skipped = 0;
  SolverOptions solver;
  io::CnmfPaths paths{"", ""};
  std::unique_ptr<io::ResultsWriter> results;  ///< native mode, on the process that writes
};

/// cNMF mode: the run directory's job table (this worker's share), params and paths.
RunPlan plan_cnmf(const FactorizeConfig& c);
/// Native mode: cNMF's job table for the arguments; with `open_results` the results file is
/// created or resumed and only its pending jobs remain.
RunPlan plan_native(const FactorizeConfig& c, const io::H5adReader& reader, bool open_results);

/// Stores finished replicates: a cNMF spectra file, or the results file (committed every
/// batch's worth of replicates or 30 s), plus the --log-json line.
class ResultStore {
public:
  ResultStore(const FactorizeConfig& c, RunPlan& plan, std::vector<std::string> genes);
  void begin_k(int R) { commit_every_ = R; }
  /// `write_files`: write the cNMF spectra file here (false when another process does).
  void store(const ReplicateResult& r, bool write_files = true);
  void end_k();
  /// Marks the results file complete when nothing is pending; true if so.
  bool finish();

private:
  RunPlan& plan_;
  std::vector<std::string> genes_;
  std::ofstream json_;
  int commit_every_ = 1, uncommitted_ = 0;
  std::chrono::steady_clock::time_point last_commit_;
};

/// How this process gets its jobs and reports its results.
class JobChannel {
public:
  virtual ~JobChannel() = default;
  /// The k values this process works on, in order.
  virtual std::vector<int> ks() const = 0;
  /// At most this many jobs of k come to this process (the batch is not made larger).
  virtual int max_jobs(int k) const = 0;
  /// The next job of k for this process, or nothing when k is done here.
  virtual std::optional<Job> next(int k) = 0;
  /// A replicate this process finished.
  virtual void finished(ReplicateResult&& r) = 0;
  /// Called after every iteration (progress; serving other ranks).
  virtual void tick(int k, int running) = 0;
  /// After each k.
  virtual void end_k(int) {}
  /// After this process's last job (the root waits for the others here).
  virtual void drain() {}
  /// Replicates finished by the whole run so far.
  virtual std::int64_t jobs_done() const = 0;
};

/// The single-process channel: a queue per k, results stored here.
class LocalChannel : public JobChannel {
public:
  LocalChannel(const std::vector<Job>& jobs, ResultStore& store, Progress& progress);
  std::vector<int> ks() const override;
  int max_jobs(int k) const override;
  std::optional<Job> next(int k) override;
  void finished(ReplicateResult&& r) override;
  void tick(int k, int running) override { progress_.tick(k, running); }
  void end_k(int) override { store_.end_k(); }
  std::int64_t jobs_done() const override { return done_; }

private:
  std::map<int, std::vector<Job>> by_k_;
  std::map<int, size_t> next_;
  ResultStore& store_;
  Progress& progress_;
  std::int64_t done_ = 0;
};

/// Device memory the run may plan with (free memory, capped by --device-memory-limit).
std::int64_t run_budget(const FactorizeConfig& c);

/// Where X goes: its device format, its bytes, and whether it stays in device memory next to
/// one replicate of the largest k or streams from host memory (a quarter of the room left
/// after one replicate per buffer, the rest going to replicates).
struct XPlan {
  FormatChoice choice;
  std::int64_t bytes_x = 0;        ///< X on the device in the chosen format
  std::int64_t one = 0;            ///< one replicate of the largest k, with its workspace
  bool in_core = true;
  std::int64_t stream_buffer = 0;  ///< bytes per streaming buffer (when not in core)
};
/// Throws InputError (before anything is allocated) when not even streaming leaves room for
/// one replicate.
XPlan plan_x(const FactorizeConfig& c, const io::H5adInfo& info, int k_max, int element_bytes,
             std::int64_t budget);

/// One line describing the run (input, jobs, solver).
void log_header(const FactorizeConfig& c, const RunPlan& plan, const io::H5adInfo& info,
                std::ostream& log);

/// Every k of the channel through the batched solver on X.
template <class XMat>
FactorizeSummary run_jobs(const FactorizeConfig& c, const RunPlan& plan, JobChannel& channel,
                          ResultStore* store, const XMat& X, std::int64_t budget,
                          std::int64_t bytes_x, std::chrono::steady_clock::time_point t0,
                          std::ostream& log) {
  using T = typename XMat::value_type;
  const int s = int(sizeof(T));
  ExecSpace space;
  FactorizeSummary sum;
  sum.jobs_total = plan.total;
  sum.jobs_skipped = plan.skipped;
  const std::int64_t used0 = used_device_bytes();
  std::int64_t peak = 0;
  for (int k : channel.ks()) {
    const int max_R = std::max(1, std::min(channel.max_jobs(k), std::max(1, 1024 / k)));
    const auto bp = plan_batch(X.rows(), X.cols(), k, s, bytes_x, budget, c.batch,
                               c.batch > 0 ? c.batch : max_R);
    if (!c.quiet) log << "plan: " << bp.describe() << "\n";
    if (store) store->begin_k(bp.R);
    JobSource src = [&]() { return channel.next(k); };
    auto on_result = [&](ReplicateResult&& r) {
      ++sum.jobs_run;
      channel.finished(std::move(r));
    };
    auto on_iteration = [&](int running) {
      peak = std::max(peak, used_device_bytes() - used0);
      channel.tick(k, running);
    };
    factorize(space, X, k, src, bp.R, plan.solver, on_result, on_iteration);
    channel.end_k(k);
  }
  channel.drain();
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sum.peak_device_bytes = peak + bytes_x;
  return sum;
}

}  // namespace knmf::detail
