/// \file
/// Helpers of the HDF5 RAII layer (include/knmf/io/detail/hdf5.hpp).

#include "io/hdf5.hpp"

#include <cstring>

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

void fail(const std::string& file, const std::string& what) {
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

std::optional<std::vector<std::int64_t>> int_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  Attribute attr(H5Aopen(obj, name, H5P_DEFAULT));
  if (!attr) return std::nullopt;
  Datatype type(H5Aget_type(attr.get()));
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) return std::nullopt;
  Dataspace space(H5Aget_space(attr.get()));
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0) return std::nullopt;
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
  Dataspace space(H5Aget_space(attr.get()));
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0) return std::nullopt;
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
