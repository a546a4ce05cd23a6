// knmf driver entry point. Start-up order: MPI (when built with it), then Kokkos, then the
// command line; Kokkos finalizes before MPI.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cli.hpp"
#include "hdf5_library.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/core/host_access.hpp"
#include "knmf/version.hpp"
#if KNMF_HAVE_MPI
#include <mpi.h>

#include "knmf/mpi/run.hpp"
#endif

#if KNMF_HAVE_MPI
namespace {
/// Whether this process should join MPI: started by an MPI launcher (mpirun/mpiexec of Open
/// MPI or MPICH/Hydra, a PMIx server, Slurm's srun), asked for a distributed run on the
/// command line, or KNMF_MPI=1. A plain `knmf ...` then skips MPI_Init, which in Open MPI's
/// singleton mode starts a helper daemon (~0.3 s); KNMF_MPI=0 skips it always.
bool want_mpi(int argc, char** argv) {
  if (const char* v = std::getenv("KNMF_MPI")) return std::string(v) != "0";
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                          "MPI_LOCALNRANKS", "SLURM_PROCID"})
    if (std::getenv(var)) return true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--static" || a.rfind("--distribute", 0) == 0) return true;
  }
  return false;
}
}  // namespace
#endif

int main(int argc, char** argv) {
  knmf::ensure_blas_kernels(argc, argv);
  // HDF5 is closed below, by how the command ended (a corrupt input can leave HDF5 objects it
  // cannot close: its shutdown would print junk after the one-line error)
  knmf::cli::defer_hdf5_shutdown();
  auto split = knmf::cli::split_kokkos_args(argc, argv);
#if KNMF_HAVE_MPI
  const bool use_mpi = want_mpi(argc, argv);
  if (use_mpi) MPI_Init(&argc, &argv);
  int size = 1, rank = 0;
  if (use_mpi) {
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  }
  knmf::cli::set_rank(rank, size);
  // One device per rank: the rank's index on its node modulo the node's devices (Kokkos picks
  // the device from --kokkos-device-id); on the host, the node's cores shared out.
  auto has = [&](const char* flag) {
    for (const auto& a : split.kokkos)
      if (a.rfind(flag, 0) == 0) return true;
    return false;
  };
  const int local = use_mpi ? knmf::mpi::local_rank(MPI_COMM_WORLD) : 0;
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
    split.kokkos.push_back("--kokkos-num-threads=" +
                           std::to_string(std::min(knmf::cli::max_kokkos_threads(),
                                                   std::max(1, cores / per_node))));
  }
  (void)local;
#endif
  // Bad Kokkos flags or variables end here, before Kokkos (which would abort) and before
  // anything is written.
  if (const int bad = knmf::cli::check_kokkos_args(split.kokkos)) {
#if KNMF_HAVE_MPI
    if (use_mpi) MPI_Finalize();
#endif
    return bad;
  }
  knmf::cli::set_thread_binding(split.kokkos);  // Kokkos warns at start unless OMP_PROC_BIND is set
  std::vector<char*> kargv{argv[0]};
  for (auto& a : split.kokkos) kargv.push_back(a.data());
  int kargc = static_cast<int>(kargv.size());
  kargv.push_back(nullptr);
  int rc = 0;
  {
    Kokkos::ScopeGuard guard(kargc, kargv.data());
    knmf::install_device_memory_guard();  // device-kernels build only
    rc = knmf::cli::run(split.rest);
  }
  knmf::cli::finish_hdf5(rc != 0);
#if KNMF_HAVE_MPI
  if (use_mpi) MPI_Finalize();
#endif
  return rc;
}
