// knmf factorize over MPI: the run of src/run/factorize_detail.hpp with the MPI parts: the
// plan made on rank 0 and broadcast, job distribution (dynamic or static) or a row partition.
#include <algorithm>
#include <cstring>
#include <deque>
#include <exception>
#include <ostream>
#include <type_traits>

#include "knmf/core/error.hpp"
#include "knmf/matrix/load.hpp"
#include "knmf/mpi/distributed.hpp"
#include "knmf/mpi/run.hpp"
#include "run/factorize_detail.hpp"

namespace knmf::mpi {

int local_rank(MPI_Comm comm) {
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int r = 0;
  MPI_Comm_rank(node, &r);
  MPI_Comm_free(&node);
  return r;
}

namespace {

using detail::JobChannel;
using detail::Placement;
using detail::ProgressHook;
using detail::ResultStore;
using detail::RunContext;
using detail::RunPlan;

enum Tag : int { kRequest = 101, kJobs = 102, kResult = 103, kDone = 104 };
constexpr int kRoot = 0;

// --------------------------------------------------------------------- messages
std::vector<std::int64_t> pack_jobs(const std::vector<Job>& jobs) {
  std::vector<std::int64_t> v{std::int64_t(jobs.size())};
  for (const auto& j : jobs) v.insert(v.end(), {j.k, j.iter, j.seed, j.index});
  return v;
}
std::vector<Job> unpack_jobs(const std::vector<std::int64_t>& v) {
  std::vector<Job> jobs;
  for (std::int64_t i = 0; i < v[0]; ++i)
    jobs.push_back(Job{int(v[size_t(1 + 4 * i)]), int(v[size_t(2 + 4 * i)]), v[size_t(3 + 4 * i)],
                       v[size_t(4 + 4 * i)]});
  return jobs;
}

constexpr int kHeader = 12;
std::vector<double> pack_result(const ReplicateResult& r, bool payload) {
  std::vector<double> m{double(r.job.k), double(r.job.iter), double(r.job.seed),
                        double(r.job.index), double(r.n_iter), double(int(r.status)),
                        r.error_at_init, r.final_error, r.seconds, double(r.n), double(r.g),
                        double(payload && !r.W.empty())};
  if (payload) {
    m.insert(m.end(), r.H.begin(), r.H.end());
    m.insert(m.end(), r.W.begin(), r.W.end());
  }
  return m;
}
ReplicateResult unpack_result(const std::vector<double>& m) {
  ReplicateResult r;
  r.job = Job{int(m[0]), int(m[1]), std::int64_t(m[2]), std::int64_t(m[3])};
  r.n_iter = int(m[4]);
  r.status = ReplicateStatus(int(m[5]));
  r.error_at_init = m[6];
  r.final_error = m[7];
  r.seconds = m[8];
  r.n = std::int64_t(m[9]);
  r.g = std::int64_t(m[10]);
  const size_t hsize = size_t(r.job.k) * size_t(r.g);
  if (m.size() >= kHeader + hsize) r.H.assign(m.begin() + kHeader, m.begin() + kHeader + hsize);
  if (m[11] != 0) r.W.assign(m.begin() + kHeader + hsize, m.end());
  return r;
}

template <class V>
V recv_vector(MPI_Comm comm, int source, int tag, MPI_Datatype type, MPI_Status* st_out = nullptr) {
  MPI_Status st;
  MPI_Probe(source, tag, comm, &st);
  int count = 0;
  MPI_Get_count(&st, type, &count);
  V v(static_cast<size_t>(count));
  MPI_Recv(v.data(), count, type, st.MPI_SOURCE, tag, comm, MPI_STATUS_IGNORE);
  if (st_out) *st_out = st;
  return v;
}

void bcast_jobs(MPI_Comm comm, std::vector<Job>& jobs) {
  std::vector<std::int64_t> v;
  int rank;
  MPI_Comm_rank(comm, &rank);
  if (rank == kRoot) v = pack_jobs(jobs);
  long long n = (long long)v.size();
  MPI_Bcast(&n, 1, MPI_LONG_LONG, kRoot, comm);
  v.resize(size_t(n));
  MPI_Bcast(v.data(), int(n), MPI_INT64_T, kRoot, comm);
  jobs = unpack_jobs(v);
}

template <class Pod>
void bcast_pod(MPI_Comm comm, Pod& p) {
  static_assert(std::is_trivially_copyable_v<Pod>);
  MPI_Bcast(&p, int(sizeof(Pod)), MPI_BYTE, kRoot, comm);
}

void bcast_string(MPI_Comm comm, std::string& s, int root = kRoot) {
  long long n = (long long)s.size();
  MPI_Bcast(&n, 1, MPI_LONG_LONG, root, comm);
  s.resize(size_t(n));
  MPI_Bcast(s.data(), int(n), MPI_CHAR, root, comm);
}

// ------------------------------------------------------------------ channels
/// Job distribution: rank 0 keeps a queue per k and grants jobs on request; every rank
/// solves whole replicates.
class JobsChannel : public JobChannel {
public:
  JobsChannel(MPI_Comm comm, const std::vector<Job>& jobs, bool static_split, bool native,
              ResultStore* store, ProgressHook* progress)
      : comm_(comm), static_(static_split), native_(native), store_(store), progress_(progress) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    for (size_t i = 0; i < jobs.size(); ++i) {
      ks_all_[jobs[i].k] += 1;
      if (rank_ == kRoot && !static_) queue_[jobs[i].k].push_back(jobs[i]);
      if (static_ && int(i % size_t(size_)) == rank_) local_[jobs[i].k].push_back(jobs[i]);
    }
  }

