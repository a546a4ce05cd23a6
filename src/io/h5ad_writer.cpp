/// \file
/// H5adWriter: AnnData-0.8-compatible .h5ad files written row block by row block
/// (include/knmf/io/h5ad.hpp).

#include <unistd.h>

#include <algorithm>
#include <limits>
#include <atomic>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>

#include "h5ad_types.hpp"
#include "knmf/io/utf8.hpp"
#include "knmf/core/error.hpp"
#include "knmf/io/atomic_file.hpp"
#include "io/hdf5.hpp"
#include "knmf/io/h5ad.hpp"

namespace knmf::io {

namespace h5 = detail::h5;

namespace {

template <class T>
hid_t native_of() {
  return std::is_same_v<T, float> ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
}

/// A dataset-creation property list: chunked with `chunk` dims, deflate when level > 0.
h5::PropList chunked(const std::vector<hsize_t>& chunk, int level) {
  h5::PropList dcpl(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
  if (level > 0) {
    H5Pset_shuffle(dcpl.get());
    H5Pset_deflate(dcpl.get(), static_cast<unsigned>(level));
  }
  return dcpl;
}

std::vector<std::string> default_names(std::int64_t n) {
  std::vector<std::string> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = std::to_string(i);
  return v;
}

}  // namespace

struct H5adWriter::Impl {
  std::filesystem::path path;
  std::unique_ptr<AtomicFile> atomic;  // the temporary the file is written under
  std::string file;  // the target path, for messages
  std::int64_t n_obs = 0, n_vars = 0;
  H5adWriteOptions opts;
  h5::File fid;
  h5::Dataset x;                          // dense
  h5::Dataset data, indices, indptr;      // csr
  std::int64_t rows = 0, nnz = 0;
  std::vector<std::string> obs, var;
  bool done = false;    // close() succeeded
  bool failed = false;  // a write failed half-way: the file is unusable

  /// Run a step that writes to the file; if it throws, the writer refuses further work.
  template <class F>
  void guarded(F&& f) {
    try {
      f();
      if (fid) h5::check_writes(file, fid.get());  // a dropped write ends the file here
    } catch (...) {
      failed = true;
      throw;
    }
  }

  hid_t file_value_type() const {
    return opts.value_type == ValueType::Float64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE;
  }

