#include "knmf/solver/options.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "knmf/core/error.hpp"
#include "knmf/core/format.hpp"
#include "knmf/solver/result.hpp"

namespace knmf {

bool uses_beta_rule(double beta) { return beta != 2.0; }
bool is_kullback_leibler(double beta) { return beta == 1.0; }
bool SolverOptions::beta_rule() const { return uses_beta_rule(beta_loss); }

namespace {

using Field = SolverOptionField;

/// `text` as a number (the whole text), or InputError naming `where`.
double number(const std::string& text, const std::string& where) {
  double v = 0.0;
  std::size_t used = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) input_error(where, " '", text, "' is invalid: expected a number");
  return v;
}

int integer(const std::string& text, const std::string& where, int lo) {
  long v = 0;
  std::size_t used = 0;
  try {
    v = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v > 2147483647L)
    input_error(where, " '", text, "' is invalid: expected an integer");
  if (v < lo) input_error(where, " ", text, " is invalid: it must be >= ", lo);
  return int(v);
}

double non_negative(const std::string& text, const std::string& where) {
  const double v = number(text, where);
  if (!(v >= 0) || !std::isfinite(v))
    input_error(where, " ", text, " is invalid: it must be a finite number >= 0");
  return v;
}

/// The rows. A new option: its member in SolverOptions (options.hpp), its row here, and the
/// code that uses it; the driver's flag, the results file, consensus records, the resume check
/// and cNMF's yaml follow from the row.
const std::vector<Field>& rows() {
  using K = Field::Kind;
  constexpr unsigned yaml = Field::cnmf_yaml, refit = Field::refit;
  static const std::vector<Field> table = {
      {"solver", "--solver", K::text, yaml | Field::cli_over_yaml | refit,
       "mu (multiplicative update) or cd (scikit-learn's coordinate descent; cNMF's default; "
       "cNMF mode: given, it wins over the run's yaml)",
       [](const SolverOptions& o) { return to_string(o.solver); },
       [](SolverOptions& o, const std::string& v, const std::string& w) { o.solver = parse_solver(v, w); }},
      {"tol", "--tol", K::real, yaml | refit,
       "relative tolerance (0: run exactly --max-iter iterations)",
       [](const SolverOptions& o) { return format_double(o.tol); },
       [](SolverOptions& o, const std::string& v, const std::string& w) { o.tol = non_negative(v, w); }},
      {"max_iter", "--max-iter", K::integer, yaml | refit, "iteration cap",
       [](const SolverOptions& o) { return std::to_string(o.max_iter); },
       [](SolverOptions& o, const std::string& v, const std::string& w) { o.max_iter = integer(v, w, 1); }},
      {"check_every", "--check-every", K::integer, 0, "MU: error check period in iterations",
       [](const SolverOptions& o) { return std::to_string(o.check_every); },
       [](SolverOptions& o, const std::string& v, const std::string& w) { o.check_every = integer(v, w, 1); }},
      {"alpha_W", "--alpha-usage", K::real, yaml | refit, "regularization of the usages W (alpha_W)",
       [](const SolverOptions& o) { return format_double(o.alpha_W); },
       [](SolverOptions& o, const std::string& v, const std::string& w) { o.alpha_W = non_negative(v, w); }},
      {"alpha_H", "--alpha-spectra", K::real, yaml | refit,
       "regularization of the spectra H (alpha_H; 'same': alpha_W's, as scikit-learn)",
       [](const SolverOptions& o) { return format_double(o.alpha_H); },
       [](SolverOptions& o, const std::string& v, const std::string& w) {
         o.alpha_H = v == "same" ? o.alpha_W : non_negative(v, w);
       }},
      {"l1_ratio", "--l1-ratio", K::real, yaml | refit, "L1 share of the regularization",
       [](const SolverOptions& o) { return format_double(o.l1_ratio); },
       [](SolverOptions& o, const std::string& v, const std::string& w) {
         o.l1_ratio = number(v, w);
         if (!(o.l1_ratio >= 0 && o.l1_ratio <= 1))
           input_error(w, " ", v, " is invalid: it must lie in [0, 1]");
       }},
      {"zero_guard", "--zero-guard", K::text, 0,
       "MU denominators: replace-zero (scikit-learn, default) or add-eps (PyTorch engine)",
       [](const SolverOptions& o) { return to_string(o.zero_guard); },
       [](SolverOptions& o, const std::string& v, const std::string& w) { o.zero_guard = parse_zero_guard(v, w); }},
      {"eps", "--eps", K::real, 0, "MU: the value added with --zero-guard add-eps",
       [](const SolverOptions& o) { return format_double(o.eps); },
       [](SolverOptions& o, const std::string& v, const std::string& w) { o.eps = number(v, w); }},
      {"init", "--init", K::text, yaml | Field::optional_in_files,
       "W0, H0 as scikit-learn's init: random, nndsvd, nndsvda or nndsvdar",
       [](const SolverOptions& o) { return to_string(o.init); },
       [](SolverOptions& o, const std::string& v, const std::string& w) { o.init = parse_init(v, w); }},
      {"beta_loss", "--beta-loss", K::text, yaml | refit,
       "frobenius (default), kullback-leibler, itakura-saito or a number (scikit-learn's "
       "beta_loss; not 2 needs --solver mu)",
       [](const SolverOptions& o) { return beta_loss_name(o.beta_loss); },
       [](SolverOptions& o, const std::string& v, const std::string& w) { o.beta_loss = parse_beta_loss(v, w); }},
      {"inner_sweeps", "--inner-sweeps", K::text, Field::optional_in_files,
       "accelerated CD / MU (Frobenius): updates per product with X, 1 (scikit-learn's, the "
       "default), N or auto (1 + alpha rho; docs/accelerated.md)",
       [](const SolverOptions& o) { return inner_sweeps_name(o.inner_sweeps); },
       [](SolverOptions& o, const std::string& v, const std::string& w) { o.inner_sweeps = parse_inner_sweeps(v, w); }},
      {"inner_alpha", "--inner-alpha", K::real, Field::optional_in_files,
       "accelerated updates: auto allows 1 + alpha rho per product",
       [](const SolverOptions& o) { return format_double(o.inner_alpha); },
       [](SolverOptions& o, const std::string& v, const std::string& w) { o.inner_alpha = non_negative(v, w); }},
      {"inner_eps", "--inner-eps", K::real, Field::optional_in_files,
       "accelerated updates: a factor's repeats stop when one changes it by less than eps "
       "times the first (0 < eps < 1)",
       [](const SolverOptions& o) { return format_double(o.inner_eps); },
       [](SolverOptions& o, const std::string& v, const std::string& w) {
         o.inner_eps = number(v, w);
         if (!(o.inner_eps > 0 && o.inner_eps < 1))
           input_error(w, " ", v, " is invalid: it must lie in (0, 1)");
       }},
  };
  return table;
}

}  // namespace

