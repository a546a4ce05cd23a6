#pragma once
/// \file
/// numpy's legacy RandomState (MT19937), bit for bit: integer seeding, random_sample,
/// the legacy polar Box-Muller gauss with its cache, and randint as cNMF uses it.
/// scikit-learn's init='random' and cNMF's job table are drawn from this generator, so
/// matching it exactly is what makes knmf's replicates the same replicates as cNMF's.

#include <array>
#include <cstdint>
#include <vector>

#include "knmf/core/job.hpp"

namespace knmf {

class RandomState {
public:
  /// numpy `RandomState(seed)`; seed must lie in [0, 2^32) (InputError otherwise, as numpy).
  explicit RandomState(std::int64_t seed);

  /// One raw 32-bit MT19937 output.
  std::uint32_t next_uint32();
  /// numpy `random_sample()`: a double in [0, 1) with 53 random bits.
  double random_sample();
  /// numpy legacy `standard_normal()` (polar method; every other value comes from the cache).
  double standard_normal();
  /// numpy `randint(low, high)` for the default int64 dtype, range [low, high) with
  /// high - low <= 2^32 (the masked rejection sampler numpy uses for such ranges).
  std::int64_t randint(std::int64_t low, std::int64_t high);

  /// Fill `out` with standard normals (C order, as numpy fills an array).
  void standard_normal(double* out, std::size_t count);

private:
  void regenerate();
  std::array<std::uint32_t, 624> key_{};
  int pos_ = 624;
  bool has_gauss_ = false;
  double gauss_ = 0.0;
};

/// cNMF's replicate plan (`cnmf prepare -k ... --n-iter N --seed S`):
/// `np.random.seed(S); seeds = randint(1, 2**31 - 1, size=len(ks) * N)`, then jobs in the
/// order of itertools.product(sorted(set(ks)), range(N)).
std::vector<Job> cnmf_job_table(const std::vector<int>& ks, int n_iter, std::int64_t seed);

/// cNMF's worker split: job i belongs to worker w when (i - w) % total == 0.
std::vector<Job> worker_jobs(const std::vector<Job>& jobs, int worker_index, int total_workers);

}  // namespace knmf
