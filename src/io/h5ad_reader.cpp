/// \file
/// H5adReader: AnnData X and obs/var names through the HDF5 C API (include/knmf/io/h5ad.hpp).
/// Here: opening X and reading it as CSR or dense row blocks; the file's datasets and its
/// obs/var names: h5ad_file.cpp.

#include <algorithm>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <variant>

#include "h5ad_file.hpp"
#include "h5ad_types.hpp"
#include "knmf/core/error.hpp"
#include "io/hdf5.hpp"
#include "knmf/io/h5ad.hpp"

namespace knmf::io {

namespace h5 = detail::h5;
using detail::convert_indices;
using detail::convert_values;
using detail::native_type;
using detail::RawBuffer;
using detail::raw_resize;
using detail::size_of;

const char* to_string(StorageFormat f) {
  switch (f) {
    case StorageFormat::Dense: return "dense";
    case StorageFormat::Csr: return "csr";
    case StorageFormat::Csc: break;
  }
  return "csc";
}

const char* to_string(ValueType t) {
  switch (t) {
    case ValueType::Int8: return "int8";
    case ValueType::Int16: return "int16";
    case ValueType::Int32: return "int32";
    case ValueType::Int64: return "int64";
    case ValueType::UInt8: return "uint8";
    case ValueType::UInt16: return "uint16";
    case ValueType::UInt32: return "uint32";
    case ValueType::UInt64: return "uint64";
    case ValueType::Float32: return "float32";
    case ValueType::Float64: break;
  }
  return "float64";
}

std::vector<std::int64_t> split_rows_by_nnz(const std::vector<std::int64_t>& row_nnz,
                                            std::int64_t max_nnz) {
  std::vector<std::int64_t> bounds{0};
  const auto n = static_cast<std::int64_t>(row_nnz.size());
  std::int64_t in_block = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t c = row_nnz[static_cast<std::size_t>(r)];
    if (r > bounds.back() && in_block + c > max_nnz) {
      bounds.push_back(r);
      in_block = 0;
    }
    in_block += c;
  }
  if (n > 0) bounds.push_back(n);
  return bounds;
}

namespace {

constexpr const char* kValueRule = " (X must be finite and non-negative)";

void check_rows(std::int64_t r0, std::int64_t r1, std::int64_t n, const char* what) {
  if (r0 < 0 || r1 < r0 || r1 > n)
    throw std::out_of_range(knmf::detail::concat("H5adReader::", what, ": rows [", r0, ", ", r1,
                                           ") not within [0, ", n, ")"));
}

}  // namespace

struct H5adReader::Impl : detail::H5adFile {
  H5adInfo info;
  h5::Dataset x;                       // dense X
  h5::Dataset data, indices, indptr;   // sparse X
  std::int64_t major = 0;              // sparse: length of indptr - 1 (rows for CSR)
  std::int64_t minor = 0;              // sparse: bound of indices (columns for CSR)

  // CSC only: column pointers and per-row counts (pass 1), then the full CSR copy (pass 2).
  mutable std::vector<std::int64_t> csc_colptr;
  mutable std::vector<std::int64_t> csc_row_counts;
  mutable std::variant<std::monostate, CsrBlock<float>, CsrBlock<double>> csc_csr;

  // ---- opening -------------------------------------------------------------------------

  /// Open a 1-D sparse component of X and return its ValueType and length.
  h5::Dataset open_component(const char* comp, bool integer, ValueType& type,
                             std::int64_t& length) const {
    const std::string name = std::string("/X/") + comp;
    if (!h5::exists(fid.get(), name)) input_error(file, ": ", name, " is missing (sparse X needs data, indices and indptr)");
    if (kind_of(name) != H5I_DATASET) input_error(file, ": ", name, " is not a dataset");
    h5::Dataset d = open_dataset(name);
    h5::Datatype t(H5Dget_type(d.get()));
    const auto vt = detail::value_type_of(t.get());
    if (!vt || (integer && !detail::is_integer(*vt)))
      input_error(file, ": ", name, " has dtype ", detail::type_name(t.get()),
                  ", which knmf does not support (expected ",
                  integer ? "integers" : "integers, float32 or float64", ")");
    const auto ext = h5::dims(d.get());
    if (ext.size() != 1) input_error(file, ": ", name, " has rank ", ext.size(), "; expected 1");
    type = *vt;
    length = static_cast<std::int64_t>(ext[0]);
    return d;
  }