  std::vector<int> ks() const override {
    std::vector<int> v;
    for (const auto& [k, n] : ks_all_) v.push_back(k);
    return v;
  }
  int max_jobs(int k) const override {
    if (static_) {
      auto it = local_.find(k);
      return it == local_.end() ? 0 : int(it->second.size());
    }
    auto it = ks_all_.find(k);
    return it == ks_all_.end() ? 0 : std::max(1, it->second / size_);
  }

  std::optional<Job> next(int k) override {
    if (static_ || rank_ == kRoot) {
      auto& q = static_ ? local_[k] : queue_[k];
      if (q.empty()) return std::nullopt;
      Job j = q.front();
      q.pop_front();
      return j;
    }
    auto& buf = local_[k];
    if (buf.empty() && !exhausted_[k]) {
      std::int64_t req[2] = {k, 4};
      MPI_Send(req, 2, MPI_INT64_T, kRoot, kRequest, comm_);
      const auto got = unpack_jobs(recv_vector<std::vector<std::int64_t>>(comm_, kRoot, kJobs, MPI_INT64_T));
      if (got.empty()) exhausted_[k] = true;
      for (const auto& j : got) buf.push_back(j);
    }
    if (buf.empty()) return std::nullopt;
    Job j = buf.front();
    buf.pop_front();
    return j;
  }

  void finished(ReplicateResult&& r) override {
    if (rank_ == kRoot) {
      store_->store(r);
      record(r);
      return;
    }
    if (!native_ && store_) store_->store(r);  // cNMF mode: this rank writes its own file
    const auto m = pack_result(r, native_);
    MPI_Send(m.data(), int(m.size()), MPI_DOUBLE, kRoot, kResult, comm_);
  }

  void tick(int k, int running) override {
    if (rank_ != kRoot) return;
    serve(false);
    progress_->tick(k, running);
  }
  void end_k(int) override {
    if (rank_ == kRoot) store_->end_k();
  }
  void drain() override {
    if (rank_ != kRoot) {
      MPI_Send(nullptr, 0, MPI_BYTE, kRoot, kDone, comm_);
      return;
    }
    while (done_ranks_ < size_ - 1) serve(true);
    store_->end_k();
  }
  std::int64_t jobs_done() const override { return done_; }

private:
  void record(const ReplicateResult& r) {
    ++done_;
    progress_->finished(r.job.k, r.n_iter);
  }

