#pragma once
/// \file
/// Solver options as a plain struct (filled by the driver's CLI, usable from C++ directly).
/// Defaults follow cNMF's run parameters and scikit-learn's semantics.

#include <cstdint>
#include <string>

namespace knmf {

/// `mu`: Frobenius multiplicative update. `cd`: scikit-learn's coordinate descent
/// (cNMF's default for Frobenius loss).
enum class SolverKind { mu, cd };

/// How a denominator of the MU update is kept away from zero.
enum class ZeroGuard {
  replace_zero,  ///< scikit-learn: entries exactly 0 become float32 eps (default)
  add_eps,       ///< PyTorch engine: add `eps` to every denominator
};

/// How each replicate's W0, H0 are made: scikit-learn's `init` (`_initialize_nmf`).
/// `random`: scaled |N(0,1)| draws (the default; cNMF's default). `nndsvd`: from a rank-k
/// randomized SVD of X (Boutsidis & Gallopoulos), zeros kept; `nndsvda`: its zeros filled
/// with mean(X); `nndsvdar`: its zeros filled with |mean(X) N(0,1) / 100|.
enum class InitKind { random, nndsvd, nndsvda, nndsvdar };

struct SolverOptions {
  SolverKind solver = SolverKind::cd;
  int max_iter = 1000;          ///< cNMF's default (scikit-learn's own default is 200)
  double tol = 1e-4;            ///< relative tolerance; 0 runs exactly max_iter iterations
  int check_every = 10;         ///< MU: error check period (scikit-learn: 10)
  double alpha_W = 0.0;         ///< cNMF alpha_usage
  double alpha_H = 0.0;         ///< cNMF alpha_spectra
  double l1_ratio = 0.0;
  ZeroGuard zero_guard = ZeroGuard::replace_zero;
  double eps = 1e-9;            ///< added when zero_guard == add_eps
  bool return_W = false;        ///< also return each replicate's usages W (n x k)
  InitKind init = InitKind::random;  ///< W0, H0 of a factorization (a refit does not use it)
  /// scikit-learn's beta_loss as a number: 2 Frobenius (the MuRule / CdRule path), 1
  /// Kullback-Leibler, 0 Itakura-Saito, any other finite value the beta-divergence. Only
  /// solver mu handles beta != 2 (BetaMuRule, scikit-learn's _fit_multiplicative_update).
  double beta_loss = 2.0;
  /// Accelerated CD and MU (Gillis & Glineur 2012; docs/accelerated.md; Frobenius only):
  /// after each product with X, up to this many updates of the factor against the same
  /// products (CD: sweeps; MU: multiplicative steps).
  /// 1 (the default) is scikit-learn's CD exactly; N > 1 at most N; inner_sweeps_auto the
  /// paper's 1 + inner_alpha * rho, rho = 1 + (nnz + m' k) / (m (k + 1)) for a factor of m
  /// columns whose partner has m'. The repeats of a slot stop when an update's change (CD: its
  /// projected-gradient violation; MU: the l1 norm of its step) falls to inner_eps times the
  /// first update's.
  int inner_sweeps = 1;
  static constexpr int inner_sweeps_auto = -1;
  double inner_alpha = 0.5;
  double inner_eps = 0.1;
  /// Diagnostics (benchmarks, convergence studies): record each iteration's objective and the
  /// rule's per-iteration value in ReplicateResult::trace. Costs one k x k Gram of H and a
  /// dot per slot and iteration (no product with X: W^T X of the last update is reused; the
  /// beta-divergence rule pays its divergence pass). Results are unchanged by it.
  bool record_trace = false;

  /// The accelerated MU (solver mu, Frobenius, inner_sweeps != 1): its factorization holds a
  /// third n x k buffer per replicate (solver_bytes' mu_repeats).
  bool accelerated_mu() const {
    return solver == SolverKind::mu && beta_loss == 2.0 && inner_sweeps != 1;
  }

  /// Throws InputError naming the option and its value when out of range.
  void validate() const;
};

std::string to_string(SolverKind s);
std::string to_string(ZeroGuard z);
std::string to_string(InitKind i);
/// Parses "mu"/"cd" (InputError naming `option` otherwise).
SolverKind parse_solver(const std::string& s, const std::string& option = "--solver");
ZeroGuard parse_zero_guard(const std::string& s, const std::string& option = "--zero-guard");
/// Parses "random"/"nndsvd"/"nndsvda"/"nndsvdar" (InputError naming `option` otherwise).
InitKind parse_init(const std::string& s, const std::string& option = "--init");
/// Parses scikit-learn's beta_loss: "frobenius" (2), "kullback-leibler" (1), "itakura-saito"
/// (0) or a finite number (InputError naming `option` and the value otherwise).
double parse_beta_loss(const std::string& s, const std::string& option = "--beta-loss");
/// The name of a beta_loss value: frobenius, kullback-leibler, itakura-saito, or the number.
std::string beta_loss_name(double beta);
/// Parses --inner-sweeps: "auto" or an integer >= 1 (InputError naming `option` otherwise).
int parse_inner_sweeps(const std::string& s, const std::string& option = "--inner-sweeps");
/// "auto" or the number.
std::string inner_sweeps_name(int inner_sweeps);

/// scikit-learn's refusal for beta_loss <= 0 on an X with zeros (dense X: its smallest value
/// is 0; sparse X: an implicit zero, i.e. fewer stored entries than n*g, or a stored 0):
/// InputError naming `source`. `min_value` is the smallest stored value, `stored` how many
/// values are stored of n*g.
void check_beta_loss_zeros(double beta_loss, double min_value, std::int64_t stored,
                           std::int64_t n, std::int64_t g, const std::string& source);

/// Regularization scales as scikit-learn computes them from (alpha, l1_ratio) and X's shape:
/// l1_W = g * alpha_W * l1_ratio, l2_W = g * alpha_W * (1 - l1_ratio), and with n for H.
struct Regularization {
  double l1_W = 0, l2_W = 0, l1_H = 0, l2_H = 0;
};
Regularization regularization(const SolverOptions& o, std::int64_t n, std::int64_t g);

/// scikit-learn's EPSILON: float32 machine epsilon.
inline constexpr double sklearn_epsilon = 1.1920928955078125e-07;

}  // namespace knmf