  /// /X as a dataset (dense) or a group (sparse), checked; after fid is open.
  void open_x() {
    if (!h5::exists(fid.get(), "/X")) input_error(file, ": not an AnnData file: no /X");
    switch (kind_of("/X")) {
      case H5I_DATASET: open_dense(); break;
      case H5I_GROUP: open_sparse(); break;
      default: input_error(file, ": not an AnnData file: /X is neither a dataset nor a group");
    }
    check_index_length("obs", info.n_obs, "row");
  }

  void open_dense() {
    x = open_dataset("/X");
    h5::Datatype t(H5Dget_type(x.get()));
    const auto vt = detail::value_type_of(t.get());
    if (!vt)
      input_error(file, ": /X has dtype ", detail::type_name(t.get()),
                  ", which knmf does not support (expected integers, float32 or float64)");
    const auto ext = h5::dims(x.get());
    if (ext.size() != 2)
      input_error(file, ": /X is a dataset of rank ", ext.size(),
                  "; expected a 2-D (n_obs x n_vars) matrix");
    info.format = StorageFormat::Dense;
    info.value_type = *vt;
    info.n_obs = static_cast<std::int64_t>(ext[0]);
    info.n_vars = static_cast<std::int64_t>(ext[1]);
    info.nnz = info.n_obs * info.n_vars;
  }

  void open_sparse() {
    h5::Group g(H5Gopen2(fid.get(), "/X", H5P_DEFAULT));
    if (!g) h5::fail(file, "cannot open group /X");
    std::string fmt;
    if (auto enc = h5::string_attr(g.get(), "encoding-type")) {
      if (*enc == "csr_matrix") fmt = "csr";
      else if (*enc == "csc_matrix") fmt = "csc";
      else input_error(file, ": /X has encoding-type '", *enc, "'; expected csr_matrix or csc_matrix");
    } else if (auto old = h5::string_attr(g.get(), "h5sparse_format")) {
      if (*old != "csr" && *old != "csc")
        input_error(file, ": /X has h5sparse_format '", *old, "'; expected csr or csc");
      fmt = *old;
    } else {
      input_error(file, ": /X is a group without an encoding-type attribute (csr_matrix or csc_matrix)");
    }
    auto shape = h5::int_attr(g.get(), "shape");
    if (!shape) shape = h5::int_attr(g.get(), "h5sparse_shape");
    if (!shape) input_error(file, ": /X has no shape attribute");
    if (shape->size() != 2)
      input_error(file, ": /X has a shape attribute of ", shape->size(),
                  " entries; expected [n_obs, n_vars]");
    if ((*shape)[0] < 0 || (*shape)[1] < 0)
      input_error(file, ": /X has the shape attribute [", (*shape)[0], ", ", (*shape)[1],
                  "]: a negative size");
    info.format = fmt == "csr" ? StorageFormat::Csr : StorageFormat::Csc;
    info.n_obs = (*shape)[0];
    info.n_vars = (*shape)[1];
    const bool csr = info.format == StorageFormat::Csr;
    major = csr ? info.n_obs : info.n_vars;
    minor = csr ? info.n_vars : info.n_obs;
    if (minor > std::numeric_limits<std::int32_t>::max())
      input_error(file, ": /X has ", minor, csr ? " columns" : " rows",
                  "; at most 2^31 - 1 are supported");

    ValueType vt{}, it{}, pt{};
    std::int64_t n_data = 0, n_indices = 0, n_indptr = 0;
    data = open_component("data", false, vt, n_data);
    indices = open_component("indices", true, it, n_indices);
    indptr = open_component("indptr", true, pt, n_indptr);
    info.value_type = vt;
    info.index_type = it;
    info.indptr_type = pt;
    if (n_indptr != major + 1)
      input_error(file, ": /X/indptr has ", n_indptr, " entries but the shape attribute [",
                  info.n_obs, ", ", info.n_vars, "] needs ", major + 1, " (",
                  csr ? "n_obs" : "n_vars", " + 1)");
    if (n_data != n_indices)
      input_error(file, ": /X/data has ", n_data, " entries but /X/indices has ", n_indices);
    info.nnz = n_data;
    const std::int64_t first = read_indptr_raw(0), last = read_indptr_raw(major);
    if (first != 0) input_error(file, ": /X/indptr[0] = ", first, "; expected 0");
    if (last != info.nnz)
      input_error(file, ": /X/indptr[", major, "] = ", last, " but nnz = len(/X/data) = ", info.nnz);
  }

  // ---- reading ---------------------------------------------------------------------------

