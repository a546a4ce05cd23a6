#pragma once
/// \file
/// A minimal ZIP reader and writer (zlib), enough for numpy's `.npz` archives.
///
/// Reader: stored and deflate entries, CRC-32 verified, ZIP64 extra fields and ZIP64
/// end-of-central-directory records. Writer: deflate entries with correct CRC, sizes and
/// central directory; ZIP64 records when an entry, an offset or the directory passes 4 GiB
/// (or always, with ZipWriteOptions::force_zip64). Corrupt or truncated archives throw
/// knmf::InputError naming the file and what is wrong. No encryption, no multi-disk archives.

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace knmf::io {

/// One entry of a ZIP archive's central directory.
struct ZipEntry {
  std::string name;
  std::uint16_t method = 0;  ///< 0 stored, 8 deflate
  std::uint16_t flags = 0;   ///< general-purpose bit flags
  std::uint32_t crc32 = 0;
  std::uint64_t compressed_size = 0;
  std::uint64_t uncompressed_size = 0;
  std::uint64_t local_header_offset = 0;
};

/// Reads a ZIP archive from a file: the central directory on construction, entries on demand.
/// One reader is not safe to use from several threads at once (reads share one stream).
class ZipReader {
public:
  /// Open `path` and read its central directory (InputError if missing, truncated or corrupt).
  explicit ZipReader(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<ZipEntry>& entries() const { return entries_; }
  /// The entry called `name`, or nullptr.
  const ZipEntry* find(const std::string& name) const;
  /// The uncompressed bytes of entry `name` (InputError if absent, corrupt or its CRC differs).
  std::string read(const std::string& name);
  /// The uncompressed bytes of `entry` (one of entries()). Allocates the entry's declared
  /// size (at most 1032 times its compressed size, deflate's limit) and no more: data that
  /// inflates beyond it fails at the first byte past it.
  std::string read(const ZipEntry& entry);
  /// The first min(`max_bytes`, declared size) uncompressed bytes of `entry` (fewer when its
  /// data ends sooner), inflating only that far; the CRC is not checked (it covers the whole
  /// entry). For a look at a header before the whole entry is read.
  std::string read_prefix(const ZipEntry& entry, std::size_t max_bytes);

private:
  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const;
  std::string read_at(std::uint64_t offset, std::uint64_t size, const char* what);
  /// Checks `entry`'s local header, sizes and method; the offset of its data.
  std::uint64_t data_offset(const ZipEntry& entry);
  /// Inflates `entry`'s deflate data (at `offset`) into `out` (sized to the bytes wanted);
  /// `whole`: output beyond out.size() is an error, else inflating stops there. Bytes produced.
  std::size_t inflate_into(const ZipEntry& entry, std::uint64_t offset, std::string& out, bool whole);

  std::string path_;
  std::ifstream in_;
  std::uint64_t file_size_ = 0;
  std::uint64_t directory_offset_ = 0;
  std::vector<ZipEntry> entries_;
};

/// Deflated entries kept for reuse across archives. A ZipWriter given one
/// (ZipWriteOptions::memo) deflates bytes it has seen before only once: cNMF's spectra files
/// of a run all carry the same 128 KB of gene names, whose compression cost as much as the
/// spectra's. The archives are byte for byte what they would be without it. Keeps the last
/// few inputs of at least `min_bytes` (their bytes, to compare, and their deflate). Not
/// thread-safe: one memo per writing thread.
class DeflateMemo {
public:
  explicit DeflateMemo(std::size_t min_bytes = 4096, std::size_t entries = 4)
      : min_bytes_(min_bytes), entries_(entries) {}
  /// Entries written from the memo so far.
  std::size_t reused() const { return reused_; }

private:
  friend class ZipWriter;
  struct Item {
    std::string raw, compressed;
    int level = 0;
    std::uint32_t crc = 0;
  };
  std::size_t min_bytes_, entries_, reused_ = 0;
  std::vector<Item> items_;  ///< the most recent first
};

/// Options of ZipWriter.
struct ZipWriteOptions {
  /// zlib compression level (0-9; 6 is zlib's and Python's default).
  int level = 6;
  /// Where to find and keep the deflate of repeated entries (none: every entry deflated).
  DeflateMemo* memo = nullptr;
  /// Write ZIP64 local/central extra fields and end records for every entry, as if the
  /// archive passed 4 GiB (tests use it; numpy's readers accept either form).
  bool force_zip64 = false;
};

/// Streams a ZIP archive of deflate entries to a sink (a file, a string, ...).
class ZipWriter {
public:
  /// Receives the archive's bytes in order.
  using Sink = std::function<void(const char* data, std::size_t size)>;

  explicit ZipWriter(Sink sink, ZipWriteOptions options = {});

  /// Compress `data` into a new entry called `name` (names must be unique).
  void add(const std::string& name, std::string_view data);
  /// Write the central directory and end records. No entry may be added afterwards.
  void finish();

private:
  struct Written {
    ZipEntry entry;
    bool zip64 = false;
  };
  void emit(const std::string& bytes);

  Sink sink_;
  ZipWriteOptions options_;
  std::uint64_t offset_ = 0;
  std::uint16_t dos_time_ = 0, dos_date_ = 0;
  std::vector<Written> written_;
  bool finished_ = false;
};

}  // namespace knmf::io
