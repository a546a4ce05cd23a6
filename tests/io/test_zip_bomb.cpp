// Zip bombs (issue 15, defect 5): a 3 MB .npz whose member inflates to 3 GiB drove the process
// to 6.1 GB before failing. Each bomb is built here at run time (a deflate segment of 1 MiB of
// zeros, repeated: about 1000:1, within what deflate allows) and must fail with one line naming
// the file, the member and the declared sizes, before anything large is allocated. This
// executable replaces operator new to see (and cap) the largest allocation while a bomb is read.
#include <gtest/gtest.h>
#include <zlib.h>

#if defined(__GNUC__) && !defined(__clang__)
// the replaced operator delete frees what the replaced operator new mallocs
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "io_test_util.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/io/npy.hpp"
#include "knmf/io/zip.hpp"

namespace {
std::atomic<std::size_t> g_cap{0};      // 0: allocations are not watched
std::atomic<std::size_t> g_largest{0};  // the largest allocation while watched
}  // namespace

// nvcc compiles a replaced operator new for the device as well (it is implicitly
// __host__ __device__); the device pass gets a plain malloc, the host the watched one.
void* operator new(std::size_t n) {
#ifdef __CUDA_ARCH__
  return std::malloc(n ? n : 1);
#else
  if (const std::size_t cap = g_cap.load(std::memory_order_relaxed)) {
    std::size_t seen = g_largest.load(std::memory_order_relaxed);
    while (n > seen && !g_largest.compare_exchange_weak(seen, n)) {
    }
    if (n > cap) throw std::bad_alloc();  // what the old reader asked for: refused, not touched
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
#endif
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using knmf::io::NpyArray;
using knmf::test::TempDir;

constexpr std::size_t kMiB = std::size_t(1) << 20;
/// The most one allocation may take while a bomb is read: the inflate's header window and
/// input chunk (64 KiB each), with room to spare; a bomb asks for gigabytes.
constexpr std::size_t kAllowed = 1 * kMiB;

/// Watches allocations for the life of the object.
struct Watch {
  Watch() {
    g_largest = 0;
    g_cap = 64 * kMiB;
  }
  ~Watch() { g_cap = 0; }
  std::size_t largest() const { return g_largest.load(); }
};

/// Raw deflate of `data`, ending in a full flush (or, `final`, the last block): segments made
/// this way can be concatenated into one stream, none refers to another's bytes.
std::string deflate_segment(const std::string& data, bool final) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, final ? Z_FINISH : Z_FULL_FLUSH), final ? Z_STREAM_END : Z_OK);
  out.resize(out.size() - zs.avail_out);
  deflateEnd(&zs);
  return out;
}

/// One member of a hand-made archive: its deflate data, CRC and the size it inflates to
/// (`declared`: the size the archive states, when it lies).
struct Member {
  std::string name, deflated;
  std::uint32_t crc = 0;
  std::uint64_t size = 0, declared = 0;
};

/// `head` followed by `zeros_mib` MiB of zeros.
Member member(const std::string& name, const std::string& head, std::size_t zeros_mib) {
  Member m;
  m.name = name;
  m.deflated = deflate_segment(head, zeros_mib == 0);
  m.crc = static_cast<std::uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(head.data()),
                                           static_cast<uInt>(head.size())));
  m.size = head.size();
  if (zeros_mib > 0) {
    const std::string zeros(kMiB, '\0');
    const std::string seg = deflate_segment(zeros, false);
    const uLong zcrc = crc32(0L, reinterpret_cast<const Bytef*>(zeros.data()), uInt(kMiB));
    m.deflated.reserve(m.deflated.size() + zeros_mib * seg.size() + 16);
    for (std::size_t k = 0; k < zeros_mib; ++k) {
      m.deflated += seg;
      m.crc = static_cast<std::uint32_t>(crc32_combine(m.crc, zcrc, z_off_t(kMiB)));
    }
    m.deflated += deflate_segment("", true);
    m.size += std::uint64_t(zeros_mib) * kMiB;
  }
  m.declared = m.size;
  return m;
}

