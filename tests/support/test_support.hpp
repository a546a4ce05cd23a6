#pragma once
/// \file
/// Helpers shared by knmf's tests: data locations, golden files, temp dirs, tolerances.

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <sys/types.h>

namespace knmf::test {

/// tests/data (committed golden data and fixtures); $KNMF_TEST_DATA_DIR overrides it.
std::filesystem::path data_dir();

/// The build tree the suite was configured in (its drivers/knmf, tests/derived).
std::filesystem::path binary_dir();
/// The driver (knmf) and the full-disk shim the driver tests run. Their absolute paths are
/// compiled into this file only, not into each test's flags: there they would make every clone's
/// and every build tree's compile of those tests a ccache miss (.ci/README.md).
const char* driver_path();
const char* enospc_shim_path();
/// A file's bytes, read in one call (a byte-by-byte stream iterator is slow under ASan on the
/// 25 MB results files the kill tests compare); throws when the file cannot be read.
std::string read_bytes(const std::filesystem::path& path);
/// tests/data/real: the real matrices and cNMF's reference run on pbmc-donor-a, laid out as
/// in ../shared/data (see tests/data/real/README.md for provenance and licences).
std::filesystem::path real_dir();
/// cNMF's pbmcA run: real_dir()/cnmf-pbmc-donor-a/{prepare/pbmcA, reference}.
std::filesystem::path pbmc_prepare_dir();
std::filesystem::path pbmc_reference_dir();
/// cNMF's pbmcA.tpm.h5ad (kept cells x all 13,939 genes, float32), which is not committed:
/// derived once by knmf's prepare from the raw counts into a folder of the build tree
/// ($KNMF_TEST_DERIVED_DIR overrides it) and checked, on every call, against the committed
/// fingerprint of cNMF's file (tests/data/real/cnmf-pbmc-donor-a/tpm_fingerprint.json):
/// throws when anything differs, so no test runs on a TPM other than cNMF's.
std::filesystem::path pbmc_tpm_h5ad();
/// Load a JSON golden file from tests/data.
nlohmann::json load_json(const std::string& name);

/// A fresh, empty temporary directory removed when the object dies.
class TempDir {
public:
  explicit TempDir(const std::string& tag = "knmf-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

private:
  std::filesystem::path path_;
};

/// Relative difference |a-b| / max(|b|, floor).
/// Pearson correlation of two equally long vectors.
inline double correlation(const double* a, const double* b, std::size_t n) {
  double ma = 0, mb = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ma += a[i];
    mb += b[i];
  }
  ma /= double(n);
  mb /= double(n);
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

inline double rel_diff(double a, double b, double floor = std::numeric_limits<double>::min()) {
  const double d = std::abs(a - b);
  const double s = std::max(std::abs(b), floor);
  return d / s;
}

}  // namespace knmf::test

namespace knmf::test {
/// Read a raw little-endian float64 file (golden arrays written by tests/scripts).
std::vector<double> read_f64(const std::filesystem::path& path);
/// max |a - b| / max |b|: the normwise (infinity-norm) relative difference of two arrays.
double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b);

/// The fingerprints of tests/scripts/make_real_fixtures.py (fingerprint_csr,
/// fingerprint_names): a 64-bit hash of a float32 CSR matrix (row offsets, then each row's
/// entries sorted by column) and of a list of names.
std::uint64_t csr_fingerprint(const std::vector<std::int64_t>& row_offsets,
                              const std::vector<std::int32_t>& cols,
                              const std::vector<float>& values);
std::uint64_t names_fingerprint(const std::vector<std::string>& names);
}  // namespace knmf::test

