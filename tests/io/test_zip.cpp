// ZIP reader/writer: numpy's archives, corrupt and truncated ones, and the ZIP64 path.
#include <gtest/gtest.h>

#include <random>

#include "io_test_util.hpp"
#include "knmf/io/npy.hpp"
#include "knmf/io/zip.hpp"

namespace {

using knmf::io::ZipReader;
using knmf::io::ZipWriter;
using knmf::test::io_fixture;

std::string write_archive(const std::vector<std::pair<std::string, std::string>>& entries,
                          knmf::io::ZipWriteOptions options = {}) {
  std::string out;
  ZipWriter w([&](const char* p, std::size_t n) { out.append(p, n); }, options);
  for (const auto& [name, data] : entries) w.add(name, data);
  w.finish();
  return out;
}

std::string some_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (std::size_t k = 0; k < n; ++k) s[k] = static_cast<char>(k % 7 == 0 ? rng() : 'a' + k % 13);
  return s;
}

std::uint32_t get32(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(s[at + k]);
  return v;
}
void put32(std::string& s, std::size_t at, std::uint32_t v) {
  for (int k = 0; k < 4; ++k) s[at + k] = static_cast<char>((v >> (8 * k)) & 0xff);
}

TEST(Zip, ReadsNumpyArchives) {
  for (const char* name : {"small.df.npz", "stored.df.npz"}) {
    SCOPED_TRACE(name);
    ZipReader z(io_fixture(name));
    ASSERT_EQ(z.entries().size(), 3u);
    EXPECT_EQ(z.entries()[0].name, "data.npy");
    EXPECT_EQ(z.entries()[0].method, std::string(name) == "small.df.npz" ? 8 : 0);
    const auto data = knmf::io::parse_npy(z.read("data.npy"), name);
    EXPECT_EQ(data.doubles, (std::vector<double>{0, 1, 2, 3, 4, 5}));
    EXPECT_NE(z.find("columns.npy"), nullptr);
    EXPECT_EQ(z.find("nope.npy"), nullptr);
    KNMF_EXPECT_INPUT_ERROR(z.read("nope.npy"), name, "no entry 'nope.npy'");
  }
}

TEST(Zip, CorruptAndTruncatedArchivesNameTheProblem) {
  const std::string bad_crc = io_fixture("bad_crc.df.npz");
  ZipReader z(bad_crc);
  KNMF_EXPECT_INPUT_ERROR(z.read("data.npy"), bad_crc, "CRC-32 mismatch in entry 'data.npy'");
  EXPECT_NO_THROW(z.read("index.npy"));
  for (const char* name : {"truncated_tail.df.npz", "truncated_half.df.npz", "not_a_zip.df.npz"}) {
    const std::string path = io_fixture(name);
    KNMF_EXPECT_INPUT_ERROR(ZipReader{path}, path, "no end-of-central-directory record");
  }
  KNMF_EXPECT_INPUT_ERROR(ZipReader{"/nonexistent/a.npz"}, "/nonexistent/a.npz", "cannot open");
}

