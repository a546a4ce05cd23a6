// knmf factorize over MPI: job distribution (dynamic or static) and row partition.
#include "distributed_detail.hpp"  // before the solver templates (see nmf_impl.hpp)

#include <algorithm>
#include <cstring>
#include <deque>
#include <iostream>
#include <type_traits>

#include "knmf/core/error.hpp"
#include "knmf/matrix/load.hpp"
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
using detail::Progress;
using detail::ResultStore;
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

// ------------------------------------------------------------------ channels
/// Job distribution: rank 0 keeps a queue per k and grants jobs on request; every rank
/// solves whole replicates.
class JobsChannel : public JobChannel {
public:
  JobsChannel(MPI_Comm comm, const std::vector<Job>& jobs, bool static_split, bool native,
              ResultStore* store, Progress* progress)
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
        store_->store(r, /*write_files=*/false);  // native: the results file; cNMF: the log
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
  Progress* progress_;
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
              Progress* progress)
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
  Progress* progress_;
  std::map<int, std::deque<Job>> by_k_;
  bool gather_w_ = false;
  std::int64_t n_global_ = 0;
  std::int64_t done_ = 0;
};

// ------------------------------------------------------------------- the run
template <class T>
FactorizeSummary run_typed(const FactorizeConfig& c0, const DistributeOptions& dist, MPI_Comm comm,
                           std::ostream& log) {
  const auto t0 = std::chrono::steady_clock::now();
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  FactorizeConfig c = c0;
  if (rank != kRoot) {
    c.quiet = true;
    c.log_json.clear();
  }
  // Rank 0 plans (it alone touches the results file and cleans up temporaries); the others
  // receive the pending jobs and the solver options.
  RunPlan plan;
  std::string x_path;
  if (c.cnmf_mode()) {
    if (rank == kRoot) plan = detail::plan_cnmf(c);
    x_path = io::CnmfPaths(c.output_dir, c.name).normalized_counts();
    plan.paths = io::CnmfPaths(c.output_dir, c.name);
  } else {
    x_path = c.input;
  }
  MPI_Barrier(comm);  // rank 0's checks passed (an error there aborts everyone)
  auto reader = io::H5adReader::open(x_path);
  if (!c.cnmf_mode()) {
    plan = detail::plan_native(c, reader, rank == kRoot);
  }
  plan.x_path = x_path;
  bcast_jobs(comm, plan.jobs);
  SolverOptions solver = plan.solver;
  bcast_pod(comm, solver);
  plan.solver = solver;
  long long counts[2] = {plan.total, plan.skipped};
  MPI_Bcast(counts, 2, MPI_LONG_LONG, kRoot, comm);
  plan.total = counts[0];
  plan.skipped = counts[1];
  const auto& info = reader.info();
  detail::log_header(c, plan, info, log);
  if (plan.jobs.empty()) {
    if (plan.results) plan.results->finish();
    if (!c.quiet) log << "knmf factorize: nothing to do\n";
    FactorizeSummary s;
    s.jobs_total = plan.total;
    s.jobs_skipped = plan.skipped;
    return s;
  }
  ResultStore store(c, plan, reader.var_names());
  Progress progress(std::int64_t(plan.jobs.size()), c.progress_seconds, c.quiet, log);

  const int s = int(sizeof(T));
  const std::int64_t budget = detail::run_budget(c);
  int k_max = 1;
  for (const auto& j : plan.jobs) k_max = std::max(k_max, j.k);
  // (the row partition divides X over the ranks: plan with a single rank's share)
  const auto x = detail::plan_x(c, info, k_max, s, budget * size);
  const auto& choice = x.choice;
  const std::int64_t bytes_x = x.bytes_x, one = x.one;
  Distribution mode = dist.mode;
  if (mode == Distribution::automatic)
    mode = (size > 1 && bytes_x + one > budget) ? Distribution::rows : Distribution::jobs;
  ExecSpace space;
  FactorizeSummary sum;
  if (mode == Distribution::jobs) {
    if (bytes_x + one > budget)
      input_error("X (", x_path, ") needs ", format_bytes(double(bytes_x)),
                  " on each rank's device but only ", format_bytes(double(budget)),
                  " are available: use --distribute rows (or auto)");
    if (!c.quiet)
      log << "plan: " << size << " rank(s), job distribution ("
          << (dist.static_split ? "static modulo split" : "dynamic, from rank 0")
          << "); X on every device as " << (choice.sparse ? "sparse CSR + CSC" : "dense") << " ("
          << choice.reason << "), " << format_bytes(double(bytes_x)) << "\n";
    JobsChannel channel(comm, plan.jobs, dist.static_split, !c.cnmf_mode(), &store, &progress);
    if (choice.sparse)
      sum = detail::run_jobs(c, plan, channel, &store, load_csr<T>(space, reader), budget, bytes_x, t0, log);
    else
      sum = detail::run_jobs(c, plan, channel, &store, load_dense<T>(space, reader), budget, bytes_x, t0, log);
  } else {
    if (!c.quiet)
      log << "plan: " << size << " rank(s), X partitioned by rows ("
          << (choice.sparse ? "sparse" : "dense") << ", " << format_bytes(double(bytes_x))
          << " in all); W^T X and W^T W allreduced every iteration\n";
    auto run_rows = [&](const auto& X) {
      RowsChannel channel(comm, plan.jobs, X.rows(), &store, &progress);
      channel.set_gather(plan.solver.return_W, X.global_rows());
      return detail::run_jobs(c, plan, channel, &store, X, budget, bytes_x / size, t0, log);
    };
    if (choice.sparse)
      sum = run_rows(load_distributed_csr<T>(comm, space, reader));
    else
      sum = run_rows(load_distributed_dense<T>(comm, space, reader));
  }
  long long run = sum.jobs_run;
  MPI_Allreduce(MPI_IN_PLACE, &run, 1, MPI_LONG_LONG, MPI_SUM, comm);
  if (mode == Distribution::jobs) sum.jobs_run = run;
  long long peak = sum.peak_device_bytes;
  MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_LONG_LONG, MPI_MAX, comm);
  sum.peak_device_bytes = peak;
  if (store.finish() && !c.quiet) log << "knmf factorize: " << c.results << " is complete\n";
  if (!c.quiet)
    log << "knmf factorize: " << sum.jobs_run << " job(s) on " << size << " rank(s) in "
        << detail::format_seconds(sum.seconds) << ", peak device memory per rank "
        << format_bytes(double(sum.peak_device_bytes)) << "\n";
  return sum;
}

}  // namespace

FactorizeSummary run_factorize(const FactorizeConfig& config, const DistributeOptions& dist,
                               MPI_Comm comm, std::ostream& log) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  try {
    config.validate();
    return config.dtype == Dtype::float32 ? run_typed<float>(config, dist, comm, log)
                                   : run_typed<double>(config, dist, comm, log);
  } catch (const std::exception& e) {
    // One rank's failure ends the whole run at once (no rank is left waiting in a collective).
    std::cerr << "knmf: error: " << e.what();
    if (rank != kRoot) std::cerr << " (rank " << rank << ")";
    std::cerr << "\n" << std::flush;
    MPI_Abort(comm, 1);
  }
  return {};
}

}  // namespace knmf::mpi
