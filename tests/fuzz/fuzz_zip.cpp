// ZIP archives and .npz members: the end records (ZIP64 included), the central directory,
// local headers, stored and deflate entries (CRC, declared sizes, inflate bounds), then each
// .npy member's header check (read_npz_header) and its bounded read (read_npz_member).
#include "fuzz_common.hpp"
#include "knmf/io/npy.hpp"
#include "knmf/io/zip.hpp"

using namespace knmf::io;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = knmf::fuzz::MemFile::write(data, size);
  knmf::fuzz::input_errors_only([&] {
    ZipReader zip(path);
    const std::vector<ZipEntry> entries = zip.entries();
    std::size_t tried = 0;
    for (const ZipEntry& e : entries) {
      if (++tried > 8) break;
      KNMF_FUZZ_CHECK(zip.find(e.name) != nullptr);
      knmf::fuzz::input_errors_only([&] {
        const std::string prefix = zip.read_prefix(e, 128);
        KNMF_FUZZ_CHECK(prefix.size() <= 128 && prefix.size() <= e.uncompressed_size);
      });
      knmf::fuzz::input_errors_only([&] {
        const std::string all = zip.read(e);
        KNMF_FUZZ_CHECK(all.size() == e.uncompressed_size);
      });
      if (e.name.size() > 4 && e.name.compare(e.name.size() - 4, 4, ".npy") == 0) {
        knmf::fuzz::input_errors_only([&] { read_npz_header(zip, e.name); });
        knmf::fuzz::input_errors_only([&] { read_npz_member(zip, e.name); });
      }
    }
  });
  return 0;
}