/// `v` as `n` little-endian bytes (bytes beyond the 8 of `v` are 0: no shift by 64 or more).
void put(std::string& s, std::uint64_t v, int n) {
  for (int k = 0; k < n; ++k) s.push_back(static_cast<char>(k < 8 ? (v >> (8 * k)) & 0xff : 0));
}

/// A ZIP archive of deflate members (sizes below 4 GiB: no ZIP64).
std::string archive(const std::vector<Member>& members) {
  std::string out, dir;
  for (const auto& m : members) {
    const std::uint64_t offset = out.size();
    for (std::string* h : {&out, &dir}) {
      const bool central = h == &dir;
      put(*h, central ? 0x02014b50 : 0x04034b50, 4);
      if (central) put(*h, 20, 2);  // made by
      put(*h, 20, 2);               // needed
      put(*h, 0, 2);                // flags
      put(*h, 8, 2);                // deflate
      put(*h, 0, 4);                // time, date
      put(*h, m.crc, 4);
      put(*h, m.deflated.size(), 4);
      put(*h, m.declared, 4);
      put(*h, m.name.size(), 2);
      put(*h, 0, 2);  // extra
      if (central) {
        put(*h, 0, 2 + 2 + 2 + 4);  // comment, disk, attributes
        put(*h, offset, 4);
      }
      *h += m.name;
    }
    out += m.deflated;
  }
  const std::uint64_t dir_offset = out.size();
  out += dir;
  put(out, 0x06054b50, 4);
  put(out, 0, 4);
  put(out, members.size(), 2);
  put(out, members.size(), 2);
  put(out, dir.size(), 4);
  put(out, dir_offset, 4);
  put(out, 0, 2);
  return out;
}

