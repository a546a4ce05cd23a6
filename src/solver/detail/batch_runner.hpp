#pragma once
/// \file
/// The batched solver's driver (internal): the slots' state (job, progress, status) over a
/// SlotBatch (slot_batch.hpp: buffers, transfers, compaction), filled from a job source, run
/// under an update rule (rules.hpp: the updates and the per-slot convergence decisions), its
/// finished slots emitted as results. X is reached only through XOperand (x_operand.hpp), so
/// the runner is compiled once per value type (batched.hpp).

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <optional>
#include <utility>
#include <vector>
#include <Kokkos_Profiling_ScopedRegion.hpp>

#include "knmf/core/compat.hpp"
#include "knmf/core/error.hpp"
#include "knmf/solver/init.hpp"
#include "knmf/solver/nmf.hpp"
#include "kernels.hpp"
#include "rules.hpp"
#include "slot_batch.hpp"
#include "x_operand.hpp"

namespace knmf::detail {

/// What a rule's factorize_step sees (rule.hpp): the batch, the options and the active slots,
/// and the products with X that the two factor updates read, summed over row blocks.
template <class T>
struct FactorizeStep {
  const ExecSpace& space;
  const XOperand<T>& X;
  SlotBatch<T>& batch;
  const SolverOptions& opts;
  const Regularization& reg;
  const SlotMask& active;

  /// GH = H H^T and P = X H^T of the current H.
  void products_for_W() const {
    auto& b = batch;
    slot_gram(space, b.H, b.R, b.k, active, b.gram_partial, b.GH);
    X.x_times_ht(space, b.H, b.P, b.gather);
  }
  /// Q = W^T X and GW = W^T W of the current W.
  void products_for_H() const {
    auto& b = batch;
    X.wt_times_x(space, b.W, b.Q, b.gather);
    X.reduce(space, b.Q);
    slot_gram(space, b.W, b.R, b.k, active, b.gram_partial, b.GW);
    X.reduce(space, b.GW);
  }
  /// Per-slot sums of the chunk partials of a reduction over the n columns of W (over all
  /// row blocks) or the g columns of H.
  std::vector<double> violations_W() const {
    auto v = batch.sum_partials(batch.n, batch.R);
    X.reduce(v);
    return v;
  }
  std::vector<double> violations_H() const { return batch.sum_partials(batch.g, batch.R); }
  /// Both, from one copy to the host: W's from batch.red_partial_w() (where a W reduction
  /// whose sums are not needed before H's update writes), H's from batch.red_partial.
  std::pair<std::vector<double>, std::vector<double>> violations_WH() const {
    auto v = batch.sum_partials_wh();
    X.reduce(v.first);
    return v;
  }

  // ------------------------------------------------ the beta rule (rule_beta_mu.hpp)
  /// The active slots, in order (the beta passes run slot by slot).
  std::vector<int> slots = {};

