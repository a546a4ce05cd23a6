#pragma once
/// \file
/// One replicate to compute: a row of cNMF's job table. The solver takes jobs, a run hands
/// them out and records them, the results file and cNMF's files store them; the table itself
/// (its seeds, drawn as cNMF draws them) is made by random/random_state.hpp
/// (cnmf_job_table) or read from cNMF's files (io/cnmf_files.hpp).

#include <cstdint>

namespace knmf {

/// One (k, iter, seed) replicate of cNMF's replicate plan (`cnmf prepare -k ... --n-iter N
/// --seed S`).
struct Job {
  int k = 0;
  int iter = 0;
  std::int64_t seed = 0;
  /// Position in the job table (cNMF's row index; workers split on it).
  std::int64_t index = 0;
};

}  // namespace knmf