/// A .npy preamble and header (no data) for `descr` and `shape`, padded as numpy pads it.
std::string npy_header(const std::string& descr, const std::string& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  dict.append(64 - (10 + dict.size() + 1) % 64, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  put(out, dict.size(), 2);
  return out + dict;
}

std::string npy(const NpyArray& a) { return knmf::io::format_npy(a); }

const std::string kColumns = npy(NpyArray::from_strings({3}, {"n_components", "iter", "nmf_seed"}));
const std::string kIndex = npy(NpyArray::from_int64({2}, {0, 1}));

/// Expect `read` to throw an InputError (one line) containing every needle, allocating at
/// most kAllowed at once.
template <class F>
void expect_refused_small(F&& read, const std::vector<std::string>& needles) {
  std::string message;
  std::size_t largest = 0;
  bool input_error = false;
  {
    Watch w;
    try {
      read();
    } catch (const knmf::InputError& e) {
      input_error = true;
      message = e.what();
    } catch (const std::bad_alloc&) {
      message = "std::bad_alloc";
    }
    largest = w.largest();
  }
  EXPECT_TRUE(input_error) << "expected an InputError, got: " << message;
  for (const auto& n : needles) EXPECT_NE(message.find(n), std::string::npos) << message << " lacks " << n;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_LE(largest, kAllowed) << "largest allocation while reading: " << largest << " bytes";
}

TEST(ZipBomb, MemberLargerThanItsHeaderDeclaresFailsAtTheHeader) {
  // a (2, 3) int64 array followed by 3 GiB of zeros: the archive declares them all
  TempDir dir("knmf-zip-bomb");
  const std::string head = npy(NpyArray::from_int64({2, 3}, {1, 2, 3, 4, 5, 6}));
  const Member bomb = member("data.npy", head, 3072);
  const std::string bytes = archive({bomb, member("index.npy", kIndex, 0), member("columns.npy", kColumns, 0)});
  EXPECT_LT(bytes.size(), 4 * kMiB);  // ~3 MB on disk
  const auto path = (dir / "bomb.npz").string();
  knmf::test::write_bytes(path, bytes);
  const std::vector<std::string> needles{path + ":data.npy", "the archive declares " + std::to_string(bomb.size),
                                         "the .npy header declares " + std::to_string(head.size())};
  knmf::io::ZipReader zip(path);
  expect_refused_small([&] { knmf::io::read_npz_member(zip, "data.npy"); }, needles);
  expect_refused_small([&] { knmf::io::read_df_npz(path); }, needles);
  expect_refused_small([&] { knmf::io::read_cnmf_job_table(path); }, needles);
}

TEST(ZipBomb, FrameWhoseDataOutgrowsItsLabelsFailsBeforeTheData) {
  // The job table as the probe built it: an honest header of 134,217,728 x 3 int64 (3 GiB of
  // zeros, ~3 MB deflated) and an index of 2 labels.
  TempDir dir("knmf-zip-bomb");
  const std::string head = npy_header("<i8", "(134217728, 3)");
  const std::string bytes = archive({member("data.npy", head, 3072), member("index.npy", kIndex, 0),
                                     member("columns.npy", kColumns, 0)});
  const auto path = (dir / "nmf_idvrun_params.yaml.df.npz").string();
  knmf::test::write_bytes(path, bytes);
  expect_refused_small([&] { knmf::io::read_cnmf_job_table(path); },
                       {path, "2 index labels for 134217728 rows"});
}

TEST(ZipBomb, ArchiveThatUnderstatesTheMemberFailsAtTheFirstByteBeyond) {
  // the archive declares the 176 bytes the header needs; the stream goes on for 3 GiB
  TempDir dir("knmf-zip-bomb");
  const std::string head = npy(NpyArray::from_int64({2, 3}, {1, 2, 3, 4, 5, 6}));
  Member liar = member("data.npy", head, 3072);
  liar.declared = head.size();
  const auto path = (dir / "liar.npz").string();
  knmf::test::write_bytes(path, archive({liar, member("index.npy", kIndex, 0), member("columns.npy", kColumns, 0)}));
  expect_refused_small([&] { knmf::io::read_df_npz(path); },
                       {path, "'data.npy' inflates to more than its declared " + std::to_string(head.size())});
}

TEST(ZipBomb, ObjectArrayPickleBeyondItsElementsFails) {
  // a pickled (object) array of 2 elements whose member is declared 3 GiB long
  TempDir dir("knmf-zip-bomb");
  const std::string head = npy_header("|O", "(2,)");
  const Member bomb = member("index.npy", head, 3072);
  const auto path = (dir / "object.npz").string();
  knmf::test::write_bytes(path, archive({member("data.npy", npy(NpyArray::from_doubles({2, 1}, {1, 2})), 0),
                                         bomb, member("columns.npy", npy(NpyArray::from_int64({1}, {0})), 0)}));
  expect_refused_small([&] { knmf::io::read_df_npz(path); },
                       {path + ":index.npy", "the archive declares " + std::to_string(bomb.size),
                        "object array of shape (2,)"});
}

TEST(ZipBomb, HeaderLongerThanAMemberNeedsFails) {
  TempDir dir("knmf-zip-bomb");
  std::string head("\x93NUMPY\x02\x00", 8);
  put(head, 100 * kMiB, 4);  // a 100 MiB header, then zeros
  const auto path = (dir / "long_header.npz").string();
  knmf::test::write_bytes(path, archive({member("data.npy", head, 128), member("index.npy", kIndex, 0),
                                         member("columns.npy", kColumns, 0)}));
  expect_refused_small([&] { knmf::io::read_df_npz(path); },
                       {path + ":data.npy", "header of 104857600 bytes announced"});
}

TEST(ZipBomb, HonestFramesStillRead) {
  TempDir dir("knmf-zip-bomb");
  const auto path = (dir / "ok.npz").string();
  const std::string data = npy(NpyArray::from_int64({2, 3}, {3, 0, 7, 3, 1, 8}));
  knmf::test::write_bytes(path, archive({member("data.npy", data, 0), member("index.npy", kIndex, 0),
                                         member("columns.npy", kColumns, 0)}));
  Watch w;
  const auto jobs = knmf::io::read_cnmf_job_table(path);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[1].k, 3);
  EXPECT_EQ(jobs[1].iter, 1);
  EXPECT_EQ(jobs[1].seed, 8);
}

}  // namespace
