#pragma once
/// \file
/// A small RAII layer over the HDF5 C API (internal, not installed: src/io and src/results
/// include it; the library links HDF5 privately and the package exports no HDF5 headers).
///
/// * `Handle<Close>` owns one `hid_t` and calls the matching `H5*close` when it dies;
///   `File`, `Group`, `Dataset`, `Dataspace`, `Datatype`, `Attribute`, `PropList` are its
///   instances. Predefined ids (`H5T_NATIVE_DOUBLE`, `H5P_DEFAULT`) are never wrapped.
/// * `ErrorSilencer` switches off HDF5's automatic printing of its error stack for the
///   current thread while it lives, and restores the previous handler afterwards.
/// * `Location` pairs an open object with the file name so that every failure becomes a
///   `knmf::InputError` of one line: "<file>: <what> <object>: <innermost HDF5 message>".

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "knmf/core/error.hpp"

namespace knmf::io::detail::h5 {

/// Owner of one HDF5 identifier, closed with `Close` on destruction. Move-only.
template <herr_t (*Close)(hid_t)>
class Handle {
public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle() { reset(); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(other.release()) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = other.release();
    }
    return *this;
  }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  explicit operator bool() const { return valid(); }
  /// Give up ownership without closing.
  hid_t release() {
    const hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }
  /// Close now (errors on close are ignored: a destructor cannot report them).
  void reset() {
    if (id_ >= 0) Close(id_);
    id_ = H5I_INVALID_HID;
  }

private:
  hid_t id_ = H5I_INVALID_HID;
};

using File = Handle<&H5Fclose>;
using Group = Handle<&H5Gclose>;
using Dataset = Handle<&H5Dclose>;
using Dataspace = Handle<&H5Sclose>;
using Datatype = Handle<&H5Tclose>;
using Attribute = Handle<&H5Aclose>;
using PropList = Handle<&H5Pclose>;
using Object = Handle<&H5Oclose>;

