#pragma once
/// \file
/// The batched solver's two entry points (internal), over XOperand<T> (x_operand.hpp): the
/// factorization of the jobs of one k drawn from a source, and the refit of usages for fixed
/// spectra. Defined in batched_impl.hpp and compiled once per value type
/// (src/solver/batched_float.cpp, batched_double.cpp, in parallel); every other file links to
/// those two copies.

#include <cmath>
#include <vector>

#include "knmf/core/error.hpp"
#include "knmf/solver/nmf.hpp"
#include "x_operand.hpp"

namespace knmf::detail {

inline void check_common(int k, int batch_size, const SolverOptions& opts) {
  if (k < 1) input_error("k = ", k, " is invalid: the number of components must be >= 1");
  if (batch_size < 1) input_error("--batch ", batch_size, " is invalid: it must be >= 1");
  opts.validate();
}

/// Throws InputError unless the `count` values of spectra matrix `index` (row-major, `cols`
/// per row) are finite and non-negative; `context` starts the message.
inline void check_spectra_values(const double* values, size_t count, size_type cols,
                                 size_t index, const char* context = "") {
  for (size_t e = 0; e < count; ++e) {
    const double v = values[e];
    if (!std::isfinite(v) || v < 0)
      input_error(context, "spectra ", index, " has an invalid value ", v, " at row ",
                  size_type(e) / cols, ", column ", size_type(e) % cols,
                  ": spectra must be finite and non-negative");
  }
}

/// knmf::factorize (knmf/solver/nmf.hpp) over X.
template <class T>
void run_factorize(const ExecSpace& space, const XOperand<T>& X, int k, const JobSource& next_job,
                   int batch_size, const SolverOptions& opts, const ResultCallback& on_result,
                   const IterationCallback& on_iteration);

/// knmf::refit_usages (knmf/solver/nmf.hpp) over X.
template <class T>
std::vector<RefitResult> run_refit(const ExecSpace& space, const XOperand<T>& X,
                                   const std::vector<std::vector<double>>& spectra, int k,
                                   int batch_size, const SolverOptions& opts);

#define KNMF_BATCHED_TEMPLATES(how, T)                                                         \
  how template void run_factorize<T>(const ExecSpace&, const XOperand<T>&, int,               \
                                     const JobSource&, int, const SolverOptions&,              \
                                     const ResultCallback&, const IterationCallback&);         \
  how template std::vector<RefitResult> run_refit<T>(                                          \
      const ExecSpace&, const XOperand<T>&, const std::vector<std::vector<double>>&, int, int, \
      const SolverOptions&);
KNMF_BATCHED_TEMPLATES(extern, float)
KNMF_BATCHED_TEMPLATES(extern, double)

}  // namespace knmf::detail
