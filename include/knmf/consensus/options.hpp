#pragma once
/// \file
/// Options of the consensus step as plain structs (filled by the driver's CLI, usable from C++).
/// Defaults are cNMF's (`cnmf consensus`): density threshold 0.5, neighbourhood 0.30 of the
/// replicates, scikit-learn KMeans(n_init=10, random_state=1).

#include <cstdint>

#include "knmf/core/types.hpp"

namespace knmf::consensus {

/// k-means as scikit-learn 1.2's `KMeans(n_clusters=k, n_init, random_state)` runs it:
/// greedy k-means++ seeding (2 + int(log k) local trials), Lloyd iterations, best inertia of
/// `n_init` restarts drawn from one numpy RandomState(seed).
struct KMeansOptions {
  int n_init = 10;            ///< restarts (cNMF: 10)
  std::int64_t seed = 1;      ///< numpy RandomState seed (cNMF: random_state=1); [0, 2^32)
  int max_iter = 300;         ///< Lloyd iterations per restart (scikit-learn's default)
  double tol = 1e-4;          ///< center-shift tolerance, relative to the mean feature variance

  /// InputError naming the option and value when out of range.
  void validate() const;
};

struct ConsensusOptions {
  /// Keep replicate spectra whose local density is strictly below this (cNMF's
  /// `--local-density-threshold`); 0 < t <= 2 (2 keeps all: distances of unit vectors are <= 2).
  double local_density_threshold = 0.5;
  /// n_neighbors = int(local_neighborhood_size * rows / k) (cNMF's `--local-neighborhood-size`).
  double local_neighborhood_size = 0.30;
  KMeansOptions kmeans;
  /// Device bytes for one row block of a distance matrix (rows x rows is never held whole).
  size_type distance_block_bytes = size_type(256) << 20;
  /// Stored entries per row block when streaming X or TPM from their files.
  size_type stream_block_nnz = size_type(1) << 24;
  /// Device bytes for the X H^T products (and usages) of one streamed pass of k-selection:
  /// the k values are refitted in groups that fit, one pass over X per group.
  size_type product_bytes = size_type(4) << 30;

  /// InputError naming the option (as cNMF's CLI spells it) and the value when out of range.
  void validate() const;
};

/// cNMF's neighbour count for `rows` stacked spectra of `k` components:
/// Python's `int(local_neighborhood_size * rows / k)`, evaluated in the same order.
int neighbor_count(double local_neighborhood_size, size_type rows, int k);

}  // namespace knmf::consensus
