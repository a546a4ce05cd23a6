#pragma once
/// \file
/// Reading and writing the count matrix X of AnnData `.h5ad` files (HDF5).
///
/// `H5adReader` reads X in row blocks, whatever its storage on disk (dense 2-D dataset, CSR
/// or CSC group), into the in-memory form the caller picks: CSR blocks (`CsrBlock<T>`) or
/// dense row-major rows; T is float or double and every on-disk numeric type converts.
/// Reads go through HDF5 hyperslabs of bounded size (`H5adReadOptions::chunk_bytes`), so
/// host memory beyond the destination stays bounded -- except for CSC files, where row
/// blocks need the whole matrix: the first row read converts the file to a full host CSR
/// copy (see `H5adReader::read_csr_rows`).
///
/// Every value is checked as it is converted: finite and non-negative (NMF input), column
/// indices in range, indptr monotone. Any problem with the file is a `knmf::InputError`
/// with a one-line message that names the file, the dataset and the offending value and
/// position, e.g.
///   "x.h5ad: /X/data[5] = nan at row 3, column 1 is not finite (X must be finite and non-negative)".
///
/// `H5adWriter` writes an AnnData-0.8-compatible file incrementally, one row block at a time.
///
/// Neither class is thread-safe; one object must be used by one thread at a time.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "knmf/io/fingerprint.hpp"

namespace knmf::io {

/// How X is stored in the file.
enum class StorageFormat {
  Dense,  ///< 2-D dataset /X (n_obs x n_vars, row-major)
  Csr,    ///< group /X with data, indices (columns), indptr (n_obs + 1)
  Csc     ///< group /X with data, indices (rows), indptr (n_vars + 1)
};

/// A numeric element type of an HDF5 dataset.
enum class ValueType { Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Float32, Float64 };

/// "dense", "csr", "csc".
const char* to_string(StorageFormat f);
/// numpy's names: "int8" ... "uint64", "float32", "float64".
const char* to_string(ValueType t);

/// What `H5adReader::open` found out about X without reading it.
struct H5adInfo {
  std::int64_t n_obs = 0;   ///< rows (cells)
  std::int64_t n_vars = 0;  ///< columns (genes)
  StorageFormat format = StorageFormat::Dense;
  /// Stored entries: len(data) for sparse X (explicit zeros included), n_obs * n_vars for dense.
  std::int64_t nnz = 0;
  ValueType value_type = ValueType::Float32;    ///< on-disk type of the values
  std::optional<ValueType> index_type;          ///< sparse only: type of `indices`
  std::optional<ValueType> indptr_type;         ///< sparse only: type of `indptr`
};

/// Rows [row_begin, row_end) of a matrix with `ncols` columns in CSR form. Offsets are
/// relative to the block: `row_offsets` has rows() + 1 entries and starts at 0; the entries
/// of row `row_begin + i` are [row_offsets[i], row_offsets[i + 1]) of `cols` and `values`.
template <class T>
struct CsrBlock {
  std::int64_t row_begin = 0;
  std::int64_t row_end = 0;
  std::int64_t ncols = 0;
  std::vector<std::int64_t> row_offsets{0};
  std::vector<std::int32_t> cols;
  std::vector<T> values;

