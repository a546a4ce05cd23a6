// Kokkos' pass-through flags and the environment Kokkos and OpenMP read at start, checked
// before Kokkos::initialize sees them. Kokkos answers a bad value with Kokkos::abort (exit 134,
// a backtrace) and a thread count beyond its OpenMP pool with a crash or a hang after the run
// has begun writing; knmf refuses them first, with one line and nothing written.
#include <Kokkos_Core.hpp>
#include <sched.h>

#include <cctype>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"

namespace knmf::cli {

namespace {

/// The most threads a Kokkos host pool of this build holds (0: no fixed limit).
constexpr int max_host_threads() {
#ifdef KOKKOS_ENABLE_OPENMP
  return Kokkos::Impl::OpenMPTraits::MAX_THREAD_COUNT;
#else
  return 0;
#endif
}

struct Refusal {
  int status;  ///< 2: not a Kokkos option or not of its type (a usage error); 1: out of range
  std::string message;
};

enum class Kind { threads, device_id, map_device_id_by, boolean, text, flag };

struct Known {
  const char* name;
  Kind kind;
};

// Kokkos 4.6's command-line options (Kokkos_Core.cpp, Kokkos_Profiling.cpp), plus
// --kokkos-threads: Kokkos 3's name of --kokkos-num-threads, which Kokkos 4 no longer knows
// (it warns and runs on every core) while knmf documents it; knmf passes it on renamed.
constexpr Known known_flags[] = {
    {"--kokkos-num-threads", Kind::threads},
    {"--kokkos-threads", Kind::threads},
    {"--kokkos-device-id", Kind::device_id},
    {"--kokkos-map-device-id-by", Kind::map_device_id_by},
    {"--kokkos-disable-warnings", Kind::boolean},
    {"--kokkos-print-configuration", Kind::boolean},
    {"--kokkos-tune-internals", Kind::boolean},
    {"--kokkos-tools-libs", Kind::text},
    {"--kokkos-tools-library", Kind::text},
    {"--kokkos-tools-args", Kind::text},
    {"--kokkos-tools-help", Kind::flag},
    {"--kokkos-help", Kind::flag},
};

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
  return max_host_threads() > 0
             ? "from 1 to " + std::to_string(max_host_threads()) + " (Kokkos' OpenMP thread pool "
                                                                   "holds at most " +
                   std::to_string(max_host_threads()) + ")"
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

/// `what` names the option or variable, `value` its text; `usage` when it came from argv.
std::optional<Refusal> check_value(Kind kind, const std::string& what, const std::string& value,
                                   bool usage) {
  const int bad_type = usage ? 2 : 1;
  const std::string tail = usage ? " (see knmf --help)" : "";
  const std::string head = what + " '" + value + "' is invalid: ";
  switch (kind) {
    case Kind::threads: {
      const auto n = parse_int(value);
      if (!n) return Refusal{bad_type, head + "expected a number of threads " + threads_range() + tail};
      if (*n < 1 || (max_host_threads() > 0 && *n > max_host_threads()) || *n > INT_MAX)
        return Refusal{1, head + "expected a number of threads " + threads_range()};
      return std::nullopt;
    }
    case Kind::device_id: {
      const auto n = parse_int(value);
      if (!n) return Refusal{bad_type, head + "expected a device id >= 0" + tail};
      if (*n < 0 || *n > INT_MAX) return Refusal{1, head + "expected a device id >= 0"};
      const int devices = cuda_devices();
      if (devices >= 0 && *n >= devices)
        return Refusal{1, head + "this process sees " + std::to_string(devices) +
                              " CUDA device(s)" +
                              (devices > 0 ? " (ids 0 to " + std::to_string(devices - 1) + ")"
                                           : std::string())};
      return std::nullopt;
    }
    case Kind::map_device_id_by:
      if (value != "random" && value != "mpi_rank")
        return Refusal{bad_type, head + "expected random or mpi_rank" + tail};
      return std::nullopt;
    case Kind::boolean:
      if (!is_boolean(value))
        return Refusal{bad_type, head + "expected a boolean (yes, true, 1, no, false, 0)" + tail};
      return std::nullopt;
    case Kind::text:
      if (value.empty()) return Refusal{bad_type, head + "expected a non-empty value" + tail};
      return std::nullopt;
    case Kind::flag:
      return std::nullopt;
  }
  return std::nullopt;
}

std::string known_list() {
  std::string s;
  for (const auto& k : known_flags) {
    if (std::string(k.name) == "--kokkos-threads" || std::string(k.name) == "--kokkos-tools-library")
      continue;  // the old names
    if (!s.empty()) s += ", ";
    s += k.name;
  }
  return s;
}

std::optional<Refusal> check_flag(std::string& arg) {
  const size_t eq = arg.find('=');
  const std::string name = arg.substr(0, eq);
  const Known* known = nullptr;
  for (const auto& k : known_flags)
    if (name == k.name) known = &k;
  if (!known)
    return Refusal{2, name + " is not a Kokkos option (Kokkos " +
                          std::to_string(KOKKOS_VERSION / 10000) + "." +
                          std::to_string(KOKKOS_VERSION / 100 % 100) + " takes " + known_list() +
                          ") (see knmf --help)"};
  if (known->kind == Kind::flag) {
    if (eq != std::string::npos)
      return Refusal{2, name + " takes no value (see knmf --help)"};
    return std::nullopt;
  }
  if (eq == std::string::npos) {
    if (known->kind == Kind::boolean) return std::nullopt;  // --kokkos-disable-warnings: true
    return Refusal{2, name + " needs a value: " + name + "=VALUE (see knmf --help)"};
  }
  if (auto r = check_value(known->kind, name, arg.substr(eq + 1), true)) return r;
  if (name == "--kokkos-threads") arg = "--kokkos-num-threads" + arg.substr(eq);
  return std::nullopt;
}

const char* env(const char* name) { return std::getenv(name); }

/// OMP_NUM_THREADS' first entry (the outermost level's count), as text; "" when unset.
std::string omp_threads_first() {
  const char* omp = env("OMP_NUM_THREADS");
  if (!omp) return "";
  const std::string s(omp);
  return s.substr(0, s.find(','));
}

/// The CPUs this process may run on (0 when the system does not say).
int process_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
}

std::optional<Refusal> check_environment(bool threads_flag) {
  struct Var {
    const char* name;
    Kind kind;
  };
  constexpr Var vars[] = {{"KOKKOS_NUM_THREADS", Kind::threads},
                          {"KOKKOS_DEVICE_ID", Kind::device_id},
                          {"KOKKOS_MAP_DEVICE_ID_BY", Kind::map_device_id_by},
                          {"KOKKOS_DISABLE_WARNINGS", Kind::boolean},
                          {"KOKKOS_PRINT_CONFIGURATION", Kind::boolean},
                          {"KOKKOS_TUNE_INTERNALS", Kind::boolean}};
  for (const auto& v : vars)
    if (const char* value = env(v.name))
      if (auto r = check_value(v.kind, std::string("environment variable ") + v.name, value, false))
        return r;
  const char* profile = env("KOKKOS_PROFILE_LIBRARY");
  const char* tools = env("KOKKOS_TOOLS_LIBS");
  if (profile && tools && std::string(profile) != tools)
    return Refusal{1, std::string("environment variables KOKKOS_PROFILE_LIBRARY '") + profile +
                          "' and KOKKOS_TOOLS_LIBS '" + tools + "' differ: set one of them"};
  // Without a thread count of Kokkos' own, the OpenMP pool takes OpenMP's (the first entry of
  // OMP_NUM_THREADS). libgomp itself ignores a value it cannot read, with a warning.
  const char* omp = env("OMP_NUM_THREADS");
  if (omp && !threads_flag && !env("KOKKOS_NUM_THREADS") && max_host_threads() > 0) {
    const auto n = parse_int(omp_threads_first());
    if (n && *n > max_host_threads())
      return Refusal{1, "environment variable OMP_NUM_THREADS '" + std::string(omp) +
                            "' is invalid: Kokkos' OpenMP thread pool holds at most " +
                            std::to_string(max_host_threads()) +
                            " threads (set it lower or give --kokkos-num-threads=N)"};
  }
  return std::nullopt;
}

}  // namespace

