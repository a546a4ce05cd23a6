#include "test_support.hpp"

#include <cstdlib>
#include <fstream>
#include <random>

namespace knmf::test {

std::filesystem::path data_dir() {
  // The environment overrides the compiled-in path: test binaries built on one machine and run
  // on another (perf/gpu/check.sh on the device machine) find tests/data in the copied tree.
  if (const char* env = std::getenv("KNMF_TEST_DATA_DIR")) return env;
  return KNMF_TEST_DATA_DIR;
}

std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("KNMF_SHARED_DIR")) return env;
  return KNMF_SHARED_DIR;
}

bool require_shared(const std::string& what) {
  const auto dir = shared_dir();
  if (std::filesystem::exists(dir / "data")) return true;
  const std::string msg = "SHARED DATA MISSING: " + what + " needs " + (dir / "data").string() +
                          " (set KNMF_SHARED_DIR, or KNMF_ALLOW_MISSING_SHARED=1 to skip)";
  if (std::getenv("KNMF_ALLOW_MISSING_SHARED")) {
    std::fprintf(stderr, "*** %s ***\n", msg.c_str());
  } else {
    ADD_FAILURE() << msg;
  }
  return false;
}

nlohmann::json load_json(const std::string& name) {
  std::ifstream in(data_dir() / name);
  if (!in) throw std::runtime_error("missing golden file tests/data/" + name);
  return nlohmann::json::parse(in);
}

TempDir::TempDir(const std::string& tag) {
  std::random_device rd;
  const auto base = std::filesystem::temp_directory_path();
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto p = base / (tag + "-" + std::to_string(rd()));
    if (std::filesystem::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary directory");
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace knmf::test

namespace knmf::test {
std::vector<double> read_f64(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("missing golden array " + path.string());
  in.seekg(0, std::ios::end);
  const auto bytes = static_cast<size_t>(in.tellg());
  in.seekg(0);
  std::vector<double> v(bytes / sizeof(double));
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(double)));
  return v;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double d = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(a[i] - b[i]));
    s = std::max(s, std::abs(b[i]));
  }
  return s > 0 ? d / s : d;
}
}  // namespace knmf::test
