// The memory model of a run (knmf/run/memory.hpp): per-replicate bytes and batch plans, held
// at the values the model gave before the solver reported its own buffers (issue 14), so a
// refactoring of the solver cannot move a plan unnoticed.
#include <gtest/gtest.h>

#include <cstdint>

#include "knmf/core/error.hpp"
#include "knmf/core/types.hpp"
#include "knmf/run/memory.hpp"

namespace {

using knmf::bytes_per_replicate;
using knmf::plan_batch;

struct Case {
  std::int64_t n, g;
  int k, s;
  bool refit;  // a fixed-H refit (W_next)
  std::int64_t tuned, portable;  // bytes with the host-tuned kernels / everywhere else
};

// The dense products' host scratch (double on the host-tuned build) is the only difference.
const Case kCases[] = {
    {1000, 2000, 5, 4, false, 160816, 160816},
    {1000, 2000, 5, 8, false, 400816, 320816},
    {100000, 20000, 12, 4, false, 12595984, 12595984},
    {100000, 20000, 12, 8, false, 26995984, 25075984},
    {7, 3, 1, 8, true, 328, 272},
    {5000, 300, 30, 8, true, 5066440, 3866440},
    {20000, 9000, 7, 4, true, 2444784, 2444784},
    {1, 1, 1, 8, false, 80, 72},
    {8193, 50, 3, 8, false, 594336, 397728},
};

TEST(MemoryModel, BytesPerReplicateUnchanged) {
  for (const auto& c : kCases) {
    const std::int64_t want = knmf::host_tuned_kernels ? c.tuned : c.portable;
    EXPECT_EQ(bytes_per_replicate(c.n, c.g, c.k, c.s, c.refit), want)
        << c.n << " x " << c.g << ", k = " << c.k << ", s = " << c.s;
  }
}

TEST(MemoryModel, PlanUnchanged) {
  const std::int64_t MB = 1000 * 1000;
  auto p = plan_batch(1000, 2000, 5, 4, 8 * MB, 50 * MB, 0, 1000);
  EXPECT_EQ(p.bytes_per_slot, 160816);
  EXPECT_EQ(p.bytes_fixed, 5 * 2000 * 4 + (std::int64_t(8) << 20));
  EXPECT_EQ(p.R, 208);
  EXPECT_EQ(p.describe(),
            "k = 5: 208 replicate(s) per batch; device memory 49.88 MB of 50.00 MB (X 8.00 MB, "
            "factors 208 x 160.82 KB, workspace 8.43 MB)");
  p = plan_batch(1000, 2000, 5, 4, 8 * MB, 50 * MB, 0, 17);  // capped by max_R
  EXPECT_EQ(p.R, 17);
  p = plan_batch(1000, 2000, 5, 4, 8 * MB, 50 * MB, 100, 100);  // forced and fits
  EXPECT_EQ(p.R, 100);
  EXPECT_THROW(plan_batch(1000, 2000, 5, 4, 8 * MB, 50 * MB, 300, 300), knmf::InputError);
  EXPECT_THROW(plan_batch(1000, 2000, 5, 4, 40 * MB, 48 * MB, 0, 10), knmf::InputError);
  p = plan_batch(20000, 9000, 7, 4, 100 * MB, 1000 * MB, 0, 1000, true);
  EXPECT_EQ(p.bytes_per_slot, 2444784);
  EXPECT_EQ(p.bytes_fixed, 7 * 20000 * 4 + (std::int64_t(8) << 20));
  EXPECT_EQ(p.R, (1000 * MB - 100 * MB - p.bytes_fixed) / 2444784);
}

}  // namespace
