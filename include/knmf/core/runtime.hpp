#pragma once
/// \file
/// What knmf was built with and what it runs on: versions, backends, the default space.

#include <string>
#include <vector>

namespace knmf {

/// knmf's version, e.g. "0.1.0".
std::string version();
/// The git commit the library was built from (short hash; "+changes" when tracked files
/// differed from it; "unknown" when built outside a checkout). Generated at build time.
std::string git_revision();
/// Kokkos' version as "major.minor.patch" (two-digit patch, e.g. "4.6.01").
std::string kokkos_version();
/// Kokkos Kernels' version, in the same form.
std::string kokkos_kernels_version();
/// The GPU architecture the CUDA code was built for (e.g. "sm_90 (Kokkos_ARCH_HOPPER90)"),
/// or "" without CUDA.
std::string gpu_architecture();
/// Kokkos backends compiled in (e.g. {"OpenMP", "Serial"}).
std::vector<std::string> enabled_backends();
/// Name of Kokkos::DefaultExecutionSpace (e.g. "OpenMP", "Cuda").
std::string default_execution_space();
/// A multi-line report for `knmf --version`.
std::string build_report();
/// Concurrency of the default execution space (threads on the host; 0 before initialize).
int concurrency();
/// Description of the device in use (GPU name or host CPU), valid after Kokkos::initialize.
std::string device_description();

/// OpenBLAS 0.3.21 (Debian 12) does not recognise recent Xeons (Sapphire Rapids) and falls
/// back to its slowest x86-64 kernels ("Prescott"), which cuts GEMM speed several-fold. When
/// OpenBLAS (a dynamic-architecture build) is linked and reports that core, OPENBLAS_CORETYPE
/// is unset and the CPU has AVX-512 or AVX2, this re-selects OpenBLAS' kernels as SkylakeX or
/// Haswell. Call first thing in main, before any BLAS call. KNMF_KEEP_BLAS_CORE=1 disables it.
void ensure_blas_kernels(int argc, char** argv);
/// The BLAS kernel family in use (OpenBLAS' core name), or "unknown".
std::string blas_core();

}  // namespace knmf
