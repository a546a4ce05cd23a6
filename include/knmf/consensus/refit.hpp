#pragma once
/// \file
/// Fixed-H refits from streamed products: scikit-learn's
/// `non_negative_factorization(X, H=H, update_H=False)` with the run's solver (cd or mu),
/// computed without holding X.
///
/// A fixed-H refit reads X only through P = X H^T (n x k), H H^T (k x k) and, for the error,
/// ||X||^2: coordinate descent updates W from (P, H H^T) alone, MU likewise, and the error
/// is ||X - W H||^2 = ||X||^2 - 2 <W, P> + <W^T W, H H^T> (docs/numerics.md). So X is
/// streamed once in CSR row blocks (RowSource) to form P for every spectra matrix at once;
/// the iterations then run on the device in O(n k) memory with the solver's own kernels
/// (the same update, convergence test and chunked reductions as knmf::refit_usages, which
/// needs X resident on the device).

#include <vector>

#include "knmf/consensus/clustering.hpp"
#include "knmf/matrix/row_source.hpp"
#include "knmf/core/types.hpp"
#include "knmf/solver/options.hpp"
#include "knmf/solver/result.hpp"

namespace knmf::consensus {

struct RefitOutcome {
  HostRows W;                 ///< n x k usages, row-major (scikit-learn's W)
  int n_iter = 0;
  ReplicateStatus status = ReplicateStatus::max_iter;
  double error_at_init = 0.0; ///< ||X - W0 H||_F
  double squared_error = 0.0; ///< ||X - W H||_F^2 (cNMF's prediction error), via the identity
};

/// Refit the usages of X on each of `spectra` (each k_s x X.cols(), finite, non-negative),
/// from one streamed pass over X. `opts` are the run's NMF parameters (solver, tol,
/// max_iter, alpha_W, l1_ratio, beta_loss); regularization is scaled by X's shape as
/// scikit-learn does. For a beta-rule loss (cNMF's refits of a Kullback-Leibler or
/// Itakura-Saito run) the products do not suffice: that pass also gathers X, which is then
/// resident on the device (CSR, as factorize holds it) for the beta-divergence MU refit;
/// squared_error stays the Frobenius error, as cNMF's prediction error is.
std::vector<RefitOutcome> refit_usages_streamed(const ExecSpace& space, const RowSource& X,
                                                const std::vector<HostRows>& spectra,
                                                const SolverOptions& opts,
                                                size_type block_nnz = size_type(1) << 24,
                                                bool return_W = true);

/// The fixed-H refit from its products alone: P = X H^T given transposed as `pt`
/// (k x m row-major, m = rows of X), G = H H^T (k x k), ||X||^2, X.mean() (for MU's start)
/// and X's shape (n_rows = m, n_cols) for the regularization scales. Returns W (m x k).
/// Frobenius only (beta_loss 2; InputError otherwise).
RefitOutcome refit_from_products(const ExecSpace& space, const HostRows& pt, const HostRows& G,
                                 double norm2_x, double mean_x, size_type n_cols,
                                 const SolverOptions& opts);

}  // namespace knmf::consensus
