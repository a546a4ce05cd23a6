#pragma once
/// \file
/// Solver options as a plain struct (filled by the driver's CLI, usable from C++ directly).
/// Defaults follow cNMF's run parameters and scikit-learn's semantics.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

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

  /// Whether the loss is not Frobenius: solver mu then runs the beta-divergence rule
  /// (BetaMuRule). The one test of that every decision makes (uses_beta_rule).
  bool beta_rule() const;

  /// The accelerated MU (solver mu, Frobenius, inner_sweeps != 1): its factorization holds a
  /// third n x k buffer per replicate (solver_bytes' mu_repeats).
  bool accelerated_mu() const {
    return solver == SolverKind::mu && !beta_rule() && inner_sweeps != 1;
  }

  /// Throws InputError naming the option and its value when out of range (each field by its
  /// row of solver_option_fields(), then the rules between fields).
  void validate() const;
};

/// Whether a beta_loss is not Frobenius (2), i.e. solver mu runs the beta-divergence rule of
/// scikit-learn's _fit_multiplicative_update: the one predicate for it.
bool uses_beta_rule(double beta);
/// Whether a beta_loss is the Kullback-Leibler divergence (1), whose MU has a closed form
/// that needs X's row and column sums instead of a pass over W H.
bool is_kullback_leibler(double beta);

// ---- the option table ------------------------------------------------------------------------

/// What a SolverOptions field is everywhere it appears: one row per field, read by the driver's
/// flags, the results file's root attributes, consensus records (refit_<name>), the resume
/// check, cNMF's NAME.nmf_idvrun_params.yaml and the Python keywords. `name` is at once the
/// member, the results-file attribute, the scikit-learn / cNMF yaml keyword and the Python
/// keyword (they coincide by design); `flag` is the driver's.
struct SolverOptionField {
  enum class Kind { integer, real, text };  ///< the type of the results-file attribute
  /// Where the field is read from, besides the driver and the results file.
  enum Use : unsigned {
    cnmf_yaml = 1u,          ///< a key of cNMF's yaml (cNMF mode: the yaml's value is the run's)
    cli_over_yaml = 2u,      ///< cNMF mode: the flag, when given, wins over the yaml (--solver)
    refit = 4u,              ///< a consensus refit runs with it (recorded as refit_<name>)
    optional_in_files = 8u,  ///< files written before it existed lack it: the default applies
    optional_in_yaml = 16u,  ///< a cNMF yaml may lack it (knmf's own keys): the default applies
  };
  const char* name;
  const char* flag;
  Kind kind;
  unsigned use;
  const char* help;
  /// The value's canonical text: a number exactly (format_double), a count, or a choice name.
  std::string (*get)(const SolverOptions&);
  /// Parse `text` into the field and check its range alone; InputError naming `where` (a flag,
  /// "FILE: key 'tol'") and the text otherwise.
  void (*set)(SolverOptions&, const std::string& text, const std::string& where);
};

/// The rows, in the order fields are applied and listed (alpha_W before alpha_H: "same").
const std::vector<SolverOptionField>& solver_option_fields();

/// cNMF's run parameters (the key/text pairs of NAME.nmf_idvrun_params.yaml, io's
/// read_nmf_run_params; `non_scalar`: its keys holding a list or mapping) applied to `o`: every
/// row with a cnmf_yaml key, except a cli_over_yaml row when `keep_cli` (the flag was given).
/// InputError naming `path` and the key for a missing or invalid value. Returns one warning
/// per key knmf does not read.
std::vector<std::string> apply_cnmf_params(
    SolverOptions& o, const std::vector<std::pair<std::string, std::string>>& values,
    const std::string& path, bool keep_cli = false,
    const std::vector<std::string>& non_scalar = {});

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
/// values are stored of n*g. Nothing when `o` does not run the beta rule with beta_loss <= 0.
void check_beta_loss_zeros(const SolverOptions& o, double min_value, std::int64_t stored,
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
