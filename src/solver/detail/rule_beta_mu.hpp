#pragma once
/// \file
/// The beta-divergence multiplicative-update rule (scikit-learn's solver="mu" with
/// not Frobenius: _fit_multiplicative_update): W from the old H, then H from the new W, each
/// through the passes over X of beta_passes.hpp; the error is the beta-divergence
/// sqrt(2 div) (_beta_divergence with square_root=True), with MuRule's convergence decision
/// (every check_every iterations: stop when (previous - error) / error_at_init < tol).
/// The interface of a rule: rule.hpp. Unlike MuRule it needs X in a fixed-H refit (refit_step)
/// and measures its error through the step context (beta_errors), so the batch runner calls it
/// through those (is_beta_rule).

#include <Kokkos_Profiling_ScopedRegion.hpp>

#include <cmath>
#include <type_traits>
#include <vector>

#include "rule.hpp"
#include "rule_mu.hpp"

namespace knmf::detail {

struct BetaMuRule {
  static constexpr const char* iteration_region = "knmf::beta_mu::iteration";
  static constexpr const char* refit_region = "knmf::beta_mu::refit_iteration";
  static constexpr bool fixed_h_uses_next = false;

  /// scikit-learn (update_H=False, solver mu): W = sqrt(mean(X) / k).
  static double fixed_h_start(double mean, int k) { return MuRule::fixed_h_start(mean, k); }

  template <class Step>
  static void factorize_step(const Step& s, StepOutputs&) {
    {
      Kokkos::Profiling::ScopedRegion r1("knmf::beta_mu::update_W");
      s.beta_update_W(false);
    }
    {
      Kokkos::Profiling::ScopedRegion r2("knmf::beta_mu::update_H");
      s.beta_update_H();
    }
  }

  /// One W update with H fixed (the step context has X).
  template <class Step>
  static void refit_step(const Step& s, StepOutputs&) {
    Kokkos::Profiling::ScopedRegion r1("knmf::beta_mu::update_W");
    s.beta_update_W(true);
  }

  static Verdict after_update(const SolverOptions& o, SlotProgress& s, double v) {
    return MuRule::after_update(o, s, v);
  }
  static Verdict after_error(const SolverOptions& o, SlotProgress& s, double e) {
    return MuRule::after_error(o, s, e);
  }
};

template <class Rule>
inline constexpr bool is_beta_rule = std::is_same_v<Rule, BetaMuRule>;

}  // namespace knmf::detail
