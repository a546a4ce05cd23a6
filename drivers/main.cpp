// knmf driver entry point. Start-up order: MPI (when built with it), then Kokkos, then the
// command line; Kokkos finalizes before MPI.
#include <Kokkos_Core.hpp>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cli.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/version.hpp"
#if KNMF_HAVE_MPI
#include <mpi.h>

#include "knmf/mpi/run.hpp"
#endif

int main(int argc, char** argv) {
  knmf::ensure_blas_kernels(argc, argv);
  auto split = knmf::cli::split_kokkos_args(argc, argv);
#if KNMF_HAVE_MPI
  MPI_Init(&argc, &argv);
  int size = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  knmf::cli::set_rank(rank, size);
  // One device per rank: the rank's index on its node modulo the node's devices (Kokkos picks
  // the device from --kokkos-device-id); on the host, the node's cores shared out.
  auto has = [&](const char* flag) {
    for (const auto& a : split.kokkos)
      if (a.rfind(flag, 0) == 0) return true;
    return false;
  };
  const int local = knmf::mpi::local_rank(MPI_COMM_WORLD);
#ifdef KOKKOS_ENABLE_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0 && !has("--kokkos-device-id") &&
      !has("--kokkos-num-devices"))
    split.kokkos.push_back("--kokkos-device-id=" + std::to_string(local % devices));
#endif
  if (size > 1 && !std::getenv("OMP_NUM_THREADS") && !has("--kokkos-threads") &&
      !has("--kokkos-num-threads")) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int per_node = 1;
    MPI_Comm_size(node, &per_node);
    MPI_Comm_free(&node);
    const int cores = int(std::thread::hardware_concurrency());
    split.kokkos.push_back("--kokkos-threads=" + std::to_string(std::max(1, cores / per_node)));
  }
  (void)local;
#endif
  // Kokkos 3.4 warns at start unless OMP_PROC_BIND is set; binding spreads the threads.
  setenv("OMP_PROC_BIND", "spread", 0);
  setenv("OMP_PLACES", "threads", 0);
  std::vector<char*> kargv{argv[0]};
  for (auto& a : split.kokkos) kargv.push_back(a.data());
  int kargc = static_cast<int>(kargv.size());
  kargv.push_back(nullptr);
  int rc = 0;
  {
    Kokkos::ScopeGuard guard(kargc, kargv.data());
    rc = knmf::cli::run(split.rest);
  }
#if KNMF_HAVE_MPI
  MPI_Finalize();
#endif
  return rc;
}