  /// Visits X's blocks for the beta passes (a named type: nvcc refuses extended lambdas in
  /// a function templated on a local lambda type).
  struct BetaVisit {
    const ExecSpace& space;
    const XOperand<T>& X;
    template <class F>
    void operator()(bool transposed, const F& f) const {
      X.for_each_beta_block(space, transposed, f);
    }
  };
  BetaVisit beta_visit() const { return BetaVisit{space, X}; }
  BetaOperands<T> beta_operands(const std::vector<int>& which) const {
    return BetaOperands<T>{batch.W, batch.H, batch.R, batch.k, opts.beta_loss, nullptr, which};
  }
  /// W <- W * (numerator / denominator)^gamma for the active slots (this block's rows). For
  /// beta 1 the denominator is H's row sums (scikit-learn's H_sum), recomputed every iteration
  /// of a factorization and kept over a refit's iterations (`refit`; set by the runner's fill).
  void beta_update_W(bool refit) const {
    auto& b = batch;
    if (is_kullback_leibler(opts.beta_loss)) {
      if (!refit) slot_row_sums(space, b.H, b.R, b.k, active, b.gram_partial, b.hsum);
      hsum_in_place(space, b.hsum, b.k, active, reg.l1_W, reg.l2_W);
    }
    beta_w_pass(space, beta_visit(), beta_operands(slots), b.beta, b.P, b.hsum, reg.l1_W,
                reg.l2_W);
  }
  /// H <- H * (numerator / denominator)^gamma for the active slots, from the new W; the
  /// numerator (Q), denominator (H_next) and W's sums are summed over the row blocks.
  void beta_update_H() const {
    auto& b = batch;
    beta_h_pass(space, beta_visit(), beta_operands(slots), b.beta, b.Q, b.H_next);
    X.reduce(space, b.Q);
    if (!is_kullback_leibler(opts.beta_loss)) {
      X.reduce(space, b.H_next);
    } else {
      slot_row_sums(space, b.W, b.R, b.k, active, b.gram_partial, b.wsum);
      X.reduce(space, b.wsum);
    }
    beta_h_update(space, b.H, b.Q, b.H_next, b.wsum, active, b.k, opts.beta_loss, reg.l1_H,
                  reg.l2_H);
  }
  /// sqrt(2 D_beta(X | W H)) of the slots in `which` (mask `m`): one value per slot of the
  /// batch, 0 for the others. H's row sums (beta 1) go to wsum, which the next H update
  /// recomputes.
  std::vector<double> beta_errors(const std::vector<int>& which, const SlotMask& m,
                                  size_type n_global) const {
    auto& b = batch;
    std::vector<double> sums(size_t(b.R), 0.0), err(size_t(b.R), 0.0);
    if (is_kullback_leibler(opts.beta_loss)) slot_row_sums(space, b.H, b.R, b.k, m, b.gram_partial, b.wsum);
    beta_divergence_pass(space, beta_visit(), beta_operands(which), b.beta, b.wsum, sums);
    X.reduce(sums);
    for (int r : which)
      err[size_t(r)] = beta_error_from_sum(sums[size_t(r)], opts.beta_loss, double(n_global),
                                           double(b.g));
    return err;
  }

  // ------------------------------------------- accelerated sweeps (rule_cd.hpp, inner_sweeps)
  /// The most sweeps per product of W's and of H's update (1: scikit-learn's CD).
  int sweeps_W = 1, sweeps_H = 1;
  /// Sweeps each slot ran in this step beyond the first of each update (set by the rule).
  std::vector<int> repeats = {};
  /// The mask of the slots r with on[r] (a second buffer: `active` stays valid).
  const SlotMask& subset_mask(const std::vector<char>& on) const {
    return batch.upload_subset_mask([&](int r) { return on[size_t(r)] != 0; });
  }
};

template <class T>
class BatchRunner {
public:
  BatchRunner(const ExecSpace& space, const XOperand<T>& X, int k, int R, const SolverOptions& opts,
              RunMode mode, const std::vector<std::vector<double>>* spectra = nullptr)
      : space_(space), X_(X), k_(k), mode_(mode), opt_(opts), spectra_(spectra),
        b_(space, X.rows(), X.cols(), k, mode) {
    KNMF_ASSERT(k >= 1 && R >= 1, "bad batch shape");
    KNMF_ASSERT(mode != RunMode::refit || spectra != nullptr, "refit needs spectra");
    n_ = X.rows();
    g_ = X.cols();
    if (mode == RunMode::factorize && opts.init != InitKind::random) {
      if (!X.whole_matrix())
        input_error("--init ", to_string(opts.init),
                    " is not available with X partitioned by rows (--distribute rows): the "
                    "randomized SVD's LU and QR need every row on one rank; use --distribute "
                    "jobs or --init random");
      if (size_type(k) > std::min(X.rows(), X.cols()))
        input_error("--init ", to_string(opts.init), ": k = ", k,
                    " is invalid: it must be <= min(cells, genes) = ", std::min(X.rows(), X.cols()),
                    " (scikit-learn's rule; --init random has no such limit)");
    }
    n_global_ = X.global_rows();
    row0_ = X.row_offset();
    reg_ = regularization(opts, n_global_, g_);
    norm_x_ = X.stats().norm2;
    mean_ = X.mean();
    beta_ = opts.solver == SolverKind::mu && opts.beta_rule();
    if (opts.inner_sweeps != 1) set_sweep_limits(X);
    // scikit-learn's refusal, before anything runs (a run checks it before any output too)
    check_beta_loss_zeros(opts, X.stats().min_value, X.stats().count, n_global_, g_,
                            "X");
    b_.keep_w_next = mode == RunMode::factorize && opts.accelerated_mu();
    b_.allocate(R);
    if (beta_) b_.allocate_beta(X.beta_shape());
    slots_.assign(size_t(R), Slot{});
  }