  /// Read elements [offset, offset + count) of a 1-D dataset as `type` into buf.
  void read_1d(const h5::Dataset& d, const char* name, ValueType type, std::int64_t offset,
               std::int64_t count, void* buf) const {
    if (count <= 0) return;
    h5::Dataspace fspace(H5Dget_space(d.get()));
    const hsize_t start = static_cast<hsize_t>(offset), n = static_cast<hsize_t>(count);
    h5::Dataspace mspace(H5Screate_simple(1, &n, nullptr));
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr) < 0 ||
        H5Dread(d.get(), native_type(type), mspace.get(), fspace.get(), H5P_DEFAULT, buf) < 0)
      h5::fail(file, knmf::detail::concat("cannot read ", name, "[", offset, ":", offset + count, "]"));
  }

  std::int64_t read_indptr_raw(std::int64_t i) const {
    std::int64_t v = 0;
    // HDF5 converts any integer type to int64 (uint64 beyond 2^63 saturates, then fails the checks).
    h5::Dataspace fspace(H5Dget_space(indptr.get()));
    const hsize_t start = static_cast<hsize_t>(i), n = 1;
    h5::Dataspace mspace(H5Screate_simple(1, &n, nullptr));
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr) < 0 ||
        H5Dread(indptr.get(), H5T_NATIVE_INT64, mspace.get(), fspace.get(), H5P_DEFAULT, &v) < 0)
      h5::fail(file, knmf::detail::concat("cannot read /X/indptr[", i, "]"));
    return v;
  }

  /// indptr[i0 .. i1] (inclusive: i1 - i0 + 1 entries) as int64, checked to lie in [0, nnz]
  /// and to be non-decreasing. Read in bounded chunks.
  std::vector<std::int64_t> read_indptr(std::int64_t i0, std::int64_t i1) const {
    std::vector<std::int64_t> p(static_cast<std::size_t>(i1 - i0 + 1));
    const std::int64_t chunk = std::max<std::int64_t>(1, static_cast<std::int64_t>(opts.chunk_bytes / 8));
    for (std::int64_t a = i0; a <= i1; a += chunk) {
      const std::int64_t n = std::min(chunk, i1 + 1 - a);
      std::int64_t* dst = p.data() + (a - i0);
      // Read as int64 directly: HDF5's integer conversion is exact for every value we accept.
      h5::Dataspace fspace(H5Dget_space(indptr.get()));
      const hsize_t start = static_cast<hsize_t>(a), cnt = static_cast<hsize_t>(n);
      h5::Dataspace mspace(H5Screate_simple(1, &cnt, nullptr));
      if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &start, nullptr, &cnt, nullptr) < 0 ||
          H5Dread(indptr.get(), H5T_NATIVE_INT64, mspace.get(), fspace.get(), H5P_DEFAULT, dst) < 0)
        h5::fail(file, knmf::detail::concat("cannot read /X/indptr[", a, ":", a + n, "]"));
      for (std::int64_t k = 0; k < n; ++k) {
        const std::int64_t i = a + k, v = dst[k];
        if (v < 0 || v > info.nnz)
          input_error(file, ": /X/indptr[", i, "] = ", v, " is outside [0, nnz = ", info.nnz, "]");
        if (i > i0 && v < p[static_cast<std::size_t>(i - i0 - 1)])
          input_error(file, ": /X/indptr[", i, "] = ", v, " is less than /X/indptr[", i - 1,
                      "] = ", p[static_cast<std::size_t>(i - i0 - 1)],
                      " (indptr must be non-decreasing)");
      }
    }
    return p;
  }

  /// Visit stored entries [p0, p1) in bounded chunks: f(q0, n, indices_raw, values_raw)
  /// (values_raw is null when with_values is false).
  template <class F>
  void for_each_entry_chunk(std::int64_t p0, std::int64_t p1, bool with_values, F&& f) const {
    const ValueType it = *info.index_type, vt = info.value_type;
    const std::size_t per_entry = size_of(it) + (with_values ? size_of(vt) : 0);
    const std::int64_t chunk =
        std::max<std::int64_t>(1, static_cast<std::int64_t>(opts.chunk_bytes / per_entry));
    const std::int64_t n_max = std::min(chunk, p1 - p0);
    if (n_max <= 0) return;
    RawBuffer ibuf, vbuf;
    void* iraw = raw_resize(ibuf, static_cast<std::size_t>(n_max) * size_of(it));
    void* vraw = with_values ? raw_resize(vbuf, static_cast<std::size_t>(n_max) * size_of(vt)) : nullptr;
    for (std::int64_t q0 = p0; q0 < p1; q0 += chunk) {
      const std::int64_t n = std::min(chunk, p1 - q0);
      read_1d(indices, "/X/indices", it, q0, n, iraw);
      if (with_values) read_1d(data, "/X/data", vt, q0, n, vraw);
      f(q0, n, static_cast<const void*>(iraw), static_cast<const void*>(vraw));
    }
  }

  /// Visit the dense rows [r0, r1) in bands of at most chunk_bytes:
  /// f(row, nrows, col, ncols, raw) with raw row-major nrows x ncols. A band spans whole rows
  /// unless a single row exceeds the budget; then it is one row, cut into column pieces
  /// (visited in column order).
  template <class F>
  void for_each_dense_band(std::int64_t r0, std::int64_t r1, F&& f) const {
    const std::int64_t g = info.n_vars;
    if (g == 0 || r1 <= r0) return;
    const std::size_t es = size_of(info.value_type);
    const std::int64_t budget = std::max<std::int64_t>(1, static_cast<std::int64_t>(opts.chunk_bytes / es));
    const std::int64_t nr = budget >= g ? budget / g : 1;
    const std::int64_t nc = budget >= g ? g : budget;
    RawBuffer buf;
    void* raw = raw_resize(buf, static_cast<std::size_t>(std::min(nr, r1 - r0) * nc) * es);
    h5::Dataspace fspace(H5Dget_space(x.get()));
    for (std::int64_t r = r0; r < r1; r += nr) {
      const std::int64_t rows = std::min(nr, r1 - r);
      for (std::int64_t c = 0; c < g; c += nc) {
        const std::int64_t cols = std::min(nc, g - c);
        const hsize_t start[2] = {static_cast<hsize_t>(r), static_cast<hsize_t>(c)};
        const hsize_t count[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(cols)};
        h5::Dataspace mspace(H5Screate_simple(2, count, nullptr));
        if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr) < 0 ||
            H5Dread(x.get(), native_type(info.value_type), mspace.get(), fspace.get(), H5P_DEFAULT, raw) < 0)
          h5::fail(file, knmf::detail::concat("cannot read /X[", r, ":", r + rows, ", ", c, ":", c + cols, "]"));
        f(r, rows, c, cols, static_cast<const void*>(raw));
      }
    }
  }

  [[noreturn]] void bad_dense_value(std::int64_t row, std::int64_t col, double v, const char* why) const {
    input_error(file, ": /X value ", v, " at row ", row, ", column ", col, " ", why, kValueRule);
  }

  template <class V>
  [[noreturn]] void bad_sparse_value(std::int64_t q, std::int64_t row, std::int64_t col, V v,
                                     const char* why) const {
    input_error(file, ": /X/data[", q, "] = ", v, " at row ", row, ", column ", col, " ", why, kValueRule);
  }

  template <class V>
  [[noreturn]] void bad_index(std::int64_t q, V v, std::int64_t major_pos) const {
    const bool csr = info.format == StorageFormat::Csr;
    input_error(file, ": /X/indices[", q, "] = ", v, " is out of range [0, ", minor, ") in ",
                csr ? "row " : "column ", major_pos, csr ? " (n_vars = " : " (n_obs = ", minor, ")");
  }

  /// Row (or CSC column) holding entry q, given the pointers p of majors [m0, ...].
  static std::int64_t major_of(const std::vector<std::int64_t>& p, std::int64_t m0, std::int64_t q) {
    return m0 + (std::upper_bound(p.begin(), p.end(), q) - p.begin()) - 1;
  }

  /// Add n raw values at `vraw` (the file's type) to `fp`: value k at (row_of(k), col_of(k)),
  /// taken as double, as stored (the conversion to T may round). Values were checked already.
  template <class RowOf, class ColOf>
  void hash_raw(XFingerprint& fp, const void* vraw, std::int64_t n, RowOf&& row_of, ColOf&& col_of) const {
    convert_values<double>(info.value_type, vraw, n,
                           [&](std::int64_t k, double v) { fp.add(row_of(k), col_of(k), v); },
                           [](std::int64_t, auto, const char*) {});
  }

  // ---- CSR file --------------------------------------------------------------------------

  template <class T>
  void csr_from_csr(std::int64_t r0, std::int64_t r1, CsrBlock<T>& out, XFingerprint* fp) const {
    const std::vector<std::int64_t> p = read_indptr(r0, r1);
    const std::int64_t p0 = p.front(), p1 = p.back();
    out.row_offsets.resize(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) out.row_offsets[i] = p[i] - p0;
    out.cols.resize(static_cast<std::size_t>(p1 - p0));
    out.values.resize(static_cast<std::size_t>(p1 - p0));
    std::int64_t row = r0;  // cursor of the fingerprint: the row of the entry being hashed
    for_each_entry_chunk(p0, p1, true, [&](std::int64_t q0, std::int64_t n, const void* iraw, const void* vraw) {
      std::int32_t* cols = out.cols.data() + (q0 - p0);
      T* vals = out.values.data() + (q0 - p0);
      convert_indices(*info.index_type, iraw, n, minor,
                      [&](std::int64_t k, std::int32_t c) { cols[k] = c; },
                      [&](std::int64_t k, auto v) { bad_index(q0 + k, v, major_of(p, r0, q0 + k)); });
      convert_values<T>(info.value_type, vraw, n, [&](std::int64_t k, T v) { vals[k] = v; },
                        [&](std::int64_t k, auto v, const char* why) {
                          bad_sparse_value(q0 + k, major_of(p, r0, q0 + k), cols[k], v, why);
                        });
      if (fp)
        hash_raw(*fp, vraw, n,
                 [&](std::int64_t k) {
                   while (p[static_cast<std::size_t>(row - r0 + 1)] <= q0 + k) ++row;
                   return row;
                 },
                 [&](std::int64_t k) { return std::int64_t(cols[k]); });
    });
  }

  template <class T>
  void dense_from_csr(std::int64_t r0, std::int64_t r1, T* out, XFingerprint* fp) const {
    const std::int64_t g = info.n_vars;
    std::fill(out, out + (r1 - r0) * g, T(0));
    const std::vector<std::int64_t> p = read_indptr(r0, r1);
    std::vector<std::int32_t> cols;
    std::int64_t row = r0;  // cursor: the row of the entry being converted
    std::int64_t hrow = r0;  // cursor of the fingerprint
    for_each_entry_chunk(p.front(), p.back(), true, [&](std::int64_t q0, std::int64_t n, const void* iraw, const void* vraw) {
      cols.resize(static_cast<std::size_t>(n));
      convert_indices(*info.index_type, iraw, n, minor,
                      [&](std::int64_t k, std::int32_t c) { cols[static_cast<std::size_t>(k)] = c; },
                      [&](std::int64_t k, auto v) { bad_index(q0 + k, v, major_of(p, r0, q0 + k)); });
      convert_values<T>(info.value_type, vraw, n,
                        [&](std::int64_t k, T v) {
                          while (p[static_cast<std::size_t>(row - r0 + 1)] <= q0 + k) ++row;
                          out[(row - r0) * g + cols[static_cast<std::size_t>(k)]] += v;
                        },
                        [&](std::int64_t k, auto v, const char* why) {
                          bad_sparse_value(q0 + k, major_of(p, r0, q0 + k), cols[static_cast<std::size_t>(k)], v, why);
                        });
      if (fp)
        hash_raw(*fp, vraw, n,
                 [&](std::int64_t k) {
                   while (p[static_cast<std::size_t>(hrow - r0 + 1)] <= q0 + k) ++hrow;
                   return hrow;
                 },
                 [&](std::int64_t k) { return std::int64_t(cols[static_cast<std::size_t>(k)]); });
    });
  }

  // ---- dense file ------------------------------------------------------------------------

  template <class T>
  void dense_from_dense(std::int64_t r0, std::int64_t r1, T* out, XFingerprint* fp) const {
    const std::int64_t g = info.n_vars;
    for_each_dense_band(r0, r1, [&](std::int64_t r, std::int64_t rows, std::int64_t c, std::int64_t cols, const void* raw) {
      for (std::int64_t i = 0; i < rows; ++i) {
        T* dst = out + (r - r0 + i) * g + c;
        const void* src = static_cast<const char*>(raw) + static_cast<std::size_t>(i * cols) * size_of(info.value_type);
        convert_values<T>(info.value_type, src, cols, [&](std::int64_t k, T v) { dst[k] = v; },
                          [&](std::int64_t k, auto v, const char* why) { bad_dense_value(r + i, c + k, static_cast<double>(v), why); });
        if (fp) hash_raw(*fp, src, cols, [&](std::int64_t) { return r + i; }, [&](std::int64_t k) { return c + k; });
      }
    });
  }

  template <class T>
  void csr_from_dense(std::int64_t r0, std::int64_t r1, CsrBlock<T>& out, XFingerprint* fp) const {
    const std::int64_t g = info.n_vars;
    out.row_offsets.assign(static_cast<std::size_t>(r1 - r0 + 1), 0);
    out.cols.clear();
    out.values.clear();
    for_each_dense_band(r0, r1, [&](std::int64_t r, std::int64_t rows, std::int64_t c, std::int64_t cols, const void* raw) {
      for (std::int64_t i = 0; i < rows; ++i) {
        const void* src = static_cast<const char*>(raw) + static_cast<std::size_t>(i * cols) * size_of(info.value_type);
        convert_values<T>(info.value_type, src, cols,
                          [&](std::int64_t k, T v) {
                            if (v != T(0)) {
                              out.cols.push_back(static_cast<std::int32_t>(c + k));
                              out.values.push_back(v);
                            }
                          },
                          [&](std::int64_t k, auto v, const char* why) { bad_dense_value(r + i, c + k, static_cast<double>(v), why); });
        if (fp) hash_raw(*fp, src, cols, [&](std::int64_t) { return r + i; }, [&](std::int64_t k) { return c + k; });
        // Bands cut into column pieces hold one row; the row ends with its last piece.
        if (c + cols == g) out.row_offsets[static_cast<std::size_t>(r - r0 + i + 1)] = static_cast<std::int64_t>(out.cols.size());
      }
    });
  }

  // ---- CSC file --------------------------------------------------------------------------

  /// Pass 1: column pointers (checked) and the number of entries of each row.
  void csc_count() const {
    if (!csc_row_counts.empty() || info.n_obs == 0) return;
    std::vector<std::int64_t> p = read_indptr(0, major);
    std::vector<std::int64_t> counts(static_cast<std::size_t>(info.n_obs), 0);
    for_each_entry_chunk(0, info.nnz, false, [&](std::int64_t q0, std::int64_t n, const void* iraw, const void*) {
      convert_indices(*info.index_type, iraw, n, minor,
                      [&](std::int64_t, std::int32_t r) { ++counts[static_cast<std::size_t>(r)]; },
                      [&](std::int64_t k, auto v) { bad_index(q0 + k, v, major_of(p, 0, q0 + k)); });
    });
    csc_colptr = std::move(p);
    csc_row_counts = std::move(counts);
  }

  /// Pass 2: every entry goes to the next free slot of its row; columns come in increasing
  /// order, so each row's columns end up sorted.
  template <class C>
  void csc_convert() const {
    csc_count();
    CsrBlock<C> all;
    all.row_begin = 0;
    all.row_end = info.n_obs;
    all.ncols = info.n_vars;
    all.row_offsets.assign(static_cast<std::size_t>(info.n_obs + 1), 0);
    for (std::int64_t r = 0; r < info.n_obs; ++r)
      all.row_offsets[static_cast<std::size_t>(r + 1)] = all.row_offsets[static_cast<std::size_t>(r)] + csc_row_counts[static_cast<std::size_t>(r)];
    all.cols.resize(static_cast<std::size_t>(info.nnz));
    all.values.resize(static_cast<std::size_t>(info.nnz));
    std::vector<std::int64_t> next(all.row_offsets.begin(), all.row_offsets.end() - 1);
    std::vector<std::int32_t> rows;
    std::int64_t col = 0;  // cursor: the column of the entry being converted
    const auto& p = csc_colptr;
    for_each_entry_chunk(0, info.nnz, true, [&](std::int64_t q0, std::int64_t n, const void* iraw, const void* vraw) {
      rows.resize(static_cast<std::size_t>(n));
      convert_indices(*info.index_type, iraw, n, minor,
                      [&](std::int64_t k, std::int32_t r) { rows[static_cast<std::size_t>(k)] = r; },
                      [&](std::int64_t k, auto v) { bad_index(q0 + k, v, major_of(p, 0, q0 + k)); });
      convert_values<C>(info.value_type, vraw, n,
                        [&](std::int64_t k, C v) {
                          while (p[static_cast<std::size_t>(col + 1)] <= q0 + k) ++col;
                          const auto slot = static_cast<std::size_t>(next[static_cast<std::size_t>(rows[static_cast<std::size_t>(k)])]++);
                          all.cols[slot] = static_cast<std::int32_t>(col);
                          all.values[slot] = v;
                        },
                        [&](std::int64_t k, auto v, const char* why) {
                          bad_sparse_value(q0 + k, rows[static_cast<std::size_t>(k)], major_of(p, 0, q0 + k), v, why);
                        });
    });
    csc_csr = std::move(all);
  }

  /// Run f(const CsrBlock<C>&) on the full CSR copy of a CSC file, converting it first.
  template <class F>
  void with_csc_csr(F&& f) const {
    if (std::holds_alternative<std::monostate>(csc_csr)) {
      // float holds these types exactly; anything wider keeps double.
      switch (info.value_type) {
        case ValueType::Float32: case ValueType::Int8: case ValueType::Int16:
        case ValueType::UInt8: case ValueType::UInt16:
          csc_convert<float>();
          break;
        default:
          csc_convert<double>();
      }
    }
    if (const auto* b = std::get_if<CsrBlock<float>>(&csc_csr)) f(*b);
    else f(std::get<CsrBlock<double>>(csc_csr));
  }
};

