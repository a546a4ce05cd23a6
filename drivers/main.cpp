// knmf driver entry point. Start-up order: (MPI), then Kokkos, then the command line;
// Kokkos finalizes before MPI.
#include <Kokkos_Core.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli.hpp"

int main(int argc, char** argv) {
  auto split = knmf::cli::split_kokkos_args(argc, argv);
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
  return rc;
}
