#pragma once
/// \file
/// Helpers shared by knmf's tests: data locations, golden files, temp dirs, tolerances.

#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace knmf::test {

/// tests/data (committed golden data and fixtures); $KNMF_TEST_DATA_DIR overrides it.
std::filesystem::path data_dir();
/// ../shared beside the checkout (real matrices, the cNMF reference run).
std::filesystem::path shared_dir();
/// True when ../shared is present; otherwise records a loud failure (or a skip when
/// KNMF_ALLOW_MISSING_SHARED=1) and returns false: use via KNMF_REQUIRE_SHARED().
bool require_shared(const std::string& what);
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
inline double rel_diff(double a, double b, double floor = std::numeric_limits<double>::min()) {
  const double d = std::abs(a - b);
  const double s = std::max(std::abs(b), floor);
  return d / s;
}

}  // namespace knmf::test

#define KNMF_REQUIRE_SHARED(what)                                     \
  do {                                                                \
    if (!::knmf::test::require_shared(what)) {                        \
      if (std::getenv("KNMF_ALLOW_MISSING_SHARED")) GTEST_SKIP();     \
      return;                                                         \
    }                                                                 \
  } while (0)

namespace knmf::test {
/// Read a raw little-endian float64 file (golden arrays written by tests/scripts).
std::vector<double> read_f64(const std::filesystem::path& path);
/// max |a - b| / max |b|: the normwise (infinity-norm) relative difference of two arrays.
double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b);
}  // namespace knmf::test
