#pragma once
/// \file
/// The update rules of the solver, enumerated once (with_rule), and the fixed-H iterations of
/// one slot under a rule (run_fixed_h) for callers that hold the products instead of X.
/// A new rule: a policy file (rule.hpp says what it provides) and a case here.

#include <cmath>
#include <utility>

#include "knmf/core/error.hpp"
#include "rule.hpp"
#include "rule_beta_mu.hpp"
#include "rule_cd.hpp"
#include "rule_mu.hpp"

namespace knmf::detail {

/// f(Rule{}) with the rule of `solver` (the Frobenius rules: what a caller without X runs).
template <class F>
decltype(auto) with_rule(SolverKind solver, F&& f) {
  if (solver == SolverKind::mu) return std::forward<F>(f)(MuRule{});
  KNMF_ASSERT(solver == SolverKind::cd, "unknown solver");
  return std::forward<F>(f)(CdRule{});
}

/// f(Rule{}) with the rule of the options: BetaMuRule for solver mu with a loss other than Frobenius,
/// else the rule of `o.solver` (beta_loss 2 is exactly the MuRule / CdRule path).
template <class F>
decltype(auto) with_rule(const SolverOptions& o, F&& f) {
  if (o.solver == SolverKind::mu && o.beta_rule()) return std::forward<F>(f)(BetaMuRule{});
  return with_rule(o.solver, std::forward<F>(f));
}

/// How run_fixed_h ended: the status, and the squared error of the final W when the rule had
/// measured it at the last iteration (so the caller need not measure it again).
struct FixedHOutcome {
  ReplicateStatus status = ReplicateStatus::max_iter;
  bool measured_last = false;
  double squared_error = 0.0;
};

/// The fixed-H iterations of one slot (f.R == 1, `active` its mask) under Rule, from
/// `progress` (err_init and prev_err set) until the rule stops it: the batch runner's loop
/// for one slot whose error comes from `squared_error()` (||X - W H||^2 of the current f.W,
/// >= 0) instead of from X.
template <class Rule, class T, class SquaredError>
FixedHOutcome run_fixed_h(const ExecSpace& space, FixedH<T>& f, const SlotMask& active,
                          const Regularization& reg, const SolverOptions& opts,
                          SlotProgress& progress, const SquaredError& squared_error) {
  KNMF_ASSERT(f.R == 1, "run_fixed_h runs one slot");
  FixedHOutcome out;
  for (;;) {
    const auto v = Rule::fixed_h_step(space, f, active, reg, opts);
    Verdict d = Rule::after_update(opts, progress, v.empty() ? 0.0 : v[0]);
    out.measured_last = d.kind == Verdict::measure;
    if (out.measured_last) {
      out.squared_error = squared_error();
      d = Rule::after_error(opts, progress, std::sqrt(out.squared_error));
    }
    if (d.kind == Verdict::stop) {
      out.status = d.status;
      return out;
    }
  }
}

}  // namespace knmf::detail
