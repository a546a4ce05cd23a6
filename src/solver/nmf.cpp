#include "detail/nmf_impl.hpp"

namespace knmf {

KNMF_INSTANTIATE_SOLVER(DenseMatrix<float>)
KNMF_INSTANTIATE_SOLVER(DenseMatrix<double>)
KNMF_INSTANTIATE_SOLVER(CsrMatrix<float>)
KNMF_INSTANTIATE_SOLVER(CsrMatrix<double>)
KNMF_INSTANTIATE_SOLVER(StreamedMatrix<float>)
KNMF_INSTANTIATE_SOLVER(StreamedMatrix<double>)

}  // namespace knmf