// ---- public API ------------------------------------------------------------------------------

H5adReader::H5adReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
H5adReader::H5adReader(H5adReader&&) noexcept = default;
H5adReader& H5adReader::operator=(H5adReader&&) noexcept = default;
H5adReader::~H5adReader() {
  if (impl_) {
    h5::ErrorSilencer quiet;
    impl_.reset();
  }
}

H5adReader H5adReader::open(const std::filesystem::path& path, const H5adReadOptions& opts) {
  h5::ErrorSilencer quiet;
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->file = path.string();
  impl->opts = opts;
  if (impl->opts.chunk_bytes == 0) impl->opts.chunk_bytes = 1;
  const std::string& file = impl->file;

  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) input_error(file, ": cannot open: no such file");
  if (std::filesystem::is_directory(path, ec)) input_error(file, ": cannot open: is a directory");
  const htri_t is_hdf5 = H5Fis_hdf5(file.c_str());
  if (is_hdf5 == 0) input_error(file, ": not an HDF5 file");
  if (is_hdf5 < 0) h5::fail(file, "cannot open");
  // Parallel file systems often disable flock(); reading does not need the lock.
  h5::PropList fapl(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_file_locking(fapl.get(), true, true);
  impl->fid = h5::File(H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!impl->fid) h5::fail(file, "cannot open HDF5 file");
  impl->open_x();
  return H5adReader(std::move(impl));
}

