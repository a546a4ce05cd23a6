#pragma once
/// \file
/// Definitions of the solver's public templates (reached through solver/engine.hpp by the
/// translation units that instantiate them for each matrix type: src/solver/nmf.cpp,
/// src/mpi/). Each wraps X in an XOperandOf (x_operand.hpp) and calls the batched solver,
/// which is compiled once per value type (batched.hpp). A matrix type that is not one of
/// products.hpp's specializes RowPartition (partition.hpp) before it instantiates them.

#include <map>

#include "knmf/random/random_state.hpp"
#include "knmf/solver/nmf.hpp"
#include "batched.hpp"

namespace knmf {

template <class XMat>
void factorize(const ExecSpace& space, const XMat& X, int k, const JobSource& next_job,
               int batch_size, const SolverOptions& opts, const ResultCallback& on_result,
               const IterationCallback& on_iteration) {
  detail::run_factorize(space, detail::XOperandOf<XMat>(X), k, next_job, batch_size, opts,
                        on_result, on_iteration);
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
  return detail::run_refit(space, detail::XOperandOf<XMat>(X), spectra, k, batch_size, opts);
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