TEST(Zip, CorruptDirectoryFieldsAreCaught) {
  knmf::test::TempDir dir("knmf-zip");
  const std::string good = write_archive({{"a.bin", some_bytes(5000, 1)}, {"b.bin", "hello"}});
  const std::size_t cd = good.find("PK\x01\x02");
  ASSERT_NE(cd, std::string::npos);
  const auto path = (dir / "x.zip").string();

  std::string big_csize = good;  // compressed size runs into the directory
  put32(big_csize, cd + 20, 0x7fffffff);
  knmf::test::write_bytes(path, big_csize);
  KNMF_EXPECT_INPUT_ERROR(ZipReader(path).read("a.bin"), path, "runs past the central directory");

  std::string bomb = good;  // claims an impossible expansion ratio
  put32(bomb, cd + 24, 0xfffffff0u);
  knmf::test::write_bytes(path, bomb);
  KNMF_EXPECT_INPUT_ERROR(ZipReader(path).read("a.bin"), path, "claims");

  std::string small_usize = good;  // declared size smaller than the data
  put32(small_usize, cd + 24, 100);
  knmf::test::write_bytes(path, small_usize);
  KNMF_EXPECT_INPUT_ERROR(ZipReader(path).read("a.bin"), path, "more than its declared 100 bytes");

  std::string flipped = good;  // damage inside the deflate stream
  flipped[30 + 5 + 40] ^= 0x55;
  knmf::test::write_bytes(path, flipped);
  KNMF_EXPECT_INPUT_ERROR(ZipReader(path).read("a.bin"), path, "corrupt ZIP archive", "'a.bin'");

  std::string bad_local = good;
  bad_local[0] = 'X';
  knmf::test::write_bytes(path, bad_local);
  KNMF_EXPECT_INPUT_ERROR(ZipReader(path).read("a.bin"), path, "bad local header signature");

  std::string bad_dir = good;
  put32(bad_dir, good.size() - 22 + 16, static_cast<std::uint32_t>(good.size()));  // directory offset
  knmf::test::write_bytes(path, bad_dir);
  KNMF_EXPECT_INPUT_ERROR(ZipReader{path}, path, "central directory");
}

void expect_round_trip(const std::vector<std::pair<std::string, std::string>>& entries,
                       knmf::io::ZipWriteOptions options) {
  knmf::test::TempDir dir("knmf-zip");
  const std::string bytes = write_archive(entries, options);
  const auto path = (dir / "rt.zip").string();
  knmf::test::write_bytes(path, bytes);
  ZipReader z(path);
  ASSERT_EQ(z.entries().size(), entries.size());
  for (std::size_t k = 0; k < entries.size(); ++k) {
    EXPECT_EQ(z.entries()[k].name, entries[k].first);
    EXPECT_EQ(z.entries()[k].method, 8);
    EXPECT_EQ(z.entries()[k].uncompressed_size, entries[k].second.size());
    EXPECT_EQ(z.read(entries[k].first), entries[k].second);
  }
}

TEST(Zip, WriterRoundTrip) {
  const std::vector<std::pair<std::string, std::string>> entries = {
      {"data.npy", some_bytes(1 << 20, 2)}, {"empty", ""}, {"g\xc3\xa9nes.npy", "x"}};
  expect_round_trip(entries, {});
  const std::string bytes = write_archive(entries);
  EXPECT_LT(bytes.size(), entries[0].second.size() / 2) << "deflate should compress this";
  EXPECT_EQ(bytes.find("PK\x06\x06"), std::string::npos) << "no ZIP64 records unless needed";
  KNMF_EXPECT_INPUT_ERROR(write_archive({{"a", "1"}, {"a", "2"}}), "duplicate entry name 'a'");
}

TEST(Zip, ForcedZip64RoundTrip) {
  const std::vector<std::pair<std::string, std::string>> entries = {
      {"data.npy", some_bytes(300000, 3)}, {"index.npy", "abc"}, {"empty", ""}};
  knmf::io::ZipWriteOptions opts;
  opts.force_zip64 = true;
  expect_round_trip(entries, opts);
  const std::string bytes = write_archive(entries, opts);
  EXPECT_NE(bytes.find("PK\x06\x06"), std::string::npos) << "ZIP64 end record";
  EXPECT_NE(bytes.find("PK\x06\x07"), std::string::npos) << "ZIP64 locator";
  // The 32-bit fields of the end record point at the ZIP64 record.
  EXPECT_EQ(get32(bytes, bytes.size() - 22 + 16), 0xffffffffu);
  // Entry sizes in the central directory live in the ZIP64 extra field.
  const std::size_t cd = bytes.find("PK\x01\x02");
  EXPECT_EQ(get32(bytes, cd + 20), 0xffffffffu);
  EXPECT_EQ(get32(bytes, cd + 42), 0xffffffffu);
}