H5adReader H5adReader::open_image(const void* data, std::size_t size, const std::string& name,
                                  const H5adReadOptions& opts) {
  h5::ErrorSilencer quiet;
  auto impl = std::make_unique<Impl>();
  impl->path = name;
  impl->file = name;
  impl->opts = opts;
  if (impl->opts.chunk_bytes == 0) impl->opts.chunk_bytes = 1;
  if (size == 0) input_error(name, ": not an HDF5 file (0 bytes)");
  // The core driver serves reads from a copy of the image and never writes a backing file.
  h5::PropList fapl(H5Pcreate(H5P_FILE_ACCESS));
  if (H5Pset_fapl_core(fapl.get(), std::size_t{1} << 16, false) < 0 ||
      H5Pset_file_image(fapl.get(), const_cast<void*>(data), size) < 0)
    h5::fail(name, "cannot use the file image");
  impl->fid = h5::File(H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!impl->fid) h5::fail(name, "cannot open HDF5 file");
  impl->open_x();
  return H5adReader(std::move(impl));
}

const std::filesystem::path& H5adReader::path() const { return impl_->path; }
const H5adInfo& H5adReader::info() const { return impl_->info; }

std::vector<std::string> H5adReader::var_names() const {
  h5::ErrorSilencer quiet;
  return impl_->index_names("var", impl_->info.n_vars, "column");
}

