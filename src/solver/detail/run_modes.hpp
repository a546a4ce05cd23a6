#pragma once
/// \file
/// What a batch runs (internal): the two modes of BatchRunner (batch_runner.hpp), policy
/// classes over the shared BatchContext (batch_step.hpp). Each says where a slot starts, what
/// one iteration updates, and what a finished slot returns:
///
///   static constexpr RunMode kind;             // the SlotBatch's buffers (slot_batch.hpp)
///   static constexpr bool returns_H, records_trace;
///   static bool returns_W(const SolverOptions&);
///   static bool keep_w_next(const SolverOptions&);     // W_next beside P (slot_batch_bytes)
///   template <class Rule> static const char* region(); // the iteration's profiling region
///   void check(const BatchContext<T>&) const;          // InputError before anything runs
///   std::optional<Job> take(const JobSource&);         // the next job for a free slot
///   void look_ahead(BatchContext<T>&, const JobSource&, bool& exhausted);  // after a fill
///   template <class Rule> void start(BatchContext<T>&, int slot, const Job&);
///   template <class Rule> void fixed_products(BatchContext<T>&, fresh, active);  // per fill
///   static Matrix<T>& pack_buffer(SlotBatch<T>&);      // where the fresh W's are packed
///   template <class Rule> StepOutputs step(BatchContext<T>&, const SlotMask&, active);
///   void after_compact(BatchContext<T>&, const std::vector<int>& active);
///
/// FactorizeMode updates W and H from an init (knmf::factorize); RefitMode updates W for fixed
/// spectra H (knmf::refit_usages).

#include <algorithm>
#include <future>
#include <optional>
#include <utility>
#include <vector>

#include "knmf/core/error.hpp"
#include "knmf/solver/init.hpp"
#include "knmf/solver/nmf.hpp"
#include "batch_step.hpp"
#include "rules.hpp"

namespace knmf::detail {

/// A factorization: every slot starts from its job's init (random or NNDSVD) and updates W and
/// H. The next job's random init is drawn on a host thread while the batch runs (look_ahead).
template <class T>
class FactorizeMode {
public:
  static constexpr RunMode kind = RunMode::factorize;
  static constexpr bool returns_H = true, records_trace = true;
  static bool returns_W(const SolverOptions& o) { return o.return_W; }
  static bool keep_w_next(const SolverOptions& o) { return o.accelerated_mu(); }
  template <class Rule>
  static const char* region() {
    return Rule::iteration_region;
  }

  /// An NNDSVD init needs the whole X and k <= min(n, g) (scikit-learn's rule).
  void check(const BatchContext<T>& c) const {
    if (c.opts.init == InitKind::random) return;
    if (!c.X.whole_matrix())
      input_error("--init ", to_string(c.opts.init),
                  " is not available with X partitioned by rows (--distribute rows): the "
                  "randomized SVD's LU and QR need every row on one rank; use --distribute "
                  "jobs or --init random");
    if (size_type(c.k) > std::min(c.X.rows(), c.X.cols()))
      input_error("--init ", to_string(c.opts.init), ": k = ", c.k,
                  " is invalid: it must be <= min(cells, genes) = ",
                  std::min(c.X.rows(), c.X.cols()), " (scikit-learn's rule; --init random has no such limit)");
  }

  /// The job drawn ahead (its init then waited for), else the source's next.
  std::optional<Job> take(const JobSource& next) {
    if (!ahead_) return next();
    taken_.emplace(std::move(*ahead_));
    ahead_.reset();
    taken_->drawn.get();  // (rethrows what the draw threw)
    return taken_->job;
  }

  /// Take the next job from the source and start drawing its init (--init random only: the
  /// NNDSVD inits run on the device). A random init is a sequential RNG stream on the host
  /// (issue 26 estimates about 1 s for 2.4M cells at k = 20, not measured here), which the
  /// device would otherwise wait for at every refill. The job goes into the next free slot,
  /// as it would have without the look-ahead: the same job to the same slot, the same numbers.
  void look_ahead(BatchContext<T>& c, const JobSource& next, bool& exhausted) {
    if (exhausted || ahead_ || c.opts.init != InitKind::random) return;
    auto job = next();
    if (!job) {
      exhausted = true;
      return;
    }
    ahead_.emplace();
    Ahead& a = *ahead_;
    a.job = *job;
    a.h.resize(size_t(c.k * c.g));
    a.w.resize(size_t(c.n_global * c.k));
    a.drawn = std::async(std::launch::async, [seed = job->seed, mean = c.mean, k = c.k,
                                              n = c.n_global, g = c.g, h = a.h.data(),
                                              w = a.w.data()]() {
      random_init<T>(seed, mean, k, n, g, h, w);
    });
  }

  /// Slot r starts from the job's init: every row block draws the whole W0 (the RNG stream
  /// is sequential) and keeps its rows.
  template <class Rule>
  void start(BatchContext<T>& c, int r, const Job& job) {
    std::vector<T> h, w;
    if (taken_) {  // drawn on the host while the batch ran (look_ahead)
      h = std::move(taken_->h);
      w = std::move(taken_->w);
      taken_.reset();
    } else {
      h.resize(size_t(c.k * c.g));
      w.resize(size_t(c.n_global * c.k));
      if (c.opts.init == InitKind::random) {
        random_init<T>(job.seed, c.mean, c.k, c.n_global, c.g, h.data(), w.data());
      } else {
        // each replicate its own randomized SVD from its seed, as cNMF's jobs do (a whole X:
        // check refused a row block)
        c.X.nndsvd_init(c.space, c.k, job.seed, c.opts.init, h.data(), w.data());
      }
    }
    c.b.upload_rows_right(h.data(), r, c.b.H, c.b.H_next, c.g);
    c.b.upload_rows_left(w.data() + c.row0 * c.k, r, c.b.W, c.b.P, c.n);
  }

