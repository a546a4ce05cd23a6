// X's content fingerprint (knmf/io/fingerprint.hpp), computed while X is read: a resume
// compares it with the one its results file records (issue 15, defect 2). It must be the
// same for every storage of the same matrix and for every way knmf reads it (reader blocks,
// in-memory dense and sparse loads, the streamed X, row blocks of a partition), and differ
// for another matrix of the same shape.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "knmf/io/fingerprint.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/load.hpp"
#include "knmf/matrix/streamed_matrix.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;

std::string fixture(const std::string& name) { return (data_dir() / "h5ad" / name).string(); }

/// The fingerprint of the whole X, read by read_csr_rows (T) or read_dense_rows in blocks of
/// `rows_per_read` rows, through HDF5 reads of at most `chunk_bytes`.
template <class T>
std::string read_all(const std::string& path, bool dense, std::int64_t rows_per_read,
                     std::size_t chunk_bytes = std::size_t{64} << 20) {
  io::H5adReadOptions opts;
  opts.chunk_bytes = chunk_bytes;
  const auto r = io::H5adReader::open(path, opts);
  const auto n = r.info().n_obs, g = r.info().n_vars;
  io::XFingerprint fp;
  io::CsrBlock<T> blk;
  std::vector<T> rows(static_cast<std::size_t>(rows_per_read * g));
  for (std::int64_t a = 0; a < n; a += rows_per_read) {
    const std::int64_t b = std::min(n, a + rows_per_read);
    if (dense)
      r.read_dense_rows<T>(a, b, rows.data(), &fp);
    else
      r.read_csr_rows<T>(a, b, blk, &fp);
  }
  return fp.text(n, g);
}

// The fixtures (tests/scripts/make_h5ad_fixtures.py) store one 6 x 5 matrix M as dense
// float32/float64, CSR float32/float64 and CSC float32, and the integer matrix MI = 8 M as
// dense int64, CSR int32 values, CSR with int64 indices.
TEST(XFingerprint, IsTheSameForEveryStorageOfTheSameMatrix) {
  const std::string ref = read_all<double>(fixture("csr_f32.h5ad"), false, 6);
  ASSERT_EQ(ref.size(), 16u) << ref;
  for (const char* name : {"csr_f32.h5ad", "csr_f64.h5ad", "dense_f32.h5ad", "dense_f64.h5ad",
                           "csc_f32.h5ad"}) {
    for (bool dense : {false, true})
      for (std::int64_t rows : {1, 2, 4, 6}) {
        EXPECT_EQ(read_all<double>(fixture(name), dense, rows), ref) << name << " dense " << dense << " rows " << rows;
        EXPECT_EQ(read_all<float>(fixture(name), dense, rows), ref) << name << " dense " << dense << " rows " << rows;
        // HDF5 reads of 16 bytes: values come in many chunks
        EXPECT_EQ(read_all<float>(fixture(name), dense, rows, 16), ref) << name << " chunked";
      }
  }
  const std::string ints = read_all<double>(fixture("dense_i64.h5ad"), false, 6);
  EXPECT_NE(ints, ref) << "8 M is another matrix than M";
  for (const char* name : {"dense_i64.h5ad", "csr_int32_values.h5ad", "csr_i64_index.h5ad"})
    for (bool dense : {false, true})
      EXPECT_EQ(read_all<float>(fixture(name), dense, 4, 16), ints) << name << " dense " << dense;
}

/// A CSR file of the rows (row-major values: zero = no entry, or an explicit zero entry).
void write_csr(const std::string& path, std::int64_t g, const std::vector<double>& x,
               bool explicit_zeros, io::StorageFormat format, io::ValueType type) {
  const auto m = knmf::test::dense_to_csr_block<io::CsrBlock<double>>(
      x, g, [&](std::int64_t i, std::int64_t j) { return explicit_zeros && (i + j) % 3 == 0; });
  io::H5adWriteOptions o;
  o.format = format;
  o.value_type = type;
  o.chunk_elements = 7;  // many small HDF5 chunks
  io::write_h5ad(path, m, {}, {}, o);
}

std::vector<double> test_matrix(std::int64_t n, std::int64_t g) {
  std::vector<double> x(static_cast<std::size_t>(n * g), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < g; ++j)
      if ((i * 7 + j * 3) % 5 < 2) x[static_cast<std::size_t>(i * g + j)] = double((i + 2 * j) % 9 + 1) / 4;
  return x;
}