std::vector<std::string> H5adReader::obs_names() const {
  h5::ErrorSilencer quiet;
  return impl_->index_names("obs", impl_->info.n_obs, "row");
}

std::vector<std::int64_t> H5adReader::row_nnz(std::int64_t r0, std::int64_t r1) const {
  h5::ErrorSilencer quiet;
  const Impl& m = *impl_;
  check_rows(r0, r1, m.info.n_obs, "row_nnz");
  std::vector<std::int64_t> out(static_cast<std::size_t>(r1 - r0), 0);
  switch (m.info.format) {
    case StorageFormat::Csr: {
      if (r1 == r0) break;
      const auto p = m.read_indptr(r0, r1);
      for (std::size_t i = 0; i + 1 < p.size(); ++i) out[i] = p[i + 1] - p[i];
      break;
    }
    case StorageFormat::Csc:
      m.csc_count();
      std::copy(m.csc_row_counts.begin() + r0, m.csc_row_counts.begin() + r1, out.begin());
      break;
    case StorageFormat::Dense:
      m.for_each_dense_band(r0, r1, [&](std::int64_t r, std::int64_t rows, std::int64_t c, std::int64_t cols, const void* raw) {
        for (std::int64_t i = 0; i < rows; ++i) {
          const void* src = static_cast<const char*>(raw) + static_cast<std::size_t>(i * cols) * size_of(m.info.value_type);
          std::int64_t& count = out[static_cast<std::size_t>(r - r0 + i)];
          convert_values<double>(m.info.value_type, src, cols, [&](std::int64_t, double v) { count += v != 0; },
                                 [&](std::int64_t k, auto v, const char* why) { m.bad_dense_value(r + i, c + k, static_cast<double>(v), why); });
        }
      });
      break;
  }
  return out;
}

