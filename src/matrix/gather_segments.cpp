#include "knmf/matrix/gather_segments.hpp"

#include <string>
#include <vector>

namespace knmf::detail {

GatherSegments GatherSegments::build(const size_type* off, size_type n_rows) {
  constexpr size_type S = gather_segment_entries;
  std::vector<size_type> rows, first{0}, owner;
  for (size_type a = 0; a < n_rows; ++a) {
    const size_type len = off[a + 1] - off[a];
    if (len <= S) continue;
    const size_type segs = (len + S - 1) / S;
    for (size_type s = 0; s < segs; ++s) owner.push_back(size_type(rows.size()));
    rows.push_back(a);
    first.push_back(first.back() + segs);
  }
  GatherSegments g;
  if (rows.empty()) return g;
  auto to_device = [](const char* label, const std::vector<size_type>& v) {
    Kokkos::View<size_type*, MemSpace> d(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)),
                                         v.size());
    Kokkos::deep_copy(d, Kokkos::View<const size_type*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                             v.data(), v.size()));
    return d;
  };
  g.rows = to_device("knmf::gather::long_rows", rows);
  g.first = to_device("knmf::gather::first_segment", first);
  g.owner = to_device("knmf::gather::segment_owner", owner);
  return g;
}

}  // namespace knmf::detail
