#include "kernel_times.hpp"

#include <Kokkos_Core.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <unordered_map>
#include <vector>

namespace knmf::bench {

namespace {

using Clock = std::chrono::steady_clock;

/// A kernel or region path: its times and its children by name. Nodes live as long as the
/// process (a deque: stable addresses), so that an event costs one hash of its label in its
/// parent's children, not a path string built and compared.
struct Node {
  std::string path;
  double kernel_seconds = 0.0, region_seconds = 0.0, kernel_calls = 0.0, region_calls = 0.0;
  std::unordered_map<std::string, Node*> children;
};

struct Open {
  Node* node;
  Clock::time_point start;
};

// Kokkos calls the callbacks from the thread that launches (this benchmark's main thread):
// no locking.
struct State {
  std::deque<Node> nodes;
  Node root;                  ///< the path "" (outside every region)
  std::vector<Open> regions;  ///< open regions, innermost last
  std::vector<Open> kernels;  ///< open kernels (a deep copy's kernels nest in it)
  std::uint64_t next_id = 0;
};

State& state() {
  static State s;
  return s;
}

Node* child(const char* name) {
  auto& s = state();
  Node* parent = s.regions.empty() ? &s.root : s.regions.back().node;
  auto it = parent->children.find(name);
  if (it != parent->children.end()) return it->second;
  s.nodes.push_back(Node{});
  Node* n = &s.nodes.back();
  n->path = parent == &s.root ? std::string(name) : parent->path + "/" + name;
  parent->children.emplace(name, n);
  return n;
}

// A kernel launched inside another (a deep copy's fill or copy kernel) is part of the
// outer one's time: only the outermost is counted.
void begin_kernel(Node* n) { state().kernels.push_back(Open{n, Clock::now()}); }

void end_kernel() {
  auto& s = state();
  if (s.kernels.empty()) return;
  const Open o = s.kernels.back();
  s.kernels.pop_back();
  if (!s.kernels.empty()) return;
  o.node->kernel_seconds += std::chrono::duration<double>(Clock::now() - o.start).count();
  o.node->kernel_calls += 1;
}

void on_begin(const char* name, const std::uint32_t, std::uint64_t* id) {
  *id = state().next_id++;
  begin_kernel(child(name));
}
void on_end(std::uint64_t) { end_kernel(); }

void on_push(const char* name) {
  Node* n = child(name);
  state().regions.push_back(Open{n, Clock::now()});
}

void on_pop() {
  auto& s = state();
  if (s.regions.empty()) return;
  const Open o = s.regions.back();
  s.regions.pop_back();
  o.node->region_seconds += std::chrono::duration<double>(Clock::now() - o.start).count();
  o.node->region_calls += 1;
}

void on_begin_copy(Kokkos::Tools::SpaceHandle, const char* dst, const void*,
                   Kokkos::Tools::SpaceHandle, const char*, const void*, std::uint64_t) {
  begin_kernel(child((std::string("deep_copy[") + dst + "]").c_str()));
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
  KernelTimes t;
  for (Node& n : state().nodes) {
    if (n.kernel_calls > 0) t.kernels[n.path] = n.kernel_seconds;
    if (n.region_calls > 0) t.regions[n.path] = n.region_seconds;
    if (n.kernel_calls + n.region_calls > 0) t.counts[n.path] = n.kernel_calls + n.region_calls;
    n.kernel_seconds = n.region_seconds = n.kernel_calls = n.region_calls = 0.0;
  }
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