namespace knmf::test {

// ---- dense to CSR ----------------------------------------------------------------------------

/// A host matrix in CSR: row offsets (rows + 1 of them, from 0), each row's column indices in
/// ascending order, and its values. The element types are those of knmf's size_type and
/// ordinal_type (core/types.hpp) and of io::CsrBlock, so the arrays go to
/// CsrMatrix::from_host and StreamedMatrix::from_host_csr as they are, and into a CsrBlock by
/// dense_to_csr_block.
template <class T>
struct HostCsr {
  std::vector<std::int64_t> row_offsets{0};
  std::vector<std::int32_t> cols;
  std::vector<T> values;
  std::int64_t nnz() const { return static_cast<std::int64_t>(values.size()); }
};

/// No zero entry is stored (dense_to_csr's default).
struct NoExplicitZeros {
  bool operator()(std::int64_t, std::int64_t) const { return false; }
};

/// Rows [r0, r1) of the row-major dense matrix `x` with `g` columns, as CSR of T: every nonzero
/// entry, row by row in column order, and the zero entries (i, j) for which
/// `keep_zero(i, j)` holds (explicit zeros); the rows are numbered from r0 in `x` and from 0 in
/// the result.
template <class T, class S, class KeepZero = NoExplicitZeros>
HostCsr<T> dense_to_csr(const std::vector<S>& x, std::int64_t g, std::int64_t r0, std::int64_t r1,
                        KeepZero keep_zero = {}) {
  HostCsr<T> c;
  c.row_offsets.reserve(static_cast<std::size_t>(r1 - r0 + 1));
  for (std::int64_t i = r0; i < r1; ++i) {
    for (std::int64_t j = 0; j < g; ++j) {
      const S v = x[static_cast<std::size_t>(i * g + j)];
      if (v != S(0) || keep_zero(i, j)) {
        c.cols.push_back(static_cast<std::int32_t>(j));
        c.values.push_back(static_cast<T>(v));
      }
    }
    c.row_offsets.push_back(c.nnz());
  }
  return c;
}
/// All of x's rows (x.size() / g).
template <class T, class S>
HostCsr<T> dense_to_csr(const std::vector<S>& x, std::int64_t g) {
  return dense_to_csr<T>(x, g, 0, g == 0 ? 0 : static_cast<std::int64_t>(x.size()) / g);
}

/// The same as a CSR block (io::CsrBlock<T>, or any type with its members): rows 0..n of the
/// row-major dense matrix `x` with `g` columns.
template <class Block, class S, class KeepZero = NoExplicitZeros>
Block dense_to_csr_block(const std::vector<S>& x, std::int64_t g, KeepZero keep_zero = {}) {
  using T = typename decltype(Block::values)::value_type;
  const std::int64_t n = g == 0 ? 0 : static_cast<std::int64_t>(x.size()) / g;
  auto c = dense_to_csr<T>(x, g, 0, n, keep_zero);
  Block b;
  b.row_begin = 0;
  b.row_end = n;
  b.ncols = g;
  b.row_offsets = std::move(c.row_offsets);
  b.cols = std::move(c.cols);
  b.values = std::move(c.values);
  return b;
}

// ---- child processes -------------------------------------------------------------------------
// Every test that runs a program reports how it ended the same way: ProcResult::status is the
// exit code, or -N where signal N killed it, and a death by a signal the test did not send
// itself is a test failure that names the signal (run_command, wait_child).

/// How a child process ended, and what it wrote.
struct ProcResult {
  int status = -1;  ///< its exit code (0..255), or -N where signal N killed it (killed_by);
                    ///< -1000 where waitpid failed (a test failure already)
  std::string out;  ///< what it wrote to stdout and stderr, interleaved as written
};

/// The status of a child killed by `signal`.
constexpr int killed_by(int signal) { return -signal; }
/// A waitpid() status as ProcResult::status: the exit code, or -N for a death by signal N.
int exit_status(int wait_status);
/// A ProcResult::status in words: "exit code 3", "killed by signal 9 (Killed)".
std::string describe_status(int status);

/// Run `command` with /bin/sh -c to its end, its stdout and stderr captured together (the
/// command may still redirect either). A child killed by a signal adds a test failure naming
/// the command, the signal and its output, whatever the caller then checks.
ProcResult run_command(const std::string& command);

/// Wait for the child `pid` (started with fork or posix_spawn) to end; returns its
/// ProcResult::status. A death by a signal other than `expected_signal` (the one the test sent,
/// 0 for none) adds a test failure naming the signal; `what` names the child in it.
int wait_child(pid_t pid, int expected_signal = 0, const std::string& what = "a child process");
/// The same without blocking: false while the child runs; true once it has ended (and was
/// reaped), its status then in `status` (checked as wait_child checks it).
bool poll_child(pid_t pid, int& status, int expected_signal = 0, const std::string& what = "a child process");

/// `s` quoted for /bin/sh (single quotes).
std::string shell_quote(const std::string& s);

}  // namespace knmf::test
