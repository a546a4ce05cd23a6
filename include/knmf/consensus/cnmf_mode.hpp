#pragma once
/// \file
/// cNMF mode: read a cNMF run directory `<output_dir>/<name>/` and write the files that
/// `cnmf combine`, `cnmf consensus` and `cnmf k_selection_plot` write (cnmf-files.md), with
/// the same names, labels and dtypes, so the Python steps that follow read them unchanged.
///
/// Replicate spectra of one k come from the per-replicate files
/// `cnmf_tmp/NAME.spectra.k_K.iter_R.df.npz` listed by the job table (combined as
/// `cnmf combine` does, and the `.merged` file written), or, when none of those exist, from
/// an existing `cnmf_tmp/NAME.spectra.k_K.merged.df.npz`.

#include <iosfwd>
#include <string>
#include <vector>

#include "knmf/consensus/clustering.hpp"
#include "knmf/consensus/consensus.hpp"
#include "knmf/consensus/cross_validation.hpp"
#include "knmf/consensus/options.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/solver/options.hpp"

namespace knmf::consensus {

/// The replicate spectra of one k, stacked as cNMF's merged file holds them.
struct MergedSpectra {
  int k = 0;
  HostRows values;                      ///< (R*k) x genes
  std::vector<std::string> row_labels;  ///< `iter<r>_topic<t>` (t from 1)
  std::vector<std::string> genes;
  std::string source;                   ///< "combined" (from replicate files) or the merged file
  /// From a results file that holds non_finite replicates (left out: not factorizations):
  /// each row's row in the run's stack of every replicate (iter * k + topic - 1), and how
  /// many replicates were left out. Empty / 0: the rows are the stack's.
  std::vector<size_type> stack_rows;
  int left_out = 0;
};

/// Combine the replicate files of k listed in `jobs` (iter order) like `cnmf combine`,
/// or read the merged file when no replicate file of k exists. InputError (naming the file)
/// when a listed replicate file is missing while others exist, when neither exists, when
/// gene lists differ between replicates, or a file's shape or labels are wrong.
/// With `write_merged`, the combined stack is written to the merged file (atomic).
MergedSpectra load_replicate_spectra(const io::CnmfPaths& paths, int k,
                                     const std::vector<Job>& jobs, bool write_merged);

/// The run's NMF parameters (nmf_idvrun_params.yaml) as the solver options of its refits:
/// every option with a cNMF yaml key (solver_option_fields()), InputError naming `source` when
/// invalid; `unknown_keys` gets one warning per key knmf does not read.
SolverOptions solver_options_from(const io::NmfRunParams& p, const std::string& source,
                                  std::vector<std::string>* unknown_keys = nullptr);

struct CnmfConsensusRequest {
  std::string output_dir = ".";
  std::string name = "cNMF";
  std::vector<int> components;          ///< empty: every k of the job table (as cNMF)
  ConsensusOptions options;
};

/// What was computed and written for one k.
struct CnmfConsensusOutcome {
  int k = 0;
  ConsensusResult result;
  MergedSpectra merged;
  /// The usages (with TPM) and the TPM spectra are float32 numbers (the TPM matrix is
  /// float32, as in cNMF), written as float32.
  bool float32 = false;
  std::vector<std::string> tpm_genes;   ///< genes of the TPM outputs (empty without TPM)
  std::vector<std::string> files;       ///< every file written, in writing order
};

/// `cnmf consensus`: for each k, the consensus files (spectra, usages, and with tpm.h5ad the
/// gene_spectra_tpm, gene_spectra_score and starcat_spectra), each `.df.npz` in cnmf_tmp/ and
/// the tab-separated `.txt` copy in the run folder, plus the local density cache. All inputs
/// are checked before anything is written, and every writer is atomic. Warnings (unknown keys
/// of the run's parameters, the consensus' warnings, each once) are written to `log` as
/// "knmf: warning: ..." lines.
std::vector<CnmfConsensusOutcome> run_cnmf_consensus(const ExecSpace& space,
                                                     const CnmfConsensusRequest& req,
                                                     std::ostream& log);

struct CnmfKSelectionRequest {
  std::string output_dir = ".";
  std::string name = "cNMF";
  std::vector<int> components;          ///< empty: every k of the job table
  ConsensusOptions options;             ///< the threshold is recorded, not applied (as cNMF)
  /// k selection: also the bi-cross-validation of every k (cross_validation.hpp), with the
  /// run's solver options, into the rows' cv_ columns.
  bool cross_validate = false;
  CrossValidationOptions cross_validation;
};

/// `cnmf k_selection_plot`'s table: writes NAME.k_selection_stats.df.npz (columns k,
/// local_density_threshold, silhouette, prediction_error; RangeIndex) and returns its rows.
/// The plot is drawn by write_k_selection_plot (knmf/consensus/plot.hpp). Warnings (unknown
/// keys of the run's parameters) are written to `log` as "knmf: warning: ..." lines.
std::vector<KSelectionRow> run_cnmf_k_selection(const ExecSpace& space,
                                                const CnmfKSelectionRequest& req,
                                                std::ostream& log);

/// The stats table as cNMF writes it (float64 data, int64 index 0..n-1).
io::DataFrame k_selection_frame(const std::vector<KSelectionRow>& rows);

}  // namespace knmf::consensus