  h5::Group group(const char* name, const char* encoding, const char* version) {
    h5::Group g(H5Gcreate2(fid.get(), name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (!g) h5::fail(file, std::string("cannot create group ") + name);
    h5::write_string_attr(file, g.get(), "encoding-type", encoding);
    h5::write_string_attr(file, g.get(), "encoding-version", version);
    return g;
  }

  h5::Dataset create(hid_t loc, const char* name, hid_t type, const std::vector<hsize_t>& dims,
                     const std::vector<hsize_t>& maxdims, const std::vector<hsize_t>& chunk) {
    h5::Dataspace space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), maxdims.data()));
    h5::PropList dcpl = chunk.empty() ? h5::PropList(H5Pcreate(H5P_DATASET_CREATE))
                                      : chunked(chunk, opts.gzip_level);
    h5::Dataset d(H5Dcreate2(loc, name, type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
    if (!d) h5::fail(file, std::string("cannot create dataset ") + name);
    return d;
  }

  void start() {
    h5::PropList fapl(H5Pcreate(H5P_FILE_ACCESS));
    H5Pset_file_locking(fapl.get(), true, true);
    h5::use_write_latch(fapl.get());
    fid = h5::File(H5Fcreate(atomic->temp().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
    if (!fid) h5::fail(file, "cannot create " + atomic->temp().string());
    h5::Group root(H5Gopen2(fid.get(), "/", H5P_DEFAULT));
    h5::write_string_attr(file, root.get(), "encoding-type", "anndata");
    h5::write_string_attr(file, root.get(), "encoding-version", "0.1.0");
    for (const char* g : {"layers", "obsm", "obsp", "uns", "varm", "varp"}) group(g, "dict", "0.1.0");

    const auto ce = static_cast<hsize_t>(opts.chunk_elements);
    if (opts.format == StorageFormat::Csr) {
      h5::Group g = group("X", "csr_matrix", "0.1.0");
      h5::write_int_attr(file, g.get(), "shape", {n_obs, n_vars});
      data = create(g.get(), "data", file_value_type(), {0}, {H5S_UNLIMITED}, {ce});
      indices = create(g.get(), "indices", H5T_STD_I32LE, {0}, {H5S_UNLIMITED}, {ce});
      const auto np = static_cast<hsize_t>(n_obs + 1);
      indptr = create(g.get(), "indptr", opts.indptr_int32 ? H5T_STD_I32LE : H5T_STD_I64LE, {np}, {np},
                      {std::min(ce, np)});
      write_indptr(0, {0});
    } else {
      const auto n = static_cast<hsize_t>(n_obs), g = static_cast<hsize_t>(n_vars);
      std::vector<hsize_t> chunk;  // contiguous when empty (chunks cannot be zero-sized)
      if (n > 0 && g > 0) chunk = {std::clamp<hsize_t>(ce / g, 1, n), std::min(g, ce)};
      x = create(fid.get(), "X", file_value_type(), {n, g}, {n, g}, chunk);
      h5::write_string_attr(file, x.get(), "encoding-type", "array");
      h5::write_string_attr(file, x.get(), "encoding-version", "0.2.0");
    }
  }

  /// Write `values` at rows [offset, offset + n) of a 1-D dataset, extending it first if asked.
  void write_1d(const h5::Dataset& d, const char* name, hid_t mem, std::int64_t offset,
                std::int64_t n, const void* values, bool extend) {
    if (n <= 0) return;
    const hsize_t start = static_cast<hsize_t>(offset), count = static_cast<hsize_t>(n);
    if (extend) {
      const hsize_t size = start + count;
      if (H5Dset_extent(d.get(), &size) < 0) h5::fail(file, std::string("cannot extend ") + name);
    }
    h5::Dataspace fspace(H5Dget_space(d.get()));
    h5::Dataspace mspace(H5Screate_simple(1, &count, nullptr));
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr) < 0 ||
        H5Dwrite(d.get(), mem, mspace.get(), fspace.get(), H5P_DEFAULT, values) < 0)
      h5::fail(file, knmf::detail::concat("cannot write ", name, "[", offset, ":", offset + n, "]"));
  }

  void write_indptr(std::int64_t offset, const std::vector<std::int64_t>& v) {
    write_1d(indptr, "/X/indptr", H5T_NATIVE_INT64, offset,
             static_cast<std::int64_t>(v.size()), v.data(), false);
  }

  void check_append(std::int64_t r0, std::int64_t r1) const {
    if (done) input_error(file, ": H5adWriter: rows written after close()");
    if (failed || !fid) input_error(file, ": H5adWriter: an earlier write failed");
    if (r0 != rows || r1 < r0 || r1 > n_obs)
      input_error(file, ": H5adWriter: rows [", r0, ", ", r1, ") appended after ", rows,
                  " of ", n_obs, " rows (blocks must come in order)");
  }

  /// Append rows in CSR form (offsets relative to the block, starting at 0).
  template <class T>
  void append_csr(std::int64_t r1, const std::vector<std::int64_t>& offsets,
                  const std::vector<std::int32_t>& cols, const std::vector<T>& values) {
    const auto n = static_cast<std::int64_t>(values.size());
    if (opts.format == StorageFormat::Csr) {
      write_1d(indices, "/X/indices", H5T_NATIVE_INT32, nnz, n, cols.data(), true);
      write_1d(data, "/X/data", native_of<T>(), nnz, n, values.data(), true);
      std::vector<std::int64_t> p(offsets.begin() + 1, offsets.end());
      for (auto& v : p) v += nnz;
      if (opts.indptr_int32 && !p.empty() && p.back() > std::numeric_limits<std::int32_t>::max())
        input_error(file, ": ", p.back(), " entries do not fit the int32 /X/indptr asked for");
      write_indptr(rows + 1, p);
      nnz += n;
    } else {
      std::vector<T> dense(static_cast<std::size_t>((r1 - rows) * n_vars), T(0));
      for (std::int64_t i = 0; i < r1 - rows; ++i)
        for (std::int64_t q = offsets[static_cast<std::size_t>(i)]; q < offsets[static_cast<std::size_t>(i + 1)]; ++q)
          dense[static_cast<std::size_t>(i * n_vars + cols[static_cast<std::size_t>(q)])] += values[static_cast<std::size_t>(q)];
      append_dense(r1, dense.data());
    }
    rows = r1;
  }

  /// Append rows [rows, r1) given dense row-major (dense files only).
  template <class T>
  void append_dense(std::int64_t r1, const T* values) {
    if (r1 == rows || n_vars == 0) return;
    const hsize_t start[2] = {static_cast<hsize_t>(rows), 0};
    const hsize_t count[2] = {static_cast<hsize_t>(r1 - rows), static_cast<hsize_t>(n_vars)};
    h5::Dataspace fspace(H5Dget_space(x.get()));
    h5::Dataspace mspace(H5Screate_simple(2, count, nullptr));
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr) < 0 ||
        H5Dwrite(x.get(), native_of<T>(), mspace.get(), fspace.get(), H5P_DEFAULT, values) < 0)
      h5::fail(file, knmf::detail::concat("cannot write /X[", rows, ":", r1, ", :]"));
  }