  /// Run until `next` is exhausted and every slot has finished.
  void run(const JobSource& next, const ResultCallback& emit,
           const IterationCallback& on_iteration = {}) {
    Kokkos::Profiling::ScopedRegion region("knmf::solver::run");
    with_rule(opt_, [&](auto rule) { run_with<decltype(rule)>(next, emit, on_iteration); });
  }

private:
  struct Slot {
    bool active = false;
    bool done = false;
    Job job;
    SlotProgress progress;
    double final_err = 0.0;
    ReplicateStatus status = ReplicateStatus::max_iter;
    std::chrono::steady_clock::time_point start;
    std::vector<TracePoint> trace;  ///< SolverOptions::record_trace
  };

  template <class Rule>
  void run_with(const JobSource& next, const ResultCallback& emit,
                const IterationCallback& on_iteration) {
    exhausted_ = false;
    fill<Rule>(next);
    while (any_active()) {
      iterate<Rule>();
      const bool go_on = !on_iteration || on_iteration(active_count());
      finish_done(emit);
      if (!go_on) return;  // the running slots are dropped with the runner
      fill<Rule>(next);
      if (exhausted_ && active_count() > 0 && active_count() < b_.R) compact();
    }
  }

  /// The accelerated sweeps' limits per product (Gillis & Glineur 2012, section 3): a sweep
  /// over a factor with m columns costs about m (k + 1) k, its products with X about
  /// (nnz + m' k) k, so rho = 1 + (nnz + m' k) / (m (k + 1)) sweeps cost as much as the
  /// products they reuse; auto allows 1 + alpha rho of them. nnz is X's stored entries (n g
  /// for a dense X), over every row block (the statistics are global), so every rank of a
  /// row-partitioned X takes the same limits.
  void set_sweep_limits(const XOperand<T>& X) {
    if (opt_.inner_sweeps != SolverOptions::inner_sweeps_auto) {
      sweeps_W_ = sweeps_H_ = opt_.inner_sweeps;
      return;
    }
    const double nnz = double(X.stats().count), n = double(n_global_), g = double(g_),
                 k = double(k_);
    const double rho_W = 1.0 + (nnz + g * k) / (n * (k + 1.0));
    const double rho_H = 1.0 + (nnz + n * k) / (g * (k + 1.0));
    auto limit = [&](double rho) {
      const double v = std::floor(1.0 + opt_.inner_alpha * rho);
      return v >= 1e6 ? 1000000 : std::max(1, int(v));
    };
    sweeps_W_ = limit(rho_W);
    sweeps_H_ = limit(rho_H);
  }