  /// Rank 0: answer requests, take results, count finished ranks. `block` waits for one.
  void serve(bool block) {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      if (block) {
        MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &st);
        flag = 1;
        block = false;
      } else {
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &st);
      }
      if (!flag) return;
      if (st.MPI_TAG == kRequest) {
        std::int64_t req[2];
        MPI_Recv(req, 2, MPI_INT64_T, st.MPI_SOURCE, kRequest, comm_, MPI_STATUS_IGNORE);
        auto& q = queue_[int(req[0])];
        // guided: half of a fair share of what is left, at least one, at most asked
        const std::int64_t grant = std::min<std::int64_t>(
            req[1], std::max<std::int64_t>(1, std::int64_t(q.size()) / (2 * size_)));
        std::vector<Job> give;
        for (std::int64_t i = 0; i < grant && !q.empty(); ++i) {
          give.push_back(q.front());
          q.pop_front();
        }
        const auto v = pack_jobs(give);
        MPI_Send(v.data(), int(v.size()), MPI_INT64_T, st.MPI_SOURCE, kJobs, comm_);
      } else if (st.MPI_TAG == kResult) {
        const auto m = recv_vector<std::vector<double>>(comm_, st.MPI_SOURCE, kResult, MPI_DOUBLE);
        auto r = unpack_result(m);
        store_->store_received(r);  // native: the results file; cNMF: the log (no spectra file)
        record(r);
      } else if (st.MPI_TAG == kDone) {
        MPI_Recv(nullptr, 0, MPI_BYTE, st.MPI_SOURCE, kDone, comm_, MPI_STATUS_IGNORE);
        ++done_ranks_;
      } else {
        KNMF_ASSERT(false, "unexpected MPI message tag ", st.MPI_TAG);
      }
    }
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  bool static_, native_;
  ResultStore* store_;
  ProgressHook* progress_;
  std::map<int, int> ks_all_;
  std::map<int, std::deque<Job>> queue_, local_;
  std::map<int, bool> exhausted_;
  int done_ranks_ = 0;
  std::int64_t done_ = 0;
};

/// Row partition: all ranks run every job together; rank 0 stores (W gathered when kept).
class RowsChannel : public JobChannel {
public:
  RowsChannel(MPI_Comm comm, const std::vector<Job>& jobs, std::int64_t n_local, ResultStore* store,
              ProgressHook* progress)
      : comm_(comm), n_local_(n_local), store_(store), progress_(progress) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    for (const auto& j : jobs) by_k_[j.k].push_back(j);
  }
  std::vector<int> ks() const override {
    std::vector<int> v;
    for (const auto& [k, q] : by_k_) v.push_back(k);
    return v;
  }
  int max_jobs(int k) const override { return int(by_k_.at(k).size()); }
  std::optional<Job> next(int k) override {
    auto& q = by_k_[k];
    if (q.empty()) return std::nullopt;
    Job j = q.front();
    q.pop_front();
    return j;
  }
  void finished(ReplicateResult&& r) override {
    if (gather_w_) gather_w(r);  // collective, in the same order on every rank
    if (rank_ == kRoot) {
      r.n = n_global_;
      store_->store(r);
      ++done_;
      progress_->finished(r.job.k, r.n_iter);
    }
  }
  void tick(int k, int running) override {
    if (rank_ == kRoot) progress_->tick(k, running);
  }
  void end_k(int) override {
    if (rank_ == kRoot) store_->end_k();
  }
  std::int64_t jobs_done() const override { return done_; }
  void set_gather(bool on, std::int64_t n_global) {
    gather_w_ = on;
    n_global_ = n_global;
  }

private:
  void gather_w(ReplicateResult& r) {
    const int k = r.job.k;
    int mine = int(n_local_ * k);
    std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
    MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, kRoot, comm_);
    std::vector<double> all;
    if (rank_ == kRoot) {
      int at = 0;
      for (int i = 0; i < size_; ++i) {
        displs[size_t(i)] = at;
        at += counts[size_t(i)];
      }
      all.resize(size_t(at));
    }
    MPI_Gatherv(r.W.data(), mine, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE,
                kRoot, comm_);
    r.W = std::move(all);
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::int64_t n_local_;
  ResultStore* store_;
  ProgressHook* progress_;
  std::map<int, std::deque<Job>> by_k_;
  bool gather_w_ = false;
  std::int64_t n_global_ = 0;
  std::int64_t done_ = 0;
};

