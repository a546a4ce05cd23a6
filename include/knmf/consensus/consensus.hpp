#pragma once
/// \file
/// cNMF's consensus step end to end for one k (`cnmf consensus`), and its k-selection
/// statistics (`cnmf k_selection_plot`), on matrices streamed from files or memory.
///
/// Steps (docs/numerics.md, "cNMF's consensus of one k", as cNMF 2026 runs them):
///  1. spectra side (clustering.hpp): drop all-zero replicate spectra, L2-normalize, local
///     density, keep density < threshold, k-means, per-cluster median normalized to sum 1;
///  2. usages: fixed-H refit of norm_counts X on the median spectra (refit.hpp);
///  3. programs ordered by total normalized usage (largest first), numbered 1..k;
///  4. with TPM (all genes): TPM spectra = fixed-H refit of TPM^T on the normalized usages,
///     gene scores = OLS of the z-scored TPM on the usages (both from one streamed pass of
///     U^T TPM and column sums), starCAT reference spectra, and the final usages = fixed-H
///     refit of the unit-variance HVG TPM on the TPM spectra scaled by the genes' std.
/// Memory: O(n k + genes k) on the device plus one row block of X or TPM; never n x genes.

#include <limits>
#include <string>
#include <vector>

#include "knmf/consensus/clustering.hpp"
#include "knmf/consensus/options.hpp"
#include "knmf/consensus/refit.hpp"
#include "knmf/matrix/row_source.hpp"
#include "knmf/solver/options.hpp"

namespace knmf::consensus {

/// TPM inputs (cNMF's `tpm.h5ad`, `tpm_stats.df.npz` and the HVG list).
struct TpmInput {
  const RowSource* tpm = nullptr;      ///< cells x all genes, same cells as X, same order
  std::vector<int> hvg_columns;        ///< TPM column of each of X's genes (the HVGs), in X's order
  /// tpm_stats `__std` per TPM column (ddof 0); empty: computed from the TPM matrix
  std::vector<double> gene_std;
  bool float32 = true;                 ///< TPM stored as float32: cNMF's TPM outputs are float32
};

struct ConsensusResult {
  SpectraClustering clustering;
  /// Program p (0-based; written as p + 1) is k-means cluster order[p].
  std::vector<int> order;
  HostRows spectra;                    ///< k x genes(X), rows sum to 1 (consensus spectra)
  RefitOutcome refit;                  ///< usages of X on `spectra` (columns in program order)
  double prediction_error = 0.0;       ///< ||X - W H||^2 of that refit
  bool have_tpm = false;
  HostRows spectra_tpm;                ///< k x TPM genes (gene_spectra_tpm)
  HostRows spectra_score;              ///< k x TPM genes (gene_spectra_score)
  HostRows starcat;                    ///< k x genes(X) (starcat_spectra)
  RefitOutcome tpm_spectra_refit;      ///< the refit behind spectra_tpm (W = spectra_tpm^T)
  RefitOutcome tpm_usage_refit;        ///< the final usages on the scaled HVG TPM
  /// One line each (no "warning:" prefix): what the outputs hold that cNMF's would not (a
  /// gene with no spread in the TPM: its starCAT value 0 where cNMF's is NaN).
  std::vector<std::string> warnings;
  /// The usages cNMF writes: tpm_usage_refit.W with TPM, refit.W without (n x k).
  const HostRows& usages() const { return have_tpm ? tpm_usage_refit.W : refit.W; }
};

/// cNMF's consensus for one k: `merged` are the stacked replicate spectra (R*k x genes of X),
/// X the norm_counts matrix, `tpm` optional (nullptr: no TPM outputs; usages from X).
/// `run` are the run's NMF parameters (nmf_idvrun_params.yaml).
ConsensusResult run_consensus(const ExecSpace& space, const HostRows& merged, int k,
                              const RowSource& X, const TpmInput* tpm, const SolverOptions& run,
                              const ConsensusOptions& opts);

/// One row of cNMF's k_selection_stats table.
struct KSelectionRow {
  int k = 0;
  double local_density_threshold = 0.5;  ///< recorded as cNMF records it (not applied)
  double silhouette = 0.0;               ///< stability
  double prediction_error = 0.0;         ///< ||X - W H||^2
  /// Bi-cross-validation (cross_validation.hpp), when asked for: the mean relative
  /// prediction error of the held-out blocks and its standard deviation; NaN otherwise.
  double cv_prediction_error = std::numeric_limits<double>::quiet_NaN();
  double cv_prediction_error_sd = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> cv_errors = {};  ///< each held-out block's and replicate's (CrossValidationK)
};

/// cNMF's k-selection statistics: for every k, the unfiltered clustering of all replicate
/// spectra (cNMF's k_selection_plot skips the density filter and records the threshold),
/// its silhouette, and the prediction error of the usage refit, all refits from one pass
/// over X. `merged[i]` holds the replicates of `ks[i]`.
std::vector<KSelectionRow> k_selection(const ExecSpace& space, const std::vector<HostRows>& merged,
                                       const std::vector<int>& ks, const RowSource& X,
                                       const SolverOptions& run, const ConsensusOptions& opts);

/// Symmetric positive semi-definite solve as numpy's `lstsq(A, B, rcond=None)` computes it
/// for a k x k Gram matrix A: the pseudo-inverse with singular values below
/// eps * k * max cut off. A: k x k row-major, B: k x m row-major; returns k x m.
std::vector<double> gram_lstsq(const std::vector<double>& A, const std::vector<double>& B, int k,
                               size_type m);

}  // namespace knmf::consensus