  void write_index(const char* elem, std::vector<std::string> names) {
    h5::Group g = group(elem, "dataframe", "0.2.0");
    h5::write_string_attr(file, g.get(), "_index", "_index");
    h5::write_empty_array_attr(file, g.get(), "column-order");
    h5::Datatype type(H5Tcopy(H5T_C_S1));
    H5Tset_size(type.get(), H5T_VARIABLE);
    H5Tset_cset(type.get(), H5T_CSET_UTF8);
    const auto n = static_cast<hsize_t>(names.size());
    std::vector<hsize_t> chunk;
    if (n > 0) chunk = {std::min<hsize_t>(n, static_cast<hsize_t>(opts.chunk_elements))};
    h5::Dataset d = create(g.get(), "_index", type.get(), {n}, {n}, chunk);
    std::vector<const char*> ptrs(names.size());
    for (std::size_t i = 0; i < names.size(); ++i) ptrs[i] = names[i].c_str();
    if (n > 0 && H5Dwrite(d.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) < 0)
      h5::fail(file, std::string("cannot write /") + elem + "/_index");
    h5::write_string_attr(file, d.get(), "encoding-type", "string-array");
    h5::write_string_attr(file, d.get(), "encoding-version", "0.2.0");
  }

  void close_handles() {
    x.reset();
    data.reset();
    indices.reset();
    indptr.reset();
    fid.reset();
  }
};

H5adWriter::H5adWriter(const std::filesystem::path& path, std::int64_t n_obs, std::int64_t n_vars,
                       const H5adWriteOptions& opts)
    : impl_(std::make_unique<Impl>()) {
  h5::ErrorSilencer quiet;
  Impl& m = *impl_;
  m.path = path;
  m.file = path.string();
  m.n_obs = n_obs;
  m.n_vars = n_vars;
  m.opts = opts;
  if (n_obs < 0 || n_vars < 0 || n_vars > std::numeric_limits<std::int32_t>::max())
    input_error(m.file, ": cannot write a ", n_obs, " x ", n_vars, " matrix (n_vars must be below 2^31)");
  if (opts.format == StorageFormat::Csc)
    input_error(m.file, ": H5adWriter writes X as csr or dense, not csc");
  if (opts.value_type != ValueType::Float32 && opts.value_type != ValueType::Float64)
    input_error(m.file, ": H5adWriter writes float32 or float64 values, not ", to_string(opts.value_type));
  if (opts.gzip_level < 0 || opts.gzip_level > 9)
    input_error(m.file, ": gzip level ", opts.gzip_level, " is not in 0..9");
  if (opts.chunk_elements < 1) input_error(m.file, ": chunk_elements ", opts.chunk_elements, " must be positive");
  if (opts.gzip_level > 0 && H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0)
    input_error(m.file, ": this HDF5 library has no gzip (deflate) filter; use gzip level 0");
  m.atomic = std::make_unique<AtomicFile>(path, m.file);
  try {
    m.start();
  } catch (...) {
    m.close_handles();
    m.atomic.reset();  // removes the temporary
    throw;
  }
}

H5adWriter::H5adWriter(H5adWriter&&) noexcept = default;

H5adWriter& H5adWriter::operator=(H5adWriter&& other) noexcept {
  if (this != &other) {
    H5adWriter dying(std::move(*this));  // abandons our current file, if any
    impl_ = std::move(other.impl_);
  }
  return *this;
}

H5adWriter::~H5adWriter() {
  if (!impl_ || impl_->done) return;
  h5::ErrorSilencer quiet;
  impl_->close_handles();
  impl_->atomic.reset();  // removes the temporary
}

void H5adWriter::set_obs_names(std::vector<std::string> names) {
  if (static_cast<std::int64_t>(names.size()) != impl_->n_obs)
    input_error(impl_->file, ": ", names.size(), " obs names given for ", impl_->n_obs, " rows");
  for (std::size_t i = 0; impl_->opts.check_names_utf8 && i < names.size(); ++i)
    require_utf8_name(names[i], impl_->file + ": cell name " + std::to_string(i) + " (obs_names[" +
                                    std::to_string(i) + "])");
  impl_->obs = std::move(names);
}

void H5adWriter::set_var_names(std::vector<std::string> names) {
  if (static_cast<std::int64_t>(names.size()) != impl_->n_vars)
    input_error(impl_->file, ": ", names.size(), " var names given for ", impl_->n_vars, " columns");
  for (std::size_t i = 0; impl_->opts.check_names_utf8 && i < names.size(); ++i)
    require_utf8_name(names[i], impl_->file + ": gene name " + std::to_string(i) + " (var_names[" +
                                    std::to_string(i) + "])");
  impl_->var = std::move(names);
}

std::int64_t H5adWriter::rows_written() const { return impl_->rows; }

template <class T>
void H5adWriter::write_csr_rows(const CsrBlock<T>& b) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  h5::ErrorSilencer quiet;
  Impl& m = *impl_;
  m.check_append(b.row_begin, b.row_end);
  const std::string& f = m.file;
  if (b.ncols != m.n_vars) input_error(f, ": H5adWriter: block has ", b.ncols, " columns; expected ", m.n_vars);
  if (static_cast<std::int64_t>(b.row_offsets.size()) != b.rows() + 1 || b.row_offsets.front() != 0)
    input_error(f, ": H5adWriter: block row_offsets must have rows + 1 = ", b.rows() + 1, " entries starting at 0");
  for (std::size_t i = 1; i < b.row_offsets.size(); ++i)
    if (b.row_offsets[i] < b.row_offsets[i - 1])
      input_error(f, ": H5adWriter: block row_offsets[", i, "] = ", b.row_offsets[i], " is decreasing");
  if (b.row_offsets.back() != b.nnz() || b.cols.size() != b.values.size())
    input_error(f, ": H5adWriter: block has ", b.cols.size(), " columns, ", b.values.size(),
                " values and row_offsets ending at ", b.row_offsets.back());
  for (std::size_t q = 0; q < b.cols.size(); ++q)
    if (b.cols[q] < 0 || b.cols[q] >= m.n_vars)
      input_error(f, ": H5adWriter: block column index ", b.cols[q], " at entry ", q, " is out of range [0, ", m.n_vars, ")");
  m.guarded([&] { m.append_csr(b.row_end, b.row_offsets, b.cols, b.values); });
}

