// Minimal ZIP reader/writer on zlib (raw deflate), with ZIP64 support.
#include "knmf/io/zip.hpp"

#include <zlib.h>

#include <algorithm>
#include <ctime>
#include <iomanip>
#include <limits>
#include <sstream>

#include "knmf/core/error.hpp"

namespace knmf::io {

namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50;
constexpr std::uint32_t kCentralSig = 0x02014b50;
constexpr std::uint32_t kEndSig = 0x06054b50;
constexpr std::uint32_t kEnd64Sig = 0x06064b50;
constexpr std::uint32_t kEnd64LocatorSig = 0x07064b50;
constexpr std::uint16_t kZip64ExtraId = 0x0001;
constexpr std::uint32_t kMax32 = 0xFFFFFFFFu;
constexpr std::uint16_t kMax16 = 0xFFFFu;
constexpr std::size_t kLocalHeaderSize = 30;
constexpr std::size_t kCentralHeaderSize = 46;
constexpr std::size_t kEndSize = 22;
constexpr std::size_t kEnd64LocatorSize = 20;
constexpr std::size_t kEnd64Size = 56;
constexpr std::size_t kMaxComment = 0xFFFF;
/// zlib takes 32-bit lengths: feed it in chunks of at most this many bytes.
constexpr std::size_t kChunk = std::size_t(1) << 30;
/// deflate cannot compress better than about 1032:1; a larger claimed ratio is corrupt.
constexpr std::uint64_t kMaxDeflateRatio = 1032;

std::uint64_t get_le(const char* p, int n) {
  std::uint64_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(p[k]);
  return v;
}
std::uint16_t get16(const char* p) { return static_cast<std::uint16_t>(get_le(p, 2)); }
std::uint32_t get32(const char* p) { return static_cast<std::uint32_t>(get_le(p, 4)); }
std::uint64_t get64(const char* p) { return get_le(p, 8); }

void put_le(std::string& out, std::uint64_t v, int n) {
  for (int k = 0; k < n; ++k) out.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
}
void put16(std::string& out, std::uint64_t v) { put_le(out, v, 2); }
void put32(std::string& out, std::uint64_t v) { put_le(out, v, 4); }
void put64(std::string& out, std::uint64_t v) { put_le(out, v, 8); }

std::uint32_t crc32_of(std::string_view data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::size_t at = 0; at < data.size(); at += kChunk) {
    const std::size_t n = std::min(kChunk, data.size() - at);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + at), static_cast<uInt>(n));
  }
  return static_cast<std::uint32_t>(crc);
}

std::string hex32(std::uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(8) << std::setfill('0') << v;
  return os.str();
}

}  // namespace

// ---- reader ----------------------------------------------------------------------------------

template <class... Args>
void ZipReader::fail(const Args&... args) const {
  input_error(path_, ": corrupt ZIP archive: ", args...);
}

std::string ZipReader::read_at(std::uint64_t offset, std::uint64_t size, const char* what) {
  if (offset > file_size_ || size > file_size_ - offset)
    fail(what, " lies beyond the end of the file (truncated archive?)");
  std::string buf(static_cast<std::size_t>(size), '\0');
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(offset));
  in_.read(buf.data(), static_cast<std::streamsize>(size));
  if (static_cast<std::uint64_t>(in_.gcount()) != size) fail("short read of ", what);
  return buf;
}

