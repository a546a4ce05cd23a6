// The memory model of a run (knmf/run/memory.hpp): per-replicate bytes and batch plans, held
// at the values the model gave before the solver reported its own buffers (issue 14), so a
// refactoring of the solver cannot move a plan unnoticed. Moved once since, on purpose: the CD
// reduction partials of W and H in regions of their own (8 bytes per 1,024 of min(n, g) a
// slot; issue 26, rule_cd.hpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <tuple>

#include "knmf/core/checked.hpp"
#include "knmf/core/error.hpp"
#include "knmf/core/kernel_set.hpp"
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
    {1000, 2000, 5, 4, false, 160824, 160824},
    {1000, 2000, 5, 8, false, 400824, 320824},
    {100000, 20000, 12, 4, false, 12596144, 12596144},
    {100000, 20000, 12, 8, false, 26996144, 25076144},
    {7, 3, 1, 8, true, 336, 280},
    {5000, 300, 30, 8, true, 5066448, 3866448},
    {20000, 9000, 7, 4, true, 2444856, 2444856},
    {1, 1, 1, 8, false, 88, 80},
    {8193, 50, 3, 8, false, 594344, 397736},
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
  EXPECT_EQ(p.bytes_per_slot, 160824);
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
  EXPECT_EQ(p.bytes_per_slot, 2444856);
  EXPECT_EQ(p.bytes_fixed, 7 * 20000 * 4 + (std::int64_t(8) << 20));
  EXPECT_EQ(p.R, (1000 * MB - 100 * MB - p.bytes_fixed) / 2444856);
}

}  // namespace

namespace {

// Issue 15, defect 8: sizes in 64 bits, past 32 bits exact and past 64 bits refused.
TEST(MemoryModel, SizesAre64BitAndChecked) {
  // k = 20000 on 200 x 100, float (no host scratch): W, P 2 n k s; H, Q, H_next 3 k g s;
  // W^T W, H H^T 2 k k 8; one chunk of Gram partials k k 8, one each of W's and H's
  // reduction partials 2 x 8.
  const std::int64_t k = 20000;
  const std::int64_t want = 2 * 200 * k * 4 + 3 * k * 100 * 4 + 2 * k * k * 8 + (k * k + 2) * 8;
  EXPECT_GT(want, std::int64_t{1} << 32);
  EXPECT_EQ(bytes_per_replicate(200, 100, int(k), 4, false), want);
  const auto p = plan_batch(200, 100, int(k), 4, 0, std::int64_t{1} << 40, 0, 1000);
  EXPECT_EQ(p.bytes_per_slot, want);
  EXPECT_EQ(p.R, int(((std::int64_t{1} << 40) - p.bytes_fixed) / want));

  const std::int64_t big = std::int64_t{1} << 31;
  const int kmax = std::numeric_limits<int>::max();
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const knmf::InputError& e) {
      return std::string(e.what());
    }
    return std::string("no InputError");
  };
  // n k s, k k and k g s each past 2^63
  for (const auto& [n, g, k] : {std::tuple{big * big, std::int64_t{1}, 4}, std::tuple{big, big, kmax},
                                std::tuple{std::int64_t{1}, big * big, 2}}) {
    // (copies: a lambda capturing structured bindings is C++20, an error for nvcc in C++17)
    const std::int64_t rows = n, cols = g;
    const int comps = k;
    const std::string m = message([&] { bytes_per_replicate(rows, cols, comps, 8, false); });
    EXPECT_NE(m.find("does not fit in 64 bits"), std::string::npos) << n << " " << g << " " << k << ": " << m;
  }
  // a forced --batch whose total passes 2^63
  const std::string m =
      message([&] { plan_batch(big, 1000, 1000, 8, 0, std::int64_t{1} << 40, kmax, kmax); });
  EXPECT_NE(m.find("does not fit in 64 bits"), std::string::npos) << m;
}

TEST(CheckedArithmetic, ProductsAndSums) {
  EXPECT_EQ(knmf::checked_mul({3, 20000, 20000, 8}, "x"), std::int64_t{9600000000});
  EXPECT_EQ(knmf::checked_mul({}, "x"), 1);
  EXPECT_THROW(knmf::checked_mul({std::int64_t{1} << 32, std::int64_t{1} << 31}, "x"), knmf::InputError);
  EXPECT_EQ(knmf::checked_mul({std::int64_t{1} << 31, std::int64_t{1} << 31, 0}, "x"), 0);
  EXPECT_THROW(knmf::checked_add({std::numeric_limits<std::int64_t>::max(), 1}, "x"), knmf::InputError);
  EXPECT_THROW(knmf::checked_mul({-1, 2}, "x"), knmf::LogicError);
}

}  // namespace