// The loaders of a run (in memory dense and sparse, the streamed X, row blocks of a
// partition merged) give X the fingerprint of the file, and a matrix with one value changed,
// or one value moved to another column, gets another.
TEST(XFingerprint, IsTheSameForEveryLoadAndDiffersForAnotherMatrix) {
  TempDir tmp("knmf-fingerprint");
  const std::int64_t n = 37, g = 11;
  auto x = test_matrix(n, g);
  const auto csr = (tmp / "csr.h5ad").string(), dense = (tmp / "dense.h5ad").string();
  write_csr(csr, g, x, true, io::StorageFormat::Csr, io::ValueType::Float32);
  write_csr(dense, g, x, false, io::StorageFormat::Dense, io::ValueType::Float64);
  const std::string ref = read_all<double>(csr, false, n);
  ASSERT_EQ(ref.size(), 16u);
  ExecSpace space;
  for (const auto& path : {csr, dense}) {
    const auto r = io::H5adReader::open(path);
    EXPECT_EQ(read_all<float>(path, true, 5), ref) << path;
    // in memory; small staging blocks so that several reads make up X
    EXPECT_EQ(load_csr<float>(space, r, 64).fingerprint().text(n, g), ref) << path;
    EXPECT_EQ(load_dense<double>(space, r, 64).fingerprint().text(n, g), ref) << path;
    // streamed from host memory
    for (bool sparse : {false, true}) {
      EXPECT_EQ(StreamedMatrix<float>::load(space, r, sparse, 4096).fingerprint().text(n, g), ref) << path << " streamed";
      EXPECT_EQ(StreamedMatrix<double>::load(space, r, sparse, 4096).fingerprint().text(n, g), ref) << path << " streamed";
    }
    // row blocks (as MPI ranks hold them, one of them empty), merged in another order
    io::XFingerprint merged;
    const std::vector<std::int64_t> cuts{0, 10, 10, 23, n};
    for (std::size_t b = cuts.size() - 1; b-- > 0;) {
      auto block = load_csr_rows<double>(space, r, cuts[b], cuts[b + 1], 64).fingerprint();
      EXPECT_EQ(block.rows(), cuts[b + 1] - cuts[b]);
      EXPECT_EQ(block.text(n, g), "") << "a block is not the whole X";
      merged.merge(block);
    }
    EXPECT_EQ(merged.text(n, g), ref) << path << " merged row blocks";
    io::XFingerprint dense_blocks;
    for (std::size_t b = 0; b + 1 < cuts.size(); ++b)
      dense_blocks.merge(load_dense_rows<float>(space, r, cuts[b], cuts[b + 1]).fingerprint());
    EXPECT_EQ(dense_blocks.text(n, g), ref) << path << " merged dense row blocks";
  }
  // another matrix of the same shape: one value changed by one float32 ulp, or moved
  auto changed = x;
  changed[5] = changed[5] == 0 ? 0.25 : double(std::nextafter(float(changed[5]), 100.0f));
  write_csr((tmp / "changed.h5ad").string(), g, changed, false, io::StorageFormat::Csr, io::ValueType::Float32);
  EXPECT_NE(read_all<double>((tmp / "changed.h5ad").string(), false, n), ref);
  auto moved = x;
  std::size_t nz = 0;
  while (moved[nz] == 0 || moved[nz + 1] != 0) ++nz;
  std::swap(moved[nz], moved[nz + 1]);
  write_csr((tmp / "moved.h5ad").string(), g, moved, false, io::StorageFormat::Csr, io::ValueType::Float32);
  EXPECT_NE(read_all<double>((tmp / "moved.h5ad").string(), false, n), ref);
  // a float64 file whose values float32 cannot hold: read as float, X is rounded, but its
  // fingerprint is of the file's values (the same for --dtype float and double)
  auto fine = x;
  fine[5] = 1.0 + 1e-12;
  const auto f64 = (tmp / "fine.h5ad").string();
  write_csr(f64, g, fine, false, io::StorageFormat::Csr, io::ValueType::Float64);
  const auto fine_ref = read_all<double>(f64, false, n);
  EXPECT_EQ(read_all<float>(f64, false, 3), fine_ref);
  EXPECT_EQ(load_csr<float>(space, io::H5adReader::open(f64)).fingerprint().text(n, g), fine_ref);
  auto rounded = fine;
  rounded[5] = double(float(fine[5]));
  write_csr((tmp / "rounded.h5ad").string(), g, rounded, false, io::StorageFormat::Csr, io::ValueType::Float64);
  EXPECT_NE(read_all<double>((tmp / "rounded.h5ad").string(), false, n), fine_ref);
}

TEST(XFingerprint, NeedsEveryRowOnce) {
  io::XFingerprint f;
  f.add(0, 1, 2.0);
  f.add_rows(1);
  EXPECT_EQ(f.text(2, 3), "") << "one of two rows";
  f.add(1, 0, 0.0);  // zeros do not count
  f.add_rows(1);
  const auto two = f.text(2, 3);
  EXPECT_EQ(two.size(), 16u);
  io::XFingerprint g;
  g.add(0, 1, 2.0);
  g.add_rows(2);
  EXPECT_EQ(g.text(2, 3), two);
  EXPECT_NE(g.text(2, 4), two) << "the shape counts";
  g.add_rows(1);
  EXPECT_EQ(g.text(2, 3), "") << "a row added twice";
}

}  // namespace
