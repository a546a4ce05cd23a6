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

/// Checks Kokkos' flags and the environment variables Kokkos and OpenMP read at start
/// (KOKKOS_NUM_THREADS, KOKKOS_DEVICE_ID, ..., OMP_NUM_THREADS beyond Kokkos' thread pool)
/// before Kokkos::initialize sees them: Kokkos aborts on a bad value, and crashes or hangs on
/// more threads than its pool holds. Returns 0 when all can be used, else prints the one-line
/// error (rank 0) and returns the exit status: 2 for an unknown --kokkos-* option or a value
/// not of its type (as for knmf's own options), 1 for a value out of range. Renames
/// --kokkos-threads (Kokkos 3's name, unknown to Kokkos 4) to --kokkos-num-threads.
/// Without a thread count given, a process that may use more CPUs than Kokkos' OpenMP pool
/// holds gets --kokkos-num-threads=max_kokkos_threads() added. The values and limits are the
/// library's (knmf/core/kokkos_settings.hpp: prepare_host_threads, which also gives OpenMP the
/// count Kokkos will take).
int check_kokkos_args(std::vector<std::string>& flags);
/// The most threads Kokkos' host pool of this build holds (INT_MAX: no fixed limit).
int max_kokkos_threads();
/// Before Kokkos starts, where OMP_PROC_BIND is not set (Kokkos warns then): bind the threads
/// (spread over OMP_PLACES=threads) when the pool takes every CPU this process may use, else
/// leave them unbound (OMP_PROC_BIND=false). Bound, a process with fewer threads starts them on
/// the first CPUs of its set, so several such processes on one node (cNMF's --total-workers
/// with one thread each) would all share core 0. `flags`: Kokkos' flags, after
/// check_kokkos_args. thread_binding(): what was decided, for `knmf --version`.
void set_thread_binding(const std::vector<std::string>& flags);
const std::string& thread_binding();

/// Under MPI: this process's rank and the world size (only rank 0 prints CLI errors).
void set_rank(int rank, int size);
int rank();
int world_size();

/// Parse and run one knmf command line (argv without Kokkos flags). Kokkos must be
/// initialized. Returns the process exit code; user errors print one line on stderr.
int run(const std::vector<std::string>& args);

}  // namespace knmf::cli
