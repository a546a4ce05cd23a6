#pragma once
/// \file
/// The batch of replicate slots (internal): the stacked factors of R slots and their
/// workspaces on the device (layout: kernels.hpp), their allocation, the host <-> device
/// transfers of one slot's rows, the compaction to the running slots, and the bytes all of
/// this takes (slot_batch_bytes, which the memory model reads instead of re-deriving it).
/// A SlotBatch knows neither X nor an update rule: BatchRunner (batch_runner.hpp) owns the
/// slots' state and drives the rules (rule_mu.hpp, rule_cd.hpp) over these buffers.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "knmf/core/checked.hpp"
#include "knmf/core/error.hpp"
#include "knmf/core/host_access.hpp"
#include "knmf/core/types.hpp"
#include "beta_passes.hpp"
#include "kernels.hpp"
#include "products.hpp"

namespace knmf::detail {

enum class RunMode {
  factorize,  ///< update W and H from a random init
  refit,      ///< fixed H (job.index selects the spectra); only W updates
};

/// The bytes a SlotBatch allocates on the device, by what they grow with.
struct SlotBatchBytes {
  std::int64_t factors = 0;  ///< per slot: W, P (and W_next in a refit), H, Q, H_next
  std::int64_t grams = 0;    ///< per slot: W^T W, H H^T and the chunk partials (doubles)
  std::int64_t scratch = 0;  ///< per slot: the dense products' host scratch (products.hpp)
  std::int64_t flags = 0;    ///< per slot: the int masks (active, subset), ones and list
  std::int64_t stage = 0;    ///< per batch: the result staging buffer (k x max(n, g))
  std::int64_t beta = 0;     ///< per batch: the beta passes' scratch (beta != 2; BetaWork)
  /// What grows with the batch size, as the memory model counts it (the flags are left to
  /// its slack: 16 bytes a slot).
  std::int64_t per_slot() const { return factors + grams + scratch; }
};

/// The bytes of a SlotBatch for X of n x g, k components and `element_bytes` per value,
/// exactly as SlotBatch::allocate and SlotBatch::download allocate them (a test sums the
/// spans of a constructed batch against it).
/// With a beta-rule loss (uses_beta_rule) the batch also holds the beta scratch of `shape` (per batch) and the
/// per-slot sums of H and W (2 k values a slot, counted with the factors).
inline SlotBatchBytes slot_batch_bytes(std::int64_t n, std::int64_t g, int k, int element_bytes,
                                       RunMode mode, double beta_loss = 2.0,
                                       const BetaShape& shape = {}, bool w_next = false) {
  const std::int64_t s = element_bytes, kk = k;
  const std::int64_t chunks = std::int64_t(num_chunks(size_type(std::max(n, g))));
  const std::int64_t red_chunks =
      std::int64_t(num_chunks(size_type(n))) + std::int64_t(num_chunks(size_type(g)));
  // Every product checked: k, n and g come from the user (k = 20000 once wrapped an int).
  constexpr const char* what = "the device memory of one replicate";
  SlotBatchBytes b;
  // W, P (+ W_next: a refit, or the accelerated MU's factorization, SlotBatch::keep_w_next)
  b.factors = checked_add({checked_mul({mode == RunMode::refit || w_next ? 3 : 2, n, kk, s}, what),
                           checked_mul({3, kk, g, s}, what)},                               // H, Q, H_next
                          what);
  b.grams = checked_add({checked_mul({2, kk, kk, 8}, what),                          // W^T W, H H^T
                         checked_mul({chunks, kk, kk, 8}, what),            // gram_partial
                         checked_mul({red_chunks, 8}, what)},  // red_partial (W's and H's)
                        what);
  b.scratch = checked_mul({product_scratch_values(n, g, element_bytes), kk, s}, what);
  b.flags = 4 * std::int64_t(sizeof(int));
  b.stage = checked_mul({kk, std::max(n, g), s}, what);
  if (uses_beta_rule(beta_loss)) {
    b.factors = checked_add({b.factors, checked_mul({2, kk, s}, what)}, what);  // hsum, wsum
    b.beta = beta_scratch_bytes(shape, g, k, element_bytes);
  }
  checked_add({b.factors, b.grams, b.scratch}, what);  // per_slot() below cannot wrap
  return b;
}

/// The device buffers of R slots with k components on X of n x g (LayoutLeft, R k rows each):
///   W, P (X H^T; scratch in a factorization), W_next (a refit: MU's next W, the init pack),
///   H, Q (W^T X), H_next, the per-slot Grams GW = W^T W and GH = H H^T, the chunk partials of
///   the per-slot reductions, and the slot flags; host mirrors made once for the checks.
/// The update rules use the buffers directly (and swap W/P, W/W_next, H/H_next).
template <class T>
struct SlotBatch {
  SlotBatch(const ExecSpace& space_, size_type n_, size_type g_, int k_, RunMode mode_)
      : space(space_), n(n_), g(g_), k(k_), mode(mode_) {}

