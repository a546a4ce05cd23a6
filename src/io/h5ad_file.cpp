/// \file
/// An .h5ad file open for reading (h5ad_file.hpp): opening its datasets, and reading its obs /
/// var names (bounded in memory against corrupt files). X is read in h5ad_reader.cpp.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "h5ad_file.hpp"
#include "knmf/core/error.hpp"
#include "knmf/io/utf8.hpp"

namespace knmf::io::detail {

namespace {

/// The most bytes one variable-length name may hold. A corrupt file's global heap can state
/// any length for a string, and HDF5 1.10 allocates and copies what it states before checking
/// it against the heap object (tests/fuzz/hdf5-bugs/oom-vlen-names-length.h5: 1.8 GB for one
/// name); HDF5 allocates each string read through knmf's allocator, which refuses longer ones.
constexpr std::size_t kMaxNameBytes = std::size_t{1} << 20;

/// The allocator HDF5 uses for the variable-length strings it reads for knmf (a dataset
/// transfer property list): malloc/free, refusing strings longer than kMaxNameBytes.
class BoundedVlenMemory {
public:
  BoundedVlenMemory() : dxpl_(H5Pcreate(H5P_DATASET_XFER)) {
    if (!dxpl_ || H5Pset_vlen_mem_manager(dxpl_.get(), alloc, this, release, nullptr) < 0)
      throw LogicError("cannot set HDF5's variable-length memory manager");
  }
  hid_t dxpl() const { return dxpl_.get(); }
  /// The size of the string refused last, 0 when none was.
  std::size_t refused() const { return refused_; }

private:
  static void* alloc(std::size_t size, void* self) {
    if (size > kMaxNameBytes) {
      static_cast<BoundedVlenMemory*>(self)->refused_ = size;
      return nullptr;
    }
    return std::malloc(size);
  }
  static void release(void* p, void*) { std::free(p); }
  h5::PropList dxpl_;
  std::size_t refused_ = 0;
};

/// Frees the variable-length strings HDF5 allocated into a read buffer (zeroed before the
/// read, so that the entries a failed read left unset are null).
class VlenReclaim {
public:
  VlenReclaim(hid_t type, hid_t space, hid_t dxpl, void* buf)
      : type_(type), space_(space), dxpl_(dxpl), buf_(buf) {}
  ~VlenReclaim() { H5Dvlen_reclaim(type_, space_, dxpl_, buf_); }
  VlenReclaim(const VlenReclaim&) = delete;
  VlenReclaim& operator=(const VlenReclaim&) = delete;

private:
  hid_t type_, space_, dxpl_;
  void* buf_;
};

}  // namespace

h5::Dataset H5adFile::open_dataset(const std::string& name) const {
  h5::Dataset d(H5Dopen2(fid.get(), name.c_str(), H5P_DEFAULT));
  if (!d) h5::fail(file, "cannot open dataset " + name);
  // Size the chunk cache so that the compressed chunks a bounded read touches stay cached
  // (a chunk larger than the cache would be inflated again for every partial read).
  h5::PropList dcpl(H5Dget_create_plist(d.get()));
  if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return d;
  const auto ext = h5::dims(d.get());
  std::vector<hsize_t> chunk(ext.size());
  if (ext.empty() || H5Pget_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()) < 0)
    return d;
  h5::Datatype type(H5Dget_type(d.get()));
  std::size_t chunk_bytes = H5Tget_size(type.get());
  for (hsize_t c : chunk) chunk_bytes *= c;
  // A row band of a 2-D X spans every column chunk; keep one band plus one chunk.
  std::size_t want = 2 * chunk_bytes;
  if (ext.size() == 2 && chunk[1] > 0)
    want = ((ext[1] + chunk[1] - 1) / chunk[1] + 1) * chunk_bytes;
  want = std::min(want, std::max(opts.chunk_bytes, 2 * chunk_bytes));
  const std::size_t default_bytes = std::size_t{1} << 20;
  if (want <= default_bytes) return d;
  d.reset();
  h5::PropList dapl(H5Pcreate(H5P_DATASET_ACCESS));
  H5Pset_chunk_cache(dapl.get(), 10007, want, H5D_CHUNK_CACHE_W0_DEFAULT);
  h5::Dataset again(H5Dopen2(fid.get(), name.c_str(), dapl.get()));
  if (!again) h5::fail(file, "cannot open dataset " + name);
  return again;
}