template <class T>
void H5adWriter::write_dense_rows(std::int64_t r0, std::int64_t r1, const T* values) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  h5::ErrorSilencer quiet;
  Impl& m = *impl_;
  m.check_append(r0, r1);
  if (m.opts.format == StorageFormat::Dense) {
    m.guarded([&] { m.append_dense(r1, values); });
    m.rows = r1;
    return;
  }
  std::vector<std::int64_t> offsets{0};
  std::vector<std::int32_t> cols;
  std::vector<T> vals;
  for (std::int64_t i = 0; i < r1 - r0; ++i) {
    for (std::int64_t c = 0; c < m.n_vars; ++c) {
      const T v = values[i * m.n_vars + c];
      if (v != T(0)) {
        cols.push_back(static_cast<std::int32_t>(c));
        vals.push_back(v);
      }
    }
    offsets.push_back(static_cast<std::int64_t>(cols.size()));
  }
  m.guarded([&] { m.append_csr(r1, offsets, cols, vals); });
}

void H5adWriter::close() {
  h5::ErrorSilencer quiet;
  Impl& m = *impl_;
  if (m.done) return;
  if (m.failed || !m.fid) input_error(m.file, ": H5adWriter: an earlier write failed");
  if (m.rows != m.n_obs)
    input_error(m.file, ": H5adWriter: only ", m.rows, " of ", m.n_obs, " rows were written");
  m.guarded([&] {
    m.write_index("obs", m.obs.empty() ? default_names(m.n_obs) : std::move(m.obs));
    m.write_index("var", m.var.empty() ? default_names(m.n_vars) : std::move(m.var));
    m.x.reset();
    m.data.reset();
    m.indices.reset();
    m.indptr.reset();
    h5::close(m.file, m.fid);
    m.atomic->commit(AtomicFile::Replace::yes);
  });
  m.done = true;
}

template <class T>
void write_h5ad(const std::filesystem::path& path, const CsrBlock<T>& X,
                std::vector<std::string> obs_names, std::vector<std::string> var_names,
                const H5adWriteOptions& opts) {
  H5adWriter w(path, X.rows(), X.ncols, opts);
  if (!obs_names.empty()) w.set_obs_names(std::move(obs_names));
  if (!var_names.empty()) w.set_var_names(std::move(var_names));
  if (X.row_begin == 0) {
    w.write_csr_rows(X);
  } else {
    CsrBlock<T> block = X;  // the writer counts rows from 0
    block.row_begin = 0;
    block.row_end = X.rows();
    w.write_csr_rows(block);
  }
  w.close();
}

template void H5adWriter::write_csr_rows<float>(const CsrBlock<float>&);
template void H5adWriter::write_csr_rows<double>(const CsrBlock<double>&);
template void H5adWriter::write_dense_rows<float>(std::int64_t, std::int64_t, const float*);
template void H5adWriter::write_dense_rows<double>(std::int64_t, std::int64_t, const double*);
template void write_h5ad<float>(const std::filesystem::path&, const CsrBlock<float>&,
                                std::vector<std::string>, std::vector<std::string>,
                                const H5adWriteOptions&);
template void write_h5ad<double>(const std::filesystem::path&, const CsrBlock<double>&,
                                 std::vector<std::string>, std::vector<std::string>,
                                 const H5adWriteOptions&);

}  // namespace knmf::io
