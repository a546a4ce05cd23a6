#pragma once
/// \file
/// What a batch of slots runs in (internal): the context the batch runner and its mode share
/// (BatchContext: X, the options, the SlotBatch, X's statistics, the sweep limits), the step
/// context an update rule sees (FactorizeStep) and what a step returns (StepOutputs).

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "knmf/solver/nmf.hpp"
#include "kernels.hpp"
#include "rule.hpp"
#include "slot_batch.hpp"
#include "x_operand.hpp"

namespace knmf::detail {

/// What a rule's factorize_step reads (rule.hpp), fixed for the step: the batch, the options,
/// the active slots (mask and, where a rule needs them in order, list), the accelerated
/// sweeps' limits, and the products with X that the two factor updates read, summed over row
/// blocks. What the step produces besides the factors goes to StepOutputs.
template <class T>
struct FactorizeStep {
  const ExecSpace& space;
  const XOperand<T>& X;
  SlotBatch<T>& batch;
  const SolverOptions& opts;
  const Regularization& reg;
  const SlotMask& active;
  /// The active slots, in order: the beta passes run slot by slot, the accelerated sweeps
  /// repeat some of them. Empty on the exact Frobenius path (which allocates nothing).
  std::vector<int> slots;
  /// The most sweeps per product of W's and of H's update (1: scikit-learn's CD).
  int sweeps_W = 1, sweeps_H = 1;

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
  /// The mask of the slots r with on[r] (a second buffer: `active` stays valid).
  const SlotMask& subset_mask(const std::vector<char>& on) const {
    return batch.upload_subset_mask([&](int r) { return on[size_t(r)] != 0; });
  }
};

/// The batch's state shared by the runner (batch_runner.hpp) and its mode (run_modes.hpp):
/// X and what is known of it, the options, the slots' buffers.
template <class T>
struct BatchContext {
  BatchContext(const ExecSpace& space_, const XOperand<T>& X_, int k_, const SolverOptions& o,
               RunMode kind)
      : space(space_), X(X_), k(k_), opts(o), b(space_, X_.rows(), X_.cols(), k_, kind),
        n(X_.rows()), g(X_.cols()), n_global(X_.global_rows()), row0(X_.row_offset()),
        reg(regularization(o, n_global, g)), norm_x(X_.stats().norm2), mean(X_.mean()) {
    if (o.inner_sweeps != 1) set_sweep_limits();
  }

  ExecSpace space;
  const XOperand<T>& X;
  int k;
  SolverOptions opts;
  SlotBatch<T> b;
  size_type n = 0, g = 0;              ///< this block's rows, the columns
  size_type n_global = 0, row0 = 0;    ///< full-matrix rows and this block's offset
  Regularization reg;
  double norm_x = 0.0, mean = 0.0;     ///< ||X||^2, mean(X)
  int sweeps_W = 1, sweeps_H = 1;      ///< accelerated sweeps per product (set_sweep_limits)
  bool q_current = false;              ///< Q and GW belong to the current W (BatchRunner::errors)

  /// The device mask of the slots in `which` (the one mask buffer: valid until the next).
  const SlotMask& mask_of(const std::vector<int>& which) {
    return b.upload_mask(
        [&](int r) { return std::find(which.begin(), which.end(), r) != which.end(); });
  }
  /// The step context of the slots in mask `m` (list `which`, in order, or empty).
  FactorizeStep<T> step(const SlotMask& m, std::vector<int> which) {
    return FactorizeStep<T>{space, X, b, opts, reg, m, std::move(which), sweeps_W, sweeps_H};
  }

private:
  /// The accelerated sweeps' limits per product (Gillis & Glineur 2012, section 3): a sweep
  /// over a factor with m columns costs about m (k + 1) k, its products with X about
  /// (nnz + m' k) k, so rho = 1 + (nnz + m' k) / (m (k + 1)) sweeps cost as much as the
  /// products they reuse; auto allows 1 + alpha rho of them. nnz is X's stored entries (n g
  /// for a dense X), over every row block (the statistics are global), so every rank of a
  /// row-partitioned X takes the same limits.
  void set_sweep_limits() {
    if (opts.inner_sweeps != SolverOptions::inner_sweeps_auto) {
      sweeps_W = sweeps_H = opts.inner_sweeps;
      return;
    }
    const double nnz = double(X.stats().count), n_ = double(n_global), g_ = double(g),
                 k_ = double(k);
    const double rho_W = 1.0 + (nnz + g_ * k_) / (n_ * (k_ + 1.0));
    const double rho_H = 1.0 + (nnz + n_ * k_) / (g_ * (k_ + 1.0));
    auto limit = [&](double rho) {
      const double v = std::floor(1.0 + opts.inner_alpha * rho);
      return v >= 1e6 ? 1000000 : std::max(1, int(v));
    };
    sweeps_W = limit(rho_W);
    sweeps_H = limit(rho_H);
  }
};

}  // namespace knmf::detail
