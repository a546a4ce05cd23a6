#include "knmf/random/random_state.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "knmf/core/error.hpp"

namespace knmf {

namespace {
constexpr int kN = 624;
constexpr int kM = 397;
constexpr std::uint32_t kMatrixA = 0x9908b0dfU;
constexpr std::uint32_t kUpper = 0x80000000U;
constexpr std::uint32_t kLower = 0x7fffffffU;
}  // namespace

RandomState::RandomState(std::int64_t seed) {
  if (seed < 0 || seed > std::int64_t(0xffffffffLL))
    input_error("seed ", seed, " is outside [0, 2^32): numpy's RandomState refuses it");
  auto s = static_cast<std::uint32_t>(seed);
  for (int pos = 0; pos < kN; ++pos) {
    key_[pos] = s;
    s = 1812433253U * (s ^ (s >> 30)) + std::uint32_t(pos + 1);
  }
  pos_ = kN;
}

void RandomState::regenerate() {
  int i = 0;
  std::uint32_t y;
  for (; i < kN - kM; ++i) {
    y = (key_[i] & kUpper) | (key_[i + 1] & kLower);
    key_[i] = key_[i + kM] ^ (y >> 1) ^ (-(y & 1U) & kMatrixA);
  }
  for (; i < kN - 1; ++i) {
    y = (key_[i] & kUpper) | (key_[i + 1] & kLower);
    key_[i] = key_[i + (kM - kN)] ^ (y >> 1) ^ (-(y & 1U) & kMatrixA);
  }
  y = (key_[kN - 1] & kUpper) | (key_[0] & kLower);
  key_[kN - 1] = key_[kM - 1] ^ (y >> 1) ^ (-(y & 1U) & kMatrixA);
  pos_ = 0;
}

std::uint32_t RandomState::next_uint32() {
  if (pos_ == kN) regenerate();
  std::uint32_t y = key_[pos_++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= (y >> 18);
  return y;
}

double RandomState::random_sample() {
  const std::int32_t a = static_cast<std::int32_t>(next_uint32() >> 5);
  const std::int32_t b = static_cast<std::int32_t>(next_uint32() >> 6);
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

double RandomState::standard_normal() {
  if (has_gauss_) {
    has_gauss_ = false;
    const double v = gauss_;
    gauss_ = 0.0;
    return v;
  }
  double x1, x2, r2;
  do {
    x1 = 2.0 * random_sample() - 1.0;
    x2 = 2.0 * random_sample() - 1.0;
    r2 = x1 * x1 + x2 * x2;
  } while (r2 >= 1.0 || r2 == 0.0);
  const double f = std::sqrt(-2.0 * std::log(r2) / r2);
  gauss_ = f * x1;
  has_gauss_ = true;
  return f * x2;
}

void RandomState::standard_normal(double* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) out[i] = standard_normal();
}

std::int64_t RandomState::randint(std::int64_t low, std::int64_t high) {
  if (high <= low) input_error("randint: empty range [", low, ", ", high, ")");
  const std::uint64_t rng = std::uint64_t(high - 1 - low);
  if (rng == 0) return low;
  if (rng > 0xffffffffULL)
    input_error("randint: range [", low, ", ", high, ") wider than 2^32 is not supported");
  if (rng == 0xffffffffULL) return low + std::int64_t(next_uint32());
  std::uint32_t mask = static_cast<std::uint32_t>(rng);
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  std::uint32_t v;
  while ((v = (next_uint32() & mask)) > rng) {
  }
  return low + std::int64_t(v);
}

std::vector<Job> cnmf_job_table(const std::vector<int>& ks, int n_iter, std::int64_t seed) {
  if (ks.empty()) input_error("no k given (option -k/--components)");
  for (int k : ks)
    if (k < 1) input_error("k = ", k, " is invalid (option -k/--components): k must be >= 1");
  if (n_iter < 1) input_error("--n-iter ", n_iter, " is invalid: it must be >= 1");
  RandomState rs(seed);
  const std::size_t total = ks.size() * std::size_t(n_iter);
  std::vector<std::int64_t> seeds(total);
  for (auto& s : seeds) s = rs.randint(1, (std::int64_t(1) << 31) - 1);
  std::set<int> unique(ks.begin(), ks.end());
  std::vector<Job> jobs;
  std::int64_t i = 0;
  for (int k : unique)
    for (int r = 0; r < n_iter; ++r, ++i) jobs.push_back(Job{k, r, seeds[std::size_t(i)], i});
  return jobs;
}

std::vector<Job> worker_jobs(const std::vector<Job>& jobs, int worker_index, int total_workers) {
  if (total_workers < 1)
    input_error("--total-workers ", total_workers, " is invalid: it must be >= 1");
  if (worker_index < 0 || worker_index >= total_workers)
    input_error("--worker-index ", worker_index, " is outside [0, ", total_workers, ")");
  std::vector<Job> mine;
  for (const auto& j : jobs)
    if ((j.index - worker_index) % total_workers == 0) mine.push_back(j);
  return mine;
}

}  // namespace knmf
