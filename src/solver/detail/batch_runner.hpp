#pragma once
/// \file
/// The batched solver's driver (internal): the slots' state (job, progress, status) over a
/// SlotBatch (slot_batch.hpp: buffers, transfers, compaction), filled from a job source, run
/// under an update rule (rules.hpp: the updates and the per-slot convergence decisions) and a
/// mode (run_modes.hpp: a factorization or a refit: where a slot starts, what an iteration
/// updates, what a result holds), its finished slots emitted as results. X is reached only
/// through XOperand (x_operand.hpp), so the runner is compiled once per value type and mode
/// (batched.hpp).

#include <Kokkos_Core.hpp>

#include <chrono>
#include <utility>
#include <vector>
#include <Kokkos_Profiling_ScopedRegion.hpp>

#include "knmf/core/error.hpp"
#include "knmf/solver/nmf.hpp"
#include "batch_step.hpp"
#include "kernels.hpp"
#include "rules.hpp"
#include "slot_batch.hpp"

namespace knmf::detail {

template <class T, class Mode>
class BatchRunner {
public:
  BatchRunner(const ExecSpace& space, const XOperand<T>& X, int k, int R, const SolverOptions& opts,
              Mode mode)
      : mode_(std::move(mode)), c_(space, X, k, opts, Mode::kind) {
    KNMF_ASSERT(k >= 1 && R >= 1, "bad batch shape");
    mode_.check(c_);
    // scikit-learn's refusal, before anything runs (a run checks it before any output too)
    check_beta_loss_zeros(opts, X.stats().min_value, X.stats().count, c_.n_global, c_.g, "X");
    c_.b.keep_w_next = Mode::keep_w_next(opts);
    c_.b.allocate(R);
    slots_.assign(size_t(R), Slot{});
  }

  /// Run until `next` is exhausted and every slot has finished.
  void run(const JobSource& next, const ResultCallback& emit,
           const IterationCallback& on_iteration = {}) {
    Kokkos::Profiling::ScopedRegion region("knmf::solver::run");
    with_rule(c_.opts, [&](auto rule) { run_with<decltype(rule)>(next, emit, on_iteration); });
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
    if constexpr (is_beta_rule<Rule>) c_.b.allocate_beta(c_.X.beta_shape());
    exhausted_ = false;
    fill<Rule>(next);
    while (active_count() > 0) {
      iterate<Rule>();
      const bool go_on = !on_iteration || on_iteration(active_count());
      finish_done(emit);
      if (!go_on) return;  // the running slots are dropped with the runner
      fill<Rule>(next);
      if (exhausted_ && active_count() > 0 && active_count() < c_.b.R) compact();
    }
  }

  // ------------------------------------------------------------ slot state
  int active_count() const {
    int c = 0;
    for (const auto& s : slots_) c += s.active ? 1 : 0;
    return c;
  }
  std::vector<int> active_list() const {
    std::vector<int> a;
    for (int r = 0; r < c_.b.R; ++r)
      if (slots_[size_t(r)].active) a.push_back(r);
    return a;
  }

  // ---------------------------------------------------------- fill / init
  /// Free slots take the mode's next jobs and start; then the mode's fixed products and the
  /// fresh slots' errors at init.
  template <class Rule>
  void fill(const JobSource& next) {
    std::vector<int> fresh;
    for (int r = 0; r < c_.b.R && !exhausted_; ++r) {
      Slot& s = slots_[size_t(r)];
      if (s.active) continue;
      auto job = mode_.take(next);
      if (!job) {
        exhausted_ = true;
        break;
      }
      s = Slot{};
      s.active = true;
      s.job = *job;
      s.start = std::chrono::steady_clock::now();
      mode_.template start<Rule>(c_, r, *job);
      fresh.push_back(r);
    }
    mode_.look_ahead(c_, next, exhausted_);
    if (fresh.empty()) return;
    Kokkos::Profiling::ScopedRegion region("knmf::solver::init");
    mode_.template fixed_products<Rule>(c_, fresh, active_list());
    std::vector<double> err;
    if constexpr (is_beta_rule<Rule>) {
      const auto& m = c_.mask_of(fresh);
      err = c_.step(m, fresh).beta_errors(fresh, m, c_.n_global);
    } else {
      err = init_errors(fresh);
    }
    for (int r : fresh) {
      slots_[size_t(r)].progress.err_init = err[size_t(r)];
      slots_[size_t(r)].progress.prev_err = err[size_t(r)];
    }
  }

  /// error_at_init of the fresh slots (one value per slot of the batch): their W rows are
  /// packed so that W0^T X is one GEMM over the fresh slots only.
  std::vector<double> init_errors(const std::vector<int>& fresh) {
    auto& b = c_.b;
    const int F = int(fresh.size()), k = c_.k;
    auto list = b.upload_list(fresh);
    auto Wp = SlotBatch<T>::over(Mode::pack_buffer(b), size_type(F) * k, c_.n);
    auto Qp = SlotBatch<T>::over(b.H_next, size_type(F) * k, c_.g);
    auto Hp = SlotBatch<T>::over(b.Q, size_type(F) * k, c_.g);
    pack_slots(c_.space, b.W, list, k, Wp);
    pack_slots(c_.space, b.H, list, k, Hp);
    c_.X.wt_times_x(c_.space, Wp, Qp, b.gather);
    c_.X.reduce(c_.space, Qp);
    slot_dot(c_.space, Qp, Hp, F, k, b.ones(), b.red_partial);
    auto cross = b.sum_partials(c_.g, F);
    const auto& fm = c_.mask_of(fresh);
    slot_gram(c_.space, b.W, b.R, k, fm, b.gram_partial, b.GW);
    c_.X.reduce(c_.space, b.GW);
    slot_gram(c_.space, b.H, b.R, k, fm, b.gram_partial, b.GH);
    b.download_grams();
    // (in a refit GH was recomputed for the fresh slots only, with the same values)
    std::vector<double> err(size_t(b.R), 0.0);
    for (int p = 0; p < F; ++p) {
      const int r = fresh[size_t(p)];
      err[size_t(r)] = error_from(cross[size_t(p)], r);
    }
    return err;
  }

