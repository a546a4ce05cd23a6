// The restricted unpickler (numpy object arrays): every opcode and global it knows, and its
// refusal of everything else. An accepted array holds exactly shape-many cells.
#include "fuzz_common.hpp"
#include "knmf/io/pickle.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  knmf::fuzz::input_errors_only([&] {
    const knmf::io::PickledArray a =
        knmf::io::unpickle_object_array(knmf::fuzz::as_bytes(data, size), "fuzz.pkl");
    std::uint64_t n = 1;
    for (const std::int64_t d : a.shape) {
      KNMF_FUZZ_CHECK(d >= 0);
      n *= static_cast<std::uint64_t>(d);
    }
    KNMF_FUZZ_CHECK(a.cells.size() == n);
  });
  return 0;
}
