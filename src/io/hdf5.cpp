/// \file
/// Helpers of the HDF5 RAII layer (include/knmf/io/detail/hdf5.hpp).

#include "io/hdf5.hpp"

// The file-driver class (knmf's write latch) moved to H5FDdevelop.h in HDF5 1.13, which later
// releases no longer include from hdf5.h.
#if __has_include(<H5FDdevelop.h>)
#include <H5FDdevelop.h>
#endif

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace knmf::io::detail::h5 {

ErrorSilencer::ErrorSilencer() {
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

ErrorSilencer::~ErrorSilencer() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

namespace {
herr_t keep_innermost(unsigned /*n*/, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<std::string*>(data);
  if (err->desc && *err->desc) *out = err->desc;
  return 0;
}
}  // namespace

std::string last_error() {
  std::string msg;
  // Downward: from the API call to the function that first detected the error; keep the last.
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, &keep_innermost, &msg);
  // Keep the message on one line.
  for (char& c : msg) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return msg;
}

// ---- the write latch: a POSIX file driver whose failed writes end the file's writing ----

namespace {

/// The latch of this thread that tripped last, while its file is open, and its errno (for
/// `fail`, which knows the file only by name: the reason of errors after a dropped write);
/// the errno of the latch closed last (for `close`).
thread_local const void* t_tripped = nullptr;
thread_local int t_tripped_err = 0;
thread_local int t_closed_err = 0;

struct Latched {
  H5FD_t pub;  // first: HDF5 sees this
  int fd = -1;
  haddr_t eoa = 0, eof = 0;
  dev_t dev = 0;
  ino_t ino = 0;
  int failed = 0;  // errno of the first failed write
};

Latched* latched(H5FD_t* f) { return reinterpret_cast<Latched*>(f); }
const Latched* latched(const H5FD_t* f) { return reinterpret_cast<const Latched*>(f); }

// as sec2: offsets are off_t
constexpr haddr_t kMaxAddr = (haddr_t(1) << (8 * sizeof(off_t) - 1)) - 1;

H5FD_t* latch_open(const char* name, unsigned flags, hid_t /*fapl*/, haddr_t maxaddr) {
  if (!name || !*name || maxaddr == 0 || maxaddr > kMaxAddr) return nullptr;
  int o = (flags & H5F_ACC_RDWR) ? O_RDWR : O_RDONLY;
  if (flags & H5F_ACC_TRUNC) o |= O_TRUNC;
  if (flags & H5F_ACC_CREAT) o |= O_CREAT;
  if (flags & H5F_ACC_EXCL) o |= O_EXCL;
  const int fd = ::open(name, o | O_CLOEXEC, 0666);
  if (fd < 0) {
    H5Epush2(H5E_DEFAULT, __FILE__, "latch_open", __LINE__, H5E_ERR_CLS, H5E_FILE, H5E_CANTOPENFILE,
             "unable to open file: name = '%s', errno = %d, error message = '%s'", name, errno,
             std::strerror(errno));
    return nullptr;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return nullptr;
  }
  auto* f = new Latched{};
  f->fd = fd;
  f->eof = haddr_t(st.st_size);
  f->dev = st.st_dev;
  f->ino = st.st_ino;
  return &f->pub;
}

herr_t latch_close(H5FD_t* file) {
  Latched* f = latched(file);
  const int rc = ::close(f->fd);
  const bool failed = f->failed != 0;
  t_closed_err = f->failed;
  if (t_tripped == f) {
    t_tripped = nullptr;
    t_tripped_err = 0;
  }
  delete f;
  return rc == 0 || failed ? 0 : -1;
}

int latch_cmp(const H5FD_t* a, const H5FD_t* b) {
  const Latched *x = latched(a), *y = latched(b);
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
  return 0;
}

herr_t latch_query(const H5FD_t* /*f*/, unsigned long* flags) {
  // what sec2 offers (metadata aggregation and accumulation, data sieving, small-data
  // aggregation, a POSIX descriptor)
  *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE |
           H5FD_FEAT_AGGREGATE_SMALLDATA | H5FD_FEAT_POSIX_COMPAT_HANDLE;
  return 0;
}

haddr_t latch_get_eoa(const H5FD_t* f, H5FD_mem_t) { return latched(f)->eoa; }
herr_t latch_set_eoa(H5FD_t* f, H5FD_mem_t, haddr_t addr) {
  latched(f)->eoa = addr;
  return 0;
}
haddr_t latch_get_eof(const H5FD_t* f, H5FD_mem_t) { return latched(f)->eof; }

herr_t latch_get_handle(H5FD_t* f, hid_t, void** handle) {
  *handle = &latched(f)->fd;
  return 0;
}

herr_t latch_read(H5FD_t* file, H5FD_mem_t, hid_t, haddr_t addr, size_t size, void* buf) {
  Latched* f = latched(file);
  auto* p = static_cast<unsigned char*>(buf);
  while (size > 0) {
    const ssize_t n = ::pread(f->fd, p, size, off_t(addr));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      H5Epush2(H5E_DEFAULT, __FILE__, "latch_read", __LINE__, H5E_ERR_CLS, H5E_IO, H5E_READERROR,
               "file read failed: errno = %d, error message = '%s'", errno, std::strerror(errno));
      return -1;
    }
    if (n == 0) {  // past the end of the file: zeros (as sec2)
      std::memset(p, 0, size);
      break;
    }
    p += n;
    addr += haddr_t(n);
    size -= size_t(n);
  }
  return 0;
}

herr_t latch_write(H5FD_t* file, H5FD_mem_t, hid_t, haddr_t addr, size_t size, const void* buf) {
  Latched* f = latched(file);
  const haddr_t end = addr + size;
  if (f->failed) return 0;  // the file is abandoned: nothing more reaches the disk
  const auto* p = static_cast<const unsigned char*>(buf);
  haddr_t at = addr;
  while (size > 0) {
    const ssize_t n = ::pwrite(f->fd, p, size, off_t(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      f->failed = n < 0 ? errno : ENOSPC;
      t_tripped = f;
      t_tripped_err = f->failed;
      return 0;
    }
    p += n;
    at += haddr_t(n);
    size -= size_t(n);
  }
  if (end > f->eof) f->eof = end;
  return 0;
}

herr_t latch_truncate(H5FD_t* file, hid_t, hbool_t) {
  Latched* f = latched(file);
  if (f->failed || f->eoa == f->eof) return 0;
  if (::ftruncate(f->fd, off_t(f->eoa)) != 0) {
    f->failed = errno;
    t_tripped = f;
    t_tripped_err = f->failed;
    return 0;
  }
  f->eof = f->eoa;
  return 0;
}

herr_t latch_lock(H5FD_t* file, hbool_t rw) {
  // HDF5's file locking (as sec2); file systems without flock pass (knmf's files ask HDF5 to
  // ignore disabled locks)
  if (::flock(latched(file)->fd, (rw ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0 || errno == ENOSYS) return 0;
  H5Epush2(H5E_DEFAULT, __FILE__, "latch_lock", __LINE__, H5E_ERR_CLS, H5E_FILE, H5E_CANTLOCKFILE,
           "unable to lock the file: errno = %d, error message = '%s'", errno, std::strerror(errno));
  return -1;
}

herr_t latch_unlock(H5FD_t* file) {
  if (::flock(latched(file)->fd, LOCK_UN) == 0 || errno == ENOSYS) return 0;
  return -1;
}

hid_t latch_driver() {
  static std::mutex m;
  static hid_t id = H5I_INVALID_HID;
  std::lock_guard<std::mutex> lock(m);
  if (id >= 0 && H5Iis_valid(id) > 0) return id;  // (again after an H5close of the host)
  static H5FD_class_t cls = [] {
    H5FD_class_t c{};
#ifdef H5FD_CLASS_VERSION
    // HDF5 1.13.2 and later (Spack's 1.14): the class is versioned and user drivers carry an
    // identifier of their own (256..511 are the values HDF5 leaves to unregistered drivers).
    c.version = H5FD_CLASS_VERSION;
    c.value = static_cast<H5FD_class_value_t>(H5_VFD_RESERVED + 107);
#endif
    c.name = "knmf_write_latch";
    c.maxaddr = kMaxAddr;
    c.fc_degree = H5F_CLOSE_WEAK;
    c.open = latch_open;
    c.close = latch_close;
    c.cmp = latch_cmp;
    c.query = latch_query;
    c.get_eoa = latch_get_eoa;
    c.set_eoa = latch_set_eoa;
    c.get_eof = latch_get_eof;
    c.get_handle = latch_get_handle;
    c.read = latch_read;
    c.write = latch_write;
    c.truncate = latch_truncate;
    c.lock = latch_lock;
    c.unlock = latch_unlock;
    const H5FD_mem_t fl_map[H5FD_MEM_NTYPES] = H5FD_FLMAP_DICHOTOMY;  // as sec2
    std::memcpy(c.fl_map, fl_map, sizeof fl_map);
    return c;
  }();
  id = H5FDregister(&cls);
  return id;
}

}  // namespace

void use_write_latch(hid_t fapl) {
  const hid_t driver = latch_driver();
  if (driver < 0 || H5Pset_driver(fapl, driver, nullptr) < 0)
    throw LogicError("internal error: cannot set knmf's HDF5 file driver");
}

int failed_write(hid_t fid) {
  PropList fapl(H5Fget_access_plist(fid));
  if (!fapl || H5Pget_driver(fapl.get()) != latch_driver()) return 0;
  void* handle = nullptr;
  if (H5Fget_vfd_handle(fid, H5P_DEFAULT, &handle) < 0 || !handle) return 0;
  const auto* f = reinterpret_cast<const Latched*>(static_cast<const char*>(handle) - offsetof(Latched, fd));
  return f->failed;
}

void check_writes(const std::string& file, hid_t fid) {
  if (const int err = failed_write(fid)) system_input_error(err, "cannot write ", file);
}

void close(const std::string& file, File& f) {
  if (!f) return;
  ErrorSilencer quiet;
  const hid_t id = f.release();
  unsigned intent = 0;
  const bool flushed = H5Fget_intent(id, &intent) < 0 || !(intent & H5F_ACC_RDWR) ||
                       H5Fflush(id, H5F_SCOPE_LOCAL) >= 0;
  const int err = failed_write(id);  // the close itself only rewrites the superblock
  const std::string flush_error = flushed ? "" : last_error();
  t_closed_err = 0;
  const bool closed = H5Fclose(id) >= 0;
  const int close_err = t_closed_err;
  if (const int e = err ? err : close_err) system_input_error(e, "cannot write ", file);
  if (!flushed) input_error(file, ": cannot write: ", flush_error);
  if (!closed) fail(file, "cannot close");
}

namespace {
/// The errno that HDF5's POSIX drivers put in their messages ("..., errno = 28, error
/// message = '...'") and whether the failing call was a read; 0 when the stack has none.
struct SystemError {
  int err = 0;
  bool read = false;
};

herr_t find_errno(unsigned /*n*/, const H5E_error2_t* e, void* data) {
  auto* out = static_cast<SystemError*>(data);
  // reads, writes and truncations only (a lock held by another process is no disk failure)
  const bool io = e->maj_num == H5E_IO &&
                  (e->min_num == H5E_READERROR || e->min_num == H5E_WRITEERROR || e->min_num == H5E_SEEKERROR);
  const char* at = io && e->desc ? std::strstr(e->desc, "errno = ") : nullptr;
  if (at) *out = SystemError{std::atoi(at + std::strlen("errno = ")), e->min_num == H5E_READERROR};
  return 0;
}
}  // namespace

void fail(const std::string& file, const std::string& what) {
  SystemError se;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, &find_errno, &se);  // keeps the innermost
  if (se.err == 0 && t_tripped_err) se = SystemError{t_tripped_err, false};  // after a dropped write
  if (se.err > 0)
    system_input_error(se.err, se.read ? "cannot read " : "cannot write ", file);
  const std::string hdf5 = last_error();
  if (hdf5.empty()) input_error(file, ": ", what);
  input_error(file, ": ", what, ": ", hdf5);
}

std::vector<hsize_t> dims(hid_t dataset) {
  Dataspace space(H5Dget_space(dataset));
  if (!space) return {};
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank <= 0) return {};
  std::vector<hsize_t> d(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), d.data(), nullptr);
  return d;
}

