#pragma once
/// \file
/// The batched NMF solver: R replicates (slots) run together against one X.
///
/// Each replicate follows scikit-learn's semantics on its own (init, update order,
/// convergence); when one finishes, its result is emitted and its slot is refilled with the
/// next job, so batches stay full and no result depends on which replicates shared a batch.
/// Nothing of size R x n x g is ever allocated: device memory is X + 2 (R k) n + 3 (R k) g
/// values plus k x k blocks (3 (R k) n for the fixed-H refit with MU).

#include <functional>
#include <optional>
#include <vector>

#include "knmf/core/job.hpp"
#include "knmf/core/types.hpp"
#include "knmf/matrix/csr_matrix.hpp"
#include "knmf/matrix/dense_matrix.hpp"
#include "knmf/matrix/streamed_matrix.hpp"
#include "knmf/solver/options.hpp"
#include "knmf/solver/result.hpp"

namespace knmf {

/// Called with each finished replicate, in completion order.
using ResultCallback = std::function<void(ReplicateResult&&)>;
/// Supplies the next job (all of one k), or nothing when the queue is empty. With --init random
/// the solver asks for one job more than it has free slots, to draw that job's init while the
/// batch runs; the job goes into the next slot that frees.
using JobSource = std::function<std::optional<Job>()>;
/// Called after every iteration of a batch with the number of running replicates (progress);
/// returns whether to go on. false stops the batch cleanly after this iteration: replicates
/// that finished in it are still reported, those still running are dropped (never reported),
/// and no further job is taken.
using IterationCallback = std::function<bool(int running)>;

/// The solver functions take X as any of knmf's matrix types: DenseMatrix<T>, CsrMatrix<T>
/// (in device memory) or StreamedMatrix<T> (host memory, streamed in row blocks), with
/// T = float or double, the compute type.

/// Factorize the jobs supplied by `next_job` (all with this `k`) in batches of up to
/// `batch_size` slots, calling `on_result` for each finished replicate.
template <class XMat>
void factorize(const ExecSpace& space, const XMat& X, int k, const JobSource& next_job,
               int batch_size, const SolverOptions& opts, const ResultCallback& on_result,
               const IterationCallback& on_iteration = {});

/// Convenience: every job of `jobs` (any mix of k; grouped by k), results ordered as `jobs`.
template <class XMat>
std::vector<ReplicateResult> factorize(const ExecSpace& space, const XMat& X,
                                       const std::vector<Job>& jobs, int batch_size,
                                       const SolverOptions& opts);

/// Result of a fixed-H refit (scikit-learn `update_H=False`).
struct RefitResult {
  std::vector<double> W;  ///< n x k row-major
  int n_iter = 0;
  double error_at_init = 0.0;
  double final_error = 0.0;
  ReplicateStatus status = ReplicateStatus::max_iter;
};

/// Fixed-H refit of the usages for each spectra matrix in `spectra` (each k x g row-major,
/// non-negative), batched `batch_size` at a time. W starts as scikit-learn starts it:
/// filled with sqrt(mean(X)/k) for MU, zeros for CD.
template <class XMat>
std::vector<RefitResult> refit_usages(const ExecSpace& space, const XMat& X,
                                      const std::vector<std::vector<double>>& spectra, int k,
                                      int batch_size, const SolverOptions& opts);

/// The memory of the batched solver for X of n x g, k components and `element_bytes` per
/// value (factorize, or refit_usages with `refit`), as its batch of slots allocates it
/// (src/solver/detail/slot_batch.hpp). For the memory model (knmf/run/memory.hpp).
struct SolverBytes {
  /// Bytes per slot of a batch: the factors and products (W, P, H, Q, H_next; a refit's
  /// W_next), the per-slot Grams and chunk partials, and the dense products' host scratch
  /// (double on the OpenMP backend, where both products are formed transposed); on the
  /// portable kernels with a sparse X of `sparse_nnz` entries, the sparse gather's partial
  /// sums of long rows (at most 2 nnz / 8,192 columns of k values a slot).
  std::int64_t per_slot = 0;
  /// Bytes per batch whatever its size: the result staging buffer (k x max(n, g)) and, for
  /// a beta-rule loss (uses_beta_rule), the beta passes' scratch (W H in row blocks of at most 64 MiB, and for a
  /// sparse X with `sparse_nnz` stored entries the ratio values and per-row sums).
  std::int64_t per_batch = 0;
};
/// (`mu_repeats`: the accelerated MU's factorization, SolverOptions::accelerated_mu: W_next.)
SolverBytes solver_bytes(std::int64_t n, std::int64_t g, int k, int element_bytes,
                         bool refit = false, double beta_loss = 2.0, std::int64_t sparse_nnz = 0,
                         bool mu_repeats = false);

}  // namespace knmf
