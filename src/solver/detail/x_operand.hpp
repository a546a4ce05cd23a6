#pragma once
/// \file
/// X as the batched solver sees it (internal). The solver (batch_runner.hpp) is compiled once
/// per value type (src/solver/batched_float.cpp, batched_double.cpp) against XOperand<T>: the
/// products with X, the beta passes' blocks, the sums over the row blocks and the NNDSVD draws,
/// behind virtual calls. XOperandOf<XMat> forwards each of them to RowPartition<XMat>
/// (partition.hpp), so a matrix type costs its products and not another copy of the solver
/// (ten copies before, 8 s each at -O3). A virtual call per product or pass is nothing beside
/// the product it starts.

#include <memory>
#include <type_traits>
#include <vector>

#include "knmf/core/error.hpp"
#include "knmf/solver/init.hpp"
#include "partition.hpp"

namespace knmf::detail {

/// A beta pass's visit of one block, passed through the virtual call without copying the
/// caller's callable (a std::function would allocate for each pass of each iteration). Valid
/// only during the call it is passed to.
template <class T>
class BetaBlockVisitor {
public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, BetaBlockVisitor>>>
  BetaBlockVisitor(const F& f)  // NOLINT: implicit, as the callables it stands for
      : object_(std::addressof(f)),
        call_([](const void* o, const BetaBlock<T>& b) { (*static_cast<const F*>(o))(b); }) {}
  void operator()(const BetaBlock<T>& b) const { call_(object_, b); }

private:
  const void* object_;
  void (*call_)(const void*, const BetaBlock<T>&);
};

template <class T>
class XOperand {
public:
  using value_type = T;
  virtual ~XOperand() = default;

  /// Rows of this block, columns, the value statistics and mean of the whole X.
  virtual size_type rows() const = 0;
  virtual size_type cols() const = 0;
  virtual const ValueStats& stats() const = 0;
  virtual double mean() const = 0;
  /// Whether this block is all of X (the NNDSVD draws need every row); the rows of the full
  /// matrix and this block's first row in it.
  virtual bool whole_matrix() const = 0;
  virtual size_type global_rows() const = 0;
  virtual size_type row_offset() const = 0;

  /// P = H X^T and Q = W X over this block's rows (partition.hpp).
  virtual void x_times_ht(const ExecSpace& space, const Matrix<T>& H, const Matrix<T>& P,
                          GatherScratch<T>& scratch) const = 0;
  virtual void wt_times_x(const ExecSpace& space, const Matrix<T>& W, const Matrix<T>& Q,
                          GatherScratch<T>& scratch) const = 0;
  /// The beta passes' blocks (beta_passes.hpp) and the scratch shape they need.
  virtual void for_each_beta_block(const ExecSpace& space, bool transposed,
                                   const BetaBlockVisitor<T>& f) const = 0;
  virtual BetaShape beta_shape() const = 0;
  /// Sums over all row blocks, in place.
  virtual void reduce(const ExecSpace& space, const Matrix<T>& m) const = 0;
  virtual void reduce(const ExecSpace& space, const SlotGram& m) const = 0;
  virtual void reduce(std::vector<double>& values) const = 0;
  /// W0 and H0 of an NNDSVD init (init_factors, compiled in src/solver/nndsvd.cpp); only for
  /// a whole X.
  virtual void nndsvd_init(const ExecSpace& space, int k, std::int64_t seed, InitKind kind,
                           T* H_row_major, T* W_row_major) const = 0;
};

/// XOperand over RowPartition<XMat>. Its members are defined below, out of the class, so that
/// the explicit instantiation declarations at the end keep the in-core matrix types' products
/// in src/solver/nmf.cpp: the MPI row partition (src/mpi/) and the NNDSVD draws
/// (src/solver/nndsvd.cpp) call them there instead of compiling them again.
template <class XMat>
class XOperandOf final : public XOperand<typename XMat::value_type> {
  using T = typename XMat::value_type;
  using Part = RowPartition<XMat>;

public:
  explicit XOperandOf(const XMat& X) : X_(X) {}

