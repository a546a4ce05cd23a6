#pragma once
/// \file
/// The fixed-H refit on device-resident products (internal; see knmf/consensus/refit.hpp).

#include <vector>

#include "consensus/detail/device.hpp"
#include "knmf/consensus/refit.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/csr_matrix.hpp"

namespace knmf::consensus::detail {

/// P = H X^T (k x m, LayoutLeft; rows of X are the m columns), G = H H^T (k x k row-major).
/// Runs scikit-learn's fixed-H CD or MU for W (m x k), as the solver's refit does.
/// `return_W`: download W into the outcome (else only the statistics).
RefitOutcome refit_device(const ExecSpace& space, const DMatrix& P, const std::vector<double>& G,
                          double norm2_x, double mean_x, size_type n_cols,
                          const SolverOptions& opts, bool return_W);

/// ||X - W H||_F^2 = ||X||^2 - 2 <W, P> + <W^T W, H H^T> for W (k x m, LayoutLeft), P = H X^T
/// (k x m) and G = H H^T (k x k row-major), with the solver's chunked reductions (>= 0).
double squared_error(const ExecSpace& space, const DMatrix& W, const DMatrix& P,
                     const std::vector<double>& G, double norm2_x);

/// Rows of a streamed X gathered on the host in CSR, for the refits that need X itself on
/// the device (a beta-rule loss: the beta-divergence MU reads X / (W H), which no product of X
/// with H gives). A column map keeps the columns c with map[c] >= 0, renumbered map[c],
/// each value multiplied by scale[c].
struct HostCsr {
  size_type rows = 0, cols = 0;
  std::vector<size_type> offsets{0};
  std::vector<ordinal_type> index;
  std::vector<double> values;

  /// Append the block's rows (blocks arrive in row order); `map`/`scale` empty: all columns.
  void append(const io::CsrBlock<double>& b, const std::vector<int>& map = {},
              const std::vector<double>& scale = {}, size_type mapped_cols = 0);
  /// The transpose (X^T in CSR), rows in order within each column.
  HostCsr transposed() const;
  /// On the device (validated as `source`).
  CsrMatrix<double> to_device(const ExecSpace& space, const std::string& source) const;
};

/// The fixed-H refit of `spectra` (k x X.cols(), row-major) with X resident: knmf's batched
/// solver in refit mode (scikit-learn's `update_H=False` with the options' beta_loss). The
/// outcome's squared_error is the Frobenius ||X - W H||^2 from P = H X^T (k x m) and
/// G = H H^T, cNMF's prediction error whatever the loss.
RefitOutcome refit_resident(const ExecSpace& space, const CsrMatrix<double>& X,
                            const HostRows& spectra, const DMatrix& P,
                            const std::vector<double>& G, double norm2_x,
                            const SolverOptions& opts, bool return_W);

/// Per-row products of a Gram: G = F F^T for F (k x m LayoutLeft), as the solver's chunked
/// reduction sums it (k x k row-major).
std::vector<double> gram(const ExecSpace& space, const DMatrix& F);

}  // namespace knmf::consensus::detail
