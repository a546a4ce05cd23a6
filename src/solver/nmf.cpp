#include "detail/nmf_impl.hpp"

namespace knmf {

#define KNMF_INSTANTIATE(M)                                                                    \
  template void factorize<M>(const ExecSpace&, const M&, int, const JobSource&, int,            \
                             const SolverOptions&, const ResultCallback&,                       \
                             const IterationCallback&);                                         \
  template std::vector<ReplicateResult> factorize<M>(const ExecSpace&, const M&,                \
                                                     const std::vector<Job>&, int,              \
                                                     const SolverOptions&);                     \
  template std::vector<RefitResult> refit_usages<M>(const ExecSpace&, const M&,                 \
                                                    const std::vector<std::vector<double>>&,    \
                                                    int, int, const SolverOptions&);
KNMF_INSTANTIATE(DenseMatrix<float>)
KNMF_INSTANTIATE(DenseMatrix<double>)
KNMF_INSTANTIATE(CsrMatrix<float>)
KNMF_INSTANTIATE(CsrMatrix<double>)
KNMF_INSTANTIATE(StreamedMatrix<float>)
KNMF_INSTANTIATE(StreamedMatrix<double>)
#undef KNMF_INSTANTIATE

}  // namespace knmf
