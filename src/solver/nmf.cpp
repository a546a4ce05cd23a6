#include "detail/nmf_impl.hpp"

#include <algorithm>

namespace knmf {

KNMF_INSTANTIATE_SOLVER(DenseMatrix<float>)
KNMF_INSTANTIATE_SOLVER(DenseMatrix<double>)
KNMF_INSTANTIATE_SOLVER(CsrMatrix<float>)
KNMF_INSTANTIATE_SOLVER(CsrMatrix<double>)
KNMF_INSTANTIATE_SOLVER(StreamedMatrix<float>)
KNMF_INSTANTIATE_SOLVER(StreamedMatrix<double>)

std::int64_t product_scratch_values(std::int64_t n, std::int64_t g, int bytes_per_value) {
  if (!detail::transposed_host_gemm<double> || bytes_per_value != int(sizeof(double))) return 0;
  return std::max(std::min(n, detail::pt_block_rows), g);
}

}  // namespace knmf
