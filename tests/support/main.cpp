// GoogleTest main that initializes Kokkos once for the whole test binary.
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include "knmf/core/runtime.hpp"

int main(int argc, char** argv) {
  knmf::ensure_blas_kernels(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  Kokkos::ScopeGuard guard(argc, argv);
  return RUN_ALL_TESTS();
}
