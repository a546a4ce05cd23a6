#pragma once
/// \file
/// Definitions of the batched solver's entry points (batched.hpp), included only by
/// src/solver/batched_float.cpp and batched_double.cpp.

#include <optional>

#include "knmf/random/random_state.hpp"
#include "batch_runner.hpp"
#include "batched.hpp"
#include "run_modes.hpp"

namespace knmf::detail {

template <class T>
void run_factorize(const ExecSpace& space, const XOperand<T>& X, int k, const JobSource& next_job,
                   int batch_size, const SolverOptions& opts, const ResultCallback& on_result,
                   const IterationCallback& on_iteration) {
  check_common(k, batch_size, opts);
  // Validate each job as it is drawn (seed range, k) before it reaches a slot.
  JobSource checked = [&]() -> std::optional<Job> {
    auto j = next_job();
    if (j) {
      if (j->k != k) input_error("job ", j->index, " has k = ", j->k, " in a batch of k = ", k);
      RandomState probe(j->seed);  // throws InputError for seeds outside [0, 2^32)
    }
    return j;
  };
  BatchRunner<T, FactorizeMode<T>> runner(space, X, k, batch_size, opts, FactorizeMode<T>{});
  runner.run(checked, on_result, on_iteration);
}

template <class T>
std::vector<RefitResult> run_refit(const ExecSpace& space, const XOperand<T>& X,
                                   const std::vector<std::vector<double>>& spectra, int k,
                                   int batch_size, const SolverOptions& opts) {
  check_common(k, batch_size, opts);
  const size_t expect = size_t(k) * size_t(X.cols());
  for (size_t s = 0; s < spectra.size(); ++s) {
    if (spectra[s].size() != expect)
      input_error("spectra ", s, " has ", spectra[s].size(), " values; expected k x g = ", k,
                  " x ", X.cols(), " = ", expect);
    check_spectra_values(spectra[s].data(), expect, X.cols(), s);
  }
  std::vector<RefitResult> out(spectra.size());
  size_t next = 0;
  JobSource src = [&]() -> std::optional<Job> {
    if (next == spectra.size()) return std::nullopt;
    Job j;
    j.k = k;
    j.index = std::int64_t(next++);
    return j;
  };
  BatchRunner<T, RefitMode<T>> runner(space, X, k, batch_size, opts, RefitMode<T>(spectra));
  runner.run(src, [&](ReplicateResult&& r) {
    auto& o = out[size_t(r.job.index)];
    o.W = std::move(r.W);
    o.n_iter = r.n_iter;
    o.error_at_init = r.error_at_init;
    o.final_error = r.final_error;
    o.status = r.status;
  });
  return out;
}

}  // namespace knmf::detail