  std::int64_t rows() const { return row_end - row_begin; }
  std::int64_t nnz() const { return static_cast<std::int64_t>(values.size()); }
};

/// Options of `H5adReader`.
struct H5adReadOptions {
  /// Upper bound on the bytes of one HDF5 read (the raw on-disk values and indices read at
  /// once, before conversion into the destination). Also bounds HDF5's chunk cache per
  /// dataset (at least one compressed chunk is always cached).
  std::size_t chunk_bytes = std::size_t{64} << 20;
};

/// Reads X (and the obs/var names) of an AnnData `.h5ad` file.
///
/// Understood layouts:
///  * X: dense 2-D dataset; group with attribute `encoding-type` = csr_matrix/csc_matrix and
///    `shape`; older files' group with `h5sparse_format` = "csr"/"csc" and `h5sparse_shape`.
///    indptr and indices may be any integer type, values any integer or float type.
///  * obs/var (AnnData >= 0.7): a group whose attribute `_index` names the index dataset
///    (default `_index`); strings variable- or fixed-length, UTF-8 or ASCII. Older files:
///    a structured (compound) dataset with a string field `index`.
///
/// Explicit zeros stored in a sparse X are kept by `read_csr_rows` (they count in `nnz`);
/// zeros of a dense X are dropped. Duplicate column indices within a row are kept in CSR
/// output and summed in dense output (as scipy does).
class H5adReader {
public:
  /// Open `path` and check that it is an HDF5 file with an AnnData X (see the class
  /// comment), that X's shape, indptr and data agree, and that indptr starts at 0 and ends
  /// at nnz. Throws InputError otherwise. Cheap: reads metadata and two indptr entries.
  static H5adReader open(const std::filesystem::path& path, const H5adReadOptions& opts = {});
  /// The same reader and checks over an HDF5 file image held in memory (`size` bytes at
  /// `data`, copied; read through HDF5's core driver, nothing touches a disk). `name` stands
  /// for the file in messages and path(). For tests and the fuzzers (tests/fuzz).
  static H5adReader open_image(const void* data, std::size_t size, const std::string& name,
                               const H5adReadOptions& opts = {});

  H5adReader(H5adReader&&) noexcept;
  H5adReader& operator=(H5adReader&&) noexcept;
  ~H5adReader();

  const std::filesystem::path& path() const;
  const H5adInfo& info() const;

  /// The var (gene) index, n_vars strings in column order. InputError (naming the file, the
  /// name's position and its bytes) for a name that is not well-formed UTF-8: knmf stores
  /// names as UTF-8 (docs/results-file.md).
  std::vector<std::string> var_names() const;
  /// The obs (cell) index, n_obs strings in row order; UTF-8 as var_names().
  std::vector<std::string> obs_names() const;

  /// Stored entries per row for rows [r0, r1) (size r1 - r0): a cheap pre-pass to plan
  /// memory and block boundaries. CSR: read from indptr only (checked to be monotone).
  /// CSC: counts the row indices (the first pass of the CSC conversion; cached).
  /// Dense: reads the rows and counts the non-zeros (as costly as reading them).
  std::vector<std::int64_t> row_nnz(std::int64_t r0, std::int64_t r1) const;

  /// Rows [r0, r1) as a CSR block with values converted to T (float or double), replacing
  /// `out`'s contents (its capacity is reused).
  ///  * CSR file: indptr[r0..r1], then indices and data in bounded hyperslab chunks.
  ///  * dense file: bounded row bands; zeros are dropped.
  ///  * CSC file: the one case that holds a full host copy. The first call converts the
  ///    whole matrix in two passes over bounded column chunks (1: count the entries of each
  ///    row; 2: place every entry at its row's next free slot, so columns stay sorted)
  ///    into a CSR kept by the reader (values in float when the on-disk type converts to
  ///    float exactly, else double); later calls copy from it.
  ///
  /// `fingerprint`: when given, the rows' values as stored in the file (before the conversion
  /// to T) are added to it (io/fingerprint.hpp), and r1 - r0 to its rows.
  template <class T>
  void read_csr_rows(std::int64_t r0, std::int64_t r1, CsrBlock<T>& out,
                     XFingerprint* fingerprint = nullptr) const;

