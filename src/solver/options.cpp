#include "knmf/solver/options.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "knmf/core/error.hpp"
#include "knmf/solver/result.hpp"

namespace knmf {

void SolverOptions::validate() const {
  if (max_iter < 1) input_error("--max-iter ", max_iter, " is invalid: it must be >= 1");
  if (!(tol >= 0) || !std::isfinite(tol))
    input_error("--tol ", tol, " is invalid: it must be a finite number >= 0");
  if (check_every < 1)
    input_error("--check-every ", check_every, " is invalid: it must be >= 1");
  if (!(alpha_W >= 0) || !std::isfinite(alpha_W))
    input_error("--alpha-usage ", alpha_W, " is invalid: it must be a finite number >= 0");
  if (!(alpha_H >= 0) || !std::isfinite(alpha_H))
    input_error("--alpha-spectra ", alpha_H, " is invalid: it must be a finite number >= 0");
  if (!(l1_ratio >= 0 && l1_ratio <= 1))
    input_error("--l1-ratio ", l1_ratio, " is invalid: it must lie in [0, 1]");
  if (zero_guard == ZeroGuard::add_eps && (!(eps > 0) || !std::isfinite(eps)))
    input_error("--eps ", eps, " is invalid: it must be a finite number > 0");
  if (inner_sweeps != inner_sweeps_auto && inner_sweeps < 1)
    input_error("--inner-sweeps ", inner_sweeps,
                " is invalid: expected 1 (exact), an integer N > 1 or auto");
  if (!(inner_alpha >= 0) || !std::isfinite(inner_alpha))
    input_error("--inner-alpha ", inner_alpha, " is invalid: it must be a finite number >= 0");
  if (!(inner_eps > 0 && inner_eps < 1))
    input_error("--inner-eps ", inner_eps, " is invalid: it must lie in (0, 1)");
  if (!std::isfinite(beta_loss))
    input_error("--beta-loss ", beta_loss, " is invalid: it must be a finite number");
  if (inner_sweeps != 1 && beta_loss != 2.0)
    input_error("--inner-sweeps ", inner_sweeps_name(inner_sweeps), " with --beta-loss ",
                beta_loss_name(beta_loss), " is invalid: the accelerated updates are those of "
                "the Frobenius loss (--solver cd or mu, --beta-loss frobenius)");
  if (beta_loss != 2.0 && solver != SolverKind::mu)
    input_error("--solver ", to_string(solver), " with --beta-loss ", beta_loss_name(beta_loss),
                " is invalid: solver '", to_string(solver), "' does not handle beta_loss = ",
                beta_loss_name(beta_loss), " (only --solver mu does, as in scikit-learn)");
}

double parse_beta_loss(const std::string& s, const std::string& option) {
  if (s == "frobenius") return 2.0;
  if (s == "kullback-leibler") return 1.0;
  if (s == "itakura-saito") return 0.0;
  double v = 0.0;
  size_t used = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size() || !std::isfinite(v))
    input_error(option, " '", s,
                "' is invalid: expected frobenius, kullback-leibler, itakura-saito or a finite "
                "number");
  return v;
}

std::string beta_loss_name(double beta) {
  if (beta == 2.0) return "frobenius";
  if (beta == 1.0) return "kullback-leibler";
  if (beta == 0.0) return "itakura-saito";
  std::ostringstream o;
  o << std::setprecision(17) << beta;
  return o.str();
}

int parse_inner_sweeps(const std::string& s, const std::string& option) {
  if (s == "auto") return SolverOptions::inner_sweeps_auto;
  long v = 0;
  size_t used = 0;
  try {
    v = std::stol(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size() || v < 1 || v > 1000000)
    input_error(option, " '", s, "' is invalid: expected 1 (exact), an integer N > 1 or auto");
  return int(v);
}

std::string inner_sweeps_name(int inner_sweeps) {
  return inner_sweeps == SolverOptions::inner_sweeps_auto ? "auto" : std::to_string(inner_sweeps);
}

void check_beta_loss_zeros(double beta_loss, double min_value, std::int64_t stored,
                           std::int64_t n, std::int64_t g, const std::string& source) {
  if (!(beta_loss <= 0.0)) return;
  const bool implicit_zero = double(stored) < double(n) * double(g);
  if (implicit_zero || min_value == 0.0)
    input_error(source, ": X contains zeros",
                implicit_zero ? " (a sparse X with implicit zeros)" : "",
                ", and with beta_loss ", beta_loss_name(beta_loss),
                " (<= 0) the solver may diverge (scikit-learn refuses it): add small values to X "
                "or use a positive --beta-loss");
}

std::string to_string(SolverKind s) { return s == SolverKind::mu ? "mu" : "cd"; }
std::string to_string(ZeroGuard z) {
  return z == ZeroGuard::replace_zero ? "replace-zero" : "add-eps";
}

SolverKind parse_solver(const std::string& s, const std::string& option) {
  if (s == "mu") return SolverKind::mu;
  if (s == "cd") return SolverKind::cd;
  input_error(option, " '", s, "' is invalid: expected mu or cd");
}

ZeroGuard parse_zero_guard(const std::string& s, const std::string& option) {
  if (s == "replace-zero") return ZeroGuard::replace_zero;
  if (s == "add-eps") return ZeroGuard::add_eps;
  input_error(option, " '", s, "' is invalid: expected replace-zero or add-eps");
}

std::string to_string(InitKind i) {
  switch (i) {
    case InitKind::random: return "random";
    case InitKind::nndsvd: return "nndsvd";
    case InitKind::nndsvda: return "nndsvda";
    case InitKind::nndsvdar: return "nndsvdar";
  }
  return "?";
}

InitKind parse_init(const std::string& s, const std::string& option) {
  for (auto i : {InitKind::random, InitKind::nndsvd, InitKind::nndsvda, InitKind::nndsvdar})
    if (s == to_string(i)) return i;
  input_error(option, " '", s, "' is invalid: expected random, nndsvd, nndsvda or nndsvdar");
}

Regularization regularization(const SolverOptions& o, std::int64_t n, std::int64_t g) {
  Regularization r;
  r.l1_W = double(g) * o.alpha_W * o.l1_ratio;
  r.l2_W = double(g) * o.alpha_W * (1.0 - o.l1_ratio);
  r.l1_H = double(n) * o.alpha_H * o.l1_ratio;
  r.l2_H = double(n) * o.alpha_H * (1.0 - o.l1_ratio);
  return r;
}

std::string to_string(ReplicateStatus s) {
  switch (s) {
    case ReplicateStatus::converged: return "converged";
    case ReplicateStatus::max_iter: return "max_iter";
    case ReplicateStatus::non_finite: return "non_finite";
  }
  return "?";
}

}  // namespace knmf
