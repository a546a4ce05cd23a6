#include <algorithm>

#include "engine.hpp"

namespace knmf {

template class detail::XOperandOf<DenseMatrix<float>>;
template class detail::XOperandOf<DenseMatrix<double>>;
template class detail::XOperandOf<CsrMatrix<float>>;
template class detail::XOperandOf<CsrMatrix<double>>;
template class detail::XOperandOf<StreamedMatrix<float>>;
template class detail::XOperandOf<StreamedMatrix<double>>;

KNMF_INSTANTIATE_SOLVER(DenseMatrix<float>)
KNMF_INSTANTIATE_SOLVER(DenseMatrix<double>)
KNMF_INSTANTIATE_SOLVER(CsrMatrix<float>)
KNMF_INSTANTIATE_SOLVER(CsrMatrix<double>)
KNMF_INSTANTIATE_SOLVER(StreamedMatrix<float>)
KNMF_INSTANTIATE_SOLVER(StreamedMatrix<double>)

SolverBytes solver_bytes(std::int64_t n, std::int64_t g, int k, int element_bytes, bool refit,
                         double beta_loss, std::int64_t sparse_nnz, bool mu_repeats) {
  detail::BetaShape shape;
  if (uses_beta_rule(beta_loss)) shape.block_rows = detail::beta_block_rows(n, g, element_bytes);
  if (uses_beta_rule(beta_loss) && sparse_nnz > 0) {
    shape.sparse_rows = std::max(n, g);
    shape.sparse_values = sparse_nnz;
  }
  const auto b = detail::slot_batch_bytes(n, g, k, element_bytes,
                                          refit ? detail::RunMode::refit : detail::RunMode::factorize,
                                          beta_loss, shape, mu_repeats && !refit);
  SolverBytes out;
  out.per_slot = b.per_slot();
  // the portable gather's partial sums of long rows (products.hpp, GatherScratch): at most
  // max_gather_segments(nnz) columns of R k values, held by the batch (or k values a slot in the
  // beta passes' scratch) from the first product on
  if (!host_tuned_kernels && sparse_nnz > 0)
    out.per_slot = checked_add(
        {out.per_slot, checked_mul({detail::max_gather_segments(sparse_nnz), std::int64_t(k),
                                    std::int64_t(element_bytes)},
                                   "the device memory of one replicate")},
        "the device memory of one replicate");
  out.per_batch = b.stage + b.beta;
  return out;
}

}  // namespace knmf
