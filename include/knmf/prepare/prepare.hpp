#pragma once
/// \file
/// cNMF's `prepare` step: from raw counts to the matrix that NMF factorizes.
///
/// What `cnmf prepare` computes (cnmf.py `prepare` / `get_norm_counts` /
/// `get_highvar_genes_sparse`), reproduced here:
///  1. TPM: every cell scaled to sum 1e6. As scanpy's normalize_total on float32 counts:
///     the cell total is summed in float32, then tpm = x * float32(1e6 / total) in float32.
///  2. Highly variable genes (Klein et al. 2015 v-score, cNMF's rule): on the TPM matrix,
///     per gene the mean, the variance (ddof 0) and the Fano factor var/mean;
///     A = min of sqrt(var)/mean over the 20 genes of largest mean; B = sqrt(median Fano of
///     the genes strictly inside the 10%-90% quantiles of both mean and Fano; quantiles
///     interpolated linearly as numpy does); expected Fano = A^2 mean + B^2; the
///     `num_highvar_genes` genes of largest Fano / expected Fano are kept, in input order.
///  3. The raw counts of those genes, each gene divided by its standard deviation over cells
///     with ddof 1 (scanpy's `sc.pp.scale(zero_center=False)`): var = E[x^2] - E[x]^2 (each
///     mean summed in cell order over x / n), var = var * n / (n - 1), std 0 -> 1, and
///     x * (1 / std). Values are float64.
/// On cNMF's pbmcA run (tests/prepare) this gives the same 2000 genes and the scaled values
/// bit for bit.
///
/// Differences, all documented:
///  * Cells whose total count is 0 and genes whose total is 0 are left out of every
///    statistic (and no zero cell appears in the output), as if the input had been filtered
///    first, which cNMF asks its users to do. Zero genes are never selected.
///  * Statistics of step 2 are accumulated in float64 (cNMF's scipy/scikit-learn calls
///    accumulate float32 TPM in float32 or float64 depending on the version); exact ties of
///    the Fano ratio are broken by gene position (pandas' quicksort may order them
///    differently). Neither changes pbmcA's selection.
///  * Duplicate column entries within a row are summed.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "knmf/io/h5ad.hpp"

