// Kokkos' pass-through flags and the environment Kokkos and OpenMP read at start, checked
// before Kokkos::initialize sees them. Kokkos answers a bad value with Kokkos::abort (exit 134,
// a backtrace) and a thread count beyond its OpenMP pool with a crash or a hang after the run
// has begun writing; knmf refuses them first, with one line and nothing written. The values'
// checks and the limits are the library's (knmf/core/kokkos_settings.hpp, which the Python
// module checks through too); the flags' names and exit statuses are the driver's.
#include <Kokkos_Core.hpp>

#include <climits>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "knmf/core/error.hpp"
#include "knmf/core/kokkos_settings.hpp"

namespace knmf::cli {

namespace {

struct Refusal {
  int status;  ///< 2: not a Kokkos option or not of its type (a usage error); 1: out of range
  std::string message;
};

struct Known {
  const char* name;
  std::optional<KokkosSetting> kind;  ///< none: a flag without a value
};

// Kokkos 4.6's command-line options (Kokkos_Core.cpp, Kokkos_Profiling.cpp), plus
// --kokkos-threads: Kokkos 3's name of --kokkos-num-threads, which Kokkos 4 no longer knows
// (it warns and runs on every core) while knmf documents it; knmf passes it on renamed.
const Known known_flags[] = {
    {"--kokkos-num-threads", KokkosSetting::threads},
    {"--kokkos-threads", KokkosSetting::threads},
    {"--kokkos-device-id", KokkosSetting::device_id},
    {"--kokkos-map-device-id-by", KokkosSetting::map_device_id_by},
    {"--kokkos-disable-warnings", KokkosSetting::boolean},
    {"--kokkos-print-configuration", KokkosSetting::boolean},
    {"--kokkos-tune-internals", KokkosSetting::boolean},
    {"--kokkos-tools-libs", KokkosSetting::text},
    {"--kokkos-tools-library", KokkosSetting::text},
    {"--kokkos-tools-args", KokkosSetting::text},
    {"--kokkos-tools-help", std::nullopt},
    {"--kokkos-help", std::nullopt},
};

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
  if (!known->kind) {
    if (eq != std::string::npos)
      return Refusal{2, name + " takes no value (see knmf --help)"};
    return std::nullopt;
  }
  if (eq == std::string::npos) {
    if (*known->kind == KokkosSetting::boolean) return std::nullopt;  // --kokkos-disable-warnings: true
    return Refusal{2, name + " needs a value: " + name + "=VALUE (see knmf --help)"};
  }
  const std::string value = arg.substr(eq + 1);
  if (auto r = check_kokkos_setting(*known->kind, value))
    return Refusal{r->wrong_type ? 2 : 1, name + " '" + value + "' is invalid: " + r->reason +
                                              (r->wrong_type ? " (see knmf --help)" : "")};
  if (name == "--kokkos-threads") arg = "--kokkos-num-threads" + arg.substr(eq);
  return std::nullopt;
}

/// The value of --kokkos-num-threads=N among the (checked) flags; 0 when not given.
long long threads_flag_value(const std::vector<std::string>& flags) {
  long long threads = 0;
  for (const auto& f : flags)
    if (f.rfind("--kokkos-num-threads=", 0) == 0) threads = std::atoll(f.c_str() + 21);
  return threads;
}

}  // namespace

int check_kokkos_args(std::vector<std::string>& flags) {
  std::optional<Refusal> refusal;
  for (auto& f : flags)
    if ((refusal = check_flag(f))) break;
  const long long flag = threads_flag_value(flags);
  int threads = 0;
  if (!refusal) {
    try {
      threads = prepare_host_threads(int(flag), "--kokkos-num-threads=N");
    } catch (const InputError& e) {
      refusal = Refusal{1, e.what()};
    }
  }
  if (refusal) {
    if (rank() == 0) std::cerr << "knmf: error: " << refusal->message << "\n";
    return refusal->status;
  }
  // Given no thread count at all, OpenMP starts one thread per CPU this process may use: on a
  // machine with more than the pool holds, Kokkos would crash. The pool's size is given then
  // (prepare_host_threads).
  if (flag <= 0 && threads > 0) flags.push_back("--kokkos-num-threads=" + std::to_string(threads));
  return 0;
}

int max_kokkos_threads() { return max_host_threads() > 0 ? max_host_threads() : INT_MAX; }

namespace {
std::string g_binding = "OMP_PROC_BIND unset";
}

void set_thread_binding(const std::vector<std::string>& flags) {
  if (const char* given = std::getenv("OMP_PROC_BIND")) {
    g_binding = std::string("OMP_PROC_BIND=") + given + " (given)";
    return;
  }
  // The pool's size, as Kokkos takes it: the flag (checked above), KOKKOS_NUM_THREADS, the
  // first entry of OMP_NUM_THREADS; none: one thread per CPU this process may use.
  long long threads = threads_flag_value(flags);
  if (threads <= 0) threads = environment_host_threads();
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
