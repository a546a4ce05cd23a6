// .npy: the preamble and header dict (parse_npy_header), the data of every dtype knmf reads
// and object arrays through the restricted unpickler (parse_npy). An accepted array must hold
// shape-many values and survive format_npy -> parse_npy unchanged (bit for bit).
#include <cstring>

#include "fuzz_common.hpp"
#include "knmf/io/npy.hpp"

using namespace knmf::io;

namespace {

std::size_t value_count(const NpyArray& a) {
  switch (a.kind) {
    case NpyKind::Float: return a.doubles.size();
    case NpyKind::Int:
    case NpyKind::Bool: return a.ints.size();
    case NpyKind::Unicode: return a.strings.size();
    case NpyKind::Object: return a.cells.size();
  }
  return 0;
}

void round_trip(const NpyArray& a) {
  if (a.kind == NpyKind::Object) return;  // knmf writes no pickles
  std::string bytes;
  try {
    bytes = format_npy(a, "fuzz round trip");
  } catch (const knmf::InputError&) {
    return;  // e.g. a value that does not fit the dtype the writer picks
  }
  const NpyArray b = parse_npy(bytes, "fuzz round trip");  // what knmf writes, it must read
  KNMF_FUZZ_CHECK(b.shape == a.shape);
  KNMF_FUZZ_CHECK(b.kind == a.kind);
  KNMF_FUZZ_CHECK(!b.fortran_order);
  KNMF_FUZZ_CHECK(b.ints == a.ints);
  KNMF_FUZZ_CHECK(b.strings == a.strings);
  KNMF_FUZZ_CHECK(b.doubles.size() == a.doubles.size());
  KNMF_FUZZ_CHECK(a.doubles.empty() ||
                  std::memcmp(a.doubles.data(), b.doubles.data(), 8 * a.doubles.size()) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = knmf::fuzz::as_bytes(data, size);
  knmf::fuzz::input_errors_only([&] {
    const NpyHeader h = parse_npy_header(bytes, "fuzz.npy", max_npy_header_bytes);
    KNMF_FUZZ_CHECK(h.data_offset <= bytes.size());
    KNMF_FUZZ_CHECK(h.data_offset <= 12 + max_npy_header_bytes);
  });
  knmf::fuzz::input_errors_only([&] {
    const NpyArray a = parse_npy(bytes, "fuzz.npy");
    KNMF_FUZZ_CHECK(a.size() >= 0);
    KNMF_FUZZ_CHECK(value_count(a) == static_cast<std::size_t>(a.size()));
    round_trip(a);
  });
  return 0;
}
