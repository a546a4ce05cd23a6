#pragma once
/// \file
/// A matrix (X, or TPM) as a sequence of host CSR row blocks, read on each pass (from an
/// AnnData file) or cut from a CSR matrix in memory, so that a pass over it never holds more
/// than one block: consensus accumulates every product it needs (X H^T, U^T X, column sums)
/// block by block on the device. A block holds at most a given number of stored entries
/// (or one row).
///
/// The two streaming paths of knmf, and why there are two: this one streams from the file,
/// host memory one block, for the passes of consensus (a few per k); StreamedMatrix
/// (streamed_matrix.hpp) holds X in (pinned) host memory and streams it to the device on
/// every iteration of factorize, where reading the file again per product would dominate.
/// Both transpose a row block to CSC with the one routine of src/matrix/block_csc.hpp, so
/// their products see the entries in the same order.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "knmf/core/types.hpp"
#include "knmf/io/h5ad.hpp"

namespace knmf {

/// Visitor of one row block (rows [block.row_begin, block.row_end), values as double).
using BlockVisitor = std::function<void(const io::CsrBlock<double>&)>;

class RowSource {
public:
  virtual ~RowSource() = default;
  virtual size_type rows() const = 0;
  virtual size_type cols() const = 0;
  /// What to call the matrix in messages (its file name).
  virtual const std::string& name() const = 0;
  /// Column (gene) names, cols() of them (empty when the source has none).
  virtual std::vector<std::string> column_names() const = 0;
  /// Row (cell) names, rows() of them (empty when the source has none).
  virtual std::vector<std::string> row_names() const = 0;
  /// Call `visit` for consecutive row blocks covering [0, rows()) in order, each with at
  /// most `max_nnz` stored entries unless a single row has more.
  virtual void for_each_block(size_type max_nnz, const BlockVisitor& visit) const = 0;
};

/// Rows read from an AnnData file on each pass (host memory: one block).
class H5adRowSource final : public RowSource {
public:
  explicit H5adRowSource(const std::string& path);
  size_type rows() const override;
  size_type cols() const override;
  const std::string& name() const override { return name_; }
  std::vector<std::string> column_names() const override;
  std::vector<std::string> row_names() const override;
  void for_each_block(size_type max_nnz, const BlockVisitor& visit) const override;
  const io::H5adReader& reader() const { return reader_; }
  /// Check, during the first whole pass (no pass of its own), that X's content fingerprint
  /// (io/fingerprint.hpp) is `fingerprint`: that pass ends in an InputError naming the file,
  /// both fingerprints and `recorded_by` (whose X it should be: "the run in r.h5") when it
  /// is not.
  void expect_fingerprint(std::string fingerprint, std::string recorded_by);

private:
  std::string name_;
  io::H5adReader reader_;
  std::string expected_fingerprint_, recorded_by_;
  mutable bool fingerprint_checked_ = false;
  mutable std::vector<size_type> bounds_;  // block boundaries of the last max_nnz
  mutable size_type bounds_nnz_ = -1;
};

/// Rows held in host memory as one CSR matrix (tests, benchmarks, callers with X at hand).
class CsrRowSource final : public RowSource {
public:
  /// `matrix` must cover rows [0, n): row_begin 0. Values are not checked here.
  CsrRowSource(io::CsrBlock<double> matrix, std::string name,
               std::vector<std::string> row_names = {}, std::vector<std::string> column_names = {});
  size_type rows() const override { return m_.rows(); }
  size_type cols() const override { return m_.ncols; }
  const std::string& name() const override { return name_; }
  std::vector<std::string> column_names() const override { return cols_; }
  std::vector<std::string> row_names() const override { return rows_; }
  void for_each_block(size_type max_nnz, const BlockVisitor& visit) const override;
  const io::CsrBlock<double>& matrix() const { return m_; }

private:
  io::CsrBlock<double> m_;
  std::string name_;
  std::vector<std::string> rows_, cols_;
};

}  // namespace knmf
