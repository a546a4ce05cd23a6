#pragma once
// The device bytes a test's code holds at a time, and their peak, from Kokkos Tools' allocation
// events (what a GPU would hold: the memory plan's tests compare it with the plan).
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "knmf/core/types.hpp"

namespace knmf::test {

/// The device allocations live at a time (what a GPU would hold), learned from Kokkos Tools'
/// allocation events the way the device memory guard tells device Views from host ones (the
/// previous callbacks, the guard's in the device-kernels build, still run).
struct LiveDeviceBytes {
  LiveDeviceBytes(const LiveDeviceBytes&) = delete;
  LiveDeviceBytes& operator=(const LiveDeviceBytes&) = delete;
  static inline Kokkos::Tools::Experimental::EventSet previous{};
  static inline std::int64_t bytes = 0, peak = 0, views = 0, peak_views = 0;
  static bool counted(const Kokkos::Tools::SpaceHandle& space, const char* label) {
    const std::string l(label);
    return std::strcmp(space.name, MemSpace::name()) == 0 && l.rfind("knmf::", 0) == 0 &&
           l.rfind("knmf::host::", 0) != 0 &&
           !(l.size() >= 7 && l.compare(l.size() - 7, 7, "_mirror") == 0);
  }
  static void on_allocate(Kokkos::Tools::SpaceHandle space, const char* label, const void* ptr,
                          std::uint64_t size) {
    if (previous.allocate_data) previous.allocate_data(space, label, ptr, size);
    if (!counted(space, label)) return;
    bytes += std::int64_t(size);
    ++views;
    peak = std::max(peak, bytes);
    peak_views = std::max(peak_views, views);
  }
  static void on_deallocate(Kokkos::Tools::SpaceHandle space, const char* label,
                            const void* ptr, std::uint64_t size) {
    if (previous.deallocate_data) previous.deallocate_data(space, label, ptr, size);
    if (!counted(space, label)) return;
    bytes -= std::int64_t(size);
    --views;
  }
  LiveDeviceBytes() {
    namespace E = Kokkos::Tools::Experimental;
    previous = E::get_callbacks();
    bytes = peak = views = peak_views = 0;
    E::set_allocate_data_callback(on_allocate);
    E::set_deallocate_data_callback(on_deallocate);
  }
  ~LiveDeviceBytes() {
    namespace E = Kokkos::Tools::Experimental;
    E::set_allocate_data_callback(previous.allocate_data);
    E::set_deallocate_data_callback(previous.deallocate_data);
  }
  void restart_peak() { peak = bytes; }
  /// The live allocations are `want` bytes of Views: Kokkos rounds each View's bytes up to a
  /// multiple of 8, so up to 7 more per View.
  void expect_holds(std::int64_t want) const {
    EXPECT_GE(bytes, want);
    EXPECT_LT(bytes - want, 8 * std::max<std::int64_t>(views, 1));
  }
};

}  // namespace knmf::test
