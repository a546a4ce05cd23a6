#include "knmf/solver/init.hpp"

#include <cmath>

#include "knmf/core/error.hpp"
#include "knmf/random/random_state.hpp"

namespace knmf {

template <class T>
void random_init(std::int64_t seed, double mean, int k, size_type n, size_type g,
                 T* H_row_major, T* W_row_major) {
  KNMF_ASSERT(k >= 1, "k must be positive");
  RandomState rs(seed);
  const T avg = T(std::sqrt(mean / double(k)));
  const size_type nh = size_type(k) * g;
  for (size_type e = 0; e < nh; ++e) H_row_major[e] = std::abs(avg * T(rs.standard_normal()));
  if (W_row_major == nullptr) return;
  const size_type nw = n * size_type(k);
  for (size_type e = 0; e < nw; ++e) W_row_major[e] = std::abs(avg * T(rs.standard_normal()));
}

template void random_init<float>(std::int64_t, double, int, size_type, size_type, float*, float*);
template void random_init<double>(std::int64_t, double, int, size_type, size_type, double*,
                                  double*);

}  // namespace knmf
