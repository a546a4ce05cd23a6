#pragma once
/// \file
/// The one place for Kokkos / Kokkos Kernels version switches.
///
/// knmf is written to the API of Kokkos and Kokkos Kernels 4.5 and later, the releases
/// clusters ship (Spack's recipe takes 4.5:4.7; cmake/bootstrap.sh and CI build 4.6.01).
/// Within that window no switch is needed, so this header only refuses an older release
/// with a clear message. Should a later release change an API knmf calls, the switch goes
/// here, keyed on KOKKOS_VERSION / KOKKOSKERNELS_VERSION, and nowhere else.

#include <Kokkos_Core.hpp>
#include <KokkosKernels_config.h>

#if KOKKOS_VERSION < 40500
#error "knmf needs Kokkos 4.5 or newer (Spack: kokkos@4.5:4.7; or cmake/bootstrap.sh, which builds 4.6.01)"
#endif
#if !defined(KOKKOSKERNELS_VERSION) || KOKKOSKERNELS_VERSION < 40500
#error "knmf needs Kokkos Kernels 4.5 or newer, built against the same Kokkos release"
#endif