  // ------------------------------------------------------------ slot state
  bool any_active() const { return active_count() > 0; }
  int active_count() const {
    int c = 0;
    for (const auto& s : slots_) c += s.active ? 1 : 0;
    return c;
  }
  const SlotMask& active_mask() {
    return b_.upload_mask([&](int r) { return slots_[size_t(r)].active; });
  }
  const SlotMask& mask_of(const std::vector<int>& which) {
    return b_.upload_mask(
        [&](int r) { return std::find(which.begin(), which.end(), r) != which.end(); });
  }

  // ---------------------------------------------------------- fill / init
  template <class Rule>
  void fill(const JobSource& next) {
    std::vector<int> fresh;
    for (int r = 0; r < b_.R && !exhausted_; ++r) {
      if (slots_[size_t(r)].active) continue;
      if (ahead_) {
        Ahead a = std::move(*ahead_);
        ahead_.reset();
        a.drawn.get();  // (rethrows what the draw threw)
        init_slot<Rule>(r, a.job, &a);
        fresh.push_back(r);
        continue;
      }
      auto job = next();
      if (!job) {
        exhausted_ = true;
        break;
      }
      init_slot<Rule>(r, *job);
      fresh.push_back(r);
    }
    draw_ahead(next);
    if (fresh.empty()) return;
    Kokkos::Profiling::ScopedRegion region("knmf::solver::init");
    if (beta_) {
      // a refit keeps H's row sums (scikit-learn's H_sum) over its iterations
      if (mode_ == RunMode::refit && is_kullback_leibler(opt_.beta_loss))
        slot_row_sums(space_, b_.H, b_.R, k_, mask_of(fresh), b_.gram_partial, b_.hsum);
      const auto err = step_of(mask_of(fresh), fresh).beta_errors(fresh, mask_of(fresh), n_global_);
      for (int r : fresh) {
        slots_[size_t(r)].progress.err_init = err[size_t(r)];
        slots_[size_t(r)].progress.prev_err = err[size_t(r)];
      }
      return;
    }
    if (mode_ == RunMode::refit) {
      // H is fixed: X H^T and H H^T are computed once per fill.
      const auto& all = active_mask();
      X_.x_times_ht(space_, b_.H, b_.P, b_.gather);
      slot_gram(space_, b_.H, b_.R, k_, all, b_.gram_partial, b_.GH);
    }
    init_errors(fresh);
  }

  /// The next job, taken from the source while the batch runs, and its random W0 and H0 being
  /// drawn on a host thread meanwhile (a random init is a sequential RNG stream on the host:
  /// issue 26 estimates about 1 s for 2.4M cells at k = 20, not measured here, which the
  /// device would otherwise wait for at every refill). The job goes into the next free slot, as it would have without the look-ahead:
  /// the same job to the same slot, the same numbers.
  struct Ahead {
    Job job;
    std::vector<T> h, w;
    std::future<void> drawn;  ///< declared last: destroyed (waited for) before h and w
  };
  std::optional<Ahead> ahead_;

  /// Take the next job from the source and start drawing its init (a factorization with
  /// --init random only: the NNDSVD inits run on the device).
  void draw_ahead(const JobSource& next) {
    if (exhausted_ || ahead_ || mode_ != RunMode::factorize || opt_.init != InitKind::random)
      return;
    auto job = next();
    if (!job) {
      exhausted_ = true;
      return;
    }
    ahead_.emplace();
    Ahead& a = *ahead_;
    a.job = *job;
    a.h.resize(size_t(k_ * g_));
    a.w.resize(size_t(n_global_ * k_));
    a.drawn = std::async(std::launch::async, [seed = job->seed, mean = mean_, k = k_,
                                              n = n_global_, g = g_, h = a.h.data(),
                                              w = a.w.data()]() {
      random_init<T>(seed, mean, k, n, g, h, w);
    });
  }

