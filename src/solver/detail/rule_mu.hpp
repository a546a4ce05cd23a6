#pragma once
/// \file
/// The multiplicative-update rule (scikit-learn's Frobenius MU, solver="mu"): its updates and
/// its convergence decision. The interface of a rule: rule.hpp.

#include <Kokkos_Profiling_ScopedRegion.hpp>

#include <cmath>
#include <utility>
#include <vector>

#include "kernels.hpp"
#include "rule.hpp"

namespace knmf::detail {

struct MuRule {
  static constexpr const char* iteration_region = "knmf::mu::iteration";
  static constexpr const char* refit_region = "knmf::mu::refit_iteration";
  static constexpr bool fixed_h_uses_next = true;

  /// scikit-learn (update_H=False): W = sqrt(mean(X) / k).
  static double fixed_h_start(double mean, int k) { return std::sqrt(mean / double(k)); }

  /// W <- W * P / (W G_H + ...) (written over P, then swapped), then H likewise into H_next.
  /// Accelerated (inner_sweeps != 1): each update is repeated against the same products
  /// (repeat_updates, rule.hpp), so P and Q must survive: the new values go to W_next / H_next
  /// and are copied into W / H for the slots updated (slot_copy_change), which also measures
  /// the change of each slot's step (its l1 norm), the repeats' stopping measure.
  template <class Step>
  static void factorize_step(const Step& s, StepOutputs& out) {
    auto& b = s.batch;
    const bool add_eps = s.opts.zero_guard == ZeroGuard::add_eps;
    if (s.sweeps_W > 1 || s.sweeps_H > 1) {
      {
        Kokkos::Profiling::ScopedRegion r1("knmf::mu::update_W");
        s.products_for_W();
        auto update_W = [&](const SlotMask& on) {
          mu_update(s.space, b.W, b.P, b.GH, b.k, on, s.reg.l1_W, s.reg.l2_W, add_eps,
                    s.opts.eps, b.W_next);
          slot_copy_change(s.space, b.W_next, b.W, b.R, b.k, on, b.red_partial);
          return s.violations_W();
        };
        repeat_updates(s, out.repeats, update_W(s.active), s.sweeps_W, update_W);
      }
      {
        Kokkos::Profiling::ScopedRegion r2("knmf::mu::update_H");
        s.products_for_H();
        auto update_H = [&](const SlotMask& on) {
          mu_update(s.space, b.H, b.Q, b.GW, b.k, on, s.reg.l1_H, s.reg.l2_H, add_eps,
                    s.opts.eps, b.H_next);
          slot_copy_change(s.space, b.H_next, b.H, b.R, b.k, on, b.red_partial);
          return s.violations_H();
        };
        repeat_updates(s, out.repeats, update_H(s.active), s.sweeps_H, update_H);
      }
      return;
    }
    {
      Kokkos::Profiling::ScopedRegion r1("knmf::mu::update_W");
      s.products_for_W();
      mu_update(s.space, b.W, b.P, b.GH, b.k, s.active, s.reg.l1_W, s.reg.l2_W, add_eps,
                s.opts.eps, b.P);
      std::swap(b.W, b.P);
    }
    {
      Kokkos::Profiling::ScopedRegion r2("knmf::mu::update_H");
      s.products_for_H();
      mu_update(s.space, b.H, b.Q, b.GW, b.k, s.active, s.reg.l1_H, s.reg.l2_H, add_eps,
                s.opts.eps, b.H_next);
      std::swap(b.H, b.H_next);
    }
  }

  template <class T>
  static std::vector<double> fixed_h_step(const ExecSpace& space, FixedH<T>& f,
                                          const SlotMask& active, const Regularization& reg,
                                          const SolverOptions& opts) {
    mu_update(space, f.W, f.P, f.G, f.k, active, reg.l1_W, reg.l2_W,
              opts.zero_guard == ZeroGuard::add_eps, opts.eps, f.W_next);
    std::swap(f.W, f.W_next);
    return {};
  }

  /// Whether iteration `iter` needs the error: every check_every iterations (tol > 0) and at
  /// max_iter (for the result).
  static bool needs_error(const SolverOptions& o, int iter) {
    return (o.tol > 0 && iter % o.check_every == 0) || iter >= o.max_iter;
  }

  static Verdict after_update(const SolverOptions& o, SlotProgress& s, double) {
    ++s.iter;
    return needs_error(o, s.iter) ? Verdict::check() : Verdict::next();
  }

  /// scikit-learn's test: stop when the error fell by less than tol (relative to the initial
  /// error) since the last check.
  static Verdict after_error(const SolverOptions& o, SlotProgress& s, double e) {
    if (o.tol > 0 && s.iter % o.check_every == 0) {
      if (!std::isfinite(e)) return Verdict::done(ReplicateStatus::non_finite);
      if ((s.prev_err - e) / s.err_init < o.tol) return Verdict::done(ReplicateStatus::converged);
      s.prev_err = e;
    }
    if (s.iter >= o.max_iter)
      return Verdict::done(std::isfinite(e) ? ReplicateStatus::max_iter
                                            : ReplicateStatus::non_finite);
    return Verdict::next();
  }
};

}  // namespace knmf::detail
