#include "knmf/core/host_access.hpp"
#include "knmf/matrix/stats.hpp"

#include <limits>

#include "knmf/core/compat.hpp"
#include "knmf/core/error.hpp"

namespace knmf {

namespace {
/// Compensated (Neumaier) summation: the sums of X are exact to about one rounding, so that
/// X.mean() (scikit-learn's init scale) and ||X||^2 (the error identity) do not drift with n.
KOKKOS_INLINE_FUNCTION void neumaier_add(double& sum, double& comp, double v) {
  const double t = sum + v;
  if (Kokkos::fabs(sum) >= Kokkos::fabs(v))
    comp += (sum - t) + v;
  else
    comp += (v - t) + sum;
  sum = t;
}

struct ChunkStats {
  double sum, sum_c, norm2, norm2_c, min_value, max_value;
  size_type min_pos, max_pos, nonfinite, first_nonfinite_pos;
  double first_nonfinite_value;
};
}  // namespace

template <class Space, class T>
ValueStats value_stats_impl(const Space& space, const T* data, size_type count, size_type chunk) {
  KNMF_ASSERT(chunk > 0, "chunk must be positive");
  ValueStats out;
  out.count = count;
  if (count == 0) return out;
  const size_type nchunks = (count + chunk - 1) / chunk;
  Kokkos::View<ChunkStats*, typename Space::memory_space> partial(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::stats::partial"), nchunks);
  Kokkos::parallel_for(
      "knmf::stats::chunks",
      Kokkos::RangePolicy<Space, Kokkos::IndexType<size_type>>(space, 0, nchunks),
      KOKKOS_LAMBDA(const size_type c) {
        const size_type b = c * chunk;
        const size_type e = (b + chunk < count) ? b + chunk : count;
        ChunkStats s{0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1, -1, 0, -1, 0.0};
        for (size_type i = b; i < e; ++i) {
          const double v = static_cast<double>(data[i]);
          if (!Kokkos::isfinite(v)) {
            if (s.nonfinite == 0) {
              s.first_nonfinite_pos = i;
              s.first_nonfinite_value = v;
            }
            ++s.nonfinite;
            continue;
          }
          neumaier_add(s.sum, s.sum_c, v);
          neumaier_add(s.norm2, s.norm2_c, v * v);
          if (s.min_pos < 0 || v < s.min_value) {
            s.min_value = v;
            s.min_pos = i;
          }
          if (s.max_pos < 0 || v > s.max_value) {
            s.max_value = v;
            s.max_pos = i;
          }
        }
        partial(c) = s;
      });
  auto h = host_copy(partial);
  double sum_c = 0.0, norm2_c = 0.0;
  for (size_type c = 0; c < nchunks; ++c) {
    const auto& s = h(c);
    neumaier_add(out.sum, sum_c, s.sum);
    sum_c += s.sum_c;
    neumaier_add(out.norm2, norm2_c, s.norm2);
    norm2_c += s.norm2_c;
    if (s.min_pos >= 0 && (out.min_pos < 0 || s.min_value < out.min_value)) {
      out.min_value = s.min_value;
      out.min_pos = s.min_pos;
    }
    if (s.max_pos >= 0 && (out.max_pos < 0 || s.max_value > out.max_value)) {
      out.max_value = s.max_value;
      out.max_pos = s.max_pos;
    }
    if (s.nonfinite > 0 && out.nonfinite == 0) {
      out.first_nonfinite_pos = s.first_nonfinite_pos;
      out.first_nonfinite_value = s.first_nonfinite_value;
    }
    out.nonfinite += s.nonfinite;
  }
  out.sum += sum_c;
  // the compensated sum is (out.norm2, norm2_c): the largest square is removed from its high
  // part (exactly, when it dominates), the small rest kept in the compensation
  if (out.max_pos >= 0) out.norm2_rest = (out.norm2 - out.max_value * out.max_value) + norm2_c;
  out.norm2 += norm2_c;
  return out;
}

template <class T>
ValueStats value_stats(const ExecSpace& space, const T* data, size_type count, size_type chunk) {
  return value_stats_impl(space, data, count, chunk);
}

template <class T>
ValueStats host_value_stats(const T* data, size_type count, size_type chunk) {
  return value_stats_impl(Kokkos::DefaultHostExecutionSpace(), data, count, chunk);
}

template ValueStats value_stats<float>(const ExecSpace&, const float*, size_type, size_type);
template ValueStats value_stats<double>(const ExecSpace&, const double*, size_type, size_type);
template ValueStats host_value_stats<float>(const float*, size_type, size_type);
template ValueStats host_value_stats<double>(const double*, size_type, size_type);

}  // namespace knmf
