#pragma once
/// \file
/// A content fingerprint of X (a cells x genes matrix of an .h5ad file), computed while X is
/// read anyway (never a pass of its own): a resume checks with it that the input is the X the
/// results file's replicates were computed on (docs/results-file.md, "Resuming").
///
/// What it is: every non-zero value v of X at (row, col) contributes
///   h(row, col, v) = mix(mix(mix(row) ^ col) ^ bits(double(v)))
/// (mix: splitmix64's finalizer; bits: the IEEE-754 bits of v converted to double), and
///   fingerprint = mix(mix(mix(sum of h mod 2^64 ^ nonzeros) ^ n) ^ g),
/// written as 16 lowercase hex digits. So it depends on the matrix only, not on how it is
/// stored or read:
///  * zeros do not count: a dense file and a CSR file (explicit zeros or not) of the same
///    matrix have the same fingerprint;
///  * values count by their value as double: float32, float64 and integer storage of the same
///    numbers agree (integers beyond 2^53 count as their double);
///  * the sum is commutative, so the order of entries (unsorted columns, HDF5 chunking, row
///    blocks, rows split over MPI ranks and merged) does not matter; duplicate entries of a
///    CSR row count one by one, as stored.
/// A 64-bit hash detects any accidental change (another matrix of the same shape and genes)
/// with certainty but for a 2^-64 chance; it is not a cryptographic digest.

#include <cstdint>
#include <cstring>
#include <string>

namespace knmf::io {

class XFingerprint {
public:
  /// One stored value of X at (row, col). Zeros are skipped.
  void add(std::int64_t row, std::int64_t col, double value) noexcept {
    if (value == 0) return;
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    sum_ += mix(mix(mix(std::uint64_t(row)) ^ std::uint64_t(col)) ^ bits);
    ++nonzeros_;
  }
  /// `rows` more rows were added (all of their values): value() needs every row once.
  void add_rows(std::int64_t rows) noexcept { rows_ += rows; }
  /// The fingerprint of the union of two disjoint sets of rows (e.g. the ranks' blocks).
  void merge(const XFingerprint& o) noexcept {
    sum_ += o.sum_;
    nonzeros_ += o.nonzeros_;
    rows_ += o.rows_;
  }

  std::uint64_t sum() const noexcept { return sum_; }
  std::int64_t nonzeros() const noexcept { return nonzeros_; }
  std::int64_t rows() const noexcept { return rows_; }
  /// From its parts (sum, nonzeros, rows), e.g. after an MPI reduction of each.
  static XFingerprint from_parts(std::uint64_t sum, std::int64_t nonzeros, std::int64_t rows) noexcept {
    XFingerprint f;
    f.sum_ = sum;
    f.nonzeros_ = nonzeros;
    f.rows_ = rows;
    return f;
  }

  /// The fingerprint of an n x g X, 16 hex digits; "" unless exactly n rows were added
  /// (a matrix that was not read from a file, or only part of it, has none).
  std::string text(std::int64_t n, std::int64_t g) const {
    if (rows_ != n) return {};
    const std::uint64_t v =
        mix(mix(mix(sum_ ^ std::uint64_t(nonzeros_)) ^ std::uint64_t(n)) ^ std::uint64_t(g));
    static constexpr char hex[] = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 0; i < 16; ++i) s[std::size_t(15 - i)] = hex[(v >> (4 * i)) & 0xf];
    return s;
  }

private:
  static constexpr std::uint64_t mix(std::uint64_t z) noexcept {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  std::uint64_t sum_ = 0;
  std::int64_t nonzeros_ = 0;
  std::int64_t rows_ = 0;
};

}  // namespace knmf::io
