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

template DenseMatrix<float> load_dense<float>(const ExecSpace&, const io::H5adReader&, std::size_t);
template DenseMatrix<double> load_dense<double>(const ExecSpace&, const io::H5adReader&,
                                                std::size_t);

}  // namespace knmf