  template <class Rule>
  void init_slot(int r, const Job& job, Ahead* drawn = nullptr) {
    Slot& s = slots_[size_t(r)];
    s = Slot{};
    s.active = true;
    s.job = job;
    s.start = std::chrono::steady_clock::now();
    if (mode_ == RunMode::factorize) {
      // every row block draws the whole W0 (the RNG stream is sequential) and keeps its rows
      std::vector<T> h, w;
      if (drawn) {  // drawn on the host while the batch ran (draw_ahead)
        h = std::move(drawn->h);
        w = std::move(drawn->w);
      } else {
        h.resize(size_t(k_ * g_));
        w.resize(size_t(n_global_ * k_));
        if (opt_.init == InitKind::random) {
          random_init<T>(job.seed, mean_, k_, n_global_, g_, h.data(), w.data());
        } else {
          // each replicate its own randomized SVD from its seed, as cNMF's jobs do (a whole X:
          // the constructor refused a row block)
          X_.nndsvd_init(space_, k_, job.seed, opt_.init, h.data(), w.data());
        }
      }
      b_.upload_rows_right(h.data(), r, b_.H, b_.H_next, g_);
      b_.upload_rows_left(w.data() + row0_ * k_, r, b_.W, b_.P, n_);
    } else {
      const auto& src = (*spectra_)[size_t(job.index)];
      std::vector<T> h(src.begin(), src.end());
      b_.upload_rows_right(h.data(), r, b_.H, b_.H_next, g_);
      fill_slot(space_, b_.W, r, k_, T(Rule::fixed_h_start(mean_, k_)));
    }
  }

  /// error_at_init of the fresh slots: their W rows are packed so that W0^T X is one GEMM
  /// over the fresh slots only.
  void init_errors(const std::vector<int>& fresh) {
    const int F = int(fresh.size());
    auto list = b_.upload_list(fresh);
    // a refit's P holds X H^T and must survive: pack into W_next there
    auto Wp = SlotBatch<T>::over(mode_ == RunMode::refit ? b_.W_next : b_.P, size_type(F) * k_, n_);
    auto Qp = SlotBatch<T>::over(b_.H_next, size_type(F) * k_, g_);
    auto Hp = SlotBatch<T>::over(b_.Q, size_type(F) * k_, g_);
    pack_slots(space_, b_.W, list, k_, Wp);
    pack_slots(space_, b_.H, list, k_, Hp);
    X_.wt_times_x(space_, Wp, Qp, b_.gather);
    X_.reduce(space_, Qp);
    slot_dot(space_, Qp, Hp, F, k_, b_.ones(), b_.red_partial);
    auto cross = b_.sum_partials(g_, F);
    const auto& fm = mask_of(fresh);
    slot_gram(space_, b_.W, b_.R, k_, fm, b_.gram_partial, b_.GW);
    X_.reduce(space_, b_.GW);
    slot_gram(space_, b_.H, b_.R, k_, fm, b_.gram_partial, b_.GH);
    b_.download_grams();
    for (int p = 0; p < F; ++p) {
      const int r = fresh[size_t(p)];
      const double e = error_from(cross[size_t(p)], r);
      slots_[size_t(r)].progress.err_init = e;
      slots_[size_t(r)].progress.prev_err = e;
    }
    // (in a refit GH was recomputed for the fresh slots only, with the same values)
  }

  /// ||X - W H|| of slot r from <W^T X, H> and the Grams in their host mirrors; NaN when not
  /// finite (identity_error, rule.hpp).
  double error_from(double cross, int r) const {
    const auto& gw = b_.gw_host();
    const auto& gh = b_.gh_host();
    double wh = 0.0;
    for (int s = 0; s < k_; ++s)
      for (int t = 0; t < k_; ++t) wh += gw(r, s, t) * gh(r, s, t);
    return identity_error(norm_x_, cross, wh);
  }

