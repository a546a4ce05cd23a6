// The settings Kokkos starts with, checked before it sees them (knmf/core/kokkos_settings.hpp).
#include "knmf/core/kokkos_settings.hpp"

#include <Kokkos_Core.hpp>
#include <sched.h>

#include <cctype>
#include <climits>
#include <cstdlib>

#include "knmf/core/error.hpp"

namespace knmf {

namespace {

/// A decimal integer (optional '-', digits only), saturated to +-LLONG_MAX; nothing otherwise.
std::optional<long long> parse_int(const std::string& v) {
  size_t i = v.size() > 1 && v[0] == '-' ? 1 : 0;
  if (i == v.size()) return std::nullopt;
  long long x = 0;
  for (; i < v.size(); ++i) {
    if (v[i] < '0' || v[i] > '9') return std::nullopt;
    const int d = v[i] - '0';
    x = x > (LLONG_MAX - d) / 10 ? LLONG_MAX : x * 10 + d;
  }
  return v[0] == '-' ? -x : x;
}

/// Kokkos' booleans (case-insensitive): yes, true, 1 / no, false, 0.
bool is_boolean(std::string v) {
  for (auto& c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
  return v == "yes" || v == "true" || v == "1" || v == "no" || v == "false" || v == "0";
}

std::string threads_range() {
  const int most = max_host_threads();
  return most > 0 ? "from 1 to " + std::to_string(most) +
                        " (Kokkos' OpenMP thread pool holds at most " + std::to_string(most) + ")"
                  : std::string(">= 1");
}

/// CUDA devices this process sees (-1: not a CUDA build, or unknown).
int cuda_devices() {
#ifdef KOKKOS_ENABLE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess) return n;
#endif
  return -1;
}

/// OMP_NUM_THREADS' first entry (the outermost level's count), as text; "" when unset.
std::string omp_threads_first() {
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (!omp) return "";
  const std::string s(omp);
  return s.substr(0, s.find(','));
}

}  // namespace

int max_host_threads() {
#ifdef KOKKOS_ENABLE_OPENMP
  return Kokkos::Impl::OpenMPTraits::MAX_THREAD_COUNT;
#else
  return 0;
#endif
}

std::optional<KokkosSettingRefusal> check_kokkos_setting(KokkosSetting kind,
                                                         const std::string& value) {
  switch (kind) {
    case KokkosSetting::threads: {
      const auto n = parse_int(value);
      const std::string expected = "expected a number of threads " + threads_range();
      if (!n) return KokkosSettingRefusal{true, expected};
      if (*n < 1 || (max_host_threads() > 0 && *n > max_host_threads()) || *n > INT_MAX)
        return KokkosSettingRefusal{false, expected};
      return std::nullopt;
    }
    case KokkosSetting::device_id: {
      const auto n = parse_int(value);
      if (!n) return KokkosSettingRefusal{true, "expected a device id >= 0"};
      if (*n < 0 || *n > INT_MAX) return KokkosSettingRefusal{false, "expected a device id >= 0"};
      const int devices = cuda_devices();
      if (devices >= 0 && *n >= devices)
        return KokkosSettingRefusal{
            false, "this process sees " + std::to_string(devices) + " CUDA device(s)" +
                       (devices > 0 ? " (ids 0 to " + std::to_string(devices - 1) + ")" : std::string())};
      return std::nullopt;
    }
    case KokkosSetting::map_device_id_by:
      if (value != "random" && value != "mpi_rank")
        return KokkosSettingRefusal{true, "expected random or mpi_rank"};
      return std::nullopt;
    case KokkosSetting::boolean:
      if (!is_boolean(value))
        return KokkosSettingRefusal{true, "expected a boolean (yes, true, 1, no, false, 0)"};
      return std::nullopt;
    case KokkosSetting::text:
      if (value.empty()) return KokkosSettingRefusal{true, "expected a non-empty value"};
      return std::nullopt;
  }
  return std::nullopt;
}

void check_kokkos_environment(bool threads_given, const std::string& instead) {
  struct Var {
    const char* name;
    KokkosSetting kind;
  };
  constexpr Var vars[] = {{"KOKKOS_NUM_THREADS", KokkosSetting::threads},
                          {"KOKKOS_DEVICE_ID", KokkosSetting::device_id},
                          {"KOKKOS_MAP_DEVICE_ID_BY", KokkosSetting::map_device_id_by},
                          {"KOKKOS_DISABLE_WARNINGS", KokkosSetting::boolean},
                          {"KOKKOS_PRINT_CONFIGURATION", KokkosSetting::boolean},
                          {"KOKKOS_TUNE_INTERNALS", KokkosSetting::boolean}};
  for (const auto& v : vars)
    if (const char* value = std::getenv(v.name))
      if (auto r = check_kokkos_setting(v.kind, value))
        input_error("environment variable ", v.name, " '", value, "' is invalid: ", r->reason);
  const char* profile = std::getenv("KOKKOS_PROFILE_LIBRARY");
  const char* tools = std::getenv("KOKKOS_TOOLS_LIBS");
  if (profile && tools && std::string(profile) != tools)
    input_error("environment variables KOKKOS_PROFILE_LIBRARY '", profile, "' and KOKKOS_TOOLS_LIBS '",
                tools, "' differ: set one of them");
  // Without a thread count of Kokkos' own, the OpenMP pool takes OpenMP's (the first entry of
  // OMP_NUM_THREADS). libgomp itself ignores a value it cannot read, with a warning.
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (omp && !threads_given && !std::getenv("KOKKOS_NUM_THREADS") && max_host_threads() > 0) {
    const auto n = parse_int(omp_threads_first());
    if (n && *n > max_host_threads())
      input_error("environment variable OMP_NUM_THREADS '", omp,
                  "' is invalid: Kokkos' OpenMP thread pool holds at most ", max_host_threads(),
                  " threads (set it lower or give ", instead, ")");
  }
}

int prepare_host_threads(int given, const std::string& instead) {
  check_kokkos_environment(given > 0, instead);
  int threads = given;
  if (threads <= 0)
    if (const char* k = std::getenv("KOKKOS_NUM_THREADS")) threads = int(parse_int(k).value_or(0));
  if (threads <= 0) threads = default_host_threads();
#ifdef KOKKOS_ENABLE_OPENMP
  if (threads > 0) omp_set_num_threads(threads);
#endif
  return threads;
}

int default_host_threads() {
  if (std::getenv("KOKKOS_NUM_THREADS") || std::getenv("OMP_NUM_THREADS")) return 0;
  return max_host_threads() > 0 && process_cpus() > max_host_threads() ? max_host_threads() : 0;
}

long long environment_host_threads() {
  if (const char* k = std::getenv("KOKKOS_NUM_THREADS")) {
    if (const auto n = parse_int(k); n && *n > 0) return *n;
  }
  const auto n = parse_int(omp_threads_first());
  return n && *n > 0 ? *n : 0;
}

int process_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
}

}  // namespace knmf
