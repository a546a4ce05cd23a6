#pragma once
/// \file
/// What the solver returns for each replicate.

#include <cstdint>
#include <string>
#include <vector>

#include "knmf/core/job.hpp"

namespace knmf {

enum class ReplicateStatus {
  converged,   ///< met the tolerance
  max_iter,    ///< ran max_iter iterations without meeting it (or tol == 0)
  non_finite,  ///< the error or violation became NaN/Inf; H/W are what was reached
};
std::string to_string(ReplicateStatus s);

/// One iteration of a traced run (SolverOptions::record_trace).
struct TracePoint {
  int iter = 0;          ///< iterations done
  double error = 0.0;    ///< ||X - W H||_F after it
  double value = 0.0;    ///< the rule's value (CD: the projected-gradient violation; MU: 0)
  std::int64_t sweeps = 0;  ///< factor sweeps so far (ReplicateResult::n_sweeps)
  double seconds = 0.0;  ///< wall time from slot fill
};

struct ReplicateResult {
  Job job;                       ///< k, iter, seed, index of the job table
  std::int64_t n = 0, g = 0;     ///< shape of X
  std::vector<double> H;         ///< spectra, k x g row-major
  std::vector<double> W;         ///< usages, n x k row-major (only if requested)
  int n_iter = 0;                ///< iterations run
  /// Factor sweeps run, W's and H's (2 per iteration; more with inner_sweeps != 1, where
  /// each iteration still makes two products with X).
  std::int64_t n_sweeps = 0;
  double error_at_init = 0.0;    ///< ||X - W0 H0||_F
  double final_error = 0.0;      ///< ||X - W H||_F at the end
  ReplicateStatus status = ReplicateStatus::max_iter;
  double seconds = 0.0;          ///< wall time from slot fill to result (shared batch time)
  std::vector<TracePoint> trace; ///< per iteration, only with SolverOptions::record_trace
};

}  // namespace knmf
