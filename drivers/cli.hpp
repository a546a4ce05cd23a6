#pragma once
/// \file
/// knmf's command line: CLI11 definitions and dispatch. Only drivers/ knows about argv.

#include <string>
#include <vector>

namespace knmf::cli {

/// Split argv into Kokkos' own flags (--kokkos-*, passed to Kokkos::initialize) and the rest.
struct SplitArgs {
  std::vector<std::string> kokkos;
  std::vector<std::string> rest;  ///< rest[0] is the program name
};
SplitArgs split_kokkos_args(int argc, const char* const* argv);

/// Under MPI: this process's rank and the world size (only rank 0 prints CLI errors).
void set_rank(int rank, int size);
int rank();
int world_size();

/// Parse and run one knmf command line (argv without Kokkos flags). Kokkos must be
/// initialized. Returns the process exit code; user errors print one line on stderr.
int run(const std::vector<std::string>& args);

}  // namespace knmf::cli
