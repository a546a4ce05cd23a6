#pragma once
/// \file
/// How the solver sees an X that may hold only a block of the rows of the full matrix (the
/// MPI row partition). The default is a whole matrix: no offset, nothing to reduce. A
/// partitioned matrix type specializes RowPartition (src/mpi/) so that the k x g and k x k
/// reductions (W^T X, W^T W, the W-side violation) are summed over all row blocks.

#include <vector>

#include "knmf/core/types.hpp"
#include "kernels.hpp"

namespace knmf::detail {

template <class XMat>
struct RowPartition {
  /// Rows of the full matrix (n of the regularization and the init draws).
  static size_type global_rows(const XMat& X) { return X.rows(); }
  /// Index of this block's first row in the full matrix.
  static size_type row_offset(const XMat&) { return 0; }
  /// Sum a device matrix / per-slot Grams / host values over all row blocks (in place).
  template <class T>
  static void reduce(const XMat&, const ExecSpace&, const Matrix<T>&) {}
  static void reduce(const XMat&, const ExecSpace&, const SlotGram&) {}
  static void reduce(const XMat&, std::vector<double>&) {}
};

}  // namespace knmf::detail
