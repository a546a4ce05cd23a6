#pragma once
/// \file
/// Native mode: the replicate spectra come from a knmf results file (`knmf factorize`'s
/// HDF5 output, knmf/io/results_file.hpp), X from the .h5ad it was computed on, the refits
/// use the run's recorded solver options. The outputs are cNMF's files (same names, labels
/// and dtypes as cnmf_mode.hpp writes them) under `<output_dir>/<name>/`, so cNMF's Python
/// tools read them too.

#include <string>
#include <vector>

#include "knmf/consensus/cnmf_mode.hpp"
#include "knmf/consensus/consensus.hpp"
#include "knmf/consensus/options.hpp"

namespace knmf::consensus {

struct NativeRequest {
  std::string results;                  ///< knmf results file
  std::string counts;                   ///< X (.h5ad); empty: the input recorded in `results`
  std::string tpm;                      ///< optional TPM .h5ad (all genes, the same cells)
  std::string tpm_stats;                ///< optional tpm_stats.df.npz (`__std`); empty: from TPM
  std::string output_dir = ".";
  std::string name = "knmf";
  std::vector<int> components;          ///< empty: every k of the results file
  ConsensusOptions options;
};

/// The replicate spectra of k from a results file (every replicate must be committed:
/// InputError naming the file and the missing replicates otherwise), labelled as cNMF's
/// merged file labels them.
MergedSpectra load_results_spectra(const std::string& results, int k);

/// Consensus in native mode; writes the cNMF consensus files under output_dir/name (the
/// merged spectra included, as `cnmf combine` would).
std::vector<CnmfConsensusOutcome> run_native_consensus(const ExecSpace& space,
                                                       const NativeRequest& req);

/// k-selection in native mode: writes NAME.k_selection_stats.df.npz under output_dir/name.
std::vector<KSelectionRow> run_native_k_selection(const ExecSpace& space, const NativeRequest& req);

}  // namespace knmf::consensus
