#pragma once
/// \file
/// `knmf prepare`: cNMF 1.7.1's `cnmf prepare` natively, writing cNMF's run folder
///
///   OUTPUT_DIR/NAME/NAME.overdispersed_genes.txt
///   OUTPUT_DIR/NAME/cnmf_tmp/NAME.norm_counts.h5ad      cells x HVG, unit variance (float64)
///   OUTPUT_DIR/NAME/cnmf_tmp/NAME.tpm.h5ad              cells x genes TPM (float32)
///   OUTPUT_DIR/NAME/cnmf_tmp/NAME.tpm_stats.df.npz      per gene __mean, __std (ddof 0)
///   OUTPUT_DIR/NAME/cnmf_tmp/NAME.nmf_params.df.npz     the job table (cNMF's bytes)
///   OUTPUT_DIR/NAME/cnmf_tmp/NAME.nmf_idvrun_params.yaml  scikit-learn's NMF arguments
///   OUTPUT_DIR/NAME/cnmf_tmp/NAME.knmf_prepare.json     knmf only: the options and the seed
///
/// which `knmf factorize --output-dir --name` and cNMF's own factorize / combine / consensus
/// read unchanged. Differences from cNMF, all deliberate:
///  * the seed: cNMF's default (no --seed) seeds numpy from the operating system and keeps
///    no record of it. knmf draws a seed in [0, 2^32) from std::random_device instead, prints
///    it and records it in NAME.knmf_prepare.json, so a run can be repeated.
///  * --densify changes how the matrix is held (one dense copy), not the arithmetic: the
///    outputs are those without it (cNMF's dense path uses other numpy reductions).
///  * all files appear at once: everything is written into a staging folder
///    OUTPUT_DIR/.NAME.knmf-prepare-<pid>/ first. A new run folder is that folder renamed;
///    into an existing one (a previous prepare: cNMF overwrites its prepare files and keeps
///    the rest) the staged files are renamed one by one over the old ones. A refused input
///    or any error leaves nothing (OUTPUT_DIR too is removed when this run created it and it
///    is empty).
///  * refusals are knmf::InputErrors of one line, before anything is written: cells with no
///    count in the selected genes (cNMF's own check and message; all-zero cells included),
///    gene-list names missing from the input, --numgenes above the genes with non-zero TPM
///    variance (cNMF would select genes of zero variance), k < 1, --n-iter < 1, an unknown
///    --beta-loss or --init, a seed outside numpy's [0, 2^32), a --tpm matrix whose shape
///    or genes differ from the counts'.
///  * --tpm: read by the same readers as the counts (any of their formats, float32) and
///    written as NAME.tpm.h5ad (cNMF copies an .h5ad --tpm file as it is; knmf writes the same
///    matrix and names as CSR float32).

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "knmf/prepare/prepare.hpp"

namespace knmf::prepare {

struct CnmfPrepareOptions {
  std::string output_dir = ".";   ///< --output-dir
  std::string name = "cNMF";      ///< --name
  std::string counts;             ///< -c/--counts (see count_inputs.hpp for the formats)
  std::vector<int> components;    ///< -k/--components (repeats allowed, as cNMF)
  int n_iter = 100;               ///< -n/--n-iter
  std::optional<std::int64_t> seed;  ///< --seed; none: drawn (see the file comment)
  std::string genes_file;         ///< --genes-file
  int num_highvar_genes = 2000;   ///< --numgenes
  std::string tpm;                ///< --tpm: precomputed TPM (cells x genes as the counts)
  int max_nmf_iter = 1000;        ///< --max-nmf-iter
  std::string beta_loss = "frobenius";  ///< --beta-loss
  std::string init = "random";    ///< --init
  bool densify = false;           ///< --densify
  std::int64_t block_rows = 16384;  ///< rows read at once
};

struct CnmfPrepareReport {
  std::string run_dir;
  std::int64_t seed = 0;
  bool seed_drawn = false;
  std::int64_t cells = 0;
  std::int64_t genes = 0;            ///< genes of the input
  std::int64_t selected_genes = 0;
  std::int64_t jobs = 0;
  std::int64_t completed_jobs = 0;   ///< jobs whose spectra file already exists
  bool replaced_existing = false;    ///< the run folder existed before
};

/// `cnmf prepare`'s arithmetic on counts already open, without files: the selection of
/// `num_highvar_genes` overdispersed genes (or the listed `genes`), the unit-variance
/// normalized counts, the TPM (or `tpm`'s) and its statistics, and cNMF's refusals (more genes
/// asked for than vary, named by `numgenes_option`; cells without a count in the selected
/// genes). cnmf_prepare writes what this returns; the Python module returns it.
PrepareResult cnmf_prepare_counts(const CountSource& src, int num_highvar_genes,
                                  const std::vector<std::string>& genes, const CountSource* tpm,
                                  const std::string& numgenes_option);

/// Run `cnmf prepare` (see the file comment). Throws knmf::InputError for bad input. The
/// warning that runs of the job table already appear completed is written to `log`.
CnmfPrepareReport cnmf_prepare(const CnmfPrepareOptions& opts, std::ostream& log);

/// `yaml.dump` of cNMF's `_nmf_kwargs` (PyYAML 6, sorted keys): alpha_H, alpha_W, beta_loss,
/// init, l1_ratio, max_iter, solver (cd for frobenius, else mu), tol.
std::string cnmf_run_params_yaml(const std::string& beta_loss, const std::string& init, int max_iter);

}  // namespace knmf::prepare
