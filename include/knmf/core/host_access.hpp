#pragma once
/// \file
/// Host access to device memory, in one place.
///
/// Host code (convergence decisions, slot bookkeeping, readers and writers) never touches an
/// element of a View in knmf::MemSpace directly: it reads or writes a host mirror, made here,
/// and moves the values with Kokkos::deep_copy.
///  * host_mirror(v): a host View shaped like v, contents undefined;
///  * host_copy(v):   a host View holding v's values (fences first).
/// On a GPU the mirror is a separate host allocation. On a host backend it normally aliases v
/// (no allocation, no copy), except in the device-kernels build (KNMF_DEVICE_KERNELS_ON_HOST),
/// where it is always a separate allocation, as on a GPU: there the device memory guard
/// (install_device_memory_guard) makes every other host access to device memory fail.

#include <Kokkos_Core.hpp>

#include "knmf/core/kernel_set.hpp"

namespace knmf {

template <class V>
typename V::HostMirror host_mirror(const V& v) {
  if constexpr (KNMF_DEVICE_KERNELS_ON_HOST) {
    return Kokkos::create_mirror(Kokkos::view_alloc(Kokkos::WithoutInitializing), v);
  } else {
    return Kokkos::create_mirror_view(Kokkos::view_alloc(Kokkos::WithoutInitializing), v);
  }
}

template <class V>
typename V::HostMirror host_copy(const V& v) {
  auto h = host_mirror(v);
  Kokkos::deep_copy(h, v);
  return h;
}

/// In the device-kernels build on a host backend: from now on, device allocations (Views
/// labelled "knmf::..." in the execution space's memory, not "knmf::host::..." and not
/// mirrors) are mapped inaccessible (mprotect) except while a Kokkos kernel, a deep_copy or a
/// Kokkos Kernels call (KokkosBlas / KokkosSparse region) runs, and a fault in one of them
/// ends the program with a message naming the allocation. Call once, after
/// Kokkos::initialize. KNMF_DEVICE_GUARD=0 in the environment leaves it off. A no-op in every
/// other build; returns whether the guard is on.
bool install_device_memory_guard();

}  // namespace knmf
