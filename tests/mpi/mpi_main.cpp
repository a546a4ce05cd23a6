// GoogleTest main for MPI tests: MPI first, then Kokkos; Kokkos finalizes before MPI.
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include "knmf/core/host_access.hpp"
#include "knmf/core/runtime.hpp"
#include <mpi.h>

int main(int argc, char** argv) {
  knmf::ensure_blas_kernels(argc, argv);
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {  // one report: the other ranks' failures still fail the run (exit code)
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = 0;
  {
    Kokkos::ScopeGuard guard(argc, argv);
    knmf::install_device_memory_guard();  // device-kernels build only
    rc = RUN_ALL_TESTS();
  }
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