/// Turns off HDF5's automatic error-stack printing (per thread: libhdf5 is thread-safe on
/// Debian) for the lifetime of the object; the previous handler comes back afterwards.
class ErrorSilencer {
public:
  ErrorSilencer();
  ~ErrorSilencer();
  ErrorSilencer(const ErrorSilencer&) = delete;
  ErrorSilencer& operator=(const ErrorSilencer&) = delete;

private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

/// The most specific message on the current thread's HDF5 error stack, e.g.
/// "truncated file: eof = 19674, sblock->base_addr = 0, stored_eof = 29512"; empty if none.
/// Read it right after the failing call: most HDF5 calls clear the stack.
std::string last_error();

/// Throw `InputError("<file>: <what>[: <last HDF5 error>]")`; where the failure comes from
/// the operating system (a full disk, a quota, an I/O error), one line naming it:
/// "cannot write <file>: No space left on device" ("cannot read" for reads).
[[noreturn]] void fail(const std::string& file, const std::string& what);

/// Gives `fapl` knmf's file driver for files it writes: HDF5's POSIX I/O (as its default
/// sec2 driver) behind a latch. The first write that fails (a full disk, a quota, an I/O
/// error) is remembered, and from then on the file's writes and truncations succeed without
/// reaching the disk: HDF5 never meets a failure half-way through a flush or a close. (HDF5
/// 1.10 cannot recover from one: its metadata cache stays half-flushed, and a failed H5Fclose
/// frees the file yet leaves its identifier, which H5_term_library closes again: the
/// segfault in H5F__close_cb, the "infinite loop closing library" of a full disk.) The
/// failure is reported where the file is flushed or closed: `check_writes`, `close`.
void use_write_latch(hid_t fapl);

/// The errno of the first failed write of `fid` (a file opened with use_write_latch), 0 when
/// every write succeeded.
int failed_write(hid_t fid);

/// InputError "cannot write <file>: <reason>" when a write of `fid` failed.
void check_writes(const std::string& file, hid_t fid);

/// Close `f` (a file this process wrote; its objects closed before), reporting what failed:
/// InputError "cannot write <file>: <reason>" for a failed write, as `fail` otherwise. The
/// file is closed in every case.
void close(const std::string& file, File& f);

/// Dimensions of a dataset (rank = size of the result).
std::vector<hsize_t> dims(hid_t dataset);

/// True when every component of `path` ("/var/_index") exists below `loc`.
bool exists(hid_t loc, const std::string& path);

/// The kind of object at an existing `path`: H5I_GROUP, H5I_DATASET, H5I_DATATYPE or
/// H5I_BADID when it cannot be opened.
H5I_type_t object_type(hid_t loc, const std::string& path);

/// An attribute of `obj` read as one string (scalar or one-element array; variable- or
/// fixed-length, any character set; fixed-length padding removed). Empty optional when the
/// attribute does not exist or is not a string.
std::optional<std::string> string_attr(hid_t obj, const char* name);

/// An integer-valued attribute of `obj` read as int64 (any integer or float type; any rank,
/// flattened). Empty optional when absent or not numeric.
std::optional<std::vector<std::int64_t>> int_attr(hid_t obj, const char* name);

/// Write a scalar variable-length UTF-8 string attribute (what h5py writes for `str`).
void write_string_attr(const std::string& file, hid_t obj, const char* name,
                       const std::string& value);
/// Write a 1-D int64 array attribute.
void write_int_attr(const std::string& file, hid_t obj, const char* name,
                    const std::vector<std::int64_t>& values);
/// Write a 1-D float64 array attribute of length 0 (what h5py writes for an empty list,
/// e.g. AnnData's `column-order` of a dataframe without columns).
void write_empty_array_attr(const std::string& file, hid_t obj, const char* name);

/// Write a scalar int64 attribute (what h5py writes for a Python int).
void write_int_scalar_attr(const std::string& file, hid_t obj, const char* name,
                           std::int64_t value);
/// Write a scalar float64 attribute (what h5py writes for a Python float).
void write_double_scalar_attr(const std::string& file, hid_t obj, const char* name, double value);
/// A numeric attribute of `obj` read as float64 (any integer or float type; any rank,
/// flattened). Empty optional when absent or not numeric.
std::optional<std::vector<double>> double_attr(hid_t obj, const char* name);
/// Overwrite the value of an existing one-element numeric attribute in place (converted to
/// its stored type). Unlike the write_* functions, which delete and re-create, this keeps the
/// attribute message where it is: on disk only the value's bytes change.
void overwrite_int_attr(const std::string& file, hid_t obj, const char* name, std::int64_t value);

/// Read every element of the 1-D string dataset `dataset` (any string layout); `name` is the
/// dataset's path, for messages.
std::vector<std::string> read_string_dataset(const std::string& file, hid_t dataset,
                                             const std::string& name);

/// How the elements of a string dataset are stored.
struct StringLayout {
  bool variable = false;                  ///< variable-length (char*) elements
  std::size_t size = 0;                   ///< bytes per fixed-length element
  H5T_str_t pad = H5T_STR_NULLTERM;       ///< padding of fixed-length elements
  H5T_cset_t cset = H5T_CSET_ASCII;
};

/// Layout of a string datatype; empty optional when `type` is not a string type.
std::optional<StringLayout> string_layout(hid_t type);

/// A memory datatype for elements of `layout` (what H5Dread should convert them to).
Datatype string_mem_type(const StringLayout& layout);

/// Decode `count` elements of `layout` read into `buf` (char* for variable-length, `size`
/// bytes each for fixed) and append them to `out`. Does not free variable-length memory.
void decode_strings(const StringLayout& layout, const void* buf, std::size_t count,
                    std::vector<std::string>& out);

}  // namespace knmf::io::detail::h5
