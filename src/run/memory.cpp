#include "knmf/run/memory.hpp"

#include <Kokkos_Core.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "knmf/core/error.hpp"
#include "knmf/core/types.hpp"
#include "knmf/solver/nmf.hpp"

namespace knmf {

std::int64_t available_device_bytes() {
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same_v<ExecSpace, Kokkos::Cuda>) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) return std::int64_t(free_b);
  }
#endif
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    std::int64_t kb = 0;
    std::string unit;
    in >> kb >> unit;
    if (key == "MemAvailable:") return kb * 1024;
  }
  return std::int64_t(sysconf(_SC_AVPHYS_PAGES)) * sysconf(_SC_PAGESIZE);
}

std::int64_t used_device_bytes() {
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same_v<ExecSpace, Kokkos::Cuda>) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) return std::int64_t(total_b - free_b);
  }
#endif
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return std::int64_t(resident) * sysconf(_SC_PAGESIZE);
}

AllocationRules gpu_allocation_rules(std::int64_t device_total) {
  AllocationRules r;
  r.granule = std::int64_t(2) << 20;
  r.slack = std::max<std::int64_t>(std::int64_t(256) << 20, device_total / 50);
  return r;
}

AllocationRules allocation_rules() {
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same_v<ExecSpace, Kokkos::Cuda>) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      return gpu_allocation_rules(std::int64_t(total_b));
    return gpu_allocation_rules(0);
  }
#endif
  return AllocationRules{};
}

std::int64_t unplanned_bytes(const AllocationRules& r) {
  return checked_add({r.slack, checked_mul({kPlannedViews, r.granule - 1}, "the memory plan")},
                     "the memory plan");
}

namespace {
std::int64_t unplanned() {
  static const std::int64_t b = unplanned_bytes(allocation_rules());
  return b;
}
}  // namespace

std::int64_t bytes_per_replicate(std::int64_t n, std::int64_t g, int k, int s, bool refit,
                                 double beta_loss, std::int64_t sparse_nnz, bool mu_repeats) {
  return solver_bytes(n, g, k, s, refit, beta_loss, sparse_nnz, mu_repeats).per_slot;
}

std::int64_t batch_fixed_bytes(std::int64_t n, std::int64_t g, int k, int s, bool refit,
                               double beta_loss, std::int64_t sparse_nnz) {
  return solver_bytes(n, g, k, s, refit, beta_loss, sparse_nnz).per_batch + unplanned();
}

BatchPlan plan_batch(std::int64_t n, std::int64_t g, int k, int s, std::int64_t bytes_x,
                     std::int64_t budget, int requested_R, int max_R, bool refit,
                     double beta_loss, std::int64_t sparse_nnz, bool mu_repeats) {
  BatchPlan p;
  p.n = n;
  p.g = g;
  p.k = k;
  p.element_bytes = s;
  p.bytes_x = bytes_x;
  p.budget = budget;
  const auto solver = solver_bytes(n, g, k, s, refit, beta_loss, sparse_nnz, mu_repeats);
  p.bytes_per_slot = solver.per_slot;
  p.bytes_fixed = solver.per_batch + unplanned();
  const std::int64_t room = budget - bytes_x - p.bytes_fixed;
  if (requested_R > 0) {
    p.R = requested_R;
    if (p.total() > budget)
      input_error("--batch ", requested_R, " needs ", format_bytes(double(p.total())),
                  " for k = ", k, " but only ", format_bytes(double(budget)),
                  " are available: use a smaller --batch or --batch auto");
    return p;
  }
  const std::int64_t fit = room > 0 ? room / p.bytes_per_slot : 0;
  if (fit < 1) {
    p.R = 1;
    input_error("not enough memory for k = ", k, ": one replicate needs ",
                format_bytes(double(p.total())), " (X ", format_bytes(double(bytes_x)),
                " + factors ", format_bytes(double(p.bytes_per_slot)), " + workspace ",
                format_bytes(double(p.bytes_fixed)), ") but only ", format_bytes(double(budget)),
                " are available");
  }
  p.R = int(std::min<std::int64_t>(fit, std::max(1, max_R)));
  return p;
}

std::string BatchPlan::describe() const {
  std::ostringstream os;
  os << "k = " << k << ": " << R << " replicate(s) per batch; device memory "
     << format_bytes(double(total())) << " of " << format_bytes(double(budget)) << " ("
     << "X " << format_bytes(double(bytes_x)) << ", factors " << R << " x "
     << format_bytes(double(bytes_per_slot)) << ", workspace " << format_bytes(double(bytes_fixed))
     << ")";
  return os.str();
}

}  // namespace knmf
