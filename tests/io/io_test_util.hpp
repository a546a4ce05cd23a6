#pragma once
// Helpers shared by the .npy/.npz/DataFrame/cNMF-file tests.

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "knmf/core/error.hpp"
#include "test_support.hpp"

namespace knmf::test {

/// tests/data/io/<name>
inline std::string io_fixture(const std::string& name) { return (data_dir() / "io" / name).string(); }

/// Debian's interpreter with numpy/pandas (the `python3` on PATH may lack them).
inline const char* kPython = "/usr/bin/python3";

/// True when /usr/bin/python3 can import numpy and pandas; says what is missing otherwise.
/// cmake/bootstrap.sh installs python3-numpy and python3-pandas, so the cross-checks that ask
/// for them fail (never skip) without them.
inline bool python_with_pandas() {
  if (!std::filesystem::exists(kPython)) {
    std::fprintf(stderr, "*** %s is missing (cmake/bootstrap.sh installs python3-numpy and "
                         "python3-pandas): the pandas cross-check cannot run ***\n", kPython);
    return false;
  }
  const auto r = run_command(std::string(kPython) + " -c 'import numpy, pandas'");
  if (r.status != 0) {
    std::fprintf(stderr, "*** %s lacks numpy/pandas (cmake/bootstrap.sh installs python3-numpy "
                         "and python3-pandas): the pandas cross-check cannot run ***\n", kPython);
    return false;
  }
  return true;
}

/// Write `script` to dir/check.py and run it with /usr/bin/python3 and `args` (run_command:
/// its exit code and output).
inline ProcResult run_python(const std::filesystem::path& dir, const std::string& script,
                             const std::string& args) {
  const auto file = dir / "check.py";
  std::ofstream(file) << script;
  return run_command(std::string(kPython) + " " + shell_quote(file.string()) + " " + args);
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::uint32_t crc32_of(const std::string& bytes) {
  return static_cast<std::uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

inline double from_hex(const std::string& s) { return std::strtod(s.c_str(), nullptr); }

}  // namespace knmf::test

/// Expect `stmt` to throw knmf::InputError whose message contains every one of the strings.
#define KNMF_EXPECT_INPUT_ERROR(stmt, ...)                                                  \
  do {                                                                                      \
    try {                                                                                   \
      stmt;                                                                                 \
      ADD_FAILURE() << "no InputError from " #stmt;                                         \
    } catch (const ::knmf::InputError& e) {                                                 \
      const std::string msg_ = e.what();                                                    \
      for (const std::string& needle_ : std::initializer_list<std::string>{__VA_ARGS__})    \
        EXPECT_NE(msg_.find(needle_), std::string::npos)                                    \
            << "message '" << msg_ << "' lacks '" << needle_ << "'";                        \
      EXPECT_EQ(msg_.find('\n'), std::string::npos) << "multi-line message: " << msg_;      \
    }                                                                                       \
  } while (0)
