#pragma once
/// \file
/// How the solver reaches X (internal): the two products with X and, for an X that holds only
/// a block of the rows of the full matrix (the MPI row partition), the reductions over the
/// row blocks. The solver reaches X through XOperandOf<XMat> (x_operand.hpp), which calls
/// RowPartition<XMat> alone, so a new matrix type is one specialization
/// (src/mpi/distributed_detail.hpp), declared anywhere before the solver is instantiated for it. The default is a whole matrix with the products of products.hpp:
/// no offset, nothing to reduce.

#include <vector>

#include "knmf/core/types.hpp"
#include "beta_passes.hpp"
#include "kernels.hpp"
#include "products.hpp"

namespace knmf::detail {

template <class XMat>
struct RowPartition {
  /// Whether X holds every row of the full matrix (NNDSVD's host LU/QR need them all).
  static constexpr bool whole_matrix = true;
  /// Rows of the full matrix (n of the regularization and the init draws).
  static size_type global_rows(const XMat& X) { return X.rows(); }
  /// Index of this block's first row in the full matrix.
  static size_type row_offset(const XMat&) { return 0; }
  /// P = H X^T ((R k) x rows of this block); `scratch`: the sparse gather's partials
  /// (products.hpp, GatherScratch), owned by the caller that repeats the product.
  template <class T>
  static void x_times_ht(const ExecSpace& space, const XMat& X, const Matrix<T>& H,
                         const Matrix<T>& P, GatherScratch<T>& scratch) {
    detail::x_times_ht(space, X, H, P, scratch);
  }
  /// Q = W X over this block's rows (summed over the blocks by reduce).
  template <class T>
  static void wt_times_x(const ExecSpace& space, const XMat& X, const Matrix<T>& W,
                         const Matrix<T>& Q, GatherScratch<T>& scratch) {
    detail::wt_times_x(space, X, W, Q, scratch);
  }
  /// The beta passes' view of this block's rows (beta_passes.hpp): f(BetaBlock) for each
  /// block, CSC blocks of a sparse X when `transposed`; and the scratch shape they need.
  template <class F>
  static void for_each_beta_block(const ExecSpace& space, const XMat& X, bool transposed, F&& f) {
    detail::for_each_beta_block(space, X, transposed, f);
  }
  static BetaShape beta_shape(const XMat& X) { return detail::beta_shape(X); }
  /// Sum a device matrix / per-slot Grams / host values over all row blocks (in place).
  template <class T>
  static void reduce(const XMat&, const ExecSpace&, const Matrix<T>&) {}
  static void reduce(const XMat&, const ExecSpace&, const SlotGram&) {}
  static void reduce(const XMat&, std::vector<double>&) {}
};

}  // namespace knmf::detail