bool exists(hid_t loc, const std::string& path) {
  // H5Lexists needs every intermediate link to exist, so check the components in turn.
  std::string prefix;
  std::size_t pos = 0;
  while (pos < path.size()) {
    std::size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    if (next > pos) {
      prefix += (prefix.empty() && path[0] != '/') ? "" : "/";
      prefix += path.substr(pos, next - pos);
      if (H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    }
    pos = next + 1;
  }
  return true;
}

H5I_type_t object_type(hid_t loc, const std::string& path) {
  Object obj(H5Oopen(loc, path.c_str(), H5P_DEFAULT));
  if (!obj) return H5I_BADID;
  return H5Iget_type(obj.get());
}

std::optional<StringLayout> string_layout(hid_t type) {
  if (H5Tget_class(type) != H5T_STRING) return std::nullopt;
  StringLayout l;
  l.variable = H5Tis_variable_str(type) > 0;
  l.size = H5Tget_size(type);
  l.pad = H5Tget_strpad(type);
  l.cset = H5Tget_cset(type);
  return l;
}

Datatype string_mem_type(const StringLayout& layout) {
  Datatype t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), layout.variable ? H5T_VARIABLE : layout.size);
  H5Tset_cset(t.get(), layout.cset);
  if (!layout.variable) H5Tset_strpad(t.get(), layout.pad);
  return t;
}