  ExecSpace space;
  size_type n = 0, g = 0;
  int k = 0;
  RunMode mode;
  int R = 0;  ///< slots
  /// W_next in a factorization too (the accelerated MU keeps P over its repeated updates);
  /// set before allocate. slot_batch_bytes(..., w_next) counts it.
  bool keep_w_next = false;

  Matrix<T> W, P, W_next, H, Q, H_next;
  SlotGram GW, GH;
  /// beta != 2 (allocate_beta): per-slot sums of H's rows and of W's rows ((R k) x 1), and the
  /// passes' scratch (per batch)
  Matrix<T> hsum, wsum;
  BetaWork<T> beta;
  bool has_beta = false;
  /// The sparse gather's long-row partials (products.hpp): grown by the first product that
  /// needs them, kept through compact (R2 k <= R k rows fit), empty for dense X or without
  /// long rows. Counted per slot by solver_bytes (knmf/solver/nmf.hpp), not by slot_batch_bytes.
  GatherScratch<T> gather;

  /// The beta rule's buffers (after allocate): the sums of R slots and the scratch of `shape`.
  void allocate_beta(const BetaShape& shape) {
    has_beta = true;
    hsum = alloc("knmf::beta::hsum", size_type(R) * k, 1);
    wsum = alloc("knmf::beta::wsum", size_type(R) * k, 1);
    beta.allocate(space, shape, g, k);
  }
  Kokkos::View<double*, MemSpace> gram_partial, red_partial;

  /// Allocate the buffers of R slots (contents undefined).
  void allocate(int R_) {
    R = R_;
    const size_type rk = size_type(R_) * k;
    W = alloc("knmf::solver::W", rk, n);
    P = alloc("knmf::solver::P", rk, n);
    if (mode == RunMode::refit || keep_w_next) W_next = alloc("knmf::solver::W_next", rk, n);
    H = alloc("knmf::solver::H", rk, g);
    Q = alloc("knmf::solver::Q", rk, g);
    H_next = alloc("knmf::solver::H_next", rk, g);
    allocate_small(R_);
  }

  /// Repack the slots `keep` (in order) into a batch of keep.size() slots: W and H (and a
  /// refit's P = X H^T, computed once per fill) keep their values, the scratch buffers are
  /// reallocated, the Grams zeroed.
  /// Peak memory: the scratch buffers are released first, and each kept buffer is released as
  /// soon as its packed copy is made (one old and one new buffer live at a time), so the
  /// batch never holds more than before the call (R slots: the plan's R (2nk+3gk) in a
  /// factorization, R (3nk+3gk) in a refit; packing all three before releasing any needed
  /// (R + R2)(2nk+gk) in a refit, more than planned when n k dominates).
  void compact(const std::vector<int>& keep) {
    const int R2 = int(keep.size());
    auto list = upload_list(keep);
    const size_type rk2 = size_type(R2) * k;
    const bool keep_p = mode == RunMode::refit;
    if (!keep_p) P = Matrix<T>();
    Q = Matrix<T>();
    H_next = Matrix<T>();
    W_next = Matrix<T>();
    // the fence before each release: the old buffer may still be read by the pack kernel
    const auto repack = [&](Matrix<T>& M, const char* label, size_type cols) {
      auto M2 = alloc(label, rk2, cols);
      pack_slots(space, M, list, k, M2);
      space.fence();
      M = M2;
    };
    repack(W, "knmf::solver::W", n);
    repack(H, "knmf::solver::H", g);
    if (keep_p) repack(P, "knmf::solver::P", n);
    if (has_beta) {  // a refit keeps H's sums (scikit-learn's H_sum) across iterations
      repack(hsum, "knmf::beta::hsum", 1);
      wsum = Matrix<T>();
      wsum = alloc("knmf::beta::wsum", rk2, 1);
    }
    if (!keep_p) P = alloc("knmf::solver::P", rk2, n);
    if (mode == RunMode::refit || keep_w_next) W_next = alloc("knmf::solver::W_next", rk2, n);
    Q = alloc("knmf::solver::Q", rk2, g);
    H_next = alloc("knmf::solver::H_next", rk2, g);
    list = {};
    allocate_small(R2);
  }

