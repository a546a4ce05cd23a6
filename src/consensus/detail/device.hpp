#pragma once
/// \file
/// Device helpers shared by the consensus sources (internal): allocation, host <-> device
/// copies of row-major host matrices, and the blocked Euclidean distance kernels.

#include <Kokkos_Core.hpp>

#include <string>
#include <vector>

#include "knmf/consensus/clustering.hpp"
#include "knmf/core/compat.hpp"
#include "knmf/core/types.hpp"

namespace knmf::consensus::detail {

using Policy64 = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<size_type>>;
using DMatrix = Matrix<double>;
using DVector = Vector<double>;

inline DMatrix alloc_matrix(const ExecSpace& space, const std::string& label, size_type rows,
                            size_type cols) {
  return DMatrix(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, label), rows, cols);
}
inline DVector alloc_vector(const ExecSpace& space, const std::string& label, size_type n) {
  return DVector(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, label), n);
}

/// A row-major host matrix (rows x cols) as the LayoutLeft device matrix of its transpose
/// (cols x rows): column i holds row i.
DMatrix upload_transposed(const ExecSpace& space, const HostRows& x, const std::string& label);
/// The inverse: a LayoutLeft device matrix F (a x b) as the row-major host matrix F^T (b x a).
HostRows download_transposed(const ExecSpace& space, const DMatrix& f);
/// A host vector on the device.
DVector upload(const ExecSpace& space, const std::vector<double>& v, const std::string& label);
std::vector<double> download(const ExecSpace& space, const DVector& v);

/// Squared norm of each column of xt (each row of the host matrix), summed in order.
DVector column_sq_norms(const ExecSpace& space, const DMatrix& xt);

/// d(i, j) for rows [b0, b0 + B) of the data against all rows, from the Gram block
/// G(i, j) = <x_{b0+i}, x_j> (B x n, overwritten with the distances) and the squared norms:
/// scikit-learn's euclidean_distances, sqrt(max(0, (-2 G + |x_i|^2) + |x_j|^2)), with the
/// diagonal set to 0. `squared` skips the square root.
///
/// The formula loses relative accuracy for near-duplicate rows (an error of one unit in the
/// last place of G moves a distance d by about 1e-16 / d), so the GEMM's summation order
/// would decide the last digits of the distances of near-duplicate replicate spectra. Where
/// the squared distance falls below `refine_below`, G(i, j) is recomputed from the columns
/// of `xt` (the data, g x n) in twice the working precision: those distances are then the
/// same on every backend and BLAS. Pass an empty xt to skip the refinement.
void distances_from_gram(const ExecSpace& space, const DMatrix& G, const DVector& sq_norms,
                         size_type b0, bool zero_diagonal, bool squared, const DMatrix& xt,
                         double refine_below = 1e-6);

/// G = A^T B for LayoutLeft device matrices (one GEMM).
void gemm_tn(const ExecSpace& space, const DMatrix& A, const DMatrix& B, const DMatrix& G);
/// C = A B.
void gemm_nn(const ExecSpace& space, const DMatrix& A, const DMatrix& B, const DMatrix& C);

/// Rows per block so that a block of `rows_total` doubles per row stays within `bytes`.
inline size_type block_rows(size_type bytes, size_type rows_total, size_type n) {
  size_type per_row = rows_total * size_type(sizeof(double));
  size_type b = per_row > 0 ? bytes / per_row : n;
  if (b < 1) b = 1;
  if (b > n) b = n;
  return b;
}

}  // namespace knmf::consensus::detail