ZipReader::ZipReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
  if (!in_) input_error(path, ": cannot open for reading");
  in_.seekg(0, std::ios::end);
  file_size_ = static_cast<std::uint64_t>(in_.tellg());

  // The end-of-central-directory record: the last "PK\5\6" whose comment ends the file.
  const std::uint64_t tail_size = std::min<std::uint64_t>(file_size_, kEndSize + kMaxComment);
  if (file_size_ < kEndSize)
    input_error(path, ": not a ZIP archive or truncated (", file_size_, " bytes)");
  const std::string tail = read_at(file_size_ - tail_size, tail_size, "the end record");
  std::int64_t at = -1;
  for (std::int64_t k = static_cast<std::int64_t>(tail.size() - kEndSize); k >= 0; --k) {
    const char* p = tail.data() + k;
    if (get32(p) == kEndSig && static_cast<std::uint64_t>(k) + kEndSize + get16(p + 20) == tail.size()) {
      at = k;
      break;
    }
  }
  if (at < 0)
    input_error(path, ": not a ZIP archive or truncated (no end-of-central-directory record)");
  const char* end = tail.data() + at;
  const std::uint64_t end_offset = file_size_ - tail_size + static_cast<std::uint64_t>(at);
  std::uint64_t count = get16(end + 10);
  std::uint64_t dir_size = get32(end + 12);
  std::uint64_t dir_offset = get32(end + 16);
  if (get16(end + 4) != 0 && get16(end + 4) != kMax16) fail("multi-disk archives are not supported");

  // ZIP64: a locator right before the end record points at the ZIP64 end record.
  if (end_offset >= kEnd64LocatorSize) {
    const std::string loc = read_at(end_offset - kEnd64LocatorSize, kEnd64LocatorSize, "the ZIP64 locator");
    if (get32(loc.data()) == kEnd64LocatorSig) {
      const std::uint64_t end64_offset = get64(loc.data() + 8);
      const std::string rec = read_at(end64_offset, kEnd64Size, "the ZIP64 end record");
      if (get32(rec.data()) != kEnd64Sig) fail("bad ZIP64 end-of-central-directory signature");
      count = get64(rec.data() + 32);
      dir_size = get64(rec.data() + 40);
      dir_offset = get64(rec.data() + 48);
    }
  }
  if (dir_offset > end_offset || dir_size > end_offset - dir_offset)
    fail("central directory (offset ", dir_offset, ", size ", dir_size, ") lies outside the file");
  if (count > dir_size / kCentralHeaderSize) fail("central directory too small for ", count, " entries");
  directory_offset_ = dir_offset;

  const std::string dir = read_at(dir_offset, dir_size, "the central directory");
  std::size_t p = 0;
  entries_.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t e = 0; e < count; ++e) {
    if (dir.size() - p < kCentralHeaderSize || get32(dir.data() + p) != kCentralSig)
      fail("bad central directory header for entry ", e);
    const char* h = dir.data() + p;
    ZipEntry z;
    z.flags = get16(h + 8);
    z.method = get16(h + 10);
    z.crc32 = get32(h + 16);
    z.compressed_size = get32(h + 20);
    z.uncompressed_size = get32(h + 24);
    const std::size_t name_len = get16(h + 28), extra_len = get16(h + 30), comment_len = get16(h + 32);
    z.local_header_offset = get32(h + 42);
    if (dir.size() - p - kCentralHeaderSize < name_len + extra_len + comment_len)
      fail("central directory entry ", e, " is truncated");
    z.name.assign(h + kCentralHeaderSize, name_len);
    // ZIP64 extra: 8-byte values for exactly the fields whose 32-bit slot is 0xFFFFFFFF.
    const char* x = h + kCentralHeaderSize + name_len;
    for (std::size_t q = 0; q + 4 <= extra_len;) {
      const std::uint16_t id = get16(x + q), len = get16(x + q + 2);
      if (q + 4 + len > extra_len) fail("bad extra field in entry '", z.name, "'");
      if (id == kZip64ExtraId) {
        std::size_t f = q + 4;
        auto take = [&](std::uint64_t& field) {
          if (field != kMax32) return;
          if (f + 8 > q + 4 + len) fail("short ZIP64 extra field in entry '", z.name, "'");
          field = get64(x + f);
          f += 8;
        };
        take(z.uncompressed_size);
        take(z.compressed_size);
        take(z.local_header_offset);
      }
      q += 4 + len;
    }
    // Two entries of one name: readers disagree on which counts (Python's zipfile takes the
    // last, a scan from the front the first), so the archive is ambiguous.
    for (const auto& prior : entries_)
      if (prior.name == z.name) fail("entry '", z.name, "' appears twice in the central directory");
    entries_.push_back(std::move(z));
    p += kCentralHeaderSize + name_len + extra_len + comment_len;
  }
}