/// The kind of the object at an existing `path`; an object HDF5 cannot open (a corrupt
/// object header) is an input error naming it, not a "wrong kind".
H5I_type_t H5adFile::kind_of(const std::string& path) const {
  const H5I_type_t kind = h5::object_type(fid.get(), path);
  if (kind == H5I_BADID) input_error(file, ": cannot open ", path, " (a corrupt object header?)");
  return kind;
}

/// Strings of a 1-D dataset read through the memory type `mem` (a string type, or a compound
/// holding just the string field), `layout` describing each element. Read in bounded pieces,
/// after its length is checked to be `expected` (X's `dim`s): a dataset's declared length
/// costs the file nothing, so nothing is sized by it before it agrees with X.
std::vector<std::string> H5adFile::read_strings(const h5::Dataset& d, const std::string& name,
                                                hid_t mem, const h5::StringLayout& layout,
                                                std::int64_t expected, const char* dim) const {
  const auto ext = h5::dims(d.get());
  if (ext.size() != 1) input_error(file, ": ", name, " has rank ", ext.size(), "; expected 1");
  if (ext[0] != static_cast<hsize_t>(expected))
    input_error(file, ": ", name, " has ", ext[0], " names but X has ", expected, " ", dim, "s");
  const std::int64_t total = static_cast<std::int64_t>(ext[0]);
  const std::size_t es = H5Tget_size(mem);
  const std::int64_t chunk = std::max<std::int64_t>(1, static_cast<std::int64_t>(opts.chunk_bytes / (es + 32)));
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(total));
  RawBuffer buf;
  void* raw = raw_resize(buf, static_cast<std::size_t>(std::min(chunk, std::max<std::int64_t>(total, 1))) * es);
  if (layout.variable && H5Tget_class(mem) == H5T_STRING) check_name_lengths(d, name, total);
  h5::Dataspace fspace(H5Dget_space(d.get()));
  BoundedVlenMemory vlen;
  for (std::int64_t a = 0; a < total; a += chunk) {
    const hsize_t start = static_cast<hsize_t>(a), n = static_cast<hsize_t>(std::min(chunk, total - a));
    h5::Dataspace mspace(H5Screate_simple(1, &n, nullptr));
    std::memset(raw, 0, n * es);
    std::optional<VlenReclaim> reclaim;
    if (layout.variable) reclaim.emplace(mem, mspace.get(), vlen.dxpl(), raw);
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr) < 0 ||
        H5Dread(d.get(), mem, mspace.get(), fspace.get(), vlen.dxpl(), raw) < 0) {
      const std::string where = knmf::detail::concat(name, "[", a, ":", a + static_cast<std::int64_t>(n), "]");
      if (vlen.refused())
        input_error(file, ": ", where, " holds a name of ", vlen.refused(), " bytes (more than ",
                    kMaxNameBytes, "): the file is corrupt");
      h5::fail(file, "cannot read " + where);
    }
    h5::decode_strings(layout, raw, n, out);
  }
  return out;
}

