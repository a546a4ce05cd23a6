#include "knmf/matrix/load.hpp"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>
#include <Kokkos_Profiling_ScopedRegion.hpp>

#include "knmf/core/compat.hpp"
#include "knmf/core/error.hpp"

namespace knmf {

namespace {
void check_range(const io::H5adReader& reader, std::int64_t r0, std::int64_t r1, bool whole) {
  const auto& info = reader.info();
  const std::string source = reader.path().string();
  if (info.n_obs <= 0 || info.n_vars <= 0)
    input_error(source, ": X is empty (", info.n_obs, " cells x ", info.n_vars, " genes)");
  KNMF_ASSERT(0 <= r0 && r0 <= r1 && r1 <= info.n_obs && (!whole || r1 > r0), "bad row range");
}

/// "file" for the whole matrix, "file (rows a-b)" for a block.
std::string source_of(const io::H5adReader& reader, std::int64_t r0, std::int64_t r1) {
  std::string s = reader.path().string();
  if (r0 != 0 || r1 != reader.info().n_obs)
    s += " (rows " + std::to_string(r0) + "-" + std::to_string(r1) + ")";
  return s;
}

/// X's values against the arithmetic of T: float32, their scale, over the whole X's rows (a
/// row block of a partitioned X meets the products of the whole); the dynamic range of the
/// whole X (a row block's is checked over all blocks: mpi::DistributedMatrix).
template <class T, class M>
void check_scale(const M& X, const io::H5adReader& reader, std::int64_t r0, std::int64_t r1) {
  if (r1 <= r0) return;
  const std::string source = source_of(reader, r0, r1);
  if constexpr (std::is_same_v<T, float>)
    check_float32_scale(X.stats(), reader.info().n_obs, reader.info().n_vars, source);
  if (r0 == 0 && r1 == reader.info().n_obs)
    check_whole_x(X.stats(), double(std::numeric_limits<T>::epsilon()), source);
}
}  // namespace

template <class T>
DenseMatrix<T> load_dense_rows(const ExecSpace& space, const io::H5adReader& reader,
                               std::int64_t r0, std::int64_t r1, std::size_t block_bytes) {
  Kokkos::Profiling::ScopedRegion region("knmf::X::load_dense");
  const auto& info = reader.info();
  check_range(reader, r0, r1, false);
  DenseMatrix<T> X(space, r1 - r0, info.n_vars);
  const size_type row_bytes = info.n_vars * size_type(sizeof(T));
  const size_type rows_per_block =
      std::max<size_type>(1, size_type(block_bytes) / std::max<size_type>(row_bytes, 1));
  std::vector<T> buf(size_t(std::min(rows_per_block, std::max<size_type>(r1 - r0, 1)) * info.n_vars));
  io::XFingerprint fp;
  for (size_type a = r0; a < r1; a += rows_per_block) {
    const size_type b = std::min(r1, a + rows_per_block);
    reader.read_dense_rows<T>(a, b, buf.data(), &fp);
    X.set_rows(a - r0, b - r0, buf.data());
  }
  X.finalize(source_of(reader, r0, r1), default_reduction_chunk, true);
  check_scale<T>(X, reader, r0, r1);
  X.set_fingerprint(fp);
  return X;
}

template <class T>
DenseMatrix<T> load_dense(const ExecSpace& space, const io::H5adReader& reader,
                          std::size_t block_bytes) {
  check_range(reader, 0, reader.info().n_obs, true);
  return load_dense_rows<T>(space, reader, 0, reader.info().n_obs, block_bytes);
}

std::int64_t count_nonzeros(const io::H5adReader& reader, std::size_t block_bytes) {
  const auto& info = reader.info();
  if (info.format != io::StorageFormat::Dense) return info.nnz;
  const size_type rows_per_block =
      std::max<size_type>(1, size_type(block_bytes) / std::max<size_type>(info.n_vars * 8, 1));
  std::int64_t nnz = 0;
  for (size_type r0 = 0; r0 < info.n_obs; r0 += rows_per_block) {
    const auto counts = reader.row_nnz(r0, std::min(info.n_obs, r0 + rows_per_block));
    for (auto c : counts) nnz += c;
  }
  return nnz;
}

template <class T>
CsrMatrix<T> load_csr_rows(const ExecSpace& space, const io::H5adReader& reader, std::int64_t r0,
                           std::int64_t r1, std::size_t block_bytes) {
  Kokkos::Profiling::ScopedRegion region("knmf::X::load_csr");
  const auto& info = reader.info();
  check_range(reader, r0, r1, false);
  // entries of the block: from indptr (sparse files) or one counting pass (dense files)
  std::int64_t nnz = 0;
  if (r0 == 0 && r1 == info.n_obs) {
    nnz = count_nonzeros(reader, block_bytes);
  } else {
    for (size_type a = r0; a < r1; a += 65536)
      for (auto c : reader.row_nnz(a, std::min(r1, a + 65536))) nnz += c;
  }
  CsrMatrix<T> X(space, r1 - r0, info.n_vars, nnz);
  // Row blocks of bounded entry count (one block of host staging at a time).
  const std::int64_t per_entry = std::int64_t(sizeof(T) + sizeof(std::int32_t));
  const std::int64_t max_nnz = std::max<std::int64_t>(1, std::int64_t(block_bytes) / per_entry);
  io::CsrBlock<T> blk;
  io::XFingerprint fp;
  size_type a = r0;
  while (a < r1) {
    // grow the block row by row up to max_nnz entries, in slices of at most 65536 rows
    const auto counts = reader.row_nnz(a, std::min(r1, a + 65536));
    size_type b = a;
    std::int64_t acc = 0;
    for (auto c : counts) {
      if (b > a && acc + c > max_nnz) break;
      acc += c;
      ++b;
    }
    reader.read_csr_rows<T>(a, b, blk, &fp);
    X.set_rows(a - r0, b - r0, blk.row_offsets.data(), blk.cols.data(), blk.values.data());
    a = b;
  }
  X.finalize(source_of(reader, r0, r1), default_reduction_chunk, true);
  check_scale<T>(X, reader, r0, r1);
  X.set_fingerprint(fp);
  return X;
}

template <class T>
CsrMatrix<T> load_csr(const ExecSpace& space, const io::H5adReader& reader,
                      std::size_t block_bytes) {
  check_range(reader, 0, reader.info().n_obs, true);
  return load_csr_rows<T>(space, reader, 0, reader.info().n_obs, block_bytes);
}

#define KNMF_INSTANTIATE(T)                                                                    \
  template DenseMatrix<T> load_dense<T>(const ExecSpace&, const io::H5adReader&, std::size_t); \
  template CsrMatrix<T> load_csr<T>(const ExecSpace&, const io::H5adReader&, std::size_t);     \
  template DenseMatrix<T> load_dense_rows<T>(const ExecSpace&, const io::H5adReader&,          \
                                             std::int64_t, std::int64_t, std::size_t);         \
  template CsrMatrix<T> load_csr_rows<T>(const ExecSpace&, const io::H5adReader&, std::int64_t, \
                                         std::int64_t, std::size_t);
KNMF_INSTANTIATE(float)
KNMF_INSTANTIATE(double)
#undef KNMF_INSTANTIATE

}  // namespace knmf
