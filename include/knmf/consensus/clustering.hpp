#pragma once
/// \file
/// The spectra side of consensus (cNMF's `consensus()` before the usage refit), for one k:
/// L2-normalized replicate spectra, local density, density filter, k-means, silhouette, and
/// the per-cluster median spectra.
///
/// Inputs and outputs are host arrays (the spectra of all replicates of one k are small:
/// rows = R*k, cols = genes); the O(rows^2 * genes) and O(rows * k * genes) work (distance
/// blocks, k-means assignments) runs on `space` through GEMMs. No rows x rows matrix is held:
/// distances are computed in row blocks of ConsensusOptions::distance_block_bytes.
///
/// Distances follow scikit-learn's `euclidean_distances` (the formula cNMF's cached local
/// densities were computed with): d(i,j) = sqrt(max(0, (-2 <x_i,x_j> + |x_i|^2) + |x_j|^2)),
/// d(i,i) = 0.

#include <cstdint>
#include <string>
#include <vector>

#include "knmf/consensus/options.hpp"
#include "knmf/core/types.hpp"

namespace knmf::consensus {

/// Row-major host matrix.
struct HostRows {
  size_type rows = 0;
  size_type cols = 0;
  std::vector<double> values;  ///< rows * cols, row-major

  const double* row(size_type r) const { return values.data() + r * cols; }
  double* row(size_type r) { return values.data() + r * cols; }
};

/// Each row divided by its Euclidean norm (cNMF: `merged.T / sqrt((merged**2).sum(axis=1))`).
/// A row of zeros stays zero (its norm is 0; see drop_zero_rows).
HostRows l2_normalize_rows(const HostRows& x);

/// Indices of the rows that are not all zero (a dead component in a replicate).
std::vector<size_type> nonzero_rows(const HostRows& x);

/// The rows `keep` of x, in that order.
HostRows select_rows(const HostRows& x, const std::vector<size_type>& keep);

/// Mean distance of each row to its `n_neighbors` nearest other rows (cNMF's local density:
/// the sum of the n_neighbors + 1 smallest distances of the row, its own 0 included, divided
/// by n_neighbors). Requires 1 <= n_neighbors < rows (InputError otherwise).
std::vector<double> local_density(const ExecSpace& space, const HostRows& x, int n_neighbors,
                                  size_type block_bytes = size_type(256) << 20);

/// All pairwise distances (rows x rows, row-major on the host), for figures: O(rows^2) host
/// memory, so callers limit rows.
HostRows pairwise_distances(const ExecSpace& space, const HostRows& x,
                            size_type block_bytes = size_type(256) << 20);

struct KMeansResult {
  std::vector<int> labels;    ///< cluster of each row, 0..k-1 (scikit-learn's labels_)
  HostRows centers;           ///< k x cols (cluster_centers_)
  double inertia = 0.0;       ///< sum of squared distances to the assigned centers
  int n_iter = 0;             ///< Lloyd iterations of the chosen restart
  int best_init = 0;          ///< which restart won
};

/// scikit-learn 1.2 `KMeans(n_clusters=k, n_init, random_state=seed, algorithm='lloyd')`.
/// With the same numpy RandomState draws, k-means++ picks the same seeds and Lloyd reaches the
/// same partition as scikit-learn unless two floating-point values tie to within rounding
/// (a k-means++ draw on a cumulative-potential boundary, an equidistant point, two restarts
/// with equal inertia). Needs rows >= k >= 1 (InputError otherwise).
KMeansResult kmeans(const ExecSpace& space, const HostRows& x, int k, const KMeansOptions& opts);

/// scikit-learn `silhouette_score(x, labels, metric='euclidean')`: the mean over rows of
/// (b - a) / max(a, b), 0 for rows alone in their cluster. NaN unless
/// 2 <= number of distinct labels <= rows - 1 (scikit-learn raises there).
double silhouette_score(const ExecSpace& space, const HostRows& x, const std::vector<int>& labels,
                        size_type block_bytes = size_type(256) << 20);

/// Per-cluster median of the rows (pandas `groupby(labels).median()`, clusters in label order
/// 0..k-1), each median row then divided by its sum (cNMF's consensus spectra before
/// reordering). InputError if a cluster is empty or its median row sums to 0.
HostRows cluster_median_spectra(const HostRows& x, const std::vector<int>& labels, int k);

/// Everything cNMF's consensus computes from the replicate spectra of one k.
struct SpectraClustering {
  int k = 0;
  int n_neighbors = 0;
  std::vector<size_type> nonzero_rows; ///< input rows that are not all zero (all-zero rows, a
                                       ///< dead component of a replicate, are dropped first)
  std::vector<double> local_density;   ///< per nonzero_rows entry (empty when not filtering)
  std::vector<size_type> used_rows;    ///< input rows that were clustered (non-zero and, when
                                       ///< filtering, density < threshold)
  std::vector<int> labels;             ///< k-means label of each used row
  HostRows median_spectra;             ///< k x genes, rows sum to 1, in k-means label order
  double silhouette = 0.0;             ///< stability (NaN when undefined)
  double kmeans_inertia = 0.0;
};

/// cNMF's consensus on the spectra: drop all-zero rows, L2-normalize, (if `filter`) local
/// density and the filter `density < threshold`, k-means, per-cluster medians, silhouette.
/// cNMF's k-selection (`skip_density_and_return_after_stats`) runs this with filter = false.
/// `merged` is the R*k x genes stack of raw replicate spectra.
SpectraClustering cluster_spectra(const ExecSpace& space, const HostRows& merged, int k,
                                  const ConsensusOptions& opts, bool filter,
                                  bool compute_silhouette = true);

}  // namespace knmf::consensus
