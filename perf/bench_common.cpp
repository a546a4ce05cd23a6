#include "bench_common.hpp"

#include <Kokkos_Random.hpp>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>

#include "knmf/core/runtime.hpp"
#include "knmf/version.hpp"

namespace knmf::bench {

template <class T>
DenseMatrix<T> device_random_matrix(size_type n, size_type g, std::uint64_t seed) {
  DenseMatrix<T> X(ExecSpace(), n, g);
  auto xt = X.xt();
  Kokkos::Random_XorShift64_Pool<ExecSpace> pool(seed);
  Kokkos::parallel_for(
      "knmf::bench::random_x", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<size_type>>(0, n),
      KOKKOS_LAMBDA(const size_type i) {
        auto gen = pool.get_state();
        // each cell mixes 3 of 10 planted programs; gene j belongs to program j % 10
        const int a = int(gen.urand(10)), b = int(gen.urand(10));
        for (size_type j = 0; j < g; ++j) {
          const int p = int(j % 10);
          const double base = (p == a ? 2.0 : 0.0) + (p == b ? 1.0 : 0.0) + 0.1;
          xt(j, i) = T(base * gen.drand(0.0, 1.0));
        }
        pool.free_state(gen);
      });
  Kokkos::fence();
  X.finalize("synthetic");
  return X;
}

template DenseMatrix<float> device_random_matrix<float>(size_type, size_type, std::uint64_t);
template DenseMatrix<double> device_random_matrix<double>(size_type, size_type, std::uint64_t);

double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) * 1024.0;
}

double current_rss_bytes() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE));
}

std::string context_line() {
  return "knmf " + version() + " (git " + git_revision() + "), Kokkos " + kokkos_version() +
         ", " + default_execution_space() + ", " + device_description();
}

}  // namespace knmf::bench