const ZipEntry* ZipReader::find(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

std::string ZipReader::read(const std::string& name) {
  const ZipEntry* e = find(name);
  if (e == nullptr) input_error(path_, ": archive has no entry '", name, "'");
  return read(*e);
}

std::uint64_t ZipReader::data_offset(const ZipEntry& e) {
  if (e.flags & 0x1) input_error(path_, ": entry '", e.name, "' is encrypted");
  const std::string local = read_at(e.local_header_offset, kLocalHeaderSize, "a local header");
  if (get32(local.data()) != kLocalSig) fail("bad local header signature for entry '", e.name, "'");
  // The local header must name the entry the central directory names (as Python's zipfile
  // checks): otherwise the directory points at another entry's data.
  const std::size_t local_name_len = get16(local.data() + 26);
  if (local_name_len != e.name.size() ||
      read_at(e.local_header_offset + kLocalHeaderSize, local_name_len, "a local header's name") != e.name)
    fail("the local header of entry '", e.name, "' names another entry");
  const std::uint64_t at =
      e.local_header_offset + kLocalHeaderSize + get16(local.data() + 26) + get16(local.data() + 28);
  if (at > directory_offset_ || e.compressed_size > directory_offset_ - at)
    fail("entry '", e.name, "' runs past the central directory (truncated archive?)");
  if (e.method == 0 && e.compressed_size != e.uncompressed_size)
    fail("stored entry '", e.name, "' has different compressed and uncompressed sizes");
  if (e.method == 8 && e.uncompressed_size > e.compressed_size * kMaxDeflateRatio + 1024)
    fail("entry '", e.name, "' claims ", e.uncompressed_size, " bytes from ", e.compressed_size,
         " compressed");
  if (e.method != 0 && e.method != 8)
    input_error(path_, ": entry '", e.name, "' uses unsupported compression method ", e.method);
  return at;
}

namespace {
/// zlib's inflate state, ended on every path.
struct Inflater {
  z_stream zs{};
  bool live = false;
  ~Inflater() {
    if (live) inflateEnd(&zs);
  }
};
}  // namespace

std::size_t ZipReader::inflate_into(const ZipEntry& e, std::uint64_t at, std::string& out,
                                    bool whole) {
  Inflater inf;
  z_stream& zs = inf.zs;
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail("zlib inflateInit2 failed");
  inf.live = true;
  // The compressed data is read from the file a chunk at a time: a prefix needs only its start.
  constexpr std::uint64_t kInChunk = std::uint64_t(1) << 16;
  std::string in;
  std::uint64_t in_at = 0;
  std::size_t out_at = 0;
  int rc = Z_OK;
  char scratch[64];
  while (rc != Z_STREAM_END) {
    if (zs.avail_in == 0 && in_at < e.compressed_size) {
      const std::uint64_t n = std::min(kInChunk, e.compressed_size - in_at);
      in = read_at(at + in_at, n, "entry data");
      zs.next_in = reinterpret_cast<Bytef*>(in.data());
      zs.avail_in = static_cast<uInt>(n);
      in_at += n;
    }
    // Past the bytes wanted: a prefix is done; a whole entry inflates into a scratch buffer,
    // where any output is an error.
    const bool full = out_at == out.size();
    if (full && !whole) break;
    const std::size_t n = full ? sizeof scratch : std::min(kChunk, out.size() - out_at);
    zs.next_out = reinterpret_cast<Bytef*>(full ? scratch : out.data() + out_at);
    zs.avail_out = static_cast<uInt>(n);
    rc = inflate(&zs, Z_NO_FLUSH);
    const std::size_t produced = n - zs.avail_out;
    if (full && produced > 0)
      fail("entry '", e.name, "' inflates to more than its declared ", e.uncompressed_size, " bytes");
    out_at += produced;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && in_at == e.compressed_size)
      fail("entry '", e.name, "' has truncated deflate data");
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
      fail("entry '", e.name, "' has bad deflate data (",
           zs.msg ? std::string(zs.msg) : "error " + std::to_string(rc), ")");
  }
  return out_at;
}

std::string ZipReader::read(const ZipEntry& e) {
  const std::uint64_t at = data_offset(e);
  std::string out;
  if (e.method == 0) {
    out = read_at(at, e.compressed_size, "entry data");
  } else {
    // the declared size, at most kMaxDeflateRatio times the compressed one, is all that is
    // allocated: a stream that inflates further fails at its first byte beyond
    out.resize(static_cast<std::size_t>(e.uncompressed_size));
    const std::size_t got = inflate_into(e, at, out, true);
    if (got != out.size())
      fail("entry '", e.name, "' inflates to ", got, " bytes, declared ", e.uncompressed_size);
  }
  const std::uint32_t crc = crc32_of(out);
  if (crc != e.crc32)
    fail("CRC-32 mismatch in entry '", e.name, "' (stored ", hex32(e.crc32), ", computed ", hex32(crc), ")");
  return out;
}