  /// Nothing is fixed in a factorization.
  template <class Rule>
  void fixed_products(BatchContext<T>&, const std::vector<int>&, const std::vector<int>&) {}
  /// P is scratch until the first iteration.
  static Matrix<T>& pack_buffer(SlotBatch<T>& b) { return b.P; }

  /// One iteration of W, then H (the rule's factorize_step). The active list goes to the
  /// step only where the rule needs it: the beta passes and the accelerated sweeps. A
  /// Frobenius iteration counts two sweeps per slot and leaves Q and GW of the current W.
  template <class Rule>
  StepOutputs step(BatchContext<T>& c, const SlotMask& act, const std::vector<int>& active) {
    StepOutputs out;
    const bool list = is_beta_rule<Rule> || c.sweeps_W > 1 || c.sweeps_H > 1;
    Rule::factorize_step(c.step(act, list ? active : std::vector<int>{}), out);
    if constexpr (!is_beta_rule<Rule>) {
      out.sweeps = 2;
      c.q_current = true;
    }
    return out;
  }

  void after_compact(BatchContext<T>&, const std::vector<int>&) {}

private:
  /// A job taken from the source while the batch runs, and its random W0 and H0.
  struct Ahead {
    Job job;
    std::vector<T> h, w;
    std::future<void> drawn;  ///< declared last: destroyed (waited for) before h and w
  };
  std::optional<Ahead> ahead_;  ///< being drawn
  std::optional<Ahead> taken_;  ///< taken for the next free slot (take, then start)
};

/// A refit: every slot holds fixed spectra H (job.index selects them) and updates W from the
/// rule's fixed-H start.
template <class T>
class RefitMode {
public:
  static constexpr RunMode kind = RunMode::refit;
  static constexpr bool returns_H = false, records_trace = false;
  static bool returns_W(const SolverOptions&) { return true; }
  static bool keep_w_next(const SolverOptions&) { return false; }  // (a refit's kind has it)
  template <class Rule>
  static const char* region() {
    return Rule::refit_region;
  }

  explicit RefitMode(const std::vector<std::vector<double>>& spectra) : spectra_(spectra) {}

  void check(const BatchContext<T>&) const {}
  std::optional<Job> take(const JobSource& next) { return next(); }
  void look_ahead(BatchContext<T>&, const JobSource&, bool&) {}

  template <class Rule>
  void start(BatchContext<T>& c, int r, const Job& job) {
    const auto& src = spectra_[size_t(job.index)];
    std::vector<T> h(src.begin(), src.end());
    c.b.upload_rows_right(h.data(), r, c.b.H, c.b.H_next, c.g);
    fill_slot(c.space, c.b.W, r, c.k, T(Rule::fixed_h_start(c.mean, c.k)));
  }

  /// H is fixed: what the iterations read of it is computed once per fill. The beta rule
  /// keeps H's row sums (scikit-learn's H_sum) of the fresh slots; the Frobenius rules read
  /// P = X H^T and H H^T of every active slot.
  template <class Rule>
  void fixed_products(BatchContext<T>& c, const std::vector<int>& fresh,
                      const std::vector<int>& active) {
    auto& b = c.b;
    if constexpr (is_beta_rule<Rule>) {
      if (is_kullback_leibler(c.opts.beta_loss))
        slot_row_sums(c.space, b.H, b.R, c.k, c.mask_of(fresh), b.gram_partial, b.hsum);
    } else {
      const auto& all = c.mask_of(active);
      c.X.x_times_ht(c.space, b.H, b.P, b.gather);
      slot_gram(c.space, b.H, b.R, c.k, all, b.gram_partial, b.GH);
    }
  }
  /// P holds X H^T and must survive.
  static Matrix<T>& pack_buffer(SlotBatch<T>& b) { return b.W_next; }

  /// One W update with H fixed (the beta rule reads X; the others P and H H^T). The values
  /// are over this block's rows of W: summed over the row blocks.
  template <class Rule>
  StepOutputs step(BatchContext<T>& c, const SlotMask& act, const std::vector<int>& active) {
    StepOutputs out;
    if constexpr (is_beta_rule<Rule>) {
      Rule::refit_step(c.step(act, active), out);
    } else {
      auto& b = c.b;
      FixedH<T> f{b.W, b.W_next, b.P, b.GH, b.R, c.k, b.red_partial, b.red_partial_host()};
      out.values = Rule::fixed_h_step(c.space, f, act, c.reg, c.opts);
      if (!out.values.empty()) c.X.reduce(out.values);
      c.q_current = false;
    }
    return out;
  }

  /// H H^T of the repacked slots.
  void after_compact(BatchContext<T>& c, const std::vector<int>& active) {
    slot_gram(c.space, c.b.H, c.b.R, c.k, c.mask_of(active), c.b.gram_partial, c.b.GH);
  }

private:
  const std::vector<std::vector<double>>& spectra_;
};

}  // namespace knmf::detail
