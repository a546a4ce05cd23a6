// A matrix as a stream of CSR row blocks (see knmf/matrix/row_source.hpp).
#include "knmf/matrix/row_source.hpp"

#include <filesystem>

#include "knmf/core/error.hpp"

namespace knmf {

H5adRowSource::H5adRowSource(const std::string& path)
    : name_(path), reader_(io::H5adReader::open(path)) {}

size_type H5adRowSource::rows() const { return reader_.info().n_obs; }
size_type H5adRowSource::cols() const { return reader_.info().n_vars; }
std::vector<std::string> H5adRowSource::column_names() const { return reader_.var_names(); }
std::vector<std::string> H5adRowSource::row_names() const { return reader_.obs_names(); }

void H5adRowSource::for_each_block(size_type max_nnz, const BlockVisitor& visit) const {
  const size_type n = rows();
  if (bounds_nnz_ != max_nnz) {
    bounds_ = io::split_rows_by_nnz(reader_.row_nnz(0, n), max_nnz);
    bounds_nnz_ = max_nnz;
  }
  io::CsrBlock<double> block;
  const bool check = !expected_fingerprint_.empty() && !fingerprint_checked_;
  io::XFingerprint fp;
  for (size_t b = 0; b + 1 < bounds_.size(); ++b) {
    reader_.read_csr_rows<double>(bounds_[b], bounds_[b + 1], block, check ? &fp : nullptr);
    visit(block);
  }
  if (!check) return;
  const std::string got = fp.text(n, cols());
  if (got != expected_fingerprint_)
    input_error(name_, ": its X (fingerprint ", got, ") is not the X of ", recorded_by_,
                " (fingerprint ", expected_fingerprint_, ")");
  fingerprint_checked_ = true;
}

void H5adRowSource::expect_fingerprint(std::string fingerprint, std::string recorded_by) {
  expected_fingerprint_ = std::move(fingerprint);
  recorded_by_ = std::move(recorded_by);
  fingerprint_checked_ = false;
}

CsrRowSource::CsrRowSource(io::CsrBlock<double> matrix, std::string name,
                           std::vector<std::string> row_names, std::vector<std::string> column_names)
    : m_(std::move(matrix)), name_(std::move(name)), rows_(std::move(row_names)),
      cols_(std::move(column_names)) {
  KNMF_ASSERT(m_.row_begin == 0, "CsrRowSource needs the whole matrix");
  KNMF_ASSERT(size_type(m_.row_offsets.size()) == m_.rows() + 1, "CSR offsets");
  if (!rows_.empty() && size_type(rows_.size()) != m_.rows())
    input_error(name_, ": ", rows_.size(), " row names for ", m_.rows(), " rows");
  if (!cols_.empty() && size_type(cols_.size()) != m_.ncols)
    input_error(name_, ": ", cols_.size(), " column names for ", m_.ncols, " columns");
}

void CsrRowSource::for_each_block(size_type max_nnz, const BlockVisitor& visit) const {
  const size_type n = m_.rows();
  io::CsrBlock<double> block;
  block.ncols = m_.ncols;
  size_type r0 = 0;
  while (r0 < n) {
    size_type r1 = r0 + 1;
    while (r1 < n && m_.row_offsets[size_t(r1 + 1)] - m_.row_offsets[size_t(r0)] <= max_nnz) ++r1;
    const size_type p0 = m_.row_offsets[size_t(r0)], p1 = m_.row_offsets[size_t(r1)];
    block.row_begin = r0;
    block.row_end = r1;
    block.row_offsets.resize(size_t(r1 - r0 + 1));
    for (size_type r = r0; r <= r1; ++r) block.row_offsets[size_t(r - r0)] = m_.row_offsets[size_t(r)] - p0;
    block.cols.assign(m_.cols.begin() + p0, m_.cols.begin() + p1);
    block.values.assign(m_.values.begin() + p0, m_.values.begin() + p1);
    visit(block);
    r0 = r1;
  }
}

}  // namespace knmf