/// The archive with its entries' DOS times and dates zeroed (local headers and central
/// directory, walked by their sizes), so two writes a second apart compare equal.
std::string without_times(std::string a) {
  auto get16 = [&](std::size_t at) { return std::size_t(std::uint8_t(a[at])) | std::size_t(std::uint8_t(a[at + 1])) << 8; };
  std::size_t at = 0;
  while (get32(a, at) == 0x04034b50u) {  // local headers: time, date at 10; sizes at 18, 26, 28
    put32(a, at + 10, 0);
    at += 30 + get16(at + 26) + get16(at + 28) + get32(a, at + 18);
  }
  while (get32(a, at) == 0x02014b50u) {  // central directory: time, date at 12
    put32(a, at + 12, 0);
    at += 46 + get16(at + 28) + get16(at + 30) + get16(at + 32);
  }
  return a;
}

TEST(Zip, ADeflateMemoReusesRepeatedEntriesByteForByte) {
  const std::vector<std::pair<std::string, std::string>> entries = {
      {"data.npy", some_bytes(200000, 4)}, {"columns.npy", some_bytes(50000, 5)},
      {"index.npy", "small"}};
  knmf::io::DeflateMemo memo(1024);
  knmf::io::ZipWriteOptions with;
  with.memo = &memo;
  const std::string plain = without_times(write_archive(entries));
  EXPECT_EQ(without_times(write_archive(entries, with)), plain);
  EXPECT_EQ(memo.reused(), 0u) << "nothing to reuse in the first archive";
  EXPECT_EQ(without_times(write_archive(entries, with)), plain);
  EXPECT_EQ(memo.reused(), 2u) << "both large entries again; the small one is not kept";
  expect_round_trip(entries, with);
  // the same size, one byte different: deflated anew, and read back as written
  auto changed = entries;
  changed[1].second[777] ^= 1;
  const std::size_t before = memo.reused();
  EXPECT_EQ(without_times(write_archive(changed, with)), without_times(write_archive(changed)));
  EXPECT_EQ(memo.reused(), before + 1) << "only data.npy is the same";
  expect_round_trip(changed, with);
  // a memo of one entry: alternating inputs evict each other
  knmf::io::DeflateMemo one(1024, 1);
  with.memo = &one;
  write_archive(entries, with);
  EXPECT_EQ(one.reused(), 0u) << "columns.npy evicted data.npy";
  knmf::io::DeflateMemo none(1024, 0);  // keeps nothing
  with.memo = &none;
  EXPECT_EQ(without_times(write_archive(entries, with)), plain);
  EXPECT_EQ(none.reused(), 0u);
}

TEST(Zip, PythonZipfileReadsWhatWeWrite) {
  ASSERT_TRUE(knmf::test::python_with_pandas());
  knmf::test::TempDir dir("knmf-zip");
  for (bool zip64 : {false, true}) {
    SCOPED_TRACE(zip64 ? "zip64" : "plain");
    knmf::io::ZipWriteOptions opts;
    opts.force_zip64 = zip64;
    const std::string payload = some_bytes(200000, 4);
    const auto path = (dir / "py.zip").string();
    knmf::test::write_bytes(path, write_archive({{"a.bin", payload}, {"b.bin", "hello"}}, opts));
    const std::string script =
        "import sys, zipfile, zlib\n"
        "z = zipfile.ZipFile(sys.argv[1])\n"
        "assert z.testzip() is None\n"
        "assert z.namelist() == ['a.bin', 'b.bin'], z.namelist()\n"
        "assert z.read('b.bin') == b'hello'\n"
        "assert len(z.read('a.bin')) == int(sys.argv[2])\n"
        "assert zlib.crc32(z.read('a.bin')) == int(sys.argv[3])\n";
    const auto py = knmf::test::run_python(dir.path(), script,
                                           path + " " + std::to_string(payload.size()) + " " +
                                               std::to_string(knmf::test::crc32_of(payload)));
    EXPECT_EQ(py.status, 0) << py.out;
  }
}

}  // namespace