  // --------------------------------------------------------------- slot flags
  /// The device mask of the slots r with pred(r) (one small copy to the device).
  template <class Pred>
  const SlotMask& upload_mask(Pred pred) {
    for (int r = 0; r < R; ++r) mask_h_(r) = pred(r) ? 1 : 0;
    Kokkos::deep_copy(space, mask_, mask_h_);
    return mask_;
  }
  /// A second mask buffer, so that a subset of the active slots can be marked while the
  /// active mask (upload_mask) stays valid: the accelerated sweeps' repeating slots.
  template <class Pred>
  const SlotMask& upload_subset_mask(Pred pred) {
    for (int r = 0; r < R; ++r) subset_h_(r) = pred(r) ? 1 : 0;
    Kokkos::deep_copy(space, subset_, subset_h_);
    return subset_;
  }
  /// Every slot marked.
  const SlotMask& ones() const { return ones_; }

  /// The slot indices `slots` on the device (a view of slots.size() entries).
  Kokkos::View<int*, MemSpace> upload_list(const std::vector<int>& slots) {
    for (size_t p = 0; p < slots.size(); ++p) list_h_(p) = slots[p];
    Kokkos::deep_copy(space, list_, list_h_);
    return Kokkos::subview(list_, std::make_pair(0, int(slots.size())));
  }

  // ---------------------------------------------------------------- reductions
  /// Per-slot sums (of R_used slots) of the chunk partials of a reduction over m columns.
  std::vector<double> sum_partials(size_type m, int R_used) {
    return sum_slot_partials(space, red_partial, num_chunks(m), R_used, red_partial_h_);
  }
  /// Where a reduction over W's n columns writes partials that are read later, together with
  /// a reduction over H's g columns in red_partial (sum_partials_wh): the region of red_partial
  /// after the g columns' chunks.
  Kokkos::View<double*, MemSpace> red_partial_w() const {
    const size_type off = num_chunks(g) * R;
    return Kokkos::subview(red_partial, std::make_pair(off, off + num_chunks(n) * R));
  }
  /// Per-slot sums of both, from one copy: {W's (red_partial_w), H's}.
  std::pair<std::vector<double>, std::vector<double>> sum_partials_wh() {
    const size_type ch = num_chunks(g), cw = num_chunks(n);
    copy_partials(space, red_partial, red_partial_h_, (ch + cw) * R);
    return {sum_copied_partials(red_partial_h_, ch * R, cw, R),
            sum_copied_partials(red_partial_h_, 0, ch, R)};
  }
  /// The host mirror of red_partial (made once per allocation).
  const Kokkos::View<double*, MemSpace>::HostMirror& red_partial_host() const {
    return red_partial_h_;
  }
  /// Copy both Grams to their host mirrors.
  void download_grams() {
    Kokkos::deep_copy(gw_h_, GW);
    Kokkos::deep_copy(gh_h_, GH);
  }
  const SlotGram::HostMirror& gw_host() const { return gw_h_; }
  const SlotGram::HostMirror& gh_host() const { return gh_h_; }

  // ----------------------------------------------------------------- transfers
  /// A (rows x cols) LayoutLeft matrix over the memory of `buffer` (which must be larger).
  static Matrix<T> over(const Matrix<T>& buffer, size_type rows, size_type cols) {
    KNMF_ASSERT(rows * cols <= size_type(buffer.span()), "scratch view too large");
    return Matrix<T>(buffer.data(), rows, cols);
  }

  /// Copy k x m row-major host data (C order, e.g. H) into slot r's rows of dst, staging
  /// through the free buffer `stage`.
  void upload_rows_right(const T* host, int r, const Matrix<T>& dst, const Matrix<T>& stage,
                         size_type m) {
    Kokkos::View<const T**, Kokkos::LayoutRight, Kokkos::HostSpace,
                 Kokkos::MemoryTraits<Kokkos::Unmanaged>>
        src(host, k, m);
    Kokkos::View<T**, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> st(
        stage.data(), k, m);
    Kokkos::deep_copy(space, st, src);
    scatter_slot<T>(space, st, r, k, dst);
    space.fence();  // the host buffer dies after this call
  }

  /// Copy m x k row-major host data (C order, e.g. W) into slot r's rows (transposed).
  void upload_rows_left(const T* host, int r, const Matrix<T>& dst, const Matrix<T>& stage,
                        size_type m) {
    Kokkos::View<const T**, Kokkos::LayoutLeft, Kokkos::HostSpace,
                 Kokkos::MemoryTraits<Kokkos::Unmanaged>>
        src(host, k, m);
    auto st = over(stage, k, m);
    Kokkos::deep_copy(space, st, src);
    scatter_slot<T>(space, st, r, k, dst);
    space.fence();
  }

