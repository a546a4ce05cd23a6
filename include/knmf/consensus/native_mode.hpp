#pragma once
/// \file
/// Native mode: the replicate spectra come from a knmf results file (`knmf factorize`'s
/// HDF5 output, knmf/results/reader.hpp), X from the .h5ad it was computed on, the refits
/// use the run's recorded solver options. The outputs go into the results file itself
/// (/consensus/k_<k>/dt_<T> and /k_selection, written atomically by
/// results::update_results_file), and, when an output folder is given, also as cNMF's files
/// (same names, labels and dtypes as cnmf_mode.hpp writes them) under `<output_dir>/<name>/`,
/// so cNMF's Python tools read them too.

#include <iosfwd>
#include <string>
#include <vector>

#include "knmf/consensus/cnmf_mode.hpp"
#include "knmf/consensus/consensus.hpp"
#include "knmf/consensus/cross_validation.hpp"
#include "knmf/consensus/options.hpp"
#include "knmf/results/consensus_records.hpp"

namespace knmf::consensus {

struct NativeRequest {
  std::string results;                  ///< knmf results file
  std::string counts;                   ///< X (.h5ad); empty: the input recorded in `results`
  std::string tpm;                      ///< optional TPM .h5ad (all genes, the same cells)
  std::string tpm_stats;                ///< optional tpm_stats.df.npz (`__std`); empty: from TPM
  /// cNMF's files go to `<output_dir>/<name>/` when output_dir is not empty; none otherwise.
  std::string output_dir;
  std::string name = "knmf";
  /// Write the outputs into the results file (/consensus, /k_selection). With false the
  /// results file is only read (then output_dir must be given).
  bool update_results = true;
  std::vector<int> components;          ///< empty: every k of the results file
  ConsensusOptions options;
  /// k selection: also the bi-cross-validation of every k (cross_validation.hpp), with the
  /// run's solver options, into the rows' cv_ columns.
  bool cross_validate = false;
  CrossValidationOptions cross_validation;
};

/// The replicate spectra of k from a results file (every replicate must be committed:
/// InputError naming the file and the missing replicates otherwise), labelled as cNMF's
/// merged file labels them. Replicates of status non_finite are not factorizations: they are
/// left out (as `cnmf combine --skip-missing-files` leaves out a missing replicate), and
/// InputError when every replicate of k is.
MergedSpectra load_results_spectra(const std::string& results, int k);

/// Consensus in native mode: every k's consensus is stored in the results file (one atomic
/// update for all of them, replacing earlier consensus groups of the same k and threshold),
/// and the cNMF consensus files (the merged spectra included, as `cnmf combine` would) are
/// written under output_dir/name when output_dir is given. Every input, and that the results
/// file can be updated (not locked by a running factorize, folder writable), is checked
/// before anything is computed. The consensus' warnings are written to `log` (each once) as
/// "knmf: warning: ..." lines.
std::vector<CnmfConsensusOutcome> run_native_consensus(const ExecSpace& space,
                                                       const NativeRequest& req,
                                                       std::ostream& log);

/// k-selection in native mode: stores the stats table in the results file (/k_selection,
/// replacing an earlier one), and writes NAME.k_selection_stats.df.npz under
/// output_dir/name when output_dir is given.
std::vector<KSelectionRow> run_native_k_selection(const ExecSpace& space, const NativeRequest& req);

/// What the results file stores for one consensus outcome (settings: the options, the
/// refit solver and the input paths it was computed with).
results::ConsensusRecord consensus_record(const CnmfConsensusOutcome& outcome,
                                          const results::ConsensusSettings& settings);

}  // namespace knmf::consensus
