#pragma once
/// \file
/// The one switch between the solver's two kernel sets. Only files that branch on it include
/// this header (knmf/core/types.hpp does not): a device-kernels build compiles every other
/// file exactly as the default build does.

#include "knmf/core/types.hpp"
#include "knmf/kernel_config.hpp"

namespace knmf {

/// True runs the host-tuned kernels (src/solver/host_kernels.cpp: vectorized loops, double
/// GEMMs formed transposed, one thread per team); false runs the portable kernels, which are
/// what a CUDA build runs. A host build takes the host-tuned set unless it is configured with
/// KNMF_DEVICE_KERNELS_ON_HOST=ON.
inline constexpr bool host_tuned_kernels = host_backend && !KNMF_DEVICE_KERNELS_ON_HOST;

}  // namespace knmf
