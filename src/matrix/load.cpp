#include "knmf/matrix/load.hpp"

#include <algorithm>
#include <vector>

#include "knmf/core/compat.hpp"
#include "knmf/core/error.hpp"

namespace knmf {

template <class T>
DenseMatrix<T> load_dense(const ExecSpace& space, const io::H5adReader& reader,
                          std::size_t block_bytes) {
  compat::ScopedRegion region("knmf::X::load_dense");
  const auto& info = reader.info();
  const std::string source = reader.path().string();
  if (info.n_obs <= 0 || info.n_vars <= 0)
    input_error(source, ": X is empty (", info.n_obs, " cells x ", info.n_vars, " genes)");
  DenseMatrix<T> X(space, info.n_obs, info.n_vars);
  const size_type row_bytes = info.n_vars * size_type(sizeof(T));
  const size_type rows_per_block =
      std::max<size_type>(1, size_type(block_bytes) / std::max<size_type>(row_bytes, 1));
  std::vector<T> buf(size_t(std::min(rows_per_block, info.n_obs) * info.n_vars));
  for (size_type r0 = 0; r0 < info.n_obs; r0 += rows_per_block) {
    const size_type r1 = std::min(info.n_obs, r0 + rows_per_block);
    reader.read_dense_rows<T>(r0, r1, buf.data());
    X.set_rows(r0, r1, buf.data());
  }
  X.finalize(source);
  return X;
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
CsrMatrix<T> load_csr(const ExecSpace& space, const io::H5adReader& reader,
                      std::size_t block_bytes) {
  compat::ScopedRegion region("knmf::X::load_csr");
  const auto& info = reader.info();
  const std::string source = reader.path().string();
  if (info.n_obs <= 0 || info.n_vars <= 0)
    input_error(source, ": X is empty (", info.n_obs, " cells x ", info.n_vars, " genes)");
  const std::int64_t nnz = count_nonzeros(reader, block_bytes);
  CsrMatrix<T> X(space, info.n_obs, info.n_vars, nnz);
  // Row blocks of bounded entry count (one block of host staging at a time).
  const std::int64_t per_entry = std::int64_t(sizeof(T) + sizeof(std::int32_t));
  const std::int64_t max_nnz = std::max<std::int64_t>(1, std::int64_t(block_bytes) / per_entry);
  io::CsrBlock<T> blk;
  size_type r0 = 0;
  while (r0 < info.n_obs) {
    // grow the block row by row up to max_nnz entries, in slices of at most 65536 rows
    const size_type probe_end = std::min(info.n_obs, r0 + 65536);
    const auto counts = reader.row_nnz(r0, probe_end);
    size_type r1 = r0;
    std::int64_t acc = 0;
    for (auto c : counts) {
      if (r1 > r0 && acc + c > max_nnz) break;
      acc += c;
      ++r1;
    }
    reader.read_csr_rows<T>(r0, r1, blk);
    X.set_rows(r0, r1, blk.row_offsets.data(), blk.cols.data(), blk.values.data());
    r0 = r1;
  }
  X.finalize(source);
  return X;
}

template CsrMatrix<float> load_csr<float>(const ExecSpace&, const io::H5adReader&, std::size_t);
template CsrMatrix<double> load_csr<double>(const ExecSpace&, const io::H5adReader&, std::size_t);

template DenseMatrix<float> load_dense<float>(const ExecSpace&, const io::H5adReader&, std::size_t);
template DenseMatrix<double> load_dense<double>(const ExecSpace&, const io::H5adReader&,
                                                std::size_t);

}  // namespace knmf
