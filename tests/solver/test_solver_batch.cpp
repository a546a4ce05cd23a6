// The batch of slots (src/solver/detail/slot_batch.hpp): the bytes it reports (which the memory
// model plans with) are the bytes its Views take, in every mode and after a compaction; and
// the update rules' per-slot convergence decisions (src/solver/detail/rule_*.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "knmf/core/types.hpp"
#include "knmf/run/memory.hpp"
#include "knmf/solver/nmf.hpp"
#include "live_device_bytes.hpp"
#include "solver/engine.hpp"

namespace {
using namespace knmf;
using detail::RunMode;
using detail::SlotBatch;
using test::LiveDeviceBytes;

template <class T>
void check_bytes(size_type n, size_type g, int k, int R, RunMode mode) {
  SCOPED_TRACE(testing::Message() << n << " x " << g << ", k = " << k << ", R = " << R
                                  << ", " << sizeof(T) << "-byte values, "
                                  << (mode == RunMode::refit ? "refit" : "factorize"));
  const auto want = detail::slot_batch_bytes(n, g, k, int(sizeof(T)), mode);
  LiveDeviceBytes live;
  SlotBatch<T> b(ExecSpace(), n, g, k, mode);
  b.allocate(R);
  const std::int64_t views_per_slot = want.factors + want.grams + want.flags;
  EXPECT_EQ(b.allocated_bytes(), R * views_per_slot);
  b.download(b.H, 0, g, true);  // allocates the result stage
  EXPECT_EQ(b.allocated_bytes(), R * views_per_slot + want.stage);
  live.expect_holds(b.allocated_bytes());  // the allocation events see what the batch says
  if (R > 1) {
    // a compaction never holds more than the batch it repacks: the plan's R bounds the peak
    live.restart_peak();
    const std::int64_t before = live.bytes;
    b.compact({0, R - 1});
    EXPECT_EQ(b.allocated_bytes(), 2 * views_per_slot + want.stage);
    EXPECT_LE(live.peak, before) << "compaction peak " << live.peak << " bytes";
  }
  EXPECT_LE(live.peak_views, kPlannedViews);
  // what the memory model reads
  const auto s = solver_bytes(n, g, k, int(sizeof(T)), mode == RunMode::refit);
  EXPECT_EQ(s.per_slot, want.factors + want.grams + want.scratch);
  EXPECT_EQ(s.per_batch, want.stage);
  EXPECT_EQ(bytes_per_replicate(n, g, k, int(sizeof(T)), mode == RunMode::refit), s.per_slot);
  EXPECT_EQ(batch_fixed_bytes(n, g, k, int(sizeof(T)), mode == RunMode::refit),
            s.per_batch + unplanned_bytes(allocation_rules()));
}

TEST(SlotBatch, ReportedBytesAreAllocatedBytes) {
  for (RunMode mode : {RunMode::factorize, RunMode::refit}) {
    check_bytes<double>(3000, 700, 5, 4, mode);  // n > g, three column chunks
    check_bytes<float>(300, 2100, 3, 3, mode);   // g > n
    check_bytes<double>(1, 1, 1, 1, mode);
    check_bytes<float>(1025, 1024, 9, 5, mode);
  }
}

/// The beta rule's buffers (beta_loss != 2): the per-slot sums with the factors, the passes'
/// scratch per batch, for a dense X and a sparse one of `nnz` entries.
template <class T>
void check_beta_bytes(size_type n, size_type g, int k, int R, RunMode mode, std::int64_t nnz) {
  SCOPED_TRACE(testing::Message() << "beta: " << n << " x " << g << ", k = " << k << ", R = " << R
                                  << ", nnz " << nnz << ", " << sizeof(T) << "-byte values");
  detail::BetaShape shape{detail::beta_block_rows(n, g, int(sizeof(T))), 0, 0};
  if (nnz > 0) shape = {shape.block_rows, std::max(n, g), nnz};
  const auto plain = detail::slot_batch_bytes(n, g, k, int(sizeof(T)), mode);
  const auto want = detail::slot_batch_bytes(n, g, k, int(sizeof(T)), mode, 1.0, shape);
  EXPECT_EQ(want.factors, plain.factors + 2 * k * std::int64_t(sizeof(T)));
  EXPECT_GT(want.beta, 0);
  LiveDeviceBytes live;
  SlotBatch<T> b(ExecSpace(), n, g, k, mode);
  b.allocate(R);
  b.allocate_beta(shape);
  const std::int64_t views_per_slot = want.factors + want.grams + want.flags;
  EXPECT_EQ(b.allocated_bytes(), R * views_per_slot + want.beta);
  b.download(b.H, 0, g, true);  // the result stage: every View a batch holds
  live.expect_holds(b.allocated_bytes());
  if (R > 1) {
    live.restart_peak();
    const std::int64_t before = live.bytes;
    b.compact({0, R - 1});
    EXPECT_EQ(b.allocated_bytes(), 2 * views_per_slot + want.beta + want.stage);
    EXPECT_LE(live.peak, before) << "compaction peak " << live.peak << " bytes";
  }
  EXPECT_LE(live.peak_views, kPlannedViews);
  const auto s = solver_bytes(n, g, k, int(sizeof(T)), mode == RunMode::refit, 1.0, nnz);
  // + on the portable kernels, the sparse gather's partials of long rows (solver_bytes)
  const std::int64_t gather =
      host_tuned_kernels ? 0 : detail::max_gather_segments(nnz) * k * std::int64_t(sizeof(T));
  EXPECT_EQ(s.per_slot, want.factors + want.grams + want.scratch + gather);
  EXPECT_EQ(s.per_batch, want.stage + want.beta);
  EXPECT_EQ(batch_fixed_bytes(n, g, k, int(sizeof(T)), mode == RunMode::refit, 1.0, nnz),
            s.per_batch + unplanned_bytes(allocation_rules()));
  // W H in row blocks: never n x g (here the budget caps the rows of a block)
  EXPECT_LE(shape.block_rows * 2 * g * std::int64_t(sizeof(T)),
            std::max<std::int64_t>(detail::beta_scratch_budget, 2 * g * std::int64_t(sizeof(T))));
}

TEST(SlotBatch, BetaRuleBytesAreAllocatedBytes) {
  for (RunMode mode : {RunMode::factorize, RunMode::refit}) {
    check_beta_bytes<double>(3000, 700, 5, 4, mode, 0);
    check_beta_bytes<float>(300, 2100, 3, 3, mode, 12345);
    check_beta_bytes<double>(20000, 3000, 4, 2, mode, 0);  // 64 MiB budget: 1398 rows a block
    check_beta_bytes<double>(1, 1, 1, 1, mode, 1);
  }
  EXPECT_EQ(detail::beta_block_rows(20000, 3000, 8), (std::int64_t(64) << 20) / (2 * 3000 * 8));
}

/// A refit of n k >> g k compacted from 4 slots to 3: packing W, H and P before releasing any
/// held (4 + 3)(2nk + gk), more than the 4 (3nk + 3gk) the plan gives the batch.
TEST(SlotBatch, RefitCompactionStaysInsideThePlan) {
  const size_type n = 20000, g = 50;
  const int k = 6, R = 4;
  const auto want = detail::slot_batch_bytes(n, g, k, 8, RunMode::refit);
  LiveDeviceBytes live;
  SlotBatch<double> b(ExecSpace(), n, g, k, RunMode::refit);
  b.allocate(R);
  live.restart_peak();
  b.compact({0, 1, 3});
  EXPECT_LE(live.peak, R * (want.factors + want.grams + want.flags));
  // the plan: bytes_per_replicate, the slot flags in its slack
  EXPECT_LE(live.peak,
            R * (bytes_per_replicate(std::int64_t(n), std::int64_t(g), k, 8, true) + want.flags));
}

/// What a GPU allocates beyond the buffers (the plan's bytes_fixed): 2 MiB granules and a
/// slack of max(256 MiB, 2% of the device).
TEST(MemoryPlan, GpuAllocationRules) {
  constexpr std::int64_t MiB = std::int64_t(1) << 20, GiB = MiB << 10;
  const auto h200 = gpu_allocation_rules(141 * GiB);
  EXPECT_EQ(h200.granule, 2 * MiB);
  EXPECT_EQ(h200.slack, 141 * GiB / 50);  // 2%: 2.8 GiB
  EXPECT_EQ(gpu_allocation_rules(8 * GiB).slack, 256 * MiB);
  EXPECT_EQ(unplanned_bytes(h200), h200.slack + kPlannedViews * (2 * MiB - 1));
  const AllocationRules host{};
  EXPECT_EQ(unplanned_bytes(host), 8 * MiB);  // no rounding on a host backend
  if (!std::is_same_v<ExecSpace, Kokkos::DefaultHostExecutionSpace>) {
    EXPECT_GE(allocation_rules().slack, 256 * MiB);
  } else {
    EXPECT_EQ(unplanned_bytes(allocation_rules()), 8 * MiB);
  }
}

TEST(SlotBatch, ProductScratchOnlyForTransposedHostProducts) {
  const auto d = detail::slot_batch_bytes(20000, 3000, 4, 8, RunMode::factorize);
  const auto f = detail::slot_batch_bytes(20000, 3000, 4, 4, RunMode::factorize);
  EXPECT_EQ(f.scratch, 0);
  EXPECT_EQ(d.scratch, detail::transposed_host_gemm<double> ? 8192 * 4 * 8 : 0);
}

SolverOptions options(SolverKind s, double tol, int max_iter, int check_every = 10) {
  SolverOptions o;
  o.solver = s;
  o.tol = tol;
  o.max_iter = max_iter;
  o.check_every = check_every;
  return o;
}

TEST(Rules, MuMeasuresEveryCheckAndAtMaxIter) {
  using detail::MuRule;
  using detail::Verdict;
  const auto o = options(SolverKind::mu, 1e-4, 25, 10);
  detail::SlotProgress p;
  p.err_init = p.prev_err = 100.0;
  int measured = 0;
  for (int it = 1; it <= 25; ++it) {
    const auto v = MuRule::after_update(o, p, 0.0);
    EXPECT_EQ(p.iter, it);
    if (v.kind != Verdict::measure) continue;
    ++measured;
    const auto d = MuRule::after_error(o, p, 100.0 - it);  // falls by 1 per iteration
    EXPECT_EQ(d.kind, it == 25 ? Verdict::stop : Verdict::go_on);
    if (it == 25) {
      EXPECT_EQ(d.status, ReplicateStatus::max_iter);
    }
  }
  EXPECT_EQ(measured, 3);  // 10, 20, 25
  // converged: the fall since the last check below tol relative to the initial error
  detail::SlotProgress q;
  q.err_init = q.prev_err = 100.0;
  for (int it = 1; it < 10; ++it) MuRule::after_update(o, q, 0.0);
  EXPECT_EQ(MuRule::after_update(o, q, 0.0).kind, Verdict::measure);
  const auto d = MuRule::after_error(o, q, 100.0 - 0.5e-2);
  EXPECT_EQ(d.kind, Verdict::stop);
  EXPECT_EQ(d.status, ReplicateStatus::converged);
  // not finite
  detail::SlotProgress r;
  r.err_init = r.prev_err = 1.0;
  for (int it = 1; it <= 10; ++it) MuRule::after_update(o, r, 0.0);
  EXPECT_EQ(MuRule::after_error(o, r, std::numeric_limits<double>::quiet_NaN()).status,
            ReplicateStatus::non_finite);
  // tol = 0: only max_iter is measured
  const auto o0 = options(SolverKind::mu, 0.0, 30, 10);
  detail::SlotProgress z;
  int m0 = 0;
  for (int it = 1; it <= 30; ++it) m0 += MuRule::after_update(o0, z, 0.0).kind == Verdict::measure;
  EXPECT_EQ(m0, 1);
}

TEST(Rules, CdStopsOnTheViolationRatio) {
  using detail::CdRule;
  using detail::Verdict;
  const auto o = options(SolverKind::cd, 1e-2, 50);
  detail::SlotProgress p;
  EXPECT_EQ(CdRule::after_update(o, p, 10.0).kind, Verdict::go_on);
  EXPECT_EQ(p.viol_init, 10.0);
  EXPECT_EQ(CdRule::after_update(o, p, 0.2).kind, Verdict::go_on);
  const auto d = CdRule::after_update(o, p, 0.1);  // 0.1 / 10 <= 1e-2
  EXPECT_EQ(d.kind, Verdict::stop);
  EXPECT_EQ(d.status, ReplicateStatus::converged);
  detail::SlotProgress z;  // a zero first violation: converged at once
  EXPECT_EQ(CdRule::after_update(o, z, 0.0).status, ReplicateStatus::converged);
  detail::SlotProgress f;
  EXPECT_EQ(CdRule::after_update(o, f, std::numeric_limits<double>::infinity()).status,
            ReplicateStatus::non_finite);
  const auto o2 = options(SolverKind::cd, 1e-9, 3);
  detail::SlotProgress m;
  CdRule::after_update(o2, m, 1.0);
  CdRule::after_update(o2, m, 0.5);
  const auto last = CdRule::after_update(o2, m, 0.4);
  EXPECT_EQ(last.kind, Verdict::stop);
  EXPECT_EQ(last.status, ReplicateStatus::max_iter);
}

// Issue 15, defect 3: the error identity clamps rounding below 0 to 0, but a term or sum that
// is not finite is NaN (it was clamped to 0: float32 overflow reported error 0), and a
// stopped slot whose final error is not finite ends non_finite whatever its rule said (CD
// stops on its violation alone).
TEST(Rules, NonFiniteErrorIsNaNAndTheSlotNonFinite) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(detail::identity_error(25.0, 8.0, 0.0), 3.0);
  EXPECT_EQ(detail::identity_error(1.0, 0.5 + 1e-17, 0.0), 0.0);  // rounding below 0: clamped
  EXPECT_TRUE(std::isnan(detail::identity_error(1.0, inf, 1.0)));
  EXPECT_TRUE(std::isnan(detail::identity_error(1.0, 1.0, inf)));
  EXPECT_TRUE(std::isnan(detail::identity_error(inf, 1.0, 1.0)));
  EXPECT_TRUE(std::isnan(detail::identity_error(1.0, std::nan(""), 1.0)));
  EXPECT_EQ(detail::settle(ReplicateStatus::converged, 2.0), ReplicateStatus::converged);
  EXPECT_EQ(detail::settle(ReplicateStatus::max_iter, 2.0), ReplicateStatus::max_iter);
  EXPECT_EQ(detail::settle(ReplicateStatus::converged, std::nan("")), ReplicateStatus::non_finite);
  EXPECT_EQ(detail::settle(ReplicateStatus::max_iter, inf), ReplicateStatus::non_finite);
}

}  // namespace

