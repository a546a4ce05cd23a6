#pragma once
/// \file
/// The one place that hides API differences between Kokkos/KokkosKernels 3.4 (what the
/// bootstrap builds from Debian's trilinos 13.2) and 4.x (what Spack installs on clusters).
/// Everything else in knmf is written to the API both versions offer.

#include <Kokkos_Core.hpp>

#include <KokkosBlas3_gemm.hpp>

#include <string>

#if KOKKOS_VERSION >= 40000
#define KNMF_KOKKOS_4 1
#else
#define KNMF_KOKKOS_4 0
#endif

// Execution-space-first KokkosBlas::gemm arrived with KokkosKernels 4.2 (kokkos-kernels@X
// always pairs with kokkos@X, so Kokkos' version stands for both).
#if KOKKOS_VERSION >= 40200
#define KNMF_KK_GEMM_HAS_SPACE 1
#else
#define KNMF_KK_GEMM_HAS_SPACE 0
#endif

namespace knmf::compat {

/// Math functions callable on host and device. 3.4 keeps them in Kokkos::Experimental.
#if KNMF_KOKKOS_4
using Kokkos::fabs;
using Kokkos::isfinite;
using Kokkos::log;
using Kokkos::sqrt;
#else
using Kokkos::Experimental::fabs;
using Kokkos::Experimental::isfinite;
using Kokkos::Experimental::log;
using Kokkos::Experimental::sqrt;
#endif

/// Kokkos::Profiling::ScopedRegion exists only in 4.x; pushRegion/popRegion in both.
class ScopedRegion {
public:
  explicit ScopedRegion(const std::string& name) { Kokkos::Profiling::pushRegion(name); }
  ~ScopedRegion() { Kokkos::Profiling::popRegion(); }
  ScopedRegion(const ScopedRegion&) = delete;
  ScopedRegion& operator=(const ScopedRegion&) = delete;
};

/// Labelled fence of one execution space instance (3.4 has no label argument).
template <class Space>
void fence(const Space& space, const char* label) {
#if KNMF_KOKKOS_4
  space.fence(label);
#else
  (void)label;
  space.fence();
#endif
}

/// C = alpha op(A) op(B) + beta C on `space`. With 3.4 the call runs on the default
/// instance, so the space is fenced first to keep stream order.
template <class Space, class AV, class BV, class CV>
void gemm(const Space& space, const char* transA, const char* transB,
          typename AV::const_value_type alpha, const AV& A, const BV& B,
          typename CV::const_value_type beta, const CV& C) {
#if KNMF_KK_GEMM_HAS_SPACE
  KokkosBlas::gemm(space, transA, transB, alpha, A, B, beta, C);
#else
  space.fence();
  KokkosBlas::gemm(transA, transB, alpha, A, B, beta, C);
#endif
}

}  // namespace knmf::compat