  /// ||X - W H|| for the slots in `which`, from Q = W^T X and G_W = W^T W of the current W
  /// and the current H (H H^T is computed here). A factorization's iteration leaves Q and G_W
  /// of the current W; a fixed-H refit's does not (q_current_), so they are formed here.
  std::vector<double> errors(const std::vector<int>& which) {
    std::vector<double> err(size_t(b_.R), 0.0);
    if (which.empty()) return err;
    if (beta_) {
      const auto& m = mask_of(which);
      return step_of(m, which).beta_errors(which, m, n_global_);
    }
    const auto& m = mask_of(which);
    if (!q_current_) {
      X_.wt_times_x(space_, b_.W, b_.Q, b_.gather);
      X_.reduce(space_, b_.Q);
      slot_gram(space_, b_.W, b_.R, k_, m, b_.gram_partial, b_.GW);
      X_.reduce(space_, b_.GW);
      q_current_ = true;
    }
    slot_gram(space_, b_.H, b_.R, k_, m, b_.gram_partial, b_.GH);
    slot_dot(space_, b_.Q, b_.H, b_.R, k_, m, b_.red_partial);
    auto cross = b_.sum_partials(g_, b_.R);
    b_.download_grams();
    for (int r : which) err[size_t(r)] = error_from(cross[size_t(r)], r);
    return err;
  }

  std::vector<int> active_list() const {
    std::vector<int> a;
    for (int r = 0; r < b_.R; ++r)
      if (slots_[size_t(r)].active) a.push_back(r);
    return a;
  }
  FactorizeStep<T> step_of(const SlotMask& m, const std::vector<int>& which) {
    return FactorizeStep<T>{space_, X_, b_, opt_, reg_, m, which};
  }

  // ------------------------------------------------------------- iterations
  template <class Rule>
  void iterate() {
    Kokkos::Profiling::ScopedRegion region(mode_ == RunMode::factorize ? Rule::iteration_region
                                                                       : Rule::refit_region);
    const auto& act = active_mask();
    std::vector<double> values;
    if constexpr (is_beta_rule<Rule>) {
      auto step = step_of(act, active_list());
      values = mode_ == RunMode::factorize ? Rule::factorize_step(step) : Rule::refit_step(step);
    } else if (mode_ == RunMode::factorize) {
      // the active list only for the accelerated sweeps (the exact path allocates nothing)
      const bool repeats = sweeps_W_ > 1 || sweeps_H_ > 1;
      FactorizeStep<T> step{space_, X_, b_, opt_, reg_, act,
                            repeats ? active_list() : std::vector<int>{}};
      step.sweeps_W = sweeps_W_;
      step.sweeps_H = sweeps_H_;
      values = Rule::factorize_step(step);
      for (int r = 0; r < b_.R; ++r)
        if (slots_[size_t(r)].active)
          slots_[size_t(r)].progress.sweeps +=
              2 + (step.repeats.empty() ? 0 : step.repeats[size_t(r)]);
      q_current_ = true;
    } else {
      FixedH<T> f{b_.W, b_.W_next, b_.P, b_.GH, b_.R, k_, b_.red_partial, b_.red_partial_host()};
      values = Rule::fixed_h_step(space_, f, act, reg_, opt_);
      if (!values.empty()) X_.reduce(values);  // over W's rows: sum the row blocks
      q_current_ = false;
    }
    if (opt_.record_trace && mode_ == RunMode::factorize) record_trace(values);
    decide<Rule>(values);
  }

  /// SolverOptions::record_trace: the error of every active slot after this iteration, from
  /// the W^T X and W^T W its H-update left (errors); the next W-update recomputes H H^T, so
  /// the trajectory is unchanged.
  void record_trace(const std::vector<double>& values) {
    const auto which = active_list();
    const auto err = errors(which);
    const auto now = std::chrono::steady_clock::now();
    for (int r : which) {
      Slot& s = slots_[size_t(r)];
      s.trace.push_back(TracePoint{s.progress.iter + 1, err[size_t(r)],
                                   values.empty() ? 0.0 : values[size_t(r)], s.progress.sweeps,
                                   std::chrono::duration<double>(now - s.start).count()});
    }
  }

