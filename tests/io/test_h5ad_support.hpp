#pragma once
/// \file
/// Helpers shared by the .h5ad reader and writer tests.

#include <knmf/core/error.hpp>
#include <knmf/io/h5ad.hpp>

#include <string>
#include <vector>

#include "test_support.hpp"

namespace knmf::test {

/// tests/data/h5ad/<name>
inline std::filesystem::path h5ad_fixture(const std::string& name) {
  return data_dir() / "h5ad" / name;
}

/// The whole X as dense row-major doubles.
inline std::vector<double> read_dense_all(const io::H5adReader& r) {
  const auto& i = r.info();
  std::vector<double> d(static_cast<std::size_t>(i.n_obs * i.n_vars));
  r.read_dense_rows(0, i.n_obs, d.data());
  return d;
}

/// X read as CSR blocks of `rows` rows each, concatenated into one block.
template <class T>
io::CsrBlock<T> read_csr_in_blocks(const io::H5adReader& r, std::int64_t rows) {
  const auto& info = r.info();
  io::CsrBlock<T> all, b;
  all.row_end = info.n_obs;
  all.ncols = info.n_vars;
  for (std::int64_t r0 = 0; r0 < info.n_obs; r0 += rows) {
    const std::int64_t r1 = std::min(info.n_obs, r0 + rows);
    r.read_csr_rows(r0, r1, b);
    EXPECT_EQ(b.row_begin, r0);
    EXPECT_EQ(b.row_end, r1);
    EXPECT_EQ(b.ncols, info.n_vars);
    EXPECT_EQ(static_cast<std::int64_t>(b.row_offsets.size()), r1 - r0 + 1);
    EXPECT_EQ(b.row_offsets.front(), 0);
    EXPECT_EQ(b.row_offsets.back(), b.nnz());
    EXPECT_EQ(b.cols.size(), b.values.size());
    const std::int64_t base = all.nnz();
    for (std::size_t i = 1; i < b.row_offsets.size(); ++i) all.row_offsets.push_back(base + b.row_offsets[i]);
    all.cols.insert(all.cols.end(), b.cols.begin(), b.cols.end());
    all.values.insert(all.values.end(), b.values.begin(), b.values.end());
  }
  return all;
}

/// A CSR block scattered into dense row-major doubles.
template <class T>
std::vector<double> to_dense(const io::CsrBlock<T>& b) {
  std::vector<double> d(static_cast<std::size_t>(b.rows() * b.ncols), 0.0);
  for (std::int64_t i = 0; i < b.rows(); ++i)
    for (std::int64_t q = b.row_offsets[static_cast<std::size_t>(i)]; q < b.row_offsets[static_cast<std::size_t>(i + 1)]; ++q)
      d[static_cast<std::size_t>(i * b.ncols + b.cols[static_cast<std::size_t>(q)])] += static_cast<double>(b.values[static_cast<std::size_t>(q)]);
  return d;
}

template <class A, class B>
void expect_same_csr(const io::CsrBlock<A>& a, const io::CsrBlock<B>& b) {
  EXPECT_EQ(a.row_begin, b.row_begin);
  EXPECT_EQ(a.row_end, b.row_end);
  EXPECT_EQ(a.ncols, b.ncols);
  EXPECT_EQ(a.row_offsets, b.row_offsets);
  EXPECT_EQ(a.cols, b.cols);
  ASSERT_EQ(a.values.size(), b.values.size());
  std::size_t mismatches = 0;
  for (std::size_t q = 0; q < a.values.size(); ++q)
    mismatches += static_cast<double>(a.values[q]) != static_cast<double>(b.values[q]);
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace knmf::test
