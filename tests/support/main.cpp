// GoogleTest main that initializes Kokkos once for the whole test binary.
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include "knmf/core/host_access.hpp"
#include "knmf/core/runtime.hpp"

int main(int argc, char** argv) {
  knmf::ensure_blas_kernels(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  Kokkos::ScopeGuard guard(argc, argv);
  knmf::install_device_memory_guard();  // device-kernels build only
  return RUN_ALL_TESTS();
}
