#pragma once
/// \file
/// `knmf factorize` on an X held in host memory (the Python module's route): the same run as
/// the driver's from the point where X is loaded — the device format chosen by density and
/// memory (choose_format), the batch planned per k from the memory model (or forced), every k
/// through the batched solver, the progress and cancellation hook — with the results returned
/// instead of written. For the same X, jobs, options, batch, thread count and BLAS kernel the
/// numbers are the driver's, bit for bit.

#include <cstdint>
#include <functional>
#include <vector>

#include "knmf/core/job.hpp"
#include "knmf/core/options.hpp"
#include "knmf/matrix/host_x.hpp"
#include "knmf/run/factorize.hpp"
#include "knmf/solver/options.hpp"
#include "knmf/solver/result.hpp"

namespace knmf {

struct InMemoryOptions {
  SolverOptions solver;     ///< as the driver's options (return_W is set by save_usages)
  bool save_usages = true;  ///< return each replicate's W
  int batch = 0;            ///< --batch (0: planned from the memory model, as the driver)
  XFormat format = XFormat::automatic;  ///< --format
  std::int64_t device_memory_limit = 0;  ///< --device-memory-limit (0 = none)
  /// The driver's hook (FactorizeConfig::on_progress): after every iteration and when a
  /// replicate finishes; false from an iteration call stops the run there.
  std::function<bool(const RunProgress&)> on_progress;
};

struct InMemoryResult {
  std::vector<ReplicateResult> replicates;  ///< in the order of `jobs`; the finished ones only
  bool cancelled = false;                   ///< the hook stopped the run
  FormatChoice x_format;                    ///< X's device format and why
};

/// X is read where it is (knmf/matrix/host_x.hpp: index widths and value types converted row
/// block by row block while the run copies X into the library's own arrays, the one copy the
/// driver makes of a file). Runs `jobs` (any mix of k; run k by k in the order of first appearance, as the driver
/// does) on X. InputError for bad input (X not finite or negative, k out of range, options),
/// naming `source` for X. X must fit device memory next to one replicate (no streaming).
/// In compute type T (float or double).
template <class T>
InMemoryResult factorize_in_memory(const HostX& X, const std::vector<Job>& jobs,
                                   const InMemoryOptions& options,
                                   const std::string& source = "X");

}  // namespace knmf
