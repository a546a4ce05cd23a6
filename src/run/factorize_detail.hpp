#pragma once
/// \file
/// The one `knmf factorize` run, `run_factorize_with<T>(config, parts, log)`, and the pieces it
/// is made of. The single-process run (src/run/factorize.cpp) and the MPI run
/// (src/mpi/run_mpi.cpp) are this run with different Parts: what differs between them is only
/// how the plan reaches every process, where X goes and the job channel. The plan, the check
/// that a run fits, the loading of a whole X, the result store, the "nothing to do" path and
/// the summary exist here once.
///
/// A Parts (a class; the run is a template on it) provides:
///
///   int ranks() const;
///       processes in the run (the summary names them when more than one).
///   std::int64_t budget(std::int64_t own);
///       the device budget every process plans with, from this process's own (MPI: the
///       smallest over the ranks, so that all make the same plan).
///   template <class F> void share_plan(RunPlan& plan, const FactorizeConfig& c, F&& make);
///       runs make() on the one process that plans (it cleans up temporaries and owns the
///       results file), then gives `plan` to every process. When make() throws, every process
///       throws (the planning one its exception, the others an InputError with its message),
///       so that the caller reports it once and nothing else happens.
///   Placement place(const FactorizeConfig& c, const io::H5adReader& reader, int k, int s,
///                   std::int64_t budget);
///       where X goes for a run whose largest k is k (s: bytes per value). Throws InputError,
///       before anything is allocated, when X and one replicate cannot be placed. Must not
///       communicate: the fit check calls it in make().
///   template <class T, class F>
///   FactorizeSummary run_on_x(const RunContext& run, const Placement& where, F&& f);
///       loads X as placed, makes the job channel and returns f(X, bytes of X on this
///       device, channel).
///   void reduce(FactorizeSummary& sum);
///       the summary of the whole run from this process's.
///   void share_failures(FactorizeSummary& sum);
///       the failed replicates the first process counted (it stores every replicate), given
///       to every process, so that all of them end the run alike.

#include <algorithm>
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
#include "knmf/matrix/load.hpp"
#include "knmf/matrix/streamed_matrix.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/results/writer.hpp"
#include "knmf/run/factorize.hpp"
#include "knmf/run/memory.hpp"
#include "knmf/solver/nmf.hpp"
#include "progress.hpp"
#include "result_sinks.hpp"

