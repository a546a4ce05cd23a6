#pragma once
/// \file
/// How well a factorization recovered known programs (for simulations with ground truth).
///
/// The correlation of true program p and recovered component t is the Pearson correlation,
/// over the genes both cover, of truth[p, gene_index[j]] * gene_weight[j] and spectra[t, j].
/// With gene_weight = 1 / gene_std from prepare (see `recovery` below), both live in the
/// variance-scaled units the factorization saw: there a program's recovered spectrum is
/// proportional to its true profile divided by each gene's std, so a perfect recovery has
/// correlation 1. (Unweighted, correlations in count units are dominated by the few
/// high-expression genes every program shares, and even distinct programs correlate > 0.9.)
///
/// Programs are matched to components one-to-one by the Hungarian algorithm (maximum total
/// correlation); with fewer components than programs some programs stay unmatched.

#include <cstdint>
#include <vector>

#include "knmf/core/assignment.hpp"  // hungarian_max, the matching used here

namespace knmf::prepare {

struct PrepareResult;

struct RecoveryReport {
  int n_programs = 0;               ///< P (true programs)
  int n_components = 0;             ///< k (recovered components)
  std::vector<double> correlation;  ///< P x k row-major Pearson correlations
  std::vector<int> match;           ///< component matched to each program (Hungarian), or -1
  std::vector<double> matched;      ///< correlation of each program with its match (NaN if none)
  std::vector<double> best;         ///< each program's largest correlation with any component
  /// Each program's largest correlation with any OTHER true program (over the same genes and
  /// weights): how similar the truth itself is, the baseline a match must clearly beat.
  std::vector<double> closest_other;
  /// Smallest of `matched` (NaN when a program is unmatched).
  double min_matched() const;
};

/// truth: P x g_truth row-major; spectra: k x g row-major; gene_index: g truth columns (one
/// per spectra column); gene_weight: g weights or empty for 1. Asserts consistent sizes.
/// A constant row correlates as NaN.
RecoveryReport match_programs(const std::vector<double>& truth, int n_programs,
                              std::int64_t n_truth_genes, const std::vector<double>& spectra,
                              int n_components, const std::vector<std::int32_t>& gene_index,
                              const std::vector<double>& gene_weight = {});

/// match_programs for spectra over the genes `prep` selected, in its scaled units
/// (gene_index = prep.genes, gene_weight = 1 / prep.gene_std).
RecoveryReport recovery(const std::vector<double>& truth, int n_programs,
                        std::int64_t n_truth_genes, const std::vector<double>& spectra,
                        int n_components, const PrepareResult& prep);

}  // namespace knmf::prepare