void decode_strings(const StringLayout& layout, const void* buf, std::size_t count,
                    std::vector<std::string>& out) {
  out.reserve(out.size() + count);
  if (layout.variable) {
    const auto* ptrs = static_cast<const char* const*>(buf);
    for (std::size_t i = 0; i < count; ++i) out.emplace_back(ptrs[i] ? ptrs[i] : "");
    return;
  }
  const auto* bytes = static_cast<const char*>(buf);
  for (std::size_t i = 0; i < count; ++i) {
    const char* s = bytes + i * layout.size;
    std::size_t n = 0;
    while (n < layout.size && s[n] != '\0') ++n;
    if (layout.pad == H5T_STR_SPACEPAD) {
      while (n > 0 && s[n - 1] == ' ') --n;
    }
    out.emplace_back(s, n);
  }
}

std::optional<std::string> string_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  Attribute attr(H5Aopen(obj, name, H5P_DEFAULT));
  if (!attr) return std::nullopt;
  Datatype type(H5Aget_type(attr.get()));
  const auto layout = string_layout(type.get());
  if (!layout) return std::nullopt;
  Dataspace space(H5Aget_space(attr.get()));
  if (H5Sget_simple_extent_npoints(space.get()) != 1) return std::nullopt;
  Datatype mem = string_mem_type(*layout);
  std::vector<std::string> out;
  if (layout->variable) {
    char* p = nullptr;
    if (H5Aread(attr.get(), mem.get(), &p) < 0) return std::nullopt;
    decode_strings(*layout, &p, 1, out);
    if (p) H5free_memory(p);
  } else {
    std::vector<char> buf(layout->size);
    if (H5Aread(attr.get(), mem.get(), buf.data()) < 0) return std::nullopt;
    decode_strings(*layout, buf.data(), 1, out);
  }
  return out.front();
}