namespace knmf::detail {

// ---------------------------------------------------------------------------------- the plan

/// Everything a run needs besides X: the jobs, the solver options, where results go.
struct RunPlan {
  std::string x_path;
  std::vector<Job> jobs;  ///< pending jobs, in job-table order
  std::int64_t total = 0, skipped = 0;
  SolverOptions solver;
  io::CnmfPaths paths{"", ""};
  /// Native mode, on the process that writes: the results file checked by the plan
  /// (ResultsWriter::check), created or resumed by ResultStore::open once X is read.
  std::optional<results::RunInfo> results_info;
  std::string results_path;
  std::unique_ptr<results::ResultsWriter> results;  ///< native mode, on the process that writes
  /// One line each, printed as "knmf: warning: ..." by the process that planned.
  std::vector<std::string> warnings;
};

/// cNMF mode: the run directory's job table (this worker's share), params and paths.
RunPlan plan_cnmf(const FactorizeConfig& c);
/// Native mode: cNMF's job table for the arguments, less the jobs the results file already
/// holds; the results file is checked (nothing is written: ResultStore::open creates or
/// resumes it).
RunPlan plan_native(const FactorizeConfig& c, const io::H5adReader& reader);
/// --log-json: InputError (nothing written) when the file could not be written.
void require_writable_log(const FactorizeConfig& c);
/// Native mode, on the process that writes: creates or resumes the results file the plan
/// checked (plan.results); false elsewhere. InputError when it no longer holds the plan's
/// pending jobs (another run wrote it since), or when its replicates were computed on an X
/// whose fingerprint is not `plan.results_info->input_fingerprint` (when that is known).
bool open_results(RunPlan& plan);
/// The results writer's warnings, "knmf: warning: ..." each.
void log_warnings(const results::ResultsWriter& w, std::ostream& log);
/// Native mode: InputError when INPUT.h5ad does not exist, or when -o is that same file.
void require_input(const FactorizeConfig& c);

/// A run that failed for a full disk (`e.system_errno()` is ENOSPC) after its results file was
/// made: "; FILE keeps N of M replicates committed (S MB): free space and run the same command
/// again to resume it, or remove FILE", so the one error line says what was left on the disk
/// and what to do with it. "" for any other failure.
std::string full_disk_note(const FactorizeConfig& c, const InputError& e);

/// X's content fingerprint (io/fingerprint.hpp) by one read-only pass over the file in row
/// bands of bounded size, for a run that computes nothing.
std::string x_fingerprint_of(const io::H5adReader& reader);

/// Device memory the run may plan with (free memory, capped by --device-memory-limit).
std::int64_t run_budget(const FactorizeConfig& c);

// ------------------------------------------------------------------------- where X goes

/// X's device format (choose_format on the bytes of each format) for n x g with `nnz` stored
/// values (n * g for a dense input), and X's bytes in it.
struct XFormatPlan {
  FormatChoice choice;
  std::int64_t bytes_x = 0;  ///< X on the device in the chosen format
};
XFormatPlan plan_x_format(const FactorizeConfig& c, std::int64_t n, std::int64_t g,
                          std::int64_t nnz, bool sparse_in, int element_bytes,
                          std::int64_t budget);

/// Where X goes: its device format, its bytes, and whether it stays in device memory next to
/// one replicate of the largest k or streams from host memory (a quarter of the room left
/// after one replicate per buffer, the rest going to replicates).
struct XPlan : XFormatPlan {
  std::int64_t one = 0;            ///< one replicate of the largest k, with its workspace
  bool in_core = true;
  std::int64_t stream_buffer = 0;  ///< bytes per streaming buffer (when not in core)
};
/// Throws InputError (before anything is allocated) when not even streaming leaves room for
/// one replicate.
XPlan plan_x(const FactorizeConfig& c, const io::H5adInfo& info, int k_max, int element_bytes,
             std::int64_t budget);

/// Where a Parts puts X, and what the fit check needs to know of it.
struct Placement {
  XPlan x;                          ///< the format; for a whole X, in core or streamed
  bool rows = false;                ///< X partitioned by rows over the processes (MPI)
  std::int64_t device_rows = 0;     ///< rows of X on the device that holds the most
  std::int64_t device_x_bytes = 0;  ///< bytes of X on that device, as the batch plan counts them
};

/// The whole X on this process's device: in device memory, or streamed from host memory
/// through two buffers when it does not fit next to one replicate.
Placement place_whole_x(const FactorizeConfig& c, const io::H5adInfo& info, int k_max,
                        int element_bytes, std::int64_t budget);

/// The forced --batch (`requested` > 0) capped at the `jobs` of k there are (at least 1): more
/// replicate slots than jobs would only take memory. 0 (auto) stays 0.
inline int forced_batch(int requested, std::int64_t jobs) {
  if (requested <= 0) return 0;
  return int(std::max<std::int64_t>(1, std::min<std::int64_t>(requested, jobs)));
}

/// The jobs of k in `jobs`.
inline std::int64_t jobs_of_k(const std::vector<Job>& jobs, int k) {
  return std::count_if(jobs.begin(), jobs.end(), [k](const Job& j) { return j.k == k; });
}

/// Throws (before anything is allocated or written, the results file included) the InputError
/// a run of `ks` would meet: some k exceeds min(cells, genes) of X (a rank-k factorization
/// of X has no more than that many independent components), X and one replicate cannot be placed, or a batch
/// (the forced --batch, else one replicate) does not fit next to X.
/// `jobs_of(k)`: at most this many jobs of k (a forced --batch is capped there).
template <class Parts, class JobsOf>
void check_fits(const FactorizeConfig& c, const io::H5adReader& reader, const std::vector<int>& ks,
                int s, std::int64_t budget, Parts& parts, JobsOf&& jobs_of) {
  const std::int64_t most = std::min(reader.info().n_obs, reader.info().n_vars);
  for (int k : ks)
    if (k > most)
      input_error("-k ", k, " exceeds min(cells, genes) = ", most, " of ", reader.path().string());
  for (int k : ks) {
    const Placement where = parts.place(c, reader, k, s, budget);
    const int batch = forced_batch(c.batch, jobs_of(k));
    plan_batch(where.device_rows, reader.info().n_vars, k, s, where.device_x_bytes, budget,
               batch, batch > 0 ? batch : 1);
  }
}

/// The stored entries of a sparse X (what the beta rule's scratch holds), 0 for a dense one.
template <class T>
std::int64_t sparse_values(const DenseMatrix<T>&) {
  return 0;
}
template <class T>
std::int64_t sparse_values(const CsrMatrix<T>& X) {
  return std::int64_t(X.nnz());
}
template <class T>
std::int64_t sparse_values(const StreamedMatrix<T>& X) {
  return X.sparse() ? std::int64_t(X.nnz()) : 0;
}
/// A row block of X (MPI): its own block's entries.
template <class XMat>
auto sparse_values(const XMat& X) -> decltype(X.local(), std::int64_t()) {
  return sparse_values(X.local());
}

// ------------------------------------------------------------------------ the job channel
// (where results go: result_sinks.hpp)

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

/// The jobs of one process: a queue per k, the ks in the order their first job comes, each
/// finished replicate counted, reported to the progress hook and handed to `keep`.
class QueueChannel : public JobChannel {
public:
  QueueChannel(const std::vector<Job>& jobs, ProgressHook& progress);
  std::vector<int> ks() const override { return order_; }
  int max_jobs(int k) const override;
  std::optional<Job> next(int k) override;
  void finished(ReplicateResult&& r) override;
  void tick(int k, int running) override { progress_.tick(k, running); }
  std::int64_t jobs_done() const override { return done_; }

protected:
  /// Where a finished replicate goes (before the progress hook hears of it).
  virtual void keep(ReplicateResult&& r) = 0;

private:
  std::vector<int> order_;
  std::map<int, std::vector<Job>> by_k_;
  std::map<int, size_t> next_;
  ProgressHook& progress_;
  std::int64_t done_ = 0;
};

/// The single-process channel: the ks in increasing order, results stored here.
class LocalChannel : public QueueChannel {
public:
  LocalChannel(const std::vector<Job>& jobs, ResultStore& store, ProgressHook& progress);
  void end_k(int) override { store_.end_k(); }

protected:
  void keep(ReplicateResult&& r) override { store_.store(r); }

private:
  ResultStore& store_;
};

// ------------------------------------------------------------------------------- the run

/// What a Parts' run_on_x works with.
struct RunContext {
  const FactorizeConfig& config;
  RunPlan& plan;
  const io::H5adReader& reader;
  ResultStore& store;
  ProgressHook& progress;
  std::int64_t budget;
  std::ostream& log;
};

/// Loads the whole X as `where` (from place_whole_x) says, prints the plan line (`prefix`
/// first: a Parts names its processes there) and returns f(X, bytes of X on the device).
template <class T, class F>
FactorizeSummary with_whole_x(const RunContext& run, const Placement& where,
                              const std::string& prefix, F&& f) {
  const auto& c = run.config;
  const auto& x = where.x;
  const auto& choice = x.choice;
  ExecSpace space;
  if (x.in_core) {
    if (!c.quiet)
      run.log << "plan: " << prefix << "X in device memory as "
              << (choice.sparse ? "sparse CSR + CSC" : "dense") << " (" << choice.reason << "), "
              << format_bytes(double(x.bytes_x)) << "\n";
    if (choice.sparse) return f(load_csr<T>(space, run.reader), x.bytes_x);
    return f(load_dense<T>(space, run.reader), x.bytes_x);
  }
  auto X = StreamedMatrix<T>::load(space, run.reader, choice.sparse, x.stream_buffer);
  if (!c.quiet)
    run.log << "plan: " << prefix << "X (" << format_bytes(double(x.bytes_x)) << " as "
            << (choice.sparse ? "sparse CSR + CSC" : "dense") << ", " << choice.reason
            << ") does not fit the device budget of " << format_bytes(double(run.budget))
            << " next to the factors: streamed from host memory in " << X.num_blocks()
            << " row blocks through two buffers of " << format_bytes(double(X.device_bytes() / 2))
            << "\n";
  return f(X, X.device_bytes());
}

/// One line describing the run (input, jobs, solver).
void log_header(const FactorizeConfig& c, const RunPlan& plan, const io::H5adInfo& info,
                std::ostream& log);
/// The last line: jobs, time, peak device memory (and the ranks when more than one).
void log_summary(const FactorizeConfig& c, const FactorizeSummary& sum, int ranks,
                 std::ostream& log);

/// Every k of the channel through the batched solver on X.
template <class XMat>
FactorizeSummary run_jobs(const FactorizeConfig& c, const RunPlan& plan, JobChannel& channel,
                          ResultStore* store, const ProgressHook& progress, const XMat& X,
                          std::int64_t budget, std::int64_t bytes_x,
                          std::chrono::steady_clock::time_point t0, std::ostream& log) {
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
    // a forced --batch larger than the jobs of k pending in the run is capped there
    const std::int64_t pending = jobs_of_k(plan.jobs, k);
    const int batch = forced_batch(c.batch, pending);
    const auto bp = plan_batch(X.rows(), X.cols(), k, s, bytes_x, budget, batch,
                               batch > 0 ? batch : max_R, false, plan.solver.beta_loss,
                               sparse_values(X), plan.solver.accelerated_mu());
    if (!c.quiet) {
      log << "plan: " << bp.describe();
      if (batch < c.batch)
        log << "; --batch " << c.batch << " capped at the " << pending << " job(s) of k = " << k
            << " pending";
      log << "\n";
    }
    if (store) store->begin_k(bp.R);
    JobSource src = [&]() { return channel.next(k); };
    auto on_result = [&](ReplicateResult&& r) {
      ++sum.jobs_run;
      channel.finished(std::move(r));
    };
    auto on_iteration = [&](int running) {
      peak = std::max(peak, used_device_bytes() - used0);
      channel.tick(k, running);  // the progress hook, on the process that has one
      return !progress.cancelled();
    };
    factorize(space, X, k, src, bp.R, plan.solver, on_result, on_iteration);
    channel.end_k(k);
    sum.cancelled = progress.cancelled();
    if (sum.cancelled) break;
  }
  channel.drain();
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sum.peak_device_bytes = peak + bytes_x;
  return sum;
}