  /// The rule's decision for every active slot; the errors it asks for (and those of the
  /// slots it stops) are computed together, for those slots only.
  template <class Rule>
  void decide(const std::vector<double>& values) {
    std::vector<int> measure, stop, which;
    for (int r = 0; r < b_.R; ++r) {
      Slot& s = slots_[size_t(r)];
      if (!s.active) continue;
      const double value = values.empty() ? 0.0 : values[size_t(r)];
      const Verdict v = Rule::after_update(opt_, s.progress, value);
      if (v.kind == Verdict::go_on) continue;
      (v.kind == Verdict::measure ? measure : stop).push_back(r);
      which.push_back(r);
      s.status = v.status;
    }
    if (which.empty()) return;
    auto err = errors(which);
    for (int r : measure) {
      Slot& s = slots_[size_t(r)];
      const Verdict v = Rule::after_error(opt_, s.progress, err[size_t(r)]);
      if (v.kind == Verdict::stop) mark_done(s, v.status, err[size_t(r)]);
    }
    for (int r : stop) mark_done(slots_[size_t(r)], slots_[size_t(r)].status, err[size_t(r)]);
  }

  void mark_done(Slot& s, ReplicateStatus st, double err) {
    s.active = false;
    s.done = true;
    s.status = settle(st, err);
    s.final_err = err;
  }

  // ------------------------------------------------------------- results
  void finish_done(const ResultCallback& emit) {
    for (int r = 0; r < b_.R; ++r) {
      Slot& s = slots_[size_t(r)];
      if (!s.done) continue;
      ReplicateResult res;
      res.job = s.job;
      res.n = n_;
      res.g = g_;
      res.n_iter = s.progress.iter;
      res.n_sweeps = s.progress.sweeps;
      res.error_at_init = s.progress.err_init;
      res.final_error = s.final_err;
      res.status = s.status;
      res.trace = std::move(s.trace);
      if (mode_ == RunMode::factorize) res.H = b_.download(b_.H, r, g_, true);
      if (mode_ == RunMode::refit || opt_.return_W) res.W = b_.download(b_.W, r, n_, false);
      res.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - s.start).count();
      s.done = false;
      emit(std::move(res));
    }
  }

  // ---------------------------------------------------------- compaction
  /// When the queue is empty and slots sit idle, repack the running slots into a smaller
  /// batch so the GEMMs stop carrying idle rows.
  void compact() {
    Kokkos::Profiling::ScopedRegion region("knmf::solver::compact");
    std::vector<int> keep;
    for (int r = 0; r < b_.R; ++r)
      if (slots_[size_t(r)].active) keep.push_back(r);
    b_.compact(keep);
    std::vector<Slot> slots2;
    for (int r : keep) slots2.push_back(slots_[size_t(r)]);
    slots_ = std::move(slots2);
    if (mode_ == RunMode::refit)
      slot_gram(space_, b_.H, b_.R, k_, active_mask(), b_.gram_partial, b_.GH);
  }

  ExecSpace space_;
  const XOperand<T>& X_;
  int k_;
  RunMode mode_;
  SolverOptions opt_;
  const std::vector<std::vector<double>>* spectra_;
  SlotBatch<T> b_;
  size_type n_ = 0, g_ = 0;
  size_type n_global_ = 0, row0_ = 0;  ///< full-matrix rows and this block's offset
  Regularization reg_;
  double norm_x_ = 0.0, mean_ = 0.0;
  bool exhausted_ = false;
  bool beta_ = false;       ///< the beta rule runs (solver mu, not Frobenius)
  bool q_current_ = false;  ///< Q and GW belong to the current W (see errors)
  int sweeps_W_ = 1, sweeps_H_ = 1;  ///< accelerated sweeps per product (set_sweep_limits)
  std::vector<Slot> slots_;
};

}  // namespace knmf::detail
