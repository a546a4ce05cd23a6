// The host LAPACK part of the NNDSVD initializations (detail/nndsvd.hpp) and the public
// init_factors (knmf/solver/init.hpp) for knmf's matrix types.
#include "detail/nndsvd.hpp"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <string>

#include "knmf/matrix/csr_matrix.hpp"
#include "knmf/matrix/dense_matrix.hpp"
#include "knmf/matrix/streamed_matrix.hpp"

// LAPACK and BLAS (OpenBLAS ships both; linked as LAPACK::LAPACK, see CMakeLists.txt). No
// LAPACKE header is needed: the Fortran interfaces, with gfortran's hidden string lengths.
extern "C" {
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda,
             const double* tau, double* work, const int* lwork, int* info);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work,
             const int* lwork, int* iwork, int* info, std::size_t jobz_len);
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const double* alpha, const double* a, const int* lda, const double* b, const int* ldb,
            const double* beta, double* c, const int* ldc, std::size_t ta_len, std::size_t tb_len);
}

namespace knmf::detail {

namespace {

int lapack_int(size_type v) {
  KNMF_ASSERT(v >= 0 && v <= size_type(INT_MAX), "dimension beyond LAPACK's 32-bit indices");
  return int(v);
}

void check_info(int info, const char* routine) {
  // info > 0 from dgetrf is an exactly zero pivot: scipy.linalg.lu returns the factors anyway
  if (info < 0 || (info > 0 && std::string(routine) != "dgetrf"))
    throw LogicError(std::string("knmf::nndsvd: LAPACK ") + routine + " failed, info = " +
                     std::to_string(info));
}

}  // namespace

std::vector<double> lu_permuted_l(std::vector<double> A, size_type m, size_type p) {
  const int M = lapack_int(m), N = lapack_int(p), K = std::min(M, N);
  const int lda = std::max(1, M);
  std::vector<int> ipiv(size_t(std::max(1, K)));
  int info = 0;
  dgetrf_(&M, &N, A.data(), &lda, ipiv.data(), &info);
  check_info(info, "dgetrf");
  // L: m x K, unit lower trapezoidal; then P L: the interchanges undone in reverse order
  // (scipy's flu with permute_l: dlaswp with incx = -1)
  std::vector<double> L(size_t(m) * size_t(K), 0.0);
  for (int j = 0; j < K; ++j) {
    L[size_t(j) + size_t(j) * size_t(m)] = 1.0;
    for (size_type i = j + 1; i < m; ++i) L[size_t(i + j * m)] = A[size_t(i + j * m)];
  }
  for (int r = K - 1; r >= 0; --r) {
    const size_type other = ipiv[size_t(r)] - 1;
    if (other == r) continue;
    for (int j = 0; j < K; ++j) std::swap(L[size_t(r + j * m)], L[size_t(other + j * m)]);
  }
  return L;
}

std::vector<double> qr_economic_q(std::vector<double> A, size_type m, size_type p) {
  const int M = lapack_int(m), N = lapack_int(p), K = std::min(M, N);
  const int lda = std::max(1, M);
  std::vector<double> tau(size_t(std::max(1, K)));
  int info = 0, lwork = -1;
  double query = 0;
  dgeqrf_(&M, &N, A.data(), &lda, tau.data(), &query, &lwork, &info);
  check_info(info, "dgeqrf");
  lwork = std::max(1, int(query));
  std::vector<double> work(static_cast<size_t>(lwork));
  dgeqrf_(&M, &N, A.data(), &lda, tau.data(), work.data(), &lwork, &info);
  check_info(info, "dgeqrf");
  A.resize(size_t(m) * size_t(K));  // the first K columns hold the reflectors
  lwork = -1;
  dorgqr_(&M, &K, &K, A.data(), &lda, tau.data(), &query, &lwork, &info);
  check_info(info, "dorgqr");
  lwork = std::max(1, int(query));
  work.assign(size_t(lwork), 0.0);
  dorgqr_(&M, &K, &K, A.data(), &lda, tau.data(), work.data(), &lwork, &info);
  check_info(info, "dorgqr");
  return A;
}

ThinSvd svd_gesdd(std::vector<double> B, size_type r, size_type c) {
  KNMF_ASSERT(r <= c, "svd_gesdd expects a wide matrix");
  const int M = lapack_int(r), N = lapack_int(c), K = M;
  const int lda = std::max(1, M), ldu = std::max(1, M), ldvt = std::max(1, K);
  ThinSvd out;
  out.s.resize(size_t(K));
  out.U.resize(size_t(M) * size_t(K));
  out.Vt.resize(size_t(K) * size_t(N));
  std::vector<int> iwork(size_t(8 * std::max(1, K)));
  int info = 0, lwork = -1;
  double query = 0;
  const char jobz = 'S';
  dgesdd_(&jobz, &M, &N, B.data(), &lda, out.s.data(), out.U.data(), &ldu, out.Vt.data(), &ldvt,
          &query, &lwork, iwork.data(), &info, 1);
  check_info(info, "dgesdd");
  lwork = std::max(1, int(query));
  std::vector<double> work(static_cast<size_t>(lwork));
  dgesdd_(&jobz, &M, &N, B.data(), &lda, out.s.data(), out.U.data(), &ldu, out.Vt.data(), &ldvt,
          work.data(), &lwork, iwork.data(), &info, 1);
  check_info(info, "dgesdd");
  return out;
}

std::vector<double> host_gemm(const std::vector<double>& A, const std::vector<double>& B,
                              size_type m, size_type p, size_type q) {
  const int M = lapack_int(m), N = lapack_int(q), K = lapack_int(p);
  const int lda = std::max(1, M), ldb = std::max(1, K), ldc = std::max(1, M);
  std::vector<double> C(size_t(m) * size_t(q), 0.0);
  const double one = 1.0, zero = 0.0;
  const char no = 'N';
  dgemm_(&no, &no, &M, &N, &K, &one, A.data(), &lda, B.data(), &ldb, &zero, C.data(), &ldc, 1, 1);
  return C;
}

}  // namespace knmf::detail

namespace knmf {

template <class XMat>
void init_factors(const ExecSpace& space, const XMat& X, int k, std::int64_t seed, InitKind init,
              typename XMat::value_type* H_row_major, typename XMat::value_type* W_row_major) {
  if (init == InitKind::random) {
    random_init<typename XMat::value_type>(seed, X.mean(), k, X.rows(), X.cols(), H_row_major,
                                           W_row_major);
    return;
  }
  detail::nndsvd_init(space, detail::XOperandOf<XMat>(X), k, seed, init, X.mean(), H_row_major,
                      W_row_major);
}

#define KNMF_INSTANTIATE_INIT_FACTORS(M)                                                           \
  template void init_factors<M>(const ExecSpace&, const M&, int, std::int64_t, InitKind,            \
                            M::value_type*, M::value_type*);
KNMF_INSTANTIATE_INIT_FACTORS(DenseMatrix<float>)
KNMF_INSTANTIATE_INIT_FACTORS(DenseMatrix<double>)
KNMF_INSTANTIATE_INIT_FACTORS(CsrMatrix<float>)
KNMF_INSTANTIATE_INIT_FACTORS(CsrMatrix<double>)
KNMF_INSTANTIATE_INIT_FACTORS(StreamedMatrix<float>)
KNMF_INSTANTIATE_INIT_FACTORS(StreamedMatrix<double>)
#undef KNMF_INSTANTIATE_INIT_FACTORS

}  // namespace knmf