/// The k values of `jobs`, each once, in order.
std::vector<int> ks_of(const std::vector<Job>& jobs);

/// `knmf factorize` in compute type T, its processes sharing the work as `parts` says.
template <class T, class Parts>
FactorizeSummary run_factorize_with(const FactorizeConfig& c, Parts& parts, std::ostream& log) {
  const auto t0 = std::chrono::steady_clock::now();
  const int s = int(sizeof(T));
  const std::int64_t budget = parts.budget(run_budget(c));
  // The plan. In native mode the check that the run fits comes before the results file
  // exists: a run that cannot fit stops there, leaving nothing.
  RunPlan plan;
  std::optional<io::H5adReader> reader;
  parts.share_plan(plan, c, [&] {
    if (c.cnmf_mode())
      plan = plan_cnmf(c);
    else
      require_input(c);
    reader.emplace(io::H5adReader::open(c.cnmf_mode() ? plan.x_path : c.input));
    // native mode: the results file is checked (read only) first, so that a resumed run
    // plans for the jobs still pending, not for every replicate of every k
    if (!c.cnmf_mode()) plan = plan_native(c, *reader);
    check_fits(c, *reader, ks_of(plan.jobs), s, budget, parts,
               [&](int k) { return jobs_of_k(plan.jobs, k); });
    require_writable_log(c);
  });
  for (const auto& w : plan.warnings) log << "knmf: warning: " << w << "\n";
  if (!reader) reader.emplace(io::H5adReader::open(plan.x_path));
  const auto& info = reader->info();
  log_header(c, plan, info, log);
  ResultStore store(c, plan, reader->var_names());
  if (plan.jobs.empty()) {
    // a resumed results file may record failed replicates: they are not run again (the same
    // X, seeds and options fail the same way), and the run fails again
    // Nothing is computed, but X is still read once (its fingerprint alone, on the process
    // that writes the results file): a rerun whose input was replaced by another X of the
    // same shape and genes is refused as a resume onto it is, not told "nothing to do".
    FactorizeSummary empty;
    empty.jobs_total = plan.total;
    empty.jobs_skipped = plan.skipped;
    store.open_results_only(plan.results_info ? x_fingerprint_of(*reader) : std::string());
    if (plan.results) log_warnings(*plan.results, log);
    store.report_failures(empty, c, 0.0, info.n_obs, info.n_vars);
    parts.share_failures(empty);
    store.finish();
    if (!c.quiet && empty.jobs_failed == 0) log << "knmf factorize: nothing to do\n";
    return empty;
  }
  // Nothing is written before X is read and valid (run_on_x loads and checks it; under MPI
  // every rank's part): the results file and the --log-json file are made by store.open().
  ProgressHook progress(c.on_progress, std::int64_t(plan.jobs.size()), t0);
  int k_max = 1;
  for (const auto& j : plan.jobs) k_max = std::max(k_max, j.k);
  const Placement where = parts.place(c, *reader, k_max, s, budget);
  const RunContext run{c, plan, *reader, store, progress, budget, log};
  double x_max = 0.0;
  FactorizeSummary sum = parts.template run_on_x<T>(
      run, where, [&](const auto& X, std::int64_t bytes_x, JobChannel& channel) {
        x_max = X.stats().max_value;
        // scikit-learn's refusal of beta_loss <= 0 on an X with zeros, before anything is written
        check_beta_loss_zeros(plan.solver, X.stats().min_value, X.stats().count, info.n_obs,
                              info.n_vars, plan.x_path);
        // X as read (under MPI the whole X: DistributedMatrix merges the ranks' blocks)
        store.open(X.fingerprint().text(info.n_obs, info.n_vars));
        if (plan.results) log_warnings(*plan.results, log);
        return run_jobs(c, plan, channel, &store, progress, X, budget, bytes_x, t0, log);
      });
  parts.reduce(sum);
  sum.x_format = where.x.choice;
  sum.x_streamed = !where.rows && !where.x.in_core;
  store.report_failures(sum, c, x_max, info.n_obs, info.n_vars);
  parts.share_failures(sum);
  if (store.finish() && !c.quiet) log << "knmf factorize: " << c.results << " is complete\n";
  log_summary(c, sum, parts.ranks(), log);
  return sum;
}

}  // namespace knmf::detail