namespace {
// How many values a numeric attribute holds: its declared extent, checked against the bytes the
// file stores for it (a corrupt or hostile extent, e.g. 2^60 values in a 16-byte attribute,
// would size the reader's vector before HDF5 notices: std::length_error escaped).
hssize_t attr_values(hid_t attr, hid_t type, const char* name) {
  Dataspace space(H5Aget_space(attr));
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  const std::size_t value_bytes = H5Tget_size(type);
  const hsize_t stored = H5Aget_storage_size(attr);
  if (n < 0 || value_bytes == 0 || hsize_t(n) > stored / value_bytes) {
    char file[4096] = "";
    if (H5Fget_name(attr, file, sizeof file) < 0) file[0] = 0;
    input_error(file, ": attribute ", name, ": declares ", n, " values of ", value_bytes,
                " bytes but stores ", stored, " bytes (a damaged file)");
  }
  return n;
}
}  // namespace

std::optional<std::vector<std::int64_t>> int_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  Attribute attr(H5Aopen(obj, name, H5P_DEFAULT));
  if (!attr) return std::nullopt;
  Datatype type(H5Aget_type(attr.get()));
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) return std::nullopt;
  const hssize_t n = attr_values(attr.get(), type.get(), name);
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  if (n > 0 && H5Aread(attr.get(), H5T_NATIVE_INT64, v.data()) < 0) return std::nullopt;
  return v;
}

namespace {
Attribute create_attr(const std::string& file, hid_t obj, const char* name, hid_t type,
                      hid_t space) {
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  Attribute attr(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT));
  if (!attr) fail(file, std::string("cannot create attribute ") + name);
  return attr;
}
}  // namespace

