// Host access to device memory (knmf/core/host_access.hpp): mirrors, copies and, in the
// device-kernels build, the guard that stops host code from touching device memory directly.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include "knmf/core/host_access.hpp"
#include "knmf/core/kernel_set.hpp"
#include "knmf/core/types.hpp"

namespace {
using knmf::Matrix;

TEST(HostAccess, MirrorIsSeparateExactlyWhereAGpuWouldHaveOne) {
  Matrix<double> W(Kokkos::view_alloc(std::string("knmf::test::W")), 64, 1000);
  const auto h = knmf::host_mirror(W);
  EXPECT_EQ(h.extent(0), W.extent(0));
  EXPECT_EQ(h.extent(1), W.extent(1));
  // A GPU build and the device-kernels build copy; the host-tuned build aliases (no copy).
  EXPECT_EQ(h.data() == W.data(), knmf::host_tuned_kernels);
}

TEST(HostAccess, CopyHoldsTheDeviceValues) {
  Matrix<double> W(Kokkos::view_alloc(std::string("knmf::test::W")), 64, 1000);
  knmf::HostMatrix<double> src("values", 64, 1000);
  for (int j = 0; j < 1000; ++j)
    for (int i = 0; i < 64; ++i) src(i, j) = i + 0.5 * j;
  Kokkos::deep_copy(W, src);
  const auto h = knmf::host_copy(W);
  EXPECT_EQ(h(10, 500), 10 + 0.5 * 500);
  EXPECT_EQ(h(63, 999), 63 + 0.5 * 999);
}

#if KNMF_DEVICE_KERNELS_ON_HOST
// Device memory read by host code outside a kernel or deep_copy ends the program, naming the
// allocation: what would read garbage (or fault) on a GPU fails here on the CPU.
TEST(HostAccessDeathTest, GuardStopsDirectHostReadsOfDeviceMemory) {
  ASSERT_TRUE(knmf::install_device_memory_guard());
  Matrix<double> W(Kokkos::view_alloc(std::string("knmf::test::guarded")), 64, 1000);
  Kokkos::deep_copy(W, 1.0);
  EXPECT_DEATH(
      {
        volatile double x = W(10, 500);
        (void)x;
      },
      "knmf device memory guard: host code accessed device memory 'knmf::test::guarded'");
  EXPECT_DEATH(W(3, 900) = 2.0, "knmf::test::guarded");
  // Host buffers and mirrors are not guarded; the copy path works.
  Kokkos::View<double*, Kokkos::HostSpace> host(Kokkos::view_alloc(std::string("knmf::host::test")), 100000);
  host(50000) = 3.0;
  EXPECT_EQ(host(50000), 3.0);
  EXPECT_EQ(knmf::host_copy(W)(10, 500), 1.0);
}
#else
TEST(HostAccess, GuardIsOnlyInTheDeviceKernelsBuild) { EXPECT_FALSE(knmf::install_device_memory_guard()); }
#endif

}  // namespace