  /// Rows [r0, r1) as a dense row-major (r1 - r0) x n_vars array at `out` (T float or
  /// double), whatever the file's storage: sparse X is scattered into zeros. `fingerprint`
  /// as for read_csr_rows (a sparse file's entries count as stored, before any summing).
  template <class T>
  void read_dense_rows(std::int64_t r0, std::int64_t r1, T* out,
                       XFingerprint* fingerprint = nullptr) const;

private:
  struct Impl;
  explicit H5adReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Split rows into consecutive blocks of at most `max_nnz` stored entries each (a row with
/// more entries than that gets a block of its own). `row_nnz` as from H5adReader::row_nnz
/// for rows [0, n); returns the block boundaries b_0 = 0 < b_1 < ... < b_m = n.
std::vector<std::int64_t> split_rows_by_nnz(const std::vector<std::int64_t>& row_nnz,
                                            std::int64_t max_nnz);

/// Options of `H5adWriter`.
struct H5adWriteOptions {
  /// Csr (group /X: data, indices int32, indptr int64) or Dense (2-D dataset /X).
  StorageFormat format = StorageFormat::Csr;
  /// On-disk type of the values: Float32 or Float64.
  ValueType value_type = ValueType::Float32;
  /// gzip (deflate) level 0..9 of every dataset; 0 writes uncompressed chunks.
  int gzip_level = 4;
  /// Elements per HDF5 chunk (1-D datasets; dense X: whole rows up to this many elements).
  std::int64_t chunk_elements = std::int64_t{1} << 16;
  /// Csr: store indptr as int32 instead of int64, as scipy does below 2^31 entries (cNMF's
  /// files; scikit-learn's sparse routines refuse int32 indices with an int64 indptr).
  /// InputError when the entries pass 2^31 - 1.
  bool indptr_int32 = false;
  /// Obs and var names must be UTF-8 (they are stored as UTF-8 strings, which anndata decodes):
  /// set_obs_names / set_var_names refuse others with an InputError naming the position and
  /// the bytes. false only to write a hostile file on purpose (tests of the readers' refusal).
  bool check_names_utf8 = true;
};

/// Writes an AnnData-0.8-compatible `.h5ad` file row block by row block, so that a large
/// matrix never has to be in memory at once.
///
/// Layout: root attributes encoding-type = "anndata", encoding-version = "0.1.0"; /X as
/// csr_matrix group (data, indices int32, indptr int64, attr shape int64[2]) or dense
/// dataset (encoding-type "array"); /obs and /var dataframes with a variable-length UTF-8
/// `_index` and no columns; empty layers, obsm, obsp, uns, varm, varp.
///
/// The file is written under a temporary name in the target's folder and renamed into
/// place by `close()`; a writer destroyed before `close()` (e.g. after an error) removes
/// its temporary file, so no partial output is ever left at `path`.
class H5adWriter {
public:
  /// Start writing an n_obs x n_vars matrix to `path` (replaced on close if it exists).
  H5adWriter(const std::filesystem::path& path, std::int64_t n_obs, std::int64_t n_vars,
             const H5adWriteOptions& opts = {});
  H5adWriter(H5adWriter&&) noexcept;
  H5adWriter& operator=(H5adWriter&&) noexcept;
  /// Removes the temporary file unless close() succeeded.
  ~H5adWriter();

  /// Row (cell) names; n_obs strings. Default: "0", "1", ... (as AnnData).
  void set_obs_names(std::vector<std::string> names);
  /// Column (gene) names; n_vars strings. Default: "0", "1", ...
  void set_var_names(std::vector<std::string> names);

  /// Append rows [block.row_begin, block.row_end); row_begin must equal rows_written() and
  /// ncols n_vars. Either format accepts either kind of block (a dense file scatters CSR
  /// blocks; a CSR file drops zeros of dense rows). Values are written as given (converted
  /// to the on-disk type), not checked.
  template <class T>
  void write_csr_rows(const CsrBlock<T>& block);
  /// Append rows [r0, r1) given as a dense row-major (r1 - r0) x n_vars array.
  template <class T>
  void write_dense_rows(std::int64_t r0, std::int64_t r1, const T* rows);

  /// Rows appended so far.
  std::int64_t rows_written() const;

  /// Finish: all n_obs rows must have been written. Writes the names, closes the file and
  /// renames it to `path`.
  void close();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Write a whole matrix at once (a convenience over H5adWriter). Empty names mean the default.
template <class T>
void write_h5ad(const std::filesystem::path& path, const CsrBlock<T>& X,
                std::vector<std::string> obs_names = {}, std::vector<std::string> var_names = {},
                const H5adWriteOptions& opts = {});

}  // namespace knmf::io
