#pragma once
/// \file
/// What an update rule of the batched solver is (internal). A rule is a policy struct (one
/// file each: rule_mu.hpp, rule_cd.hpp; rules.hpp enumerates them) with
///
///   static constexpr const char* iteration_region, refit_region;   // profiling regions
///   static constexpr bool fixed_h_uses_next;  // fixed_h_step writes W_next (then swaps)
///   static double fixed_h_start(double mean, int k);   // W's value at the start of a refit
///
///   // One iteration of a factorization of the active slots (W, then H), on the buffers of
///   // a SlotBatch through a step context `s` (batch_runner.hpp: FactorizeStep):
///   //   s.batch, s.space, s.opts, s.reg, s.active,
///   //   s.products_for_W()  GH = H H^T, P = X H^T          (what W's update reads)
///   //   s.products_for_H()  Q = W^T X, GW = W^T W          (what H's update reads; summed
///   //                                                        over row blocks)
///   //   s.violations_W(), s.violations_H()  per-slot sums of the chunk partials
///   // Sets out.values (one value per slot for after_update, a violation) or leaves them
///   // empty, and out.repeats when it repeats updates (repeat_updates below).
///   template <class Step> static void factorize_step(const Step& s, StepOutputs& out);
///
///   // One W update of the active slots with H fixed, from P = X H^T and G = H H^T alone
///   // (FixedH below). Returns per-slot values over this block's rows of W (the caller sums
///   // them over row blocks), or nothing.
///   template <class T> static std::vector<double> fixed_h_step(const ExecSpace&, FixedH<T>&,
///       const SlotMask& active, const Regularization&, const SolverOptions&);
///
///   // The per-slot convergence decision, in two parts (see Verdict).
///   static Verdict after_update(const SolverOptions&, SlotProgress&, double value);
///   static Verdict after_error(const SolverOptions&, SlotProgress&, double error);
///
/// The batch runner (every slot of a batch) and the consensus refit (one slot, from products
/// it streamed; run_fixed_h in rules.hpp) both run a rule through exactly these functions, so
/// a rule's update and its decision are written once.

#include <Kokkos_Profiling_ScopedRegion.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "knmf/core/types.hpp"
#include "knmf/solver/options.hpp"
#include "knmf/solver/result.hpp"
#include "kernels.hpp"

namespace knmf::detail {

/// One slot's progress, as its rule's convergence decision reads and updates it.
struct SlotProgress {
  int iter = 0;            ///< iterations done (after_update counts them)
  double err_init = 0.0;   ///< ||X - W0 H0||_F
  double prev_err = 0.0;   ///< the error at the last check
  double viol_init = 0.0;  ///< the first iteration's value (CD: projected-gradient violation)
  std::int64_t sweeps = 0; ///< factor sweeps run (ReplicateResult::n_sweeps)
};

/// What a rule decides for a slot: after an iteration (after_update) it goes on, stops, or
/// asks for ||X - W H|| first (measure: then after_error decides, go_on or stop). A stopped
/// slot's final error is measured for its result in either case.
struct Verdict {
  enum Kind { go_on, measure, stop };
  Kind kind = go_on;
  ReplicateStatus status = ReplicateStatus::max_iter;  ///< when kind == stop

  static Verdict next() { return {go_on, ReplicateStatus::max_iter}; }
  static Verdict check() { return {measure, ReplicateStatus::max_iter}; }
  static Verdict done(ReplicateStatus s) { return {stop, s}; }
};

/// What one iteration of the active slots produces besides their new factors.
struct StepOutputs {
  /// One value per slot for the rule's after_update (a violation), or empty.
  std::vector<double> values;
  /// Sweeps each slot ran in this step beyond the first of each update (the accelerated
  /// sweeps, repeat_updates in rule.hpp), or empty.
  std::vector<int> repeats;
  /// Factor sweeps each active slot counts for this step besides `repeats` (set by the mode:
  /// 2 in a Frobenius factorization, 0 where none are counted).
  int sweeps = 0;
};

/// ||X - W H||_F from the identity ||X||^2 - 2 <W^T X, H> + <W^T W, H H^T> (docs/numerics.md,
/// "The reconstruction error without X - W H"): `norm2` = ||X||^2, `cross` = <W^T X, H>, `wh` = <W^T W, H H^T>. The sum is
/// clamped at 0 (a fit better than the rounding of its terms), but a term or sum that is not
/// finite (a product overflowed, a factor diverged) gives NaN: clamping NaN or -Inf to 0 would
/// report a perfect fit of a failed replicate. A slot whose error is NaN ends non_finite (the
/// rules' after_error, settle below).
inline double identity_error(double norm2, double cross, double wh) {
  const double sq = norm2 - 2.0 * cross + wh;
  if (!std::isfinite(sq) || !std::isfinite(cross) || !std::isfinite(wh))
    return std::numeric_limits<double>::quiet_NaN();
  return std::sqrt(sq > 0.0 ? sq : 0.0);
}

/// The status a stopped slot ends with, from its rule's verdict and its final error: a
/// replicate whose final error is not a finite number (identity_error) is not a valid
/// factorization, whatever the rule's stopping test said (CD stops on its violation alone).
inline ReplicateStatus settle(ReplicateStatus verdict, double final_error) {
  return std::isfinite(final_error) ? verdict : ReplicateStatus::non_finite;
}

/// The operands of a fixed-H step: W (R k x m) and the buffer of its next value, updated from
/// P = X H^T (R k x m) and the per-slot G = H H^T, with the chunk partials (and their host
/// mirror) of the per-slot reductions over the m columns. W and W_next are swapped by a rule
/// that writes W_next.
template <class T>
struct FixedH {
  Matrix<T>& W;
  Matrix<T>& W_next;
  const Matrix<T>& P;
  const SlotGram& G;
  int R = 1, k = 1;
  const Kokkos::View<double*, MemSpace>& partial;
  const Kokkos::View<double*, MemSpace>::HostMirror& partial_h;
};

/// The accelerated updates (SolverOptions::inner_sweeps != 1; Gillis & Glineur 2012): up to
/// limit - 1 more updates of one factor of the active slots (`s.slots`) against the same
/// products, after a first one whose changes are `first`. A slot repeats while its last
/// update's change exceeds inner_eps times its first (a zero or non-finite first change: no
/// repeat); each repeat is counted in `repeats` (per slot, sized on first use). `update(mask)` runs one update of the slots in the mask and returns every slot's
/// change (summed over the row blocks, so that every rank decides alike). CD's change is its
/// sweep's projected-gradient violation (rule_cd.hpp), MU's the l1 norm of the step
/// (rule_mu.hpp).
template <class Step, class Update>
void repeat_updates(const Step& s, std::vector<int>& repeats, const std::vector<double>& first,
                    int limit, const Update& update) {
  if (limit <= 1) return;
  Kokkos::Profiling::ScopedRegion region("knmf::solver::repeat_updates");
  const size_t R = size_t(s.batch.R);
  if (repeats.empty()) repeats.assign(R, 0);
  std::vector<char> on(R, 0);
  bool any = false;
  for (int r : s.slots)
    if (first[size_t(r)] > 0.0 && std::isfinite(first[size_t(r)])) {
      on[size_t(r)] = 1;
      any = true;
    }
  for (int j = 1; j < limit && any; ++j) {
    const auto v = update(s.subset_mask(on));
    any = false;
    for (size_t r = 0; r < R; ++r) {
      if (!on[r]) continue;
      ++repeats[r];
      if (v[r] > s.opts.inner_eps * first[r]) any = true;
      else on[r] = 0;
    }
  }
}

}  // namespace knmf::detail