/// The stored lengths of a contiguous dataset of variable-length strings, checked before
/// HDF5 reads it: HDF5 1.10 allocates and clears a buffer of the length an element states
/// before it compares it with the heap object (1.9 GB for one name of a corrupt file), which
/// the allocator of read_strings cannot prevent, only refuse afterwards. Each element is
/// stored as its length (4 bytes, little-endian), the heap collection's address and the
/// object's index (4 bytes); a name cannot be longer than kMaxNameBytes, nor its elements lie
/// past the end of the file. Chunked datasets (their chunks may be filtered) are left to
/// read_strings' allocator.
void H5adFile::check_name_lengths(const h5::Dataset& d, const std::string& name,
                                  std::int64_t total) const {
  h5::PropList dcpl(H5Dget_create_plist(d.get()));
  if (!dcpl || H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS || total <= 0) return;
  const haddr_t at = H5Dget_offset(d.get());
  if (at == HADDR_UNDEF) return;  // no storage allocated: every name reads as empty
  h5::PropList fcpl(H5Fget_create_plist(fid.get()));
  std::size_t sizeof_addr = 0, sizeof_size = 0;
  if (!fcpl || H5Pget_sizes(fcpl.get(), &sizeof_addr, &sizeof_size) < 0) return;
  const std::uint64_t elem = 8 + sizeof_addr;
  if (H5Dget_storage_size(d.get()) != elem * static_cast<std::uint64_t>(total)) return;
  hsize_t file_size = 0;
  if (H5Fget_filesize(fid.get(), &file_size) < 0) return;
  if (at > file_size || elem * static_cast<std::uint64_t>(total) > file_size - at)
    input_error(file, ": ", name, " lies past the end of the file (", total, " names at byte ", at,
                ", the file has ", file_size, "): the file is truncated or corrupt");
  // the raw bytes, through the file's own driver: a POSIX descriptor (sec2) or the image in
  // memory (core)
  h5::PropList fapl(H5Fget_access_plist(fid.get()));
  void* handle = nullptr;
  if (!fapl || H5Fget_vfd_handle(fid.get(), fapl.get(), &handle) < 0 || !handle) return;
  const hid_t driver = H5Pget_driver(fapl.get());
  if (driver != H5FD_SEC2 && driver != H5FD_CORE) return;
  const std::int64_t piece = 1 << 14;
  std::vector<unsigned char> buf;
  for (std::int64_t a = 0; a < total; a += piece) {
    const std::int64_t n = std::min(piece, total - a);
    const std::uint64_t off = at + elem * static_cast<std::uint64_t>(a), bytes = elem * static_cast<std::uint64_t>(n);
    const unsigned char* p = nullptr;
    if (driver == H5FD_CORE) {
      p = *static_cast<unsigned char**>(handle) + off;
    } else {
      buf.resize(static_cast<std::size_t>(bytes));
      std::size_t got = 0;
      while (got < buf.size()) {
        const ssize_t r = ::pread(*static_cast<int*>(handle), buf.data() + got, buf.size() - got,
                                  static_cast<off_t>(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) input_error(file, ": cannot read ", name, " (", r < 0 ? std::strerror(errno) : "end of file", ")");
        got += static_cast<std::size_t>(r);
      }
      p = buf.data();
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const unsigned char* e = p + elem * static_cast<std::uint64_t>(i);
      const std::uint32_t len = std::uint32_t(e[0]) | std::uint32_t(e[1]) << 8 |
                                std::uint32_t(e[2]) << 16 | std::uint32_t(e[3]) << 24;
      if (len > kMaxNameBytes)
        input_error(file, ": ", name, "[", a + i, "] states a length of ", len, " bytes (more than ",
                    kMaxNameBytes, "): the file is corrupt");
    }
  }
}

/// Where the obs or var names are (IndexLocation). Refuses a dataframe whose index cannot be
/// found.
H5adFile::IndexLocation H5adFile::locate_index(const char* elem, const char* dim) const {
  const std::string g = std::string("/") + elem;
  if (!h5::exists(fid.get(), g)) input_error(file, ": no ", g, " (the ", elem, " dataframe holding the ", dim, " names)");
  const H5I_type_t kind = kind_of(g);
  if (kind == H5I_DATASET) return {g, g + "['index']", true};
  if (kind != H5I_GROUP) input_error(file, ": ", g, " is neither a dataframe group nor a dataset");
  h5::Group grp(H5Gopen2(fid.get(), g.c_str(), H5P_DEFAULT));
  auto key = h5::string_attr(grp.get(), "_index");
  if (!key) {
    if (h5::exists(grp.get(), "_index")) key = "_index";
    else if (h5::exists(grp.get(), "index")) key = "index";
    else input_error(file, ": ", g, " has no _index attribute naming its index dataset");
  }
  const std::string name = g + "/" + *key;
  if (!h5::exists(fid.get(), name))
    input_error(file, ": ", name, " is missing (named by the _index attribute of ", g, ")");
  if (kind_of(name) != H5I_DATASET)
    input_error(file, ": ", name, " is a group (e.g. categorical); expected a string dataset");
  return {name, name, false};
}

/// The length of the obs or var index against X, read from the dataset's extent (no names
/// are read): factorize needs no cell names, but a file whose obs does not match X is
/// malformed (consensus would refuse it after the factorization).
void H5adFile::check_index_length(const char* elem, std::int64_t expected, const char* dim) const {
  const IndexLocation at = locate_index(elem, dim);
  h5::Dataset d = open_dataset(at.dataset);
  const auto ext = h5::dims(d.get());
  if (ext.size() == 1 && static_cast<std::int64_t>(ext[0]) != expected)
    input_error(file, ": ", at.name, " has ", ext[0], " names but X has ", expected, " ", dim, "s");
}

std::vector<std::string> H5adFile::index_names(const char* elem, std::int64_t expected,
                                               const char* dim) const {
  const IndexLocation at = locate_index(elem, dim);
  const std::string& name = at.name;
  h5::Dataset d = open_dataset(at.dataset);
  h5::Datatype t(H5Dget_type(d.get()));
  std::vector<std::string> names;
  if (!at.structured) {
    const auto layout = h5::string_layout(t.get());
    if (!layout) input_error(file, ": ", name, " is not a string dataset");
    h5::Datatype mem = h5::string_mem_type(*layout);
    names = read_strings(d, name, mem.get(), *layout, expected, dim);
  } else {
    if (H5Tget_class(t.get()) != H5T_COMPOUND || H5Tget_member_index(t.get(), "index") < 0)
      input_error(file, ": ", at.dataset, " is a dataset but not a structured array with an 'index' field");
    h5::Datatype member(H5Tget_member_type(t.get(), static_cast<unsigned>(H5Tget_member_index(t.get(), "index"))));
    const auto layout = h5::string_layout(member.get());
    if (!layout) input_error(file, ": ", name, " is not a string field");
    h5::Datatype str = h5::string_mem_type(*layout);
    h5::Datatype mem(H5Tcreate(H5T_COMPOUND, H5Tget_size(str.get())));
    H5Tinsert(mem.get(), "index", 0, str.get());
    names = read_strings(d, name, mem.get(), *layout, expected, dim);
  }
  if (static_cast<std::int64_t>(names.size()) != expected)
    input_error(file, ": ", name, " has ", names.size(), " names but X has ", expected, " ", dim, "s");
  // knmf writes names as UTF-8 strings (results file, cNMF's data frames): refuse what
  // would be stored as UTF-8 without being it
  for (std::size_t i = 0; i < names.size(); ++i)
    if (const std::size_t at = invalid_utf8_at(names[i]); at != std::string::npos)
      input_error(file, ": ", std::string(elem) == "var" ? "gene" : "cell", " name ", i, " (", name,
                  "[", i, "]) is not valid UTF-8 at byte ", at, " (bytes ", hex_bytes(names[i]),
                  "); knmf stores names as UTF-8: re-encode them in the .h5ad");
  return names;
}

}  // namespace knmf::io::detail
