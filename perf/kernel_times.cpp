#include "kernel_times.hpp"

#include <Kokkos_Core.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

namespace knmf::bench {

namespace {

using Clock = std::chrono::steady_clock;

struct Open {
  std::string key;  ///< the path of the kernel or region
  Clock::time_point start;
};

// Kokkos calls the callbacks from the thread that launches (this benchmark's main thread):
// no locking.
struct State {
  std::vector<std::string> path;  ///< the open regions' paths, innermost last
  std::vector<Open> regions, kernels;
  KernelTimes times;
  std::uint64_t next_id = 0;
};

State& state() {
  static State s;
  return s;
}

std::string child(const std::string& name) {
  const auto& p = state().path;
  return p.empty() ? name : p.back() + "/" + name;
}

// A kernel launched inside another (a deep copy's fill or copy kernel) is part of the
// outer one's time: only the outermost is counted.
void begin_kernel(const std::string& key) {
  state().kernels.push_back(Open{key, Clock::now()});
}

void end_kernel() {
  auto& s = state();
  if (s.kernels.empty()) return;
  const Open o = std::move(s.kernels.back());
  s.kernels.pop_back();
  if (!s.kernels.empty()) return;
  s.times.kernels[o.key] += std::chrono::duration<double>(Clock::now() - o.start).count();
  s.times.counts[o.key] += 1;
}

void on_begin(const char* name, const std::uint32_t, std::uint64_t* id) {
  *id = state().next_id++;
  begin_kernel(child(name));
}
void on_end(std::uint64_t) { end_kernel(); }

void on_push(const char* name) {
  auto& s = state();
  const std::string key = child(name);
  s.path.push_back(key);
  s.regions.push_back(Open{key, Clock::now()});
}

void on_pop() {
  auto& s = state();
  if (s.regions.empty()) return;
  const Open o = std::move(s.regions.back());
  s.regions.pop_back();
  s.path.pop_back();
  s.times.regions[o.key] += std::chrono::duration<double>(Clock::now() - o.start).count();
  s.times.counts[o.key] += 1;
}

void on_begin_copy(Kokkos::Tools::SpaceHandle, const char* dst, const void*,
                   Kokkos::Tools::SpaceHandle, const char*, const void*, std::uint64_t) {
  begin_kernel(child(std::string("deep_copy[") + dst + "]"));
}
void on_end_copy() { end_kernel(); }

}  // namespace

void install_kernel_timer() {
  static bool done = false;
  if (done) return;
  done = true;
  namespace E = Kokkos::Tools::Experimental;
  E::set_begin_parallel_for_callback(on_begin);
  E::set_end_parallel_for_callback(on_end);
  E::set_begin_parallel_reduce_callback(on_begin);
  E::set_end_parallel_reduce_callback(on_end);
  E::set_begin_parallel_scan_callback(on_begin);
  E::set_end_parallel_scan_callback(on_end);
  E::set_push_region_callback(on_push);
  E::set_pop_region_callback(on_pop);
  E::set_begin_deep_copy_callback(on_begin_copy);
  E::set_end_deep_copy_callback(on_end_copy);
}

KernelTimes take_kernel_times() {
  KernelTimes t = std::move(state().times);
  state().times = KernelTimes{};
  return t;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace knmf::bench