  /// Slot r's k rows of F (k x m) as host doubles: row-major k x m (`k_major`, for H) or
  /// m x k row-major (for W, as scikit-learn returns it). The staging buffer is allocated at
  /// the first call.
  std::vector<double> download(const Matrix<T>& F, int r, size_type m, bool k_major) {
    if (stage_.extent(0) != size_t(k) || stage_.extent(1) < size_t(m))
      stage_ = Matrix<T>(Kokkos::view_alloc(space, Kokkos::WithoutInitializing,
                                            "knmf::solver::result_stage"),
                         k, std::max(n, g));
    auto st = Matrix<T>(stage_.data(), k, m);
    pack_slots(space, F, upload_list({r}), k, st);
    auto h = host_mirror(st);
    Kokkos::deep_copy(space, h, st);
    space.fence();
    std::vector<double> out(size_t(k * m));
    for (size_type j = 0; j < m; ++j)
      for (int t = 0; t < k; ++t) {
        const size_t idx = k_major ? size_t(t * m + j) : size_t(j * k + t);
        out[idx] = double(h(t, j));
      }
    return out;
  }

  /// Bytes of every device View the batch holds now (for the test against slot_batch_bytes).
  std::int64_t allocated_bytes() const {
    std::int64_t b = 0;
    for (const auto* v : {&W, &P, &W_next, &H, &Q, &H_next, &stage_, &hsum, &wsum, &gather.partials})
      b += std::int64_t(v->span()) * std::int64_t(sizeof(T));
    if (has_beta) b += beta.allocated_bytes();
    b += std::int64_t(GW.span() + GH.span() + gram_partial.span() + red_partial.span()) * 8;
    b += std::int64_t(mask_.span() + subset_.span() + ones_.span() + list_.span()) *
         std::int64_t(sizeof(int));
    return b;
  }

private:
  Matrix<T> alloc(const char* label, size_type rows, size_type cols) const {
    return Matrix<T>(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string(label)),
                     rows, cols);
  }

  void allocate_small(int R_) {
    R = R_;
    // the old ones (and their host mirrors, which alias them on a host backend) released
    // first: a compaction to as many slots must not hold two sets at once
    GW = GH = SlotGram();
    gram_partial = red_partial = Kokkos::View<double*, MemSpace>();
    mask_ = subset_ = ones_ = SlotMask();
    list_ = Kokkos::View<int*, MemSpace>();
    red_partial_h_ = {};
    gw_h_ = gh_h_ = {};
    mask_h_ = subset_h_ = {};
    list_h_ = {};
    GW = SlotGram(Kokkos::view_alloc(space, "knmf::solver::WtW"), R_, k, k);
    GH = SlotGram(Kokkos::view_alloc(space, "knmf::solver::HHt"), R_, k, k);
    const size_type nch = std::max(num_chunks(n), num_chunks(g));
    gram_partial = Kokkos::View<double*, MemSpace>(
        Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::solver::gram_partial"),
        nch * R_ * k * k);
    red_partial = Kokkos::View<double*, MemSpace>(
        Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::solver::red_partial"),
        (num_chunks(n) + num_chunks(g)) * R_);  // two regions: red_partial_w
    red_partial_h_ = host_mirror(red_partial);
    gw_h_ = host_mirror(GW);
    gh_h_ = host_mirror(GH);
    mask_ = SlotMask(Kokkos::view_alloc(space, "knmf::solver::mask"), R_);
    mask_h_ = host_mirror(mask_);
    subset_ = SlotMask(Kokkos::view_alloc(space, "knmf::solver::subset_mask"), R_);
    subset_h_ = host_mirror(subset_);
    ones_ = SlotMask(Kokkos::view_alloc(space, "knmf::solver::ones"), R_);
    Kokkos::deep_copy(space, ones_, 1);
    list_ = Kokkos::View<int*, MemSpace>(Kokkos::view_alloc(space, "knmf::solver::list"), R_);
    list_h_ = host_mirror(list_);
  }

  Matrix<T> stage_;
  // host mirrors, made once: the convergence checks copy into them every few iterations
  Kokkos::View<double*, MemSpace>::HostMirror red_partial_h_;
  SlotGram::HostMirror gw_h_, gh_h_;
  SlotMask mask_, subset_, ones_;
  typename SlotMask::HostMirror mask_h_, subset_h_;
  Kokkos::View<int*, MemSpace> list_;
  typename Kokkos::View<int*, MemSpace>::HostMirror list_h_;
};

}  // namespace knmf::detail
