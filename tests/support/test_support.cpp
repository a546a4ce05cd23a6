#include "test_support.hpp"

#include <cstdlib>
#include <fstream>
#include <random>

namespace knmf::test {

std::filesystem::path data_dir() { return KNMF_TEST_DATA_DIR; }

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
