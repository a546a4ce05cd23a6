#pragma once
/// \file
/// cNMF run directories: where each file lives (`cNMF.paths` of cnmf.py), the per-run NMF
/// parameters (`NAME.nmf_idvrun_params.yaml`), the job table (`NAME.nmf_params.df.npz`) and
/// the per-replicate spectra files that `cnmf factorize` writes and `cnmf combine` reads.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "knmf/core/job.hpp"
#include "knmf/io/dataframe.hpp"

namespace knmf::io {

class DeflateMemo;  // zip.hpp

/// cNMF's density-threshold file-name fragment: Python's `str(threshold).replace('.', '_')`
/// (0.5 -> "0_5", 2.0 -> "2_0", 0.01 -> "0_01").
std::string density_threshold_string(double threshold);

/// Every file of a cNMF run `<output_dir>/<name>/`, named as cnmf.py names them.
/// `k` is the number of components, `iter` the replicate, `dt` the local density threshold
/// (formatted with density_threshold_string).
struct CnmfPaths {
  CnmfPaths(std::string output_dir, std::string name);

  std::string output_dir;
  std::string name;

  /// `<output_dir>/<name>`
  std::string run_dir() const;
  /// `<output_dir>/<name>/cnmf_tmp`
  std::string tmp_dir() const;

  // -- written by `cnmf prepare` ------------------------------------------------------------
  /// cnmf_tmp/NAME.norm_counts.h5ad (cells x HVG, unit-variance scaled)
  std::string normalized_counts() const;
  /// cnmf_tmp/NAME.tpm.h5ad
  std::string tpm() const;
  /// cnmf_tmp/NAME.tpm_stats.df.npz
  std::string tpm_stats() const;
  /// cnmf_tmp/NAME.nmf_idvrun_params.yaml
  std::string nmf_run_parameters() const;
  /// cnmf_tmp/NAME.nmf_params.df.npz (the job table)
  std::string nmf_replicate_parameters() const;
  /// NAME.overdispersed_genes.txt
  std::string nmf_genes_list() const;

  // -- written by `cnmf factorize` / `combine` ----------------------------------------------
  /// cnmf_tmp/NAME.spectra.k_K.iter_R.df.npz
  std::string iter_spectra(int k, int iter) const;
  /// cnmf_tmp/NAME.usages.k_K.iter_R.df.npz
  std::string iter_usages(int k, int iter) const;
  /// cnmf_tmp/NAME.spectra.k_K.merged.df.npz (rows `iter<r>_topic<t>`, t from 1)
  std::string merged_spectra(int k) const;

  // -- written by `cnmf consensus` ----------------------------------------------------------
  /// cnmf_tmp/NAME.local_density_cache.k_K.merged.df.npz
  std::string local_density_cache(int k) const;
  /// cnmf_tmp/NAME.spectra.k_K.dt_T.consensus.df.npz
  std::string consensus_spectra(int k, double dt) const;
  /// NAME.spectra.k_K.dt_T.consensus.txt
  std::string consensus_spectra_txt(int k, double dt) const;
  /// cnmf_tmp/NAME.usages.k_K.dt_T.consensus.df.npz
  std::string consensus_usages(int k, double dt) const;
  /// NAME.usages.k_K.dt_T.consensus.txt
  std::string consensus_usages_txt(int k, double dt) const;
  /// cnmf_tmp/NAME.stats.k_K.dt_T.df.npz
  std::string consensus_stats(int k, double dt) const;
  /// NAME.clustering.k_K.dt_T.png
  std::string clustering_plot(int k, double dt) const;
  /// cnmf_tmp/NAME.gene_spectra_score.k_K.dt_T.df.npz
  std::string gene_spectra_score(int k, double dt) const;
  /// NAME.gene_spectra_score.k_K.dt_T.txt
  std::string gene_spectra_score_txt(int k, double dt) const;
  /// cnmf_tmp/NAME.gene_spectra_tpm.k_K.dt_T.df.npz
  std::string gene_spectra_tpm(int k, double dt) const;
  /// NAME.gene_spectra_tpm.k_K.dt_T.txt
  std::string gene_spectra_tpm_txt(int k, double dt) const;
  /// cnmf_tmp/NAME.starcat_spectra.k_K.dt_T.df.npz
  std::string starcat_spectra(int k, double dt) const;
  /// NAME.starcat_spectra.k_K.dt_T.txt
  std::string starcat_spectra_txt(int k, double dt) const;

