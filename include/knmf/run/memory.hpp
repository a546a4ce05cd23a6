#pragma once
/// \file
/// The memory model of a run and the batch plan derived from it.
///
/// Device bytes of a batch of R replicates with k components on X (n x g):
///   X                      n g s            (dense; a sparse X: see the sparse matrix)
///   W, P                   2 n (R k) s      (usages and X H^T; a fixed-H refit adds W_next)
///   H, Q, H_next           3 (R k) g s
///   per-slot k x k and chunk partials (small), the dense products' host scratch
///   result staging         k max(n, g) s    (once per batch)
///   what no buffer counts  unplanned_bytes(allocation_rules()), once per batch
/// with s = sizeof(compute type). The solver reports its part (knmf::solver_bytes in
/// knmf/solver/nmf.hpp, from the buffers its batch allocates); this model adds X and the
/// slack. Free memory is that of the execution space: GPU free memory, or MemAvailable of the
/// host for OpenMP; `--device-memory-limit` caps it.
///
/// What no buffer counts, by backend (AllocationRules):
///   CUDA: cudaMalloc rounds every View up to 2 MiB (a granule per View: kPlannedViews
///         granules, the solver's at most 22 and X's at most 8); a slack of
///         max(256 MiB, 2% of the device) for the cuBLAS handle and its workspace (created at
///         the first product, after free memory was read), Kokkos' per-instance scratch and
///         the CUDA context's own growth. The pinned host copy of a streamed X is host memory
///         and not in this plan.
///   host: 8 MiB of slack (Kokkos' own allocations, host mirrors), no rounding.
/// SlotBatch::compact never holds more than the batch it repacks, so the plan's R bounds a
/// batch's peak in every mode.

#include <cstdint>
#include <string>

#include "knmf/core/checked.hpp"
#include "knmf/core/format.hpp"  // format_bytes, used with the plan

namespace knmf {

/// Bytes the execution space can still allocate (GPU: cudaMemGetInfo free; host: MemAvailable).
std::int64_t available_device_bytes();
/// Bytes currently in use on the device (GPU: total - free; host: resident set size).
std::int64_t used_device_bytes();

/// How the execution space allocates, beyond the bytes the buffers ask for.
struct AllocationRules {
  std::int64_t granule = 1;                  ///< every allocation rounded up to a multiple
  std::int64_t slack = std::int64_t(8) << 20;  ///< allocations no plan sees
};
/// Views a batch and its X hold at most (the solver's SlotBatch at most 22: tests count them).
constexpr std::int64_t kPlannedViews = 30;
/// A GPU with `device_total` bytes: 2 MiB granules, slack max(256 MiB, 2% of the device).
AllocationRules gpu_allocation_rules(std::int64_t device_total);
/// The rules of this build's execution space (CUDA: gpu_allocation_rules of the device).
AllocationRules allocation_rules();
/// What a plan adds for `r`: the slack and a granule's rounding for each planned View.
std::int64_t unplanned_bytes(const AllocationRules& r);

struct BatchPlan {
  std::int64_t n = 0, g = 0;
  int k = 0;
  int R = 0;                          ///< replicates per batch
  std::int64_t bytes_x = 0;           ///< X on the device
  std::int64_t bytes_per_slot = 0;    ///< factors + products + workspace of one replicate
  std::int64_t bytes_fixed = 0;       ///< per-batch constants
  std::int64_t budget = 0;            ///< memory the plan may use in total
  int element_bytes = 8;
  /// bytes of the whole plan: X + fixed + R * per_slot
  std::int64_t total() const {
    return checked_add({bytes_x, bytes_fixed, checked_mul({R, bytes_per_slot}, "the batch's memory")},
                       "the batch's memory");
  }
  /// One-line human description (bytes per part, R).
  std::string describe() const;
};

/// Per-replicate device bytes for (n, g, k): factorize, or a fixed-H refit (`refit`).
/// (a beta-rule loss adds the beta rule's buffers; `sparse_nnz`: X's stored entries when sparse;
/// `mu_repeats`: SolverOptions::accelerated_mu, a third n x k buffer.)
std::int64_t bytes_per_replicate(std::int64_t n, std::int64_t g, int k, int element_bytes,
                                 bool refit, double beta_loss = 2.0, std::int64_t sparse_nnz = 0,
                                 bool mu_repeats = false);
/// Device bytes of a batch whatever its size (the solver's result staging buffer and the
/// slack): BatchPlan::bytes_fixed. One replicate next to X needs bytes_per_replicate + this.
std::int64_t batch_fixed_bytes(std::int64_t n, std::int64_t g, int k, int element_bytes,
                               bool refit = false, double beta_loss = 2.0,
                               std::int64_t sparse_nnz = 0);

/// Largest R <= max_R that fits `budget` next to X (requested_R > 0 forces that R). Throws
/// InputError before anything is allocated when even R = 1 (or the forced R) does not fit,
/// saying how much is needed.
BatchPlan plan_batch(std::int64_t n, std::int64_t g, int k, int element_bytes,
                     std::int64_t bytes_x, std::int64_t budget, int requested_R, int max_R,
                     bool refit = false, double beta_loss = 2.0, std::int64_t sparse_nnz = 0,
                     bool mu_repeats = false);

}  // namespace knmf
