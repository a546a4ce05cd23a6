// Row-partitioned X over MPI ranks, and the solver instantiated for it.
#include "distributed_detail.hpp"  // the solver engine and RowPartition of DistributedMatrix

#include <algorithm>
#include <limits>

#include "knmf/core/error.hpp"
#include "knmf/matrix/load.hpp"

namespace knmf::mpi {

void allreduce_sum(MPI_Comm comm, double* data, std::size_t count) {
  if (count > 0) MPI_Allreduce(MPI_IN_PLACE, data, int(count), MPI_DOUBLE, MPI_SUM, comm);
}
void allreduce_sum(MPI_Comm comm, float* data, std::size_t count) {
  if (count > 0) MPI_Allreduce(MPI_IN_PLACE, data, int(count), MPI_FLOAT, MPI_SUM, comm);
}

std::pair<size_type, size_type> balanced_rows(const std::vector<size_type>& prefix, int rank,
                                              int size) {
  const size_type n = size_type(prefix.size()) - 1;
  const size_type total = prefix.back();
  // boundary b: the first row whose prefix reaches b/size of the entries (rows when empty)
  auto boundary = [&](int b) -> size_type {
    if (b <= 0) return 0;
    if (b >= size) return n;
    if (total == 0) return n * b / size;
    const size_type target = (total * b + size - 1) / size;
    return size_type(std::lower_bound(prefix.begin(), prefix.end(), target) - prefix.begin());
  };
  return {boundary(rank), std::max(boundary(rank), boundary(rank + 1))};
}

template <class Inner>
DistributedMatrix<Inner>::DistributedMatrix(MPI_Comm comm, Inner local, size_type row0,
                                            size_type n_global)
    : comm_(comm), local_(std::move(local)), row0_(row0), n_global_(n_global) {
  const auto& s = local_.stats();
  double sums[2] = {s.sum, s.norm2};
  allreduce_sum(comm, sums, 2);
  long long count = s.count;
  MPI_Allreduce(MPI_IN_PLACE, &count, 1, MPI_LONG_LONG, MPI_SUM, comm);
  stats_ = s;
  stats_.sum = sums[0];
  stats_.norm2 = sums[1];
  stats_.count = count;
  // the fingerprint's parts are sums (mod 2^64 for the hash), so the blocks merge in any order
  const auto& f = local_.fingerprint();
  unsigned long long sum = f.sum();
  long long counts[2] = {f.nonzeros(), f.rows()};
  MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm);
  MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_LONG_LONG, MPI_SUM, comm);
  fingerprint_ = io::XFingerprint::from_parts(sum, counts[0], counts[1]);
  // the largest value of the whole X (its position stays the local one: positions are local)
  double mx = s.max_value;
  MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_DOUBLE, MPI_MAX, comm);
  stats_.max_value = mx;
  // ||X||^2 less mx^2: the lowest rank holding mx gives its rest, every other rank its all
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int owner = (s.max_pos >= 0 && s.max_value == mx) ? rank : size;
  MPI_Allreduce(MPI_IN_PLACE, &owner, 1, MPI_INT, MPI_MIN, comm);
  double rest = rank == owner ? s.norm2_rest : s.norm2;
  allreduce_sum(comm, &rest, 1);
  stats_.norm2_rest = rest;
  if (owner < size) stats_.max_pos = 0;  // some rank has values (positions are not global)
  // every rank meets the same verdict (the run's error handling reports it)
  check_whole_x(stats_, double(std::numeric_limits<typename Inner::value_type>::epsilon()),
                      "X (all ranks' rows)");
}

std::vector<std::pair<size_type, size_type>> row_blocks(const io::H5adReader& reader, int size) {
  const size_type n = reader.info().n_obs;
  std::vector<size_type> prefix(size_t(n) + 1, 0);
  if (reader.info().format == io::StorageFormat::Dense) {
    for (size_type i = 0; i < n; ++i) prefix[size_t(i) + 1] = i + 1;
  } else {
    for (size_type a = 0; a < n; a += 65536) {
      const auto c = reader.row_nnz(a, std::min(n, a + 65536));
      for (size_t i = 0; i < c.size(); ++i) prefix[size_t(a) + i + 1] = prefix[size_t(a) + i] + c[i];
    }
  }
  std::vector<std::pair<size_type, size_type>> blocks;
  for (int r = 0; r < size; ++r) blocks.push_back(balanced_rows(prefix, r, size));
  return blocks;
}

namespace {
/// This rank's share of the rows.
std::pair<size_type, size_type> my_rows(MPI_Comm comm, const io::H5adReader& reader) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  return row_blocks(reader, size)[size_t(rank)];
}
}  // namespace

template <class T>
DistributedMatrix<DenseMatrix<T>> load_distributed_dense(MPI_Comm comm, const ExecSpace& space,
                                                         const io::H5adReader& reader) {
  const auto [r0, r1] = my_rows(comm, reader);
  return DistributedMatrix<DenseMatrix<T>>(comm, load_dense_rows<T>(space, reader, r0, r1), r0,
                                           reader.info().n_obs);
}

template <class T>
DistributedMatrix<CsrMatrix<T>> load_distributed_csr(MPI_Comm comm, const ExecSpace& space,
                                                     const io::H5adReader& reader) {
  const auto [r0, r1] = my_rows(comm, reader);
  return DistributedMatrix<CsrMatrix<T>>(comm, load_csr_rows<T>(space, reader, r0, r1), r0,
                                         reader.info().n_obs);
}

template class DistributedMatrix<DenseMatrix<float>>;
template class DistributedMatrix<DenseMatrix<double>>;
template class DistributedMatrix<CsrMatrix<float>>;
template class DistributedMatrix<CsrMatrix<double>>;
template DistributedMatrix<DenseMatrix<float>> load_distributed_dense<float>(MPI_Comm, const ExecSpace&, const io::H5adReader&);
template DistributedMatrix<DenseMatrix<double>> load_distributed_dense<double>(MPI_Comm, const ExecSpace&, const io::H5adReader&);
template DistributedMatrix<CsrMatrix<float>> load_distributed_csr<float>(MPI_Comm, const ExecSpace&, const io::H5adReader&);
template DistributedMatrix<CsrMatrix<double>> load_distributed_csr<double>(MPI_Comm, const ExecSpace&, const io::H5adReader&);

}  // namespace knmf::mpi

namespace knmf {
KNMF_INSTANTIATE_SOLVER(mpi::DistributedMatrix<DenseMatrix<float>>)
KNMF_INSTANTIATE_SOLVER(mpi::DistributedMatrix<DenseMatrix<double>>)
KNMF_INSTANTIATE_SOLVER(mpi::DistributedMatrix<CsrMatrix<float>>)
KNMF_INSTANTIATE_SOLVER(mpi::DistributedMatrix<CsrMatrix<double>>)
}  // namespace knmf
