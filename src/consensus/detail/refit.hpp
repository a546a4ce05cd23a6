#pragma once
/// \file
/// The fixed-H refit on device-resident products (internal; see knmf/consensus/refit.hpp).

#include <vector>

#include "consensus/detail/device.hpp"
#include "knmf/consensus/refit.hpp"

namespace knmf::consensus::detail {

/// P = H X^T (k x m, LayoutLeft; rows of X are the m columns), G = H H^T (k x k row-major).
/// Runs scikit-learn's fixed-H CD or MU for W (m x k), as the solver's refit does.
/// `return_W`: download W into the outcome (else only the statistics).
RefitOutcome refit_device(const ExecSpace& space, const DMatrix& P, const std::vector<double>& G,
                          double norm2_x, double mean_x, size_type n_cols,
                          const SolverOptions& opts, bool return_W);

/// Per-row products of a Gram: G = F F^T for F (k x m LayoutLeft), as the solver's chunked
/// reduction sums it (k x k row-major).
std::vector<double> gram(const ExecSpace& space, const DMatrix& F);

}  // namespace knmf::consensus::detail