// ------------------------------------------------------------------- the parts
/// The MPI parts of the one run (see src/run/factorize_detail.hpp): rank 0 plans and the
/// plan is broadcast; X is whole on every rank (job distribution through JobsChannel) or
/// partitioned by rows (RowsChannel).
class MpiParts {
public:
  MpiParts(MPI_Comm comm, const DistributeOptions& dist) : comm_(comm), dist_(dist) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
  }

  int ranks() const { return size_; }

  /// The smallest budget of the ranks: every rank makes the same placement and batch plans
  /// (the row partition runs the same batches on every rank).
  std::int64_t budget(std::int64_t own) {
    long long b = own;
    MPI_Allreduce(MPI_IN_PLACE, &b, 1, MPI_LONG_LONG, MPI_MIN, comm_);
    return std::int64_t(b);
  }

  /// Rank 0 plans (it alone cleans up temporaries and touches the results file); the others
  /// receive the pending jobs, the solver options and the counts.
  template <class F>
  void share_plan(RunPlan& plan, const FactorizeConfig& c, F&& make) {
    std::exception_ptr failure;
    std::string message;
    if (rank_ == kRoot) {
      try {
        make();
      } catch (const std::exception& e) {
        failure = std::current_exception();
        message = e.what();
      } catch (...) {
        failure = std::current_exception();
        message = "unknown error";
      }
    }
    int failed = failure ? 1 : 0;
    MPI_Bcast(&failed, 1, MPI_INT, kRoot, comm_);
    if (failed) {
      // every rank fails with it; the caller reports it once (rank 0), no rank aborts
      bcast_string(comm_, message);
      failed_together_ = true;
      if (failure) std::rethrow_exception(failure);
      throw InputError(message);
    }
    if (rank_ != kRoot) {
      if (c.cnmf_mode()) {
        plan.paths = io::CnmfPaths(c.output_dir, c.name);
        plan.x_path = plan.paths.normalized_counts();
      } else {
        plan.x_path = c.input;
      }
    }
    bcast_jobs(comm_, plan.jobs);
    SolverOptions solver = plan.solver;
    bcast_pod(comm_, solver);
    plan.solver = solver;
    long long counts[2] = {plan.total, plan.skipped};
    MPI_Bcast(counts, 2, MPI_LONG_LONG, kRoot, comm_);
    plan.total = counts[0];
    plan.skipped = counts[1];
  }

  /// jobs: the whole X on every rank's device, in device memory (no streaming: a rank that
  /// cannot hold X is told to use the row partition). rows: X divided over the ranks. auto:
  /// rows when there are several ranks and X does not fit one device next to a replicate.
  Placement place(const FactorizeConfig& c, const io::H5adReader& reader, int k, int s,
                  std::int64_t budget) const {
    const auto& info = reader.info();
    Distribution mode = dist_.mode;
    detail::XPlan all;
    if (mode != Distribution::jobs) {
      // the row partition divides X over the ranks: plan with a single rank's share
      all = detail::plan_x(c, info, k, s, budget * size_);
      if (mode == Distribution::automatic)
        mode = (size_ > 1 && all.bytes_x + all.one > budget) ? Distribution::rows
                                                               : Distribution::jobs;
    }
    if (mode == Distribution::jobs) {
      Placement p = detail::place_whole_x(c, info, k, s, budget);
      if (!p.x.in_core)
        input_error("X (", reader.path().string(), ") needs ", format_bytes(double(p.x.bytes_x)),
                    " on each rank's device but only ", format_bytes(double(budget)),
                    " are available: use --distribute rows (or auto)");
      return p;
    }
    Placement p;
    p.x = all;
    p.rows = true;
    for (const auto& [r0, r1] : row_blocks(reader, size_)) p.device_rows = std::max(p.device_rows, r1 - r0);
    p.device_x_bytes = all.bytes_x / size_;
    return p;
  }

  template <class T, class F>
  FactorizeSummary run_on_x(const RunContext& run, const Placement& where, F&& f) {
    const auto& c = run.config;
    rows_ = where.rows;
    if (!where.rows) {
      JobsChannel channel(comm_, run.plan.jobs, dist_.static_split, !c.cnmf_mode(), &run.store,
                          &run.progress);
      const std::string who = std::to_string(size_) + " rank(s), job distribution (" +
                              (dist_.static_split ? "static modulo split" : "dynamic, from rank 0") +
                              "); ";
      // Every rank reads the whole X and validates it as it reads: a bad X fails every rank
      // alike. The ranks agree on it before any of them runs (or writes) anything, so that it
      // is reported once, by rank 0, as without MPI, instead of by each rank and MPI_Abort.
      bool read = false;
      try {
        return detail::with_whole_x<T>(run, where, who, [&](const auto& X, std::int64_t bytes_x) {
          read = true;
          agree_on_x("");
          return f(X, bytes_x, channel);
        });
      } catch (const InputError& e) {
        if (read) throw;  // agree_on_x's, or an error of the run itself (that rank's alone)
        agree_on_x(e.what());
        throw;
      }
    }
    // every rank holds the same plan: all refuse together (reported once), before reading X
    if (run.plan.solver.init != InitKind::random) {
      failed_together_ = true;
      input_error("--init ", to_string(run.plan.solver.init),
                  " is not available with X partitioned by rows (--distribute rows): the "
                  "randomized SVD's LU and QR need every row on one rank; use --distribute jobs "
                  "or --init random");
    }
    const auto& choice = where.x.choice;
    if (!c.quiet)
      run.log << "plan: " << size_ << " rank(s), X partitioned by rows ("
              << (choice.sparse ? "sparse" : "dense") << ", " << format_bytes(double(where.x.bytes_x))
              << " in all); W^T X and W^T W allreduced every iteration\n";
    ExecSpace space;
    auto on_rows = [&](const auto& X) {
      RowsChannel channel(comm_, run.plan.jobs, X.rows(), &run.store, &run.progress);
      channel.set_gather(run.plan.solver.return_W, X.global_rows());
      return f(X, where.device_x_bytes, channel);
    };
    if (choice.sparse) return on_rows(load_distributed_csr<T>(comm_, space, run.reader));
    return on_rows(load_distributed_dense<T>(comm_, space, run.reader));
  }

  /// Job distribution: the jobs of all ranks; the peak of the rank that used the most.
  void reduce(FactorizeSummary& sum) {
    long long run = sum.jobs_run;
    MPI_Allreduce(MPI_IN_PLACE, &run, 1, MPI_LONG_LONG, MPI_SUM, comm_);
    if (!rows_) sum.jobs_run = run;
    long long peak = sum.peak_device_bytes;
    MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_LONG_LONG, MPI_MAX, comm_);
    sum.peak_device_bytes = peak;
  }

  /// Collective, in the job distribution, once X is read: `error` is this rank's InputError
  /// from reading X ("" when X was read and valid). When any rank has one, every rank throws
  /// the first such rank's, marked as failed together (reported once, no rank aborts).
  void agree_on_x(const std::string& error) {
    int first = error.empty() ? size_ : rank_;
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm_);
    if (first == size_) return;
    std::string message = error;
    bcast_string(comm_, message, first);
    failed_together_ = true;
    throw InputError(message);
  }

  /// Rank 0 stores every replicate (its own and those the others send), so its count of the
  /// failed ones is the run's: every rank takes it, and every rank exits alike.
  void share_failures(FactorizeSummary& sum) {
    long long failed = sum.jobs_failed;
    MPI_Bcast(&failed, 1, MPI_LONG_LONG, kRoot, comm_);
    sum.jobs_failed = failed;
    bcast_string(comm_, sum.failure);
  }

  /// Whether the error being thrown is every rank's (the plan failed).
  bool failed_together() const { return failed_together_; }