void write_string_attr(const std::string& file, hid_t obj, const char* name,
                       const std::string& value) {
  Datatype type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Dataspace space(H5Screate(H5S_SCALAR));
  Attribute attr = create_attr(file, obj, name, type.get(), space.get());
  const char* p = value.c_str();
  if (H5Awrite(attr.get(), type.get(), &p) < 0)
    fail(file, std::string("cannot write attribute ") + name);
}

void write_int_attr(const std::string& file, hid_t obj, const char* name,
                    const std::vector<std::int64_t>& values) {
  const hsize_t n = values.size();
  Dataspace space(H5Screate_simple(1, &n, nullptr));
  Attribute attr = create_attr(file, obj, name, H5T_STD_I64LE, space.get());
  if (H5Awrite(attr.get(), H5T_NATIVE_INT64, values.data()) < 0)
    fail(file, std::string("cannot write attribute ") + name);
}

void write_int_scalar_attr(const std::string& file, hid_t obj, const char* name,
                           std::int64_t value) {
  Dataspace space(H5Screate(H5S_SCALAR));
  Attribute attr = create_attr(file, obj, name, H5T_STD_I64LE, space.get());
  if (H5Awrite(attr.get(), H5T_NATIVE_INT64, &value) < 0)
    fail(file, std::string("cannot write attribute ") + name);
}

void write_double_scalar_attr(const std::string& file, hid_t obj, const char* name, double value) {
  Dataspace space(H5Screate(H5S_SCALAR));
  Attribute attr = create_attr(file, obj, name, H5T_IEEE_F64LE, space.get());
  if (H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, &value) < 0)
    fail(file, std::string("cannot write attribute ") + name);
}

std::optional<std::vector<double>> double_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  Attribute attr(H5Aopen(obj, name, H5P_DEFAULT));
  if (!attr) return std::nullopt;
  Datatype type(H5Aget_type(attr.get()));
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) return std::nullopt;
  const hssize_t n = attr_values(attr.get(), type.get(), name);
  std::vector<double> v(static_cast<std::size_t>(n));
  if (n > 0 && H5Aread(attr.get(), H5T_NATIVE_DOUBLE, v.data()) < 0) return std::nullopt;
  return v;
}

void overwrite_int_attr(const std::string& file, hid_t obj, const char* name, std::int64_t value) {
  Attribute attr(H5Aopen(obj, name, H5P_DEFAULT));
  if (!attr) fail(file, std::string("cannot open attribute ") + name);
  Dataspace space(H5Aget_space(attr.get()));
  if (H5Sget_simple_extent_npoints(space.get()) != 1)
    input_error(file, ": attribute ", name, " does not hold one value");
  if (H5Awrite(attr.get(), H5T_NATIVE_INT64, &value) < 0)
    fail(file, std::string("cannot write attribute ") + name);
}

std::vector<std::string> read_string_dataset(const std::string& file, hid_t dataset,
                                             const std::string& name) {
  Datatype type(H5Dget_type(dataset));
  const auto layout = string_layout(type.get());
  if (!layout) input_error(file, ": ", name, " is not a string dataset");
  Dataspace space(H5Dget_space(dataset));
  if (H5Sget_simple_extent_ndims(space.get()) != 1)
    input_error(file, ": ", name, " is not a 1-D dataset");
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  std::vector<std::string> out;
  if (n <= 0) return out;
  Datatype mem = string_mem_type(*layout);
  const auto count = static_cast<std::size_t>(n);
  if (layout->variable) {
    std::vector<char*> ptrs(count, nullptr);
    if (H5Dread(dataset, mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) < 0)
      fail(file, "cannot read " + name);
    decode_strings(*layout, ptrs.data(), count, out);
    H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
  } else {
    std::vector<char> buf(count * layout->size);
    if (H5Dread(dataset, mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0)
      fail(file, "cannot read " + name);
    decode_strings(*layout, buf.data(), count, out);
  }
  return out;
}

void write_empty_array_attr(const std::string& file, hid_t obj, const char* name) {
  const hsize_t n = 0;
  Dataspace space(H5Screate_simple(1, &n, nullptr));
  create_attr(file, obj, name, H5T_IEEE_F64LE, space.get());
}

}  // namespace knmf::io::detail::h5