std::string ZipReader::read_prefix(const ZipEntry& e, std::size_t max_bytes) {
  const std::uint64_t at = data_offset(e);
  const std::uint64_t n = std::min<std::uint64_t>(max_bytes, e.uncompressed_size);
  if (e.method == 0) return read_at(at, n, "entry data");
  std::string out(static_cast<std::size_t>(n), '\0');
  out.resize(inflate_into(e, at, out, false));
  return out;
}

// ---- writer ----------------------------------------------------------------------------------

ZipWriter::ZipWriter(Sink sink, ZipWriteOptions options)
    : sink_(std::move(sink)), options_(options) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  const int year = std::max(1980, tm.tm_year + 1900);
  dos_time_ = static_cast<std::uint16_t>((tm.tm_hour << 11) | (tm.tm_min << 5) | (tm.tm_sec / 2));
  dos_date_ = static_cast<std::uint16_t>(((year - 1980) << 9) | ((tm.tm_mon + 1) << 5) | tm.tm_mday);
}

void ZipWriter::emit(const std::string& bytes) {
  sink_(bytes.data(), bytes.size());
  offset_ += bytes.size();
}

namespace {
/// Raw deflate (no zlib header), as ZIP wants; fed in chunks for > 4 GiB inputs.
std::string deflate_raw(std::string_view data, int level) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    input_error("zip writer: zlib deflateInit2 failed (level ", level, ")");
  std::string compressed;
  compressed.resize(static_cast<std::size_t>(deflateBound(&zs, static_cast<uLong>(std::min(data.size(), kChunk)))) + 64);
  std::size_t in_at = 0, out_at = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (zs.avail_in == 0 && in_at < data.size()) {
      const std::size_t n = std::min(kChunk, data.size() - in_at);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + in_at));
      zs.avail_in = static_cast<uInt>(n);
      in_at += n;
    }
    if (out_at == compressed.size()) compressed.resize(compressed.size() * 2);
    const std::size_t n = std::min(kChunk, compressed.size() - out_at);
    zs.next_out = reinterpret_cast<Bytef*>(compressed.data() + out_at);
    zs.avail_out = static_cast<uInt>(n);
    rc = deflate(&zs, in_at == data.size() ? Z_FINISH : Z_NO_FLUSH);
    KNMF_ASSERT(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR, "deflate failed: ", rc);
    out_at += n - zs.avail_out;
  }
  deflateEnd(&zs);
  compressed.resize(out_at);
  return compressed;
}
}  // namespace

void ZipWriter::add(const std::string& name, std::string_view data) {
  KNMF_ASSERT(!finished_, "ZipWriter::add after finish");
  for (const auto& w : written_)
    if (w.entry.name == name) input_error("zip writer: duplicate entry name '", name, "'");
  if (name.size() > kMax16) input_error("zip writer: entry name too long");

  const std::uint32_t crc = crc32_of(data);
  DeflateMemo* memo = options_.memo && data.size() >= options_.memo->min_bytes_ ? options_.memo : nullptr;
  bool reused = false;
  if (memo)
    for (auto it = memo->items_.begin(); it != memo->items_.end(); ++it)
      if (it->crc == crc && it->level == options_.level && it->raw == data) {
        std::rotate(memo->items_.begin(), it, it + 1);  // the most recent first
        reused = true;
        ++memo->reused_;
        break;
      }
  std::string deflated;
  if (!reused) {
    deflated = deflate_raw(data, options_.level);
    if (memo && memo->entries_ > 0) {
      if (memo->items_.size() >= memo->entries_) memo->items_.pop_back();
      memo->items_.insert(memo->items_.begin(),
                          DeflateMemo::Item{std::string(data), deflated, options_.level, crc});
    }
  }
  const std::string& compressed = reused ? memo->items_[0].compressed : deflated;

  Written w;
  w.entry.name = name;
  w.entry.method = 8;
  w.entry.flags = std::any_of(name.begin(), name.end(), [](char c) { return c & 0x80; }) ? 0x800 : 0;
  w.entry.crc32 = crc;
  w.entry.compressed_size = compressed.size();
  w.entry.uncompressed_size = data.size();
  w.entry.local_header_offset = offset_;
  w.zip64 = options_.force_zip64 || data.size() >= kMax32 || compressed.size() >= kMax32 ||
            offset_ >= kMax32;

  std::string h;
  put32(h, kLocalSig);
  put16(h, w.zip64 ? 45 : 20);  // version needed to extract
  put16(h, w.entry.flags);
  put16(h, w.entry.method);
  put16(h, dos_time_);
  put16(h, dos_date_);
  put32(h, w.entry.crc32);
  put32(h, w.zip64 ? kMax32 : w.entry.compressed_size);
  put32(h, w.zip64 ? kMax32 : w.entry.uncompressed_size);
  put16(h, name.size());
  put16(h, w.zip64 ? 20 : 0);
  h += name;
  if (w.zip64) {
    put16(h, kZip64ExtraId);
    put16(h, 16);
    put64(h, w.entry.uncompressed_size);
    put64(h, w.entry.compressed_size);
  }
  emit(h);
  sink_(compressed.data(), compressed.size());
  offset_ += compressed.size();
  written_.push_back(std::move(w));
}

