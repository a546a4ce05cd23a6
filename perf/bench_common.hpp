#pragma once
// Shared pieces of knmf's benchmarks: synthetic X made on the device, timing, context.
#include <string>

#include "knmf/matrix/dense_matrix.hpp"

namespace knmf::bench {

/// n x g dense non-negative X with planted low-rank structure, generated on the device
/// (no host copy), deterministic for a seed.
template <class T>
DenseMatrix<T> device_random_matrix(size_type n, size_type g, std::uint64_t seed);

/// Peak resident set size of this process in bytes (getrusage).
double peak_rss_bytes();
/// Current resident set size in bytes (/proc/self/statm).
double current_rss_bytes();

/// One line describing the machine and build (CPU, threads, Kokkos, knmf git).
std::string context_line();

}  // namespace knmf::bench