  size_type rows() const override;
  size_type cols() const override;
  const ValueStats& stats() const override;
  double mean() const override;
  bool whole_matrix() const override;
  size_type global_rows() const override;
  size_type row_offset() const override;
  void x_times_ht(const ExecSpace& space, const Matrix<T>& H, const Matrix<T>& P,
                  GatherScratch<T>& scratch) const override;
  void wt_times_x(const ExecSpace& space, const Matrix<T>& W, const Matrix<T>& Q,
                  GatherScratch<T>& scratch) const override;
  void for_each_beta_block(const ExecSpace& space, bool transposed,
                           const BetaBlockVisitor<T>& f) const override;
  BetaShape beta_shape() const override;
  void reduce(const ExecSpace& space, const Matrix<T>& m) const override;
  void reduce(const ExecSpace& space, const SlotGram& m) const override;
  void reduce(std::vector<double>& values) const override;
  void nndsvd_init(const ExecSpace& space, int k, std::int64_t seed, InitKind kind,
                   T* H_row_major, T* W_row_major) const override;

private:
  const XMat& X_;
};

template <class XMat>
size_type XOperandOf<XMat>::rows() const { return X_.rows(); }
template <class XMat>
size_type XOperandOf<XMat>::cols() const { return X_.cols(); }
template <class XMat>
const ValueStats& XOperandOf<XMat>::stats() const { return X_.stats(); }
template <class XMat>
double XOperandOf<XMat>::mean() const { return X_.mean(); }
template <class XMat>
bool XOperandOf<XMat>::whole_matrix() const { return Part::whole_matrix; }
template <class XMat>
size_type XOperandOf<XMat>::global_rows() const { return Part::global_rows(X_); }
template <class XMat>
size_type XOperandOf<XMat>::row_offset() const { return Part::row_offset(X_); }
template <class XMat>
void XOperandOf<XMat>::x_times_ht(const ExecSpace& space, const Matrix<T>& H, const Matrix<T>& P,
                                  GatherScratch<T>& scratch) const {
  Part::x_times_ht(space, X_, H, P, scratch);
}
template <class XMat>
void XOperandOf<XMat>::wt_times_x(const ExecSpace& space, const Matrix<T>& W, const Matrix<T>& Q,
                                  GatherScratch<T>& scratch) const {
  Part::wt_times_x(space, X_, W, Q, scratch);
}
template <class XMat>
void XOperandOf<XMat>::for_each_beta_block(
    const ExecSpace& space, bool transposed,
    const BetaBlockVisitor<T>& f) const {
  Part::for_each_beta_block(space, X_, transposed, f);
}
template <class XMat>
BetaShape XOperandOf<XMat>::beta_shape() const { return Part::beta_shape(X_); }
template <class XMat>
void XOperandOf<XMat>::reduce(const ExecSpace& space, const Matrix<T>& m) const {
  Part::reduce(X_, space, m);
}
template <class XMat>
void XOperandOf<XMat>::reduce(const ExecSpace& space, const SlotGram& m) const {
  Part::reduce(X_, space, m);
}
template <class XMat>
void XOperandOf<XMat>::reduce(std::vector<double>& values) const { Part::reduce(X_, values); }
template <class XMat>
void XOperandOf<XMat>::nndsvd_init(const ExecSpace& space, int k, std::int64_t seed,
                                   InitKind kind, T* H_row_major, T* W_row_major) const {
  if constexpr (Part::whole_matrix)
    init_factors(space, X_, k, seed, kind, H_row_major, W_row_major);
  else
    throw LogicError("knmf::solver: an NNDSVD init over a block of X's rows");
}

extern template class XOperandOf<DenseMatrix<float>>;
extern template class XOperandOf<DenseMatrix<double>>;
extern template class XOperandOf<CsrMatrix<float>>;
extern template class XOperandOf<CsrMatrix<double>>;
extern template class XOperandOf<StreamedMatrix<float>>;
extern template class XOperandOf<StreamedMatrix<double>>;

}  // namespace knmf::detail