namespace {
/// Rows [r0, r1) of a CSC file's full CSR copy into `fp` (its values are the file's, exactly).
template <class C>
void hash_csc_rows(XFingerprint& fp, const CsrBlock<C>& all, std::int64_t r0, std::int64_t r1) {
  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t q = all.row_offsets[static_cast<std::size_t>(r)]; q < all.row_offsets[static_cast<std::size_t>(r + 1)]; ++q)
      fp.add(r, all.cols[static_cast<std::size_t>(q)], static_cast<double>(all.values[static_cast<std::size_t>(q)]));
}
}  // namespace

template <class T>
void H5adReader::read_csr_rows(std::int64_t r0, std::int64_t r1, CsrBlock<T>& out, XFingerprint* fp) const {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  h5::ErrorSilencer quiet;
  const Impl& m = *impl_;
  check_rows(r0, r1, m.info.n_obs, "read_csr_rows");
  out.row_begin = r0;
  out.row_end = r1;
  out.ncols = m.info.n_vars;
  switch (m.info.format) {
    case StorageFormat::Csr:
      if (r1 == r0) {
        out.row_offsets.assign(1, 0);
        out.cols.clear();
        out.values.clear();
      } else {
        m.csr_from_csr(r0, r1, out, fp);
      }
      break;
    case StorageFormat::Dense: m.csr_from_dense(r0, r1, out, fp); break;
    case StorageFormat::Csc:
      out.row_offsets.assign(static_cast<std::size_t>(r1 - r0 + 1), 0);
      out.cols.clear();
      out.values.clear();
      if (r1 == r0) break;
      m.with_csc_csr([&](const auto& all) {
        const auto ro = [&](std::int64_t r) { return all.row_offsets[static_cast<std::size_t>(r)]; };
        const std::int64_t p0 = ro(r0), p1 = ro(r1);
        for (std::int64_t r = r0; r <= r1; ++r) out.row_offsets[static_cast<std::size_t>(r - r0)] = ro(r) - p0;
        out.cols.assign(all.cols.begin() + p0, all.cols.begin() + p1);
        out.values.resize(static_cast<std::size_t>(p1 - p0));
        for (std::int64_t q = p0; q < p1; ++q)
          out.values[static_cast<std::size_t>(q - p0)] = static_cast<T>(all.values[static_cast<std::size_t>(q)]);
        if (fp) hash_csc_rows(*fp, all, r0, r1);
      });
      break;
  }
  if (fp) fp->add_rows(r1 - r0);
}