const std::vector<SolverOptionField>& solver_option_fields() { return rows(); }

void SolverOptions::validate() const {
  SolverOptions check = *this;
  for (const Field& f : rows()) f.set(check, f.get(*this), f.flag);
  // the rules between fields
  if (zero_guard == ZeroGuard::add_eps && (!(eps > 0) || !std::isfinite(eps)))
    input_error("--eps ", eps, " is invalid: it must be a finite number > 0");
  if (inner_sweeps != 1 && beta_rule())
    input_error("--inner-sweeps ", inner_sweeps_name(inner_sweeps), " with --beta-loss ",
                beta_loss_name(beta_loss), " is invalid: the accelerated updates are those of "
                "the Frobenius loss (--solver cd or mu, --beta-loss frobenius)");
  if (beta_rule() && solver != SolverKind::mu)
    input_error("--solver ", to_string(solver), " with --beta-loss ", beta_loss_name(beta_loss),
                " is invalid: solver '", to_string(solver), "' does not handle beta_loss = ",
                beta_loss_name(beta_loss), " (only --solver mu does, as in scikit-learn)");
}

std::vector<std::string> apply_cnmf_params(
    SolverOptions& o, const std::vector<std::pair<std::string, std::string>>& values,
    const std::string& path, bool keep_cli, const std::vector<std::string>& non_scalar) {
  auto find = [&](const char* key) -> const std::string* {
    for (const auto& [k, v] : values)
      if (k == key) return &v;
    return nullptr;
  };
  std::string known;
  for (const Field& f : rows()) {
    if (!(f.use & Field::cnmf_yaml)) continue;
    known += std::string(known.empty() ? "" : ", ") + f.name;
    const std::string* v = find(f.name);
    for (const auto& key : non_scalar)
      if (key == f.name) input_error(path, ": key '", key, "' must be a scalar value");
    if (!v) {
      if (f.use & Field::optional_in_yaml) continue;
      input_error(path, ": missing key '", f.name, "'");
    }
    if (keep_cli && (f.use & Field::cli_over_yaml)) {
      SolverOptions ignored;  // still checked: the file must be a valid run description
      f.set(ignored, *v, path + ": key '" + f.name + "'");
      continue;
    }
    f.set(o, *v, path + ": key '" + f.name + "'");
  }
  std::vector<std::string> keys;
  for (const auto& kv : values) keys.push_back(kv.first);
  keys.insert(keys.end(), non_scalar.begin(), non_scalar.end());
  std::vector<std::string> warnings;
  for (const auto& key : keys) {
    bool read = false;
    for (const Field& f : rows()) read = read || ((f.use & Field::cnmf_yaml) && key == f.name);
    if (!read) warnings.push_back(path + ": unknown key '" + key + "' is ignored (knmf reads " + known + ")");
  }
  return warnings;
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

void check_beta_loss_zeros(const SolverOptions& o, double min_value, std::int64_t stored,
                           std::int64_t n, std::int64_t g, const std::string& source) {
  const double beta_loss = o.beta_loss;
  if (o.solver != SolverKind::mu || !o.beta_rule() || !(beta_loss <= 0.0)) return;
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