  // -- written by `cnmf k_selection_plot` ---------------------------------------------------
  /// NAME.k_selection.png
  std::string k_selection_plot() const;
  /// NAME.k_selection_stats.df.npz
  std::string k_selection_stats() const;

private:
  std::string in_run(const std::string& file) const;
  std::string in_tmp(const std::string& file) const;
};

/// scikit-learn `non_negative_factorization` keyword arguments as cNMF stores them
/// (`yaml.dump(_nmf_kwargs)`), e.g. `alpha_H: 0.0, alpha_W: 0.0, beta_loss: frobenius,
/// init: random, l1_ratio: 0.0, max_iter: 1000, solver: cd, tol: 0.0001`.
struct NmfRunParams {
  /// Each key with its scalar value's text, in file order. What the keys mean is the solver
  /// option table's business (knmf/solver/options.hpp: apply_cnmf_params).
  std::vector<std::pair<std::string, std::string>> values;
  /// Keys whose value is a list or a mapping, in file order (no option takes one).
  std::vector<std::string> non_scalar;
};

/// Read `NAME.nmf_idvrun_params.yaml`: a YAML mapping of scalars, each key once. Malformed
/// YAML, another shape or a repeated key throws knmf::InputError naming the file (and key).
NmfRunParams read_nmf_run_params(const std::string& path);

/// The job table `NAME.nmf_params.df.npz`: one Job per row in file order (Job::index = row
/// position, what cNMF's workers split on), from the columns `n_components`, `iter` and
/// `nmf_seed` found by name (a `completed` column, when present, is not needed here).
/// InputError naming the file for a missing column, a non-integer / out-of-range value, or a
/// (n_components, iter) job listed in two rows (naming both rows).
std::vector<Job> read_cnmf_job_table(const std::string& path);

/// Write the job table `NAME.nmf_params.df.npz` as `cnmf prepare` does (save_df_to_npz of
/// the DataFrame n_components, iter, nmf_seed, completed): `data` the frame's object array
/// (Fortran order) of Python ints and bools and `columns` the names, both pickled as numpy
/// 1.24 pickles them, `index` int64 0..n-1; byte for byte cNMF's members. `completed[i]`
/// flags job i. Atomic (temporary file + rename); InputError naming `path` when it cannot
/// be written.
void write_cnmf_job_table(const std::string& path, const std::vector<Job>& jobs,
                          const std::vector<bool>& completed);

/// A row label of cNMF's merged spectra, `iter<r>_topic<t>` (r from 0, t from 1).
struct MergedSpectraLabel {
  int iter = 0;
  int topic = 0;
};
/// Parse `iter<r>_topic<t>`; InputError (prefixed with `what`) for anything else.
/// Read merged spectra themselves with read_df_npz (knmf/io/dataframe.hpp).
MergedSpectraLabel parse_merged_spectra_label(const std::string& label, const std::string& what);

// ---- reading a cNMF run's replicate spectra (consensus and compare share these) ----------

/// What a file name in cnmf_tmp says: `RUN.spectra.k_K.iter_R.df.npz` (iter = R) or
/// `RUN.spectra.k_K.merged.df.npz` (iter = -1).
struct CnmfSpectraName {
  std::string run;
  int k = 0;
  int iter = -1;
};
/// The spectra file a name denotes, or nothing for any other file name.
std::optional<CnmfSpectraName> parse_cnmf_spectra_name(const std::string& filename);

/// Spectra frames of a cNMF run, checked as they are read: numbers (not objects), string
/// gene labels, and the shape cNMF writes. Every message starts with `what` (a prefix such as
/// "A: ", may be empty) and the file name.
struct CnmfSpectra {
  std::string path;
  DataFrame frame;                 ///< as read: data row-major, rows x genes
  std::vector<std::string> genes;  ///< the column labels
};

/// One replicate's spectra `RUN.spectra.k_K.iter_R.df.npz`: exactly k rows.
CnmfSpectra read_cnmf_replicate_spectra(const std::string& path, int k, const std::string& what = "");

/// The merged spectra of k `RUN.spectra.k_K.merged.df.npz` that `cnmf combine` writes: row
/// labels `iter<r>_topic<t>`, every replicate with each of its topics 1..k once.
struct CnmfMergedSpectra : CnmfSpectra {
  int k = 0;
  std::vector<std::string> row_labels;  ///< in frame order
  /// replicate iter -> frame rows of its topics 1..k
  std::map<int, std::vector<std::int64_t>> rows;
};
CnmfMergedSpectra read_cnmf_merged_spectra(const std::string& path, int k, const std::string& what = "");

/// The first place where gene list `b` differs from `a` ("gene 3 is 'X' instead of 'Y'",
/// "5 genes instead of 4"); empty when they are equal.
std::string gene_list_difference(const std::vector<std::string>& a, const std::vector<std::string>& b);

/// Write one replicate's spectra as `cnmf factorize` does: `data` float64 k x g (H, row-major),
/// `index` int64 1..k, `columns` the gene names. Atomic (temporary file + rename), so a file
/// under the final name is always complete. InputError if gene_names.size() != g or the
/// destination cannot be written. `memo`: the writer's deflated entries to reuse (the gene
/// names repeat in every file of a run; zip.hpp, DeflateMemo).
void write_cnmf_spectra(const std::string& path, const double* H_row_major, int k, std::int64_t g,
                        const std::vector<std::string>& gene_names, DeflateMemo* memo = nullptr);

}  // namespace knmf::io