namespace knmf::prepare {

class Simulator;

/// A count matrix (cells x genes, non-negative) read in row blocks, wherever it lives.
struct CountSource {
  std::int64_t n_obs = 0;   ///< cells
  std::int64_t n_vars = 0;  ///< genes
  /// Fill `out` with rows [r0, r1) (offsets relative to the block, as io::CsrBlock).
  std::function<void(std::int64_t r0, std::int64_t r1, io::CsrBlock<float>& out)> read_rows;
  std::int64_t block_rows = 16384;  ///< rows per read_rows call
  std::vector<std::string> obs_names;  ///< n_obs names, or empty for "0", "1", ...
  std::vector<std::string> var_names;  ///< n_vars names, or empty for "0", "1", ...
  std::string name = "counts";         ///< names the matrix in error messages (a file path)
};

/// An in-memory CSR matrix (referenced, not copied: it must outlive the source).
CountSource count_source(const io::CsrBlock<float>& X, std::vector<std::string> obs_names = {},
                         std::vector<std::string> var_names = {}, std::string name = "counts");
/// X of an AnnData file (any storage; referenced, not copied), with its obs/var names.
CountSource count_source(const io::H5adReader& reader, std::int64_t block_rows = 16384);
/// A simulation, generated block by block (cell0..., gene0... names).
CountSource count_source(const Simulator& sim, std::int64_t block_rows = 4096);

struct PrepareOptions {
  /// cNMF --numgenes: how many highly variable genes to keep (>= 1).
  int num_highvar_genes = 2000;
  /// cNMF --genes-file: when not empty, use exactly these genes (in this order) instead of
  /// selecting; each must be a var name of the input (InputError otherwise).
  std::vector<std::string> genes;
  /// Per-cell total after normalization (cNMF: 1e6, i.e. TPM).
  double target_sum = 1e6;
  /// Also return the TPM matrix (kept cells x all genes), as cNMF's tpm.h5ad.
  bool keep_tpm = false;
  /// Count the genes with total 0 in the highly-variable-gene statistics as cNMF does (mean
  /// 0, NaN Fano: they move the 10% quantile of the means to 0), instead of leaving them out
  /// (the default; see the file comment). `knmf prepare` sets it, to select cNMF's genes.
  bool zero_genes_in_statistics = false;
  /// cNMF's --tpm: a precomputed TPM matrix (same cells and genes as the counts, in the same
  /// order; not owned) whose values are used as they are instead of normalizing the counts.
  /// InputError when its shape or gene names differ from the counts'.
  const CountSource* tpm = nullptr;
};

/// Step 2's per-gene statistics, over all input genes (as cNMF's gene_counts_stats).
/// Genes with total 0 have mean = var = 0 and NaN fano, expected_fano and fano_ratio.
struct GeneStatistics {
  std::vector<double> mean;           ///< TPM mean over kept cells
  std::vector<double> var;            ///< TPM variance, ddof 0
  std::vector<double> fano;           ///< var / mean
  std::vector<double> expected_fano;  ///< A^2 mean + B^2
  std::vector<double> fano_ratio;     ///< fano / expected_fano (the v-score)
  std::vector<std::uint8_t> high_var; ///< 1 for the selected genes
  double A = 0.0;
  double B = 0.0;
};

/// Klein's / cNMF's highly-variable-gene rule on given gene means and variances (ddof 0),
/// pandas' NaN semantics (a gene with mean 0 gets NaN Fano and is never preferred to a
/// gene with a finite ratio). Selects min(numgenes, n) genes. InputError if numgenes < 1.
GeneStatistics highvar_genes(const std::vector<double>& mean, const std::vector<double>& var,
                             int numgenes);

struct PrepareResult {
  /// Kept cells x selected genes, scaled counts (float64), columns sorted.
  io::CsrBlock<double> norm_counts;
  std::vector<std::int32_t> genes;       ///< input column of each output column
  std::vector<std::string> gene_names;   ///< their names
  std::vector<std::int64_t> cells;       ///< input row of each output row
  std::vector<std::string> cell_names;   ///< their names
  std::vector<double> gene_std;          ///< each output column was multiplied by 1 / gene_std
  GeneStatistics stats;                  ///< TPM statistics of every input gene
  std::int64_t zero_cells = 0;           ///< input cells left out (total count 0)
  std::int64_t zero_genes = 0;           ///< input genes with total count 0
  /// Kept cells without any count in the selected genes (cNMF stops at this point and asks
  /// for them to be filtered; they are kept here, as zero rows).
  std::int64_t zero_hvg_cells = 0;
  /// With keep_tpm: kept cells x all input genes, float32 (columns as in the input).
  io::CsrBlock<float> tpm;
};

/// Run cNMF's prepare on `source` (three passes over it). Throws InputError naming the
/// source for negative or non-finite values, out-of-range columns, fewer than 2 cells with
/// counts, or no gene with counts.
PrepareResult prepare_counts(const CountSource& source, const PrepareOptions& opts = {});

/// cNMF's `NAME.norm_counts.h5ad`: CSR float64 with the kept cells' and genes' names.
void write_norm_counts(const std::string& path, const PrepareResult& result);
/// cNMF's `NAME.overdispersed_genes.txt`: the gene names joined by '\n' (no final newline).
void write_gene_list(const std::string& path, const PrepareResult& result);
/// cNMF's `NAME.tpm_stats.df.npz`: index 0..g-1, columns `__mean`, `__std` (ddof 0).
void write_tpm_stats(const std::string& path, const PrepareResult& result);
/// The same with the gene names as index, as cNMF writes it (`tpm.var.index`); one name per
/// input gene (InputError otherwise).
void write_tpm_stats(const std::string& path, const PrepareResult& result,
                     const std::vector<std::string>& gene_names);

}  // namespace knmf::prepare
