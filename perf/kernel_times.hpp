#pragma once
// Time per Kokkos kernel and per profiling region of this process, from in-process Kokkos
// Tools callbacks (no tool library): the per-kernel timings of perf/studies/roofline.md.
//
// Keys are paths: the enclosing regions' names and the kernel's (or region's) own, joined by
// '/', e.g. "knmf::solver::run/knmf::mu::iteration/knmf::mu::update_W/knmf::spmm_gather", so
// one label under two regions (the gather of X H^T under update_W, of W^T X under update_H)
// stays two entries. Kernels are parallel_for/reduce/scan and deep copies ("deep_copy[dst]");
// a region's time is inclusive (its kernels, its sub-regions and its host code). With the
// callbacks installed Kokkos fences before each event (its default for tools): on the OpenMP
// backend, where a kernel returns when done, that costs next to nothing and the times are the
// kernels' own.
#include <map>
#include <string>

namespace knmf::bench {

struct KernelTimes {
  std::map<std::string, double> kernels;  ///< seconds per kernel path
  std::map<std::string, double> regions;  ///< inclusive seconds per region path
  std::map<std::string, double> counts;   ///< calls per kernel or region path
};

/// Register the callbacks (once; later calls do nothing).
void install_kernel_timer();
/// The times accumulated since the last reset (or install), then start again from zero.
KernelTimes take_kernel_times();

/// A string as a JSON string literal (quotes included).
std::string json_string(const std::string& s);

}  // namespace knmf::bench
