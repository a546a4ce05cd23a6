#pragma once
/// \file
/// The settings Kokkos starts with, checked before Kokkos::initialize sees them. Kokkos answers
/// a bad value with Kokkos::abort (the host process ends, exit 134) and more host threads than
/// its OpenMP pool holds with a crash or a hang. A program that starts Kokkos (the driver from
/// its --kokkos-* flags, the Python module from knmf.set_num_threads) checks its own values,
/// and the environment Kokkos and OpenMP read, here: one limit, one check, for both.

#include <optional>
#include <string>

namespace knmf {

/// The most threads Kokkos' host (OpenMP) thread pool of this build holds; 0: no fixed limit.
int max_host_threads();

/// What a Kokkos setting holds.
enum class KokkosSetting { threads, device_id, map_device_id_by, boolean, text };

/// Why a value cannot be given to Kokkos.
struct KokkosSettingRefusal {
  bool wrong_type;     ///< not a value of the setting's type at all (not a number, ...)
  std::string reason;  ///< e.g. "expected a number of threads from 1 to 512 (Kokkos' OpenMP ...)"
};

/// Whether `value` (its text) is a value of the setting that this build's Kokkos can start
/// with; nullopt when it is. A thread count must be a decimal integer from 1 to
/// max_host_threads(); a device id one of the CUDA devices this process sees.
std::optional<KokkosSettingRefusal> check_kokkos_setting(KokkosSetting kind,
                                                         const std::string& value);

/// The environment Kokkos and OpenMP read at start, checked: KOKKOS_NUM_THREADS,
/// KOKKOS_DEVICE_ID, KOKKOS_MAP_DEVICE_ID_BY, Kokkos' boolean variables, KOKKOS_PROFILE_LIBRARY
/// against KOKKOS_TOOLS_LIBS, and, where the pool takes OpenMP's count (`threads_given` false:
/// the program gives none, and KOKKOS_NUM_THREADS is unset), the first entry of
/// OMP_NUM_THREADS. InputError "environment variable NAME 'VALUE' is invalid: ..." otherwise;
/// `instead` names the program's own way of giving a thread count (e.g. "--kokkos-num-threads=N"),
/// which the message suggests.
void check_kokkos_environment(bool threads_given, const std::string& instead);

/// Before Kokkos::initialize, in the thread that calls it: the environment checked
/// (check_kokkos_environment) and the host thread count to give Kokkos returned: `given` (the
/// program's own, when > 0), else KOKKOS_NUM_THREADS', else default_host_threads(); 0: OpenMP's
/// own count (OMP_NUM_THREADS, within the pool). A count is given to OpenMP too
/// (omp_set_num_threads): Kokkos' OpenMP backend first runs a parallel region of OpenMP's count
/// before it takes its own, which OMP_NUM_THREADS=100000 crashes even when Kokkos is given 2.
int prepare_host_threads(int given, const std::string& instead);

/// The host thread count to give Kokkos where neither the program, KOKKOS_NUM_THREADS nor
/// OMP_NUM_THREADS gives one: the pool's size when this process may use more CPUs than the pool
/// holds (OpenMP would start one thread per CPU, and Kokkos crash); 0 otherwise (Kokkos'
/// own choice: one thread per CPU).
int default_host_threads();

/// The host thread count Kokkos takes from the environment: KOKKOS_NUM_THREADS, else the
/// first entry of OMP_NUM_THREADS; 0 when neither gives a number.
long long environment_host_threads();

/// The CPUs this process may run on (its affinity mask); 0 when the system does not say.
int process_cpus();

}  // namespace knmf