template <class T>
void H5adReader::read_dense_rows(std::int64_t r0, std::int64_t r1, T* out, XFingerprint* fp) const {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  h5::ErrorSilencer quiet;
  const Impl& m = *impl_;
  check_rows(r0, r1, m.info.n_obs, "read_dense_rows");
  if (r1 == r0) return;
  const std::int64_t g = m.info.n_vars;
  switch (m.info.format) {
    case StorageFormat::Dense: m.dense_from_dense(r0, r1, out, fp); break;
    case StorageFormat::Csr: m.dense_from_csr(r0, r1, out, fp); break;
    case StorageFormat::Csc:
      std::fill(out, out + (r1 - r0) * g, T(0));
      m.with_csc_csr([&](const auto& all) {
        for (std::int64_t r = r0; r < r1; ++r) {
          T* row = out + (r - r0) * g;
          for (std::int64_t q = all.row_offsets[static_cast<std::size_t>(r)]; q < all.row_offsets[static_cast<std::size_t>(r + 1)]; ++q)
            row[all.cols[static_cast<std::size_t>(q)]] += static_cast<T>(all.values[static_cast<std::size_t>(q)]);
        }
        if (fp) hash_csc_rows(*fp, all, r0, r1);
      });
      break;
  }
  if (fp) fp->add_rows(r1 - r0);
}

template void H5adReader::read_csr_rows<float>(std::int64_t, std::int64_t, CsrBlock<float>&, XFingerprint*) const;
template void H5adReader::read_csr_rows<double>(std::int64_t, std::int64_t, CsrBlock<double>&, XFingerprint*) const;
template void H5adReader::read_dense_rows<float>(std::int64_t, std::int64_t, float*, XFingerprint*) const;
template void H5adReader::read_dense_rows<double>(std::int64_t, std::int64_t, double*, XFingerprint*) const;

}  // namespace knmf::io