void ZipWriter::finish() {
  KNMF_ASSERT(!finished_, "ZipWriter::finish called twice");
  finished_ = true;
  const std::uint64_t dir_offset = offset_;
  for (const auto& w : written_) {
    const ZipEntry& e = w.entry;
    const bool big_usize = w.zip64 || e.uncompressed_size >= kMax32;
    const bool big_csize = w.zip64 || e.compressed_size >= kMax32;
    const bool big_offset = options_.force_zip64 || e.local_header_offset >= kMax32;
    const int extra = 8 * (big_usize + big_csize + big_offset);
    std::string h;
    put32(h, kCentralSig);
    put16(h, (3 << 8) | (extra ? 45 : 20));  // made by: Unix
    put16(h, extra ? 45 : 20);
    put16(h, e.flags);
    put16(h, e.method);
    put16(h, dos_time_);
    put16(h, dos_date_);
    put32(h, e.crc32);
    put32(h, big_csize ? kMax32 : e.compressed_size);
    put32(h, big_usize ? kMax32 : e.uncompressed_size);
    put16(h, e.name.size());
    put16(h, extra ? extra + 4 : 0);
    put16(h, 0);  // comment
    put16(h, 0);  // disk
    put16(h, 0);  // internal attributes
    put32(h, 0100644u << 16);  // external attributes: regular file, rw-r--r--
    put32(h, big_offset ? kMax32 : e.local_header_offset);
    h += e.name;
    if (extra) {
      put16(h, kZip64ExtraId);
      put16(h, extra);
      if (big_usize) put64(h, e.uncompressed_size);
      if (big_csize) put64(h, e.compressed_size);
      if (big_offset) put64(h, e.local_header_offset);
    }
    emit(h);
  }
  const std::uint64_t dir_size = offset_ - dir_offset;
  const std::uint64_t count = written_.size();
  const bool zip64 = options_.force_zip64 || count >= kMax16 || dir_offset >= kMax32 || dir_size >= kMax32;
  std::string t;
  if (zip64) {
    const std::uint64_t end64_offset = offset_;
    put32(t, kEnd64Sig);
    put64(t, kEnd64Size - 12);  // size of the rest of the record
    put16(t, (3 << 8) | 45);
    put16(t, 45);
    put32(t, 0);
    put32(t, 0);
    put64(t, count);
    put64(t, count);
    put64(t, dir_size);
    put64(t, dir_offset);
    put32(t, kEnd64LocatorSig);
    put32(t, 0);
    put64(t, end64_offset);
    put32(t, 1);
  }
  put32(t, kEndSig);
  put16(t, 0);
  put16(t, 0);
  put16(t, zip64 ? kMax16 : count);
  put16(t, zip64 ? kMax16 : count);
  put32(t, zip64 ? kMax32 : dir_size);
  put32(t, zip64 ? kMax32 : dir_offset);
  put16(t, 0);
  emit(t);
}

}  // namespace knmf::io
