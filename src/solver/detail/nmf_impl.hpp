#pragma once
/// \file
/// Definitions of the solver's public templates (reached through solver/engine.hpp by the
/// translation units that instantiate them for each matrix type: src/solver/nmf.cpp,
/// src/mpi/). A matrix type that is not one of products.hpp's specializes RowPartition
/// (partition.hpp) before it instantiates them.

#include <cmath>
#include <map>

#include "knmf/solver/nmf.hpp"
#include "batch_runner.hpp"

namespace knmf {

namespace detail {

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

}  // namespace detail

template <class XMat>
void factorize(const ExecSpace& space, const XMat& X, int k, const JobSource& next_job,
               int batch_size, const SolverOptions& opts, const ResultCallback& on_result,
               const IterationCallback& on_iteration) {
  detail::check_common(k, batch_size, opts);
  // Validate each job as it is drawn (seed range, k) before it reaches a slot.
  JobSource checked = [&]() -> std::optional<Job> {
    auto j = next_job();
    if (j) {
      if (j->k != k) input_error("job ", j->index, " has k = ", j->k, " in a batch of k = ", k);
      RandomState probe(j->seed);  // throws InputError for seeds outside [0, 2^32)
    }
    return j;
  };
  detail::BatchRunner<typename XMat::value_type, XMat> runner(space, X, k, batch_size, opts,
                                                             detail::RunMode::factorize);
  runner.run(checked, on_result, on_iteration);
}

template <class XMat>
std::vector<ReplicateResult> factorize(const ExecSpace& space, const XMat& X,
                                       const std::vector<Job>& jobs, int batch_size,
                                       const SolverOptions& opts) {
  std::vector<int> order;  // distinct k in order of first appearance
  std::map<int, std::vector<size_t>> by_k;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].k < 1)
      input_error("k = ", jobs[i].k, " is invalid: the number of components must be >= 1");
    RandomState probe(jobs[i].seed);
    if (!by_k.count(jobs[i].k)) order.push_back(jobs[i].k);
    by_k[jobs[i].k].push_back(i);
  }
  std::vector<ReplicateResult> out(jobs.size());
  for (int k : order) {
    const auto& idx = by_k[k];
    size_t next = 0;
    std::vector<size_t> slot_of;  // position of each supplied job in `jobs`
    JobSource src = [&]() -> std::optional<Job> {
      if (next == idx.size()) return std::nullopt;
      Job j = jobs[idx[next]];
      j.index = std::int64_t(next++);  // local handle, restored below
      return j;
    };
    factorize(space, X, k, src, batch_size, opts, [&](ReplicateResult&& r) {
      const size_t pos = idx[size_t(r.job.index)];
      r.job = jobs[pos];
      out[pos] = std::move(r);
    });
  }
  return out;
}

template <class XMat>
std::vector<RefitResult> refit_usages(const ExecSpace& space, const XMat& X,
                                      const std::vector<std::vector<double>>& spectra, int k,
                                      int batch_size, const SolverOptions& opts) {
  detail::check_common(k, batch_size, opts);
  const size_t expect = size_t(k) * size_t(X.cols());
  for (size_t s = 0; s < spectra.size(); ++s) {
    if (spectra[s].size() != expect)
      input_error("spectra ", s, " has ", spectra[s].size(), " values; expected k x g = ", k,
                  " x ", X.cols(), " = ", expect);
    detail::check_spectra_values(spectra[s].data(), expect, X.cols(), s);
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
  detail::BatchRunner<typename XMat::value_type, XMat> runner(space, X, k, batch_size, opts,
                                                             detail::RunMode::refit, &spectra);
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

}  // namespace knmf

/// The solver's public templates for matrix type M (inside namespace knmf), each line led by
/// `how`: KNMF_INSTANTIATE_SOLVER(M) instantiates them (one translation unit per type:
/// src/solver/nmf.cpp, src/mpi/distributed.cpp); KNMF_DECLARE_SOLVER(M) declares that
/// instantiation, so a file that includes this header and calls them (consensus/, the tests)
/// links to it instead of compiling the whole batched solver again (about 8 s each at -O3).
#define KNMF_SOLVER_TEMPLATES(how, M)                                                          \
  how template void factorize<M>(const ExecSpace&, const M&, int, const JobSource&, int,        \
                                 const SolverOptions&, const ResultCallback&,                   \
                                 const IterationCallback&);                                     \
  how template std::vector<ReplicateResult> factorize<M>(const ExecSpace&, const M&,            \
                                                         const std::vector<Job>&, int,          \
                                                         const SolverOptions&);                 \
  how template std::vector<RefitResult> refit_usages<M>(                                       \
      const ExecSpace&, const M&, const std::vector<std::vector<double>>&, int, int,           \
      const SolverOptions&);
#define KNMF_INSTANTIATE_SOLVER(M) KNMF_SOLVER_TEMPLATES(, M)
#define KNMF_DECLARE_SOLVER(M) KNMF_SOLVER_TEMPLATES(extern, M)

namespace knmf {
KNMF_DECLARE_SOLVER(DenseMatrix<float>)
KNMF_DECLARE_SOLVER(DenseMatrix<double>)
KNMF_DECLARE_SOLVER(CsrMatrix<float>)
KNMF_DECLARE_SOLVER(CsrMatrix<double>)
KNMF_DECLARE_SOLVER(StreamedMatrix<float>)
KNMF_DECLARE_SOLVER(StreamedMatrix<double>)
}  // namespace knmf
