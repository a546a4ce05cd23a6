#include "knmf/run/in_memory.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <type_traits>
#include <map>
#include <sstream>

#include "factorize_detail.hpp"
#include "knmf/core/error.hpp"
#include "knmf/matrix/csr_matrix.hpp"
#include "knmf/matrix/dense_matrix.hpp"
#include "knmf/run/memory.hpp"
#include "progress.hpp"

namespace knmf {
namespace detail {
namespace {

/// The in-memory channel: the ks in the order of the caller's jobs, results kept here.
class MemoryChannel : public QueueChannel {
public:
  MemoryChannel(const std::vector<Job>& jobs, ProgressHook& progress,
                std::vector<ReplicateResult>& out)
      : QueueChannel(jobs, progress), out_(out) {}

protected:
  void keep(ReplicateResult&& r) override { out_.push_back(std::move(r)); }

private:
  std::vector<ReplicateResult>& out_;
};

constexpr std::int64_t block_values = std::int64_t(1) << 20;  // values per converted block

template <class T>
CsrMatrix<T> csr_from(const ExecSpace& space, const HostX& X, const std::string& source) {
  // already the library's layout: copied as it is
  if (X.offsets_64 && !X.indices_64 && X.values_are<T>())
    return CsrMatrix<T>::from_host(space, size_type(X.n), size_type(X.g),
                                   static_cast<const size_type*>(X.offsets),
                                   static_cast<const ordinal_type*>(X.indices),
                                   static_cast<const T*>(X.values), source);
  CsrMatrix<T> M(space, size_type(X.n), size_type(X.g), size_type(X.stored()));
  io::CsrBlock<T> b;
  for (std::int64_t r0 = 0; r0 < X.n;) {
    const std::int64_t r1 = host_x_block_end(X, r0, block_values);
    host_x_rows(X, r0, r1, b, source);
    M.set_rows(size_type(r0), size_type(r1), b.row_offsets.data(), b.cols.data(), b.values.data());
    r0 = r1;
  }
  M.finalize(source);
  return M;
}

/// X dense on the device: a row-major X of type T as it is, anything else (the other type,
/// column-major, a CSR X the plan makes dense) converted in blocks of rows.
template <class T>
DenseMatrix<T> dense_from(const ExecSpace& space, const HostX& X, const std::string& source) {
  if (X.layout == HostX::Layout::dense_rows && X.values_are<T>())
    return DenseMatrix<T>::from_host(space, size_type(X.n), size_type(X.g),
                                     static_cast<const T*>(X.values), source);
  DenseMatrix<T> D(space, size_type(X.n), size_type(X.g));
  const std::int64_t block = std::max<std::int64_t>(1, block_values / X.g);
  std::vector<T> rows;
  io::CsrBlock<T> b;
  for (std::int64_t r0 = 0; r0 < X.n; r0 += block) {
    const std::int64_t r1 = std::min(X.n, r0 + block);
    rows.assign(size_t((r1 - r0) * X.g), T(0));
    if (X.sparse()) {
      host_x_rows(X, r0, r1, b, source);
      for (std::int64_t r = 0; r < r1 - r0; ++r)
        for (std::int64_t p = b.row_offsets[size_t(r)]; p < b.row_offsets[size_t(r + 1)]; ++p)
          rows[size_t(r * X.g + b.cols[size_t(p)])] += b.values[size_t(p)];
    } else {
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = 0; c < X.g; ++c) rows[size_t((r - r0) * X.g + c)] = X.at<T>(r, c);
    }
    D.set_rows(size_type(r0), size_type(r1), rows.data());
  }
  D.finalize(source);
  return D;
}

/// X's values against the arithmetic of T, as the driver's loader checks them (load.cpp):
/// float32, their scale; both, a dynamic range in which one value carries all of ||X||^2.
template <class T, class M>
void check_scale(const M& X, const std::string& source) {
  if constexpr (std::is_same_v<T, float>)
    check_float32_scale(X.stats(), X.rows(), X.cols(), source);
  check_whole_x(X.stats(), double(std::numeric_limits<T>::epsilon()), source);
}

}  // namespace
}  // namespace detail

template <class T>
InMemoryResult factorize_in_memory(const HostX& X, const std::vector<Job>& jobs,
                                   const InMemoryOptions& options, const std::string& source) {
  using namespace detail;
  const bool sparse_in = X.sparse();
  if (X.n <= 0 || X.g <= 0)
    input_error(source, " is empty (", X.n, " cells x ", X.g, " genes)");
  if (sparse_in && X.offset(0) != 0)
    input_error(source, ": the row offsets start at ", X.offset(0), ", not 0");
  FactorizeConfig c;
  c.batch = options.batch;
  c.format = options.format;
  c.device_memory_limit = options.device_memory_limit;
  c.quiet = true;
  c.dtype = sizeof(T) == 4 ? Dtype::float32 : Dtype::float64;
  RunPlan plan;
  plan.x_path = source;
  plan.jobs = jobs;
  plan.total = std::int64_t(jobs.size());
  plan.solver = options.solver;
  plan.solver.return_W = options.save_usages;
  plan.solver.validate();
  const std::int64_t most = std::min(X.n, X.g);
  for (const auto& j : jobs) {
    if (j.k < 1) input_error("k = ", j.k, " is invalid: it must be at least 1");
    if (j.k > most) input_error("k = ", j.k, " exceeds min(cells, genes) = ", most, " of ", source);
  }
  const std::int64_t budget = run_budget(c);
  const auto format = plan_x_format(c, X.n, X.g, X.stored(), sparse_in, int(sizeof(T)), budget);
  InMemoryResult out;
  out.x_format = format.choice;
  const std::int64_t bytes_x = format.bytes_x;
  const auto t0 = std::chrono::steady_clock::now();
  ProgressHook progress(options.on_progress, plan.total, t0);
  std::vector<ReplicateResult> done;
  MemoryChannel channel(plan.jobs, progress, done);
  std::ostringstream log;
  ExecSpace space;
  FactorizeSummary sum;
  if (out.x_format.sparse) {
    if (!sparse_in) input_error(source, ": format sparse needs a sparse X");
    const auto M = csr_from<T>(space, X, source);
    check_scale<T>(M, source);
    sum = run_jobs(c, plan, channel, nullptr, progress, M, budget, bytes_x, t0, log);
  } else {
    const auto M = dense_from<T>(space, X, source);
    check_scale<T>(M, source);
    sum = run_jobs(c, plan, channel, nullptr, progress, M, budget, bytes_x, t0, log);
  }
  out.cancelled = sum.cancelled;
  // back in the order of `jobs`
  std::map<std::int64_t, size_t> at;
  for (size_t i = 0; i < jobs.size(); ++i) at[jobs[i].index] = i;
  std::sort(done.begin(), done.end(), [&](const ReplicateResult& a, const ReplicateResult& b) {
    return at[a.job.index] < at[b.job.index];
  });
  out.replicates = std::move(done);
  return out;
}

template InMemoryResult factorize_in_memory<float>(const HostX&, const std::vector<Job>&,
                                                   const InMemoryOptions&, const std::string&);
template InMemoryResult factorize_in_memory<double>(const HostX&, const std::vector<Job>&,
                                                    const InMemoryOptions&, const std::string&);

}  // namespace knmf
