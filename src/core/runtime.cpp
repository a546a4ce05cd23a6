#include "knmf/core/runtime.hpp"

#include <Kokkos_Core.hpp>
#include <KokkosKernels_config.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "knmf/core/kernel_set.hpp"
#include "knmf/core/types.hpp"
#include "knmf/version.hpp"

extern "C" char* openblas_get_corename(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));

namespace knmf {

std::string blas_core() {
  if (openblas_get_corename) {
    const char* c = openblas_get_corename();
    if (c) return c;
  }
  return "unknown";
}

void ensure_blas_kernels(int /*argc*/, char** /*argv*/) {
  if (!openblas_get_corename || std::getenv("OPENBLAS_CORETYPE") ||
      std::getenv("KNMF_KEEP_BLAS_CORE"))
    return;
  const std::string core = blas_core();
  if (strcasecmp(core.c_str(), "prescott") != 0) return;
  const char* better = nullptr;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    better = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    better = "Haswell";
  if (!better || !gotoblas_dynamic_quit || !gotoblas_dynamic_init) return;
  // OpenBLAS' dynamic-architecture build picks its kernel table when loaded; pick again
  // (nothing has called BLAS yet). The variable also reaches child processes.
  setenv("OPENBLAS_CORETYPE", better, 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
}

std::string version() { return KNMF_VERSION_STRING; }

namespace {
std::string version_string(int v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d.%d.%02d", v / 10000, (v / 100) % 100, v % 100);
  return buf;
}
}  // namespace

std::string kokkos_version() { return version_string(KOKKOS_VERSION); }
std::string kokkos_kernels_version() { return version_string(KOKKOSKERNELS_VERSION); }

std::string gpu_architecture() {
#if defined(KOKKOS_ARCH_HOPPER90)
  return "sm_90 (Kokkos_ARCH_HOPPER90)";
#elif defined(KOKKOS_ARCH_AMPERE86)
  return "sm_86 (Kokkos_ARCH_AMPERE86)";
#elif defined(KOKKOS_ARCH_AMPERE80)
  return "sm_80 (Kokkos_ARCH_AMPERE80)";
#elif defined(KOKKOS_ENABLE_CUDA)
  return "another CUDA architecture";
#else
  return "";
#endif
}

std::vector<std::string> enabled_backends() {
  std::vector<std::string> b;
#ifdef KOKKOS_ENABLE_CUDA
  b.emplace_back("Cuda");
#endif
#ifdef KOKKOS_ENABLE_HIP
  b.emplace_back("HIP");
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  b.emplace_back("OpenMP");
#endif
#ifdef KOKKOS_ENABLE_THREADS
  b.emplace_back("Threads");
#endif
#ifdef KOKKOS_ENABLE_SERIAL
  b.emplace_back("Serial");
#endif
  return b;
}

std::string default_execution_space() { return Kokkos::DefaultExecutionSpace::name(); }

int concurrency() {
  return Kokkos::is_initialized() ? Kokkos::DefaultExecutionSpace().concurrency() : 0;
}

std::string device_description() {
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::Cuda>) {
    int dev = Kokkos::Cuda().cuda_device();
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
      return std::string(prop.name) + " (device " + std::to_string(dev) + ")";
    return "CUDA device " + std::to_string(dev);
  }
#endif
  std::string cpu = "host CPU";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) cpu = line.substr(p + 2);
      break;
    }
  }
  return cpu + ", " + std::to_string(concurrency()) + " threads";
}

std::string build_report() {
  std::ostringstream os;
  os << "knmf " << version() << " (git " << git_revision() << ")\n";
  os << "Kokkos " << kokkos_version() << ", Kokkos Kernels " << kokkos_kernels_version() << "\n";
  os << "backends:";
  for (const auto& b : enabled_backends()) os << ' ' << b;
  os << "\ndefault execution space: " << default_execution_space() << "\n";
  if (const auto arch = gpu_architecture(); !arch.empty()) os << "GPU code: " << arch << "\n";
  os << "solver kernels: "
     << (host_tuned_kernels ? "host-tuned"
         : host_backend     ? "portable, as a GPU runs them (KNMF_DEVICE_KERNELS_ON_HOST)"
                            : "portable (device)")
     << "\n";
  os << "MPI: " << (KNMF_HAVE_MPI ? "enabled" : "disabled") << "\n";
  os << "host BLAS kernels: " << blas_core() << "\n";
  return os.str();
}

}  // namespace knmf
