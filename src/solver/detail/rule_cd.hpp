#pragma once
/// \file
/// The coordinate-descent rule (scikit-learn's _update_cdnmf_fast, solver="cd"): its sweeps
/// and its convergence decision. The interface of a rule: rule.hpp.
///
/// Accelerated (SolverOptions::inner_sweeps != 1; Gillis & Glineur 2012): after the products
/// of each update, the sweep over that factor is repeated against the same products, per slot,
/// up to the step's sweep limit, until a sweep's change falls to inner_eps times the first
/// sweep's. The change of a sweep is its projected-gradient violation, sum |pg| over the
/// factor, which the sweep computes anyway: for a coordinate that is not clipped at 0 the step
/// is pg / G_tt, so this is the step's G-weighted l1 norm (no extra pass, no copy of the
/// factor). A sweep is an exact minimization along each coordinate, so no repeat increases the
/// objective. The convergence test stays CD's, on the first sweeps' violations (those at the
/// point where each update's products were formed).

#include <Kokkos_Profiling_ScopedRegion.hpp>

#include <cmath>
#include <tuple>
#include <vector>

#include "kernels.hpp"
#include "rule.hpp"

namespace knmf::detail {

struct CdRule {
  static constexpr const char* iteration_region = "knmf::cd::iteration";
  static constexpr const char* refit_region = "knmf::cd::refit_iteration";
  static constexpr bool fixed_h_uses_next = false;

  /// scikit-learn (update_H=False): W = 0.
  static double fixed_h_start(double, int) { return 0.0; }

  /// A sweep over W (in place), then over H; returns each slot's violation of both sweeps.
  /// Without repeated W sweeps nothing reads W's violations before H's sweep: its partials go
  /// to a region of their own and come to the host with H's, one copy and one wait per
  /// iteration instead of two (the same sums, in the same order: the same decisions).
  template <class Step>
  static void factorize_step(const Step& s, StepOutputs& out) {
    auto& b = s.batch;
    const bool w_later = s.sweeps_W <= 1;
    std::vector<double> vw, vh;
    {
      Kokkos::Profiling::ScopedRegion r1("knmf::cd::update_W");
      s.products_for_W();
      cd_update(s.space, b.W, b.P, b.GH, b.R, b.k, s.active, s.reg.l1_W, s.reg.l2_W,
                w_later ? b.red_partial_w() : b.red_partial);
      if (!w_later) {
        vw = s.violations_W();
        repeat_updates(s, out.repeats, vw, s.sweeps_W, [&](const SlotMask& on) {
          cd_update(s.space, b.W, b.P, b.GH, b.R, b.k, on, s.reg.l1_W, s.reg.l2_W,
                    b.red_partial);
          return s.violations_W();
        });
      }
    }
    {
      Kokkos::Profiling::ScopedRegion r2("knmf::cd::update_H");
      s.products_for_H();
      cd_update(s.space, b.H, b.Q, b.GW, b.R, b.k, s.active, s.reg.l1_H, s.reg.l2_H,
                b.red_partial);
      if (w_later) std::tie(vw, vh) = s.violations_WH();
      else vh = s.violations_H();
      repeat_updates(s, out.repeats, vh, s.sweeps_H, [&](const SlotMask& on) {
        cd_update(s.space, b.H, b.Q, b.GW, b.R, b.k, on, s.reg.l1_H, s.reg.l2_H, b.red_partial);
        return s.violations_H();
      });
    }
    for (size_t r = 0; r < vw.size(); ++r) vw[r] += vh[r];
    out.values = std::move(vw);
  }

  /// A sweep over W (in place); returns each slot's violation over this block's rows.
  template <class T>
  static std::vector<double> fixed_h_step(const ExecSpace& space, FixedH<T>& f,
                                          const SlotMask& active, const Regularization& reg,
                                          const SolverOptions&) {
    cd_update(space, f.W, f.P, f.G, f.R, f.k, active, reg.l1_W, reg.l2_W, f.partial);
    return sum_slot_partials(space, f.partial, num_chunks(size_type(f.W.extent(1))), f.R,
                             f.partial_h);
  }

  /// scikit-learn's test: stop when the violation fell to tol times the first iteration's.
  static Verdict after_update(const SolverOptions& o, SlotProgress& s, double v) {
    ++s.iter;
    if (s.iter == 1) s.viol_init = v;
    if (!std::isfinite(v)) return Verdict::done(ReplicateStatus::non_finite);
    if (s.viol_init == 0.0 || v / s.viol_init <= o.tol)
      return Verdict::done(ReplicateStatus::converged);
    if (s.iter >= o.max_iter) return Verdict::done(ReplicateStatus::max_iter);
    return Verdict::next();
  }

  /// Never asked (after_update does not measure); the error only goes into the result.
  static Verdict after_error(const SolverOptions&, SlotProgress&, double) {
    return Verdict::next();
  }
};

}  // namespace knmf::detail