private:
  MPI_Comm comm_;
  DistributeOptions dist_;
  int rank_ = 0, size_ = 1;
  bool rows_ = false;
  bool failed_together_ = false;
};

}  // namespace

FactorizeSummary run_factorize(const FactorizeConfig& config, const DistributeOptions& dist,
                               MPI_Comm comm, std::ostream& log) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  config.validate();  // every rank meets the same: the caller reports it once, as without MPI
  FactorizeConfig c = config;
  if (rank != kRoot) {  // only rank 0 prints, writes the JSON log and calls the progress hook
    c.quiet = true;
    c.log_json.clear();
    c.on_progress = nullptr;
  } else if (c.on_progress) {
    // a rank that stopped alone would leave the others in a collective: the hook cannot stop
    // an MPI run
    c.on_progress = [hook = config.on_progress](const RunProgress& p) {
      const bool go_on = hook(p);
      KNMF_ASSERT(go_on || p.event != RunProgress::Event::iteration,
                  "FactorizeConfig::on_progress returned false in an MPI run, which it cannot stop");
      return true;
    };
  }
  MpiParts parts(comm, dist);
  try {
    return c.dtype == Dtype::float32 ? detail::run_factorize_with<float>(c, parts, log)
                                     : detail::run_factorize_with<double>(c, parts, log);
  } catch (const std::exception& e) {
    // the writing rank's full disk: what the results file keeps and how to resume
    const auto* input = dynamic_cast<const InputError*>(&e);
    const std::string note = rank == kRoot && input ? detail::full_disk_note(c, *input) : "";
    if (parts.failed_together()) {
      if (note.empty()) throw;
      throw InputError(e.what() + note, input->system_errno());
    }
    // One rank's failure ends the whole run at once (no rank is left waiting in a collective).
    log << "knmf: error: " << e.what() << note;
    if (rank != kRoot) log << " (rank " << rank << ")";
    log << "\n" << std::flush;
    MPI_Abort(comm, 1);
  }
  return {};
}

}  // namespace knmf::mpi
