#pragma once
/// \file
/// X (cells x genes) as a dense device matrix.
///
/// Stored row-major, i.e. as the column-major (LayoutLeft) g x n matrix X^T: a cell's genes
/// are contiguous, row blocks of X are contiguous column ranges of X^T, and every product
/// with X is a plain BLAS/cuBLAS GEMM on LayoutLeft operands.

#include <functional>
#include <string>
#include <utility>

#include "knmf/core/types.hpp"
#include "knmf/io/fingerprint.hpp"
#include "knmf/matrix/stats.hpp"

namespace knmf {

template <class T>
class DenseMatrix {
public:
  using value_type = T;

  DenseMatrix() = default;
  /// Allocate an n x g matrix on `space` (contents undefined until set_rows/finalize).
  DenseMatrix(const ExecSpace& space, size_type n, size_type g);

  /// Build from n x g row-major host data, validated under the name `source`.
  static DenseMatrix from_host(const ExecSpace& space, size_type n, size_type g,
                               const T* row_major, const std::string& source = "X");

  /// Copy rows [r0, r1) from (r1 - r0) x g row-major host data.
  void set_rows(size_type r0, size_type r1, const T* row_major);

  /// Check that X is non-empty, finite and non-negative (InputError naming `source`, the
  /// value and its row/column otherwise) and compute its statistics once.
  /// `allow_empty`: a zero-row block is valid (a rank's share of a row-partitioned X).
  void finalize(const std::string& source = "X", size_type chunk = default_reduction_chunk,
                bool allow_empty = false);

  size_type rows() const { return n_; }
  size_type cols() const { return g_; }
  /// Stored entries (n * g for a dense matrix).
  size_type nnz() const { return n_ * g_; }
  /// sum and ||X||_F^2 (valid after finalize).
  const ValueStats& stats() const { return stats_; }
  /// X.mean() over all n*g entries, as scikit-learn's init uses it.
  double mean() const { return stats_.sum / (double(n_) * double(g_)); }
  /// X^T: a g x n LayoutLeft View; column i is cell i.
  const Matrix<T>& xt() const { return xt_; }
  /// Bytes held on the device.
  size_type bytes() const { return n_ * g_ * size_type(sizeof(T)); }
  const ExecSpace& space() const { return space_; }
  /// The content fingerprint of the file's X over these rows (io/fingerprint.hpp), set by the
  /// loaders of matrix/load.hpp; it has no rows for a matrix built from host data.
  const io::XFingerprint& fingerprint() const { return fingerprint_; }
  void set_fingerprint(const io::XFingerprint& f) { fingerprint_ = f; }

private:
  ExecSpace space_;
  size_type n_ = 0, g_ = 0;
  Matrix<T> xt_;
  ValueStats stats_;
  io::XFingerprint fingerprint_;
};

/// Throws InputError if `s` (statistics of X named `source`, n x g, positions row-major)
/// shows an empty, non-finite or negative matrix. Shared by the dense and sparse formats.
void check_input_stats(const ValueStats& s, size_type n, size_type g, const std::string& source,
                       const std::function<std::pair<size_type, size_type>(size_type)>& where);

/// The largest value of X that float32 arithmetic may meet in a solve of X of n x g values:
/// check_float32_scale refuses an X whose max|X|^2 * max(n, g) exceeds it.
double float32_scale_limit();

/// Throws InputError (naming `source`, X's largest value and --dtype) when X (statistics `s`
/// of the whole X, or of a row block of it: n is then the whole X's rows) is of a scale that
/// overflows float32 arithmetic: max|X|^2 * max(n, g) > 2^-24 * FLT_MAX (the reasoning is at
/// the definition). Called by the loaders of float32 X, before anything is written.
void check_float32_scale(const ValueStats& s, size_type n, size_type g, const std::string& source);

/// The checks that need the whole X's statistics (every rank's part under MPI), made once X
/// is read and before anything is written. Throws InputError (naming `source`) when X has no
/// nonzero value (nothing to factorize), or (naming X's largest value) when that one value carries all
/// of ||X||^2 to within the rounding of arithmetic of machine epsilon `eps` (that of the
/// compute type): the other values' squares sum to a positive amount below 16 eps ||X||^2,
/// so nothing they hold can change a factorization or its error, and every replicate would
/// "converge" at once with error 0 (the error identity of docs/numerics.md cancels). An X
/// with a single nonzero value (nothing else to lose) passes. `s` covers the whole X.
void check_whole_x(const ValueStats& s, double eps, const std::string& source);

}  // namespace knmf
