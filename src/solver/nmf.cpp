#include "engine.hpp"

namespace knmf {

KNMF_INSTANTIATE_SOLVER(DenseMatrix<float>)
KNMF_INSTANTIATE_SOLVER(DenseMatrix<double>)
KNMF_INSTANTIATE_SOLVER(CsrMatrix<float>)
KNMF_INSTANTIATE_SOLVER(CsrMatrix<double>)
KNMF_INSTANTIATE_SOLVER(StreamedMatrix<float>)
KNMF_INSTANTIATE_SOLVER(StreamedMatrix<double>)

SolverBytes solver_bytes(std::int64_t n, std::int64_t g, int k, int element_bytes, bool refit) {
  const auto b = detail::slot_batch_bytes(n, g, k, element_bytes,
                                          refit ? detail::RunMode::refit : detail::RunMode::factorize);
  SolverBytes out;
  out.per_slot = b.per_slot();
  out.per_batch = b.stage;
  return out;
}

}  // namespace knmf