  /// ||X - W H|| of slot r from <W^T X, H> and the Grams in their host mirrors; NaN when not
  /// finite (identity_error, rule.hpp).
  double error_from(double cross, int r) const {
    const auto& gw = c_.b.gw_host();
    const auto& gh = c_.b.gh_host();
    double wh = 0.0;
    for (int s = 0; s < c_.k; ++s)
      for (int t = 0; t < c_.k; ++t) wh += gw(r, s, t) * gh(r, s, t);
    return identity_error(c_.norm_x, cross, wh);
  }

  /// ||X - W H|| for the slots in `which`, from Q = W^T X and G_W = W^T W of the current W
  /// and the current H (H H^T is computed here). A factorization's iteration leaves Q and G_W
  /// of the current W; a fixed-H refit's does not (q_current), so they are formed here.
  template <class Rule>
  std::vector<double> errors(const std::vector<int>& which) {
    auto& b = c_.b;
    std::vector<double> err(size_t(b.R), 0.0);
    if (which.empty()) return err;
    const auto& m = c_.mask_of(which);
    if constexpr (is_beta_rule<Rule>) {
      return c_.step(m, which).beta_errors(which, m, c_.n_global);
    } else {
      if (!c_.q_current) {
        c_.X.wt_times_x(c_.space, b.W, b.Q, b.gather);
        c_.X.reduce(c_.space, b.Q);
        slot_gram(c_.space, b.W, b.R, c_.k, m, b.gram_partial, b.GW);
        c_.X.reduce(c_.space, b.GW);
        c_.q_current = true;
      }
      slot_gram(c_.space, b.H, b.R, c_.k, m, b.gram_partial, b.GH);
      slot_dot(c_.space, b.Q, b.H, b.R, c_.k, m, b.red_partial);
      auto cross = b.sum_partials(c_.g, b.R);
      b.download_grams();
      for (int r : which) err[size_t(r)] = error_from(cross[size_t(r)], r);
      return err;
    }
  }

  // ------------------------------------------------------------- iterations
  template <class Rule>
  void iterate() {
    Kokkos::Profiling::ScopedRegion region(Mode::template region<Rule>());
    const auto active = active_list();
    const auto& act = c_.b.upload_mask([&](int r) { return slots_[size_t(r)].active; });
    const StepOutputs out = mode_.template step<Rule>(c_, act, active);
    if (out.sweeps > 0)
      for (int r : active)
        slots_[size_t(r)].progress.sweeps +=
            out.sweeps + (out.repeats.empty() ? 0 : out.repeats[size_t(r)]);
    if constexpr (Mode::records_trace)
      if (c_.opts.record_trace) record_trace<Rule>(out.values);
    decide<Rule>(out.values);
  }

  /// SolverOptions::record_trace: the error of every active slot after this iteration, from
  /// the W^T X and W^T W its H-update left (errors); the next W-update recomputes H H^T, so
  /// the trajectory is unchanged.
  template <class Rule>
  void record_trace(const std::vector<double>& values) {
    const auto which = active_list();
    const auto err = errors<Rule>(which);
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
    for (int r = 0; r < c_.b.R; ++r) {
      Slot& s = slots_[size_t(r)];
      if (!s.active) continue;
      const double value = values.empty() ? 0.0 : values[size_t(r)];
      const Verdict v = Rule::after_update(c_.opts, s.progress, value);
      if (v.kind == Verdict::go_on) continue;
      (v.kind == Verdict::measure ? measure : stop).push_back(r);
      which.push_back(r);
      s.status = v.status;
    }
    if (which.empty()) return;
    auto err = errors<Rule>(which);
    for (int r : measure) {
      Slot& s = slots_[size_t(r)];
      const Verdict v = Rule::after_error(c_.opts, s.progress, err[size_t(r)]);
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
    for (int r = 0; r < c_.b.R; ++r) {
      Slot& s = slots_[size_t(r)];
      if (!s.done) continue;
      ReplicateResult res;
      res.job = s.job;
      res.n = c_.n;
      res.g = c_.g;
      res.n_iter = s.progress.iter;
      res.n_sweeps = s.progress.sweeps;
      res.error_at_init = s.progress.err_init;
      res.final_error = s.final_err;
      res.status = s.status;
      res.trace = std::move(s.trace);
      if (Mode::returns_H) res.H = c_.b.download(c_.b.H, r, c_.g, true);
      if (Mode::returns_W(c_.opts)) res.W = c_.b.download(c_.b.W, r, c_.n, false);
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
    const auto keep = active_list();
    c_.b.compact(keep);
    std::vector<Slot> slots2;
    for (int r : keep) slots2.push_back(slots_[size_t(r)]);
    slots_ = std::move(slots2);
    mode_.after_compact(c_, active_list());
  }

  Mode mode_;
  BatchContext<T> c_;
  bool exhausted_ = false;
  std::vector<Slot> slots_;
};

}  // namespace knmf::detail