// Issue 26: the solver takes the next job while the batch runs and draws its random init on a
// host thread meanwhile (batch_runner.hpp, draw_ahead). Pulled one ahead of a free slot, the
// job still goes into the next free slot: every result is the one it has alone.
TEST(BatchRunner, DrawsTheNextInitWhileTheBatchRuns) {
  const size_type n = 40, g = 30;
  const int k = 3;
  std::vector<double> x(size_t(n * g));
  for (size_type i = 0; i < n; ++i)
    for (size_type j = 0; j < g; ++j)
      x[size_t(i * g + j)] = double((i * 7 + j * 3) % 11) + 0.25 * double(j % 4);
  const auto X = DenseMatrix<double>::from_host(ExecSpace(), n, g, x.data(), "X");
  for (SolverKind s : {SolverKind::cd, SolverKind::mu}) {
    SCOPED_TRACE(to_string(s));
    auto o = options(s, 1e-6, 40);
    o.return_W = true;
    std::vector<Job> jobs;
    for (int i = 0; i < 5; ++i) jobs.push_back(Job{k, i, 1000 + 17 * i, i});
    // the order of pulls and results: job i pulled before job i - 1's result (one slot)
    std::vector<std::string> events;
    size_t pulled = 0;
    std::vector<ReplicateResult> got;
    factorize(
        ExecSpace(), X, k,
        [&]() -> std::optional<Job> {
          events.push_back("pull " + std::to_string(pulled));
          if (pulled == jobs.size()) return std::nullopt;
          return jobs[pulled++];
        },
        1, o,
        [&](ReplicateResult&& r) {
          events.push_back("result " + std::to_string(r.job.index));
          got.push_back(std::move(r));
        });
    const std::vector<std::string> want = {"pull 0", "pull 1", "result 0", "pull 2", "result 1",
                                           "pull 3", "result 2", "pull 4", "result 3",
                                           "pull 5", "result 4"};
    EXPECT_EQ(events, want);
    ASSERT_EQ(got.size(), jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      // each job alone: no look-ahead (a source of one job), the same numbers bitwise
      const auto alone = factorize(ExecSpace(), X, std::vector<Job>{jobs[i]}, 1, o);
      ASSERT_EQ(alone.size(), 1u);
      EXPECT_EQ(got[i].job.seed, jobs[i].seed);
      EXPECT_EQ(got[i].n_iter, alone[0].n_iter);
      EXPECT_EQ(got[i].final_error, alone[0].final_error);
      EXPECT_EQ(got[i].W, alone[0].W);
      EXPECT_EQ(got[i].H, alone[0].H);
    }
  }
}
