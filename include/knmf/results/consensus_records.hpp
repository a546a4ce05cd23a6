#pragma once
/// \file
/// The consensus outputs of knmf's results file (format_version 2 on; run_info.hpp: the
/// schema): what `knmf consensus --results` and `knmf k-selection --results` record, and
/// update_results_file(), which adds them.
///
/// update_results_file() builds a new file under a temporary name (an HDF5 copy of every
/// object, plus the new groups), syncs it, and renames it over the original, which it only
/// reads: a process killed at any moment leaves either the old file, unchanged, or the new
/// one, both whole. ResultsReader (reader.hpp) reads them back.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "knmf/results/run_info.hpp"
#include "knmf/solver/options.hpp"

namespace knmf::results {

/// How a consensus (or a k-selection) was computed: recorded as attributes of its group.
struct ConsensusSettings {
  double local_density_threshold = 0.5;  ///< keep replicate spectra with density below this
  double local_neighborhood_size = 0.30; ///< neighbours as a fraction of the replicates
  int kmeans_n_init = 10;                ///< k-means restarts
  std::int64_t kmeans_seed = 1;          ///< k-means random_state
  int kmeans_max_iter = 300;
  double kmeans_tol = 1e-4;
  /// The usage refit's solver: solver, tol, max_iter, alpha_W, alpha_H, l1_ratio are recorded.
  SolverOptions refit;
  std::string counts;                    ///< X (.h5ad) the usages were refitted on
  std::string tpm;                       ///< TPM (.h5ad) of the TPM outputs; "" when none
  // provenance: filled in by update_results_file() when empty
  std::string created;                   ///< ISO 8601 UTC
  std::string knmf_version, kokkos_version, backend, device;
};

/// The consensus of one k at one density threshold: /consensus/k_<k>/dt_<T>.
/// Matrices are row-major; g = the run's genes (/genes), n = its cells.
struct ConsensusRecord {
  int k = 0;
  ConsensusSettings settings;
  int n_neighbors = 0;            ///< neighbours of the local density
  double silhouette = 0.0;        ///< stability (NaN when undefined)
  double prediction_error = 0.0;  ///< ||X - W H||_F^2 of the usage refit on X
  int refit_n_iter = 0;           ///< iterations of that refit
  ReplicateState refit_status = ReplicateState::pending;  ///< its outcome
  /// The non-zero replicate spectra, as rows of the run's stacked spectra of k
  /// (row = iter * k + topic - 1, i.e. /k_<k>/spectra reshaped to (n_iter * k, g)).
  std::vector<std::int64_t> replicate_rows;
  std::vector<double> local_density;  ///< of each replicate_rows entry
  /// Program (1..k, as numbered in `spectra`) each replicate_rows entry was clustered
  /// into; 0 when the density filter dropped it.
  std::vector<std::int32_t> cluster;
  std::vector<double> spectra;        ///< k x g consensus spectra (rows sum to 1); float64
  std::vector<double> usages;         ///< n x k usages (cNMF's usages file)
  /// usages and spectra_tpm are float32 numbers, stored as float32 (as cNMF stores them
  /// when its TPM matrix is float32).
  bool float32 = false;
  bool has_tpm = false;               ///< the TPM outputs below are present
  std::vector<std::string> tpm_genes; ///< gt genes of the TPM matrix
  std::vector<double> spectra_tpm;    ///< k x gt (cNMF's gene_spectra_tpm)
  std::vector<double> spectra_score;  ///< k x gt (gene_spectra_score); float64
  std::vector<double> starcat;        ///< k x g (starcat_spectra); float64
};

/// cNMF's k-selection statistics: /k_selection (one row per k).
/// The fold grid of a bi-cross-validation (knmf/consensus/cross_validation.hpp), as the
/// k-selection record keeps it (attributes cv_cell_folds, cv_gene_folds, cv_replicates,
/// cv_seed of /k_selection).
struct CrossValidationSettings {
  int cell_folds = 0, gene_folds = 0, replicates = 0;
  std::int64_t seed = 0;
};

struct KSelectionTable {
  ConsensusSettings settings;  ///< the threshold is recorded, not applied (as cNMF)
  std::vector<int> k;
  std::vector<double> local_density_threshold, silhouette, prediction_error;
  /// The bi-cross-validation's mean relative prediction error and its standard deviation per
  /// k (datasets cv_prediction_error, cv_prediction_error_sd), and its grid: present together
  /// when `knmf k-selection --cross-validate` made the table, absent otherwise.
  std::vector<double> cv_prediction_error, cv_prediction_error_sd;
  std::optional<CrossValidationSettings> cross_validation;
};

/// Which consensus groups a file holds.
struct ConsensusKey {
  int k = 0;
  double local_density_threshold = 0.0;
  std::string group;  ///< "/consensus/k_7/dt_0_5"
};

/// The path of the consensus group of k at a density threshold: "/consensus/k_7/dt_0_5"
/// (the threshold as cNMF writes it in file names, io::density_threshold_string).
std::string consensus_group(int k, double local_density_threshold);

/// What update_results_file() adds; each entry replaces the group of the same name.
struct ResultsAdditions {
  std::vector<ConsensusRecord> consensus;  ///< each replaces /consensus/k_<k>/dt_<T>
  /// obs names of X (n of them) for /consensus/cells; empty: kept as they are (required
  /// when the file has none yet and `consensus` is not empty).
  std::vector<std::string> cells;
  std::optional<KSelectionTable> k_selection;  ///< replaces /k_selection
};

/// Steps of update_results_file(), reported to ResultsUpdateOptions::on_step (kill tests).
enum class UpdateStep {
  copied,   ///< the new file is whole under its temporary name and synced, not renamed yet
  renamed,  ///< it replaced the original (and the folder is synced)
};

struct ResultsUpdateOptions {
  /// Called at each UpdateStep; may throw to abandon the update (before `renamed`: the
  /// original stays as it was).
  std::function<void(UpdateStep)> on_step;
};

/// Add consensus outputs (and/or the k-selection table) to the results file `path`,
/// replacing groups of the same k and threshold. The file is rebuilt under a temporary name
/// in its folder (every object copied, the additions written, format_version raised to 2
/// where it was 1),
/// synced and renamed over `path`. The original is only read, under an exclusive flock()
/// (the lock HDF5 takes for writing): a `knmf factorize` resumed meanwhile is refused, and
/// while one writes the file the update is refused. Killed at any moment, `path` is the old
/// file (unchanged, byte for byte) or the new one, never a mix (a stray temporary
/// `.NAME.knmf-tmp-*` may be left, and the next writer removes it). Needs free space for a second copy of the file. Open
/// ResultsReaders (any process) keep reading the file they opened.
/// InputError (naming the file and the value) when the file is not a results file, is
/// locked, its folder is not writable, or an addition does not fit the run (k not a k of the
/// run, wrong shapes, a threshold outside (0, 2], the same group twice).
void update_results_file(const std::filesystem::path& path, const ResultsAdditions& additions,
                         const ResultsUpdateOptions& opts = {});

/// Check, before long work, that update_results_file(path, ...) can run now: `path` is a
/// knmf results file of a version this knmf reads, no process holds it open for writing
/// (HDF5 file lock), and its folder accepts new files. InputError naming the file and the
/// reason otherwise. Changes nothing.
void check_results_updatable(const std::filesystem::path& path);

}  // namespace knmf::results
