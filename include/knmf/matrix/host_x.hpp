#pragma once
/// \file
/// A matrix held in the caller's host memory, read where it is: CSR (row offsets: n + 1 entries
/// from 0, column indices, values) or dense (n x g, row- or column-major), index arrays int32 or
/// int64 and values float32, float64, int32 or int64, each on its own. Read row block by row
/// block into the library's own types, converting on the way, so no converted copy of the
/// whole matrix is made: X of an in-memory run (knmf/run/in_memory.hpp), and the Python
/// module's counts, X and TPM (python/src/module.cpp).

#include <cstdint>
#include <string>
#include <vector>

#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/row_source.hpp"

namespace knmf {

struct HostX {
  enum class Layout { csr, dense_rows, dense_columns };
  enum class Values { float32, float64, int32, int64 };
  Layout layout = Layout::csr;
  std::int64_t n = 0, g = 0;
  const void* offsets = nullptr;  ///< CSR: n + 1 row offsets
  bool offsets_64 = true;         ///< int64 (else int32)
  const void* indices = nullptr;  ///< CSR: column indices, in the order stored
  bool indices_64 = false;        ///< int64 (else int32)
  const void* values = nullptr;   ///< CSR: the stored values; dense: n x g values
  Values values_type = Values::float64;

  bool sparse() const { return layout == Layout::csr; }
  /// CSR: row r's first entry.
  std::int64_t offset(std::int64_t r) const {
    return offsets_64 ? static_cast<const std::int64_t*>(offsets)[r]
                      : std::int64_t(static_cast<const std::int32_t*>(offsets)[r]);
  }
  /// CSR: entry p's column.
  std::int64_t index(std::int64_t p) const {
    return indices_64 ? static_cast<const std::int64_t*>(indices)[p]
                      : std::int64_t(static_cast<const std::int32_t*>(indices)[p]);
  }
  /// Value p (CSR: entry p; dense: position p of the array) as T: T(value), as a file's
  /// reader converts what it reads.
  template <class T>
  T value(std::int64_t p) const {
    switch (values_type) {
      case Values::float32: return T(static_cast<const float*>(values)[p]);
      case Values::float64: return T(static_cast<const double*>(values)[p]);
      case Values::int32: return T(static_cast<const std::int32_t*>(values)[p]);
      default: return T(static_cast<const std::int64_t*>(values)[p]);
    }
  }
  /// Dense: the value at row r, column c, as T (row- or column-major).
  template <class T>
  T at(std::int64_t r, std::int64_t c) const {
    return value<T>(layout == Layout::dense_rows ? r * g + c : c * n + r);
  }
  /// The values are of type T already.
  template <class T>
  bool values_are() const {
    return sizeof(T) == 4 ? values_type == Values::float32 : values_type == Values::float64;
  }
  /// Stored entries: CSR's offset(n), a dense matrix's n g.
  std::int64_t stored() const { return sparse() ? offset(n) : n * g; }
};

/// Rows [r0, r1) of X as the library takes them (`out`: offsets from 0, int32 columns, T
/// values): a CSR X's entries, checked on the way (offsets that decrease and columns outside
/// [0, g) are input errors naming `source`; the library checks the values when it
/// finalizes), a dense X's non-zero values (NaN included), as a dense file's reader gives them.
template <class T>
void host_x_rows(const HostX& X, std::int64_t r0, std::int64_t r1, io::CsrBlock<T>& out,
                 const std::string& source);

/// The end of the row block from r0: rows while they hold at most `max_nnz` stored entries
/// together (a dense X: n g of them), at least one row.
std::int64_t host_x_block_end(const HostX& X, std::int64_t r0, std::int64_t max_nnz);

/// X as a RowSource (consensus, k selection), its values as double.
class HostXRowSource final : public RowSource {
public:
  HostXRowSource(const HostX& X, std::string name) : X_(X), name_(std::move(name)) {}
  size_type rows() const override { return X_.n; }
  size_type cols() const override { return X_.g; }
  const std::string& name() const override { return name_; }
  std::vector<std::string> column_names() const override { return {}; }
  std::vector<std::string> row_names() const override { return {}; }
  void for_each_block(size_type max_nnz, const BlockVisitor& visit) const override;

private:
  HostX X_;
  std::string name_;
};

}  // namespace knmf
