#pragma once
/// \file
/// Index types and View aliases shared by the whole library.

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <type_traits>

#include "knmf/config.hpp"
#include "knmf/core/compat.hpp"

namespace knmf {

/// Counts and offsets that can pass 2^31 (n*g, nnz, n*R*k) are 64-bit.
using size_type = std::int64_t;
/// Column (gene) indices of a sparse X: 32-bit (g is at most a few tens of thousands).
using ordinal_type = std::int32_t;

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemSpace = ExecSpace::memory_space;
using HostSpace = Kokkos::HostSpace;

/// Column-major matrix in the default memory space. knmf stores row-major data as the
/// column-major transpose so that every big operand is LayoutLeft (what BLAS/cuBLAS take).
template <class T, class Space = MemSpace>
using Matrix = Kokkos::View<T**, Kokkos::LayoutLeft, Space>;
template <class T, class Space = MemSpace>
using Vector = Kokkos::View<T*, Kokkos::LayoutLeft, Space>;
template <class T>
using HostMatrix = Kokkos::View<T**, Kokkos::LayoutLeft, Kokkos::HostSpace>;
template <class T>
using HostVector = Kokkos::View<T*, Kokkos::LayoutLeft, Kokkos::HostSpace>;

/// True when the execution space runs on the host (OpenMP, Serial).
inline constexpr bool host_backend = std::is_same_v<MemSpace, Kokkos::HostSpace>;

}  // namespace knmf