int check_kokkos_args(std::vector<std::string>& flags) {
  std::optional<Refusal> refusal;
  bool threads_flag = false;
  for (auto& f : flags) {
    if ((refusal = check_flag(f))) break;
    if (f.rfind("--kokkos-num-threads=", 0) == 0) threads_flag = true;
  }
  if (!refusal) refusal = check_environment(threads_flag);
  if (refusal) {
    if (rank() == 0) std::cerr << "knmf: error: " << refusal->message << "\n";
    return refusal->status;
  }
  // Given no thread count at all, OpenMP starts one thread per CPU this process may use: on a
  // machine with more than the pool holds, Kokkos would crash. The pool's size is given then.
  if (!threads_flag && !env("KOKKOS_NUM_THREADS") && !env("OMP_NUM_THREADS") &&
      max_host_threads() > 0) {
    if (process_cpus() > max_host_threads())
      flags.push_back("--kokkos-num-threads=" + std::to_string(max_host_threads()));
  }
  return 0;
}

int max_kokkos_threads() { return max_host_threads() > 0 ? max_host_threads() : INT_MAX; }

namespace {
std::string g_binding = "OMP_PROC_BIND unset";
}

void set_thread_binding(const std::vector<std::string>& flags) {
  if (const char* given = env("OMP_PROC_BIND")) {
    g_binding = std::string("OMP_PROC_BIND=") + given + " (given)";
    return;
  }
  // The pool's size, as Kokkos takes it: the flag (checked above), KOKKOS_NUM_THREADS, the
  // first entry of OMP_NUM_THREADS; none: one thread per CPU this process may use.
  long long threads = 0;
  for (const auto& f : flags)
    if (f.rfind("--kokkos-num-threads=", 0) == 0) threads = parse_int(f.substr(21)).value_or(0);
  if (threads <= 0 && env("KOKKOS_NUM_THREADS")) threads = parse_int(env("KOKKOS_NUM_THREADS")).value_or(0);
  if (threads <= 0) threads = parse_int(omp_threads_first()).value_or(0);
  const int cpus = process_cpus();
  const bool every_cpu = threads <= 0 || cpus <= 0 || threads >= cpus;
  setenv("OMP_PROC_BIND", every_cpu ? "spread" : "false", 1);
  if (every_cpu) setenv("OMP_PLACES", "threads", 0);
  g_binding = every_cpu
                  ? std::string("OMP_PROC_BIND=spread (set by knmf: the threads take every CPU this process may use)")
                  : "OMP_PROC_BIND=false (set by knmf: " + std::to_string(threads) + " thread(s) on " +
                        std::to_string(cpus) + " CPUs, left to the system)";
}

const std::string& thread_binding() { return g_binding; }

}  // namespace knmf::cli
