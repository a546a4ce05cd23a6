// GoogleTest main that initializes Kokkos once for the whole test binary.
//
// An area's tests are one program (tests/CMakeLists.txt: knmf_test_program), and each of its
// ctest entries runs the cases of its own source files only: `--knmf_source=a.cpp[,b.cpp]`
// keeps the cases whose TEST is written in one of those files (by file name), within any
// --gtest_filter given too. Sharding (GTEST_TOTAL_SHARDS) then splits what is kept. A
// --knmf_source that keeps no case is an error, not an empty pass.
#include <fnmatch.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <cstring>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "knmf/core/host_access.hpp"
#include "knmf/core/runtime.hpp"

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t b = 0;
  for (;;) {
    const auto e = s.find(sep, b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) return out;
    b = e + 1;
  }
}

/// GoogleTest's filter syntax: POSITIVE[-NEGATIVE], each a ':'-separated list of globs.
bool matches_filter(const std::string& name, const std::string& filter) {
  const auto dash = filter.find('-');
  const std::string pos = filter.substr(0, dash);
  const std::string neg = dash == std::string::npos ? "" : filter.substr(dash + 1);
  auto any = [&](const std::string& list) {
    for (const auto& p : split(list, ':'))
      if (!p.empty() && fnmatch(p.c_str(), name.c_str(), 0) == 0) return true;
    return false;
  };
  return (pos.empty() || any(pos)) && !any(neg);
}

std::string base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/// Removes --knmf_source=LIST from argv; "" when absent.
std::string take_source_flag(int& argc, char** argv) {
  const char* flag = "--knmf_source=";
  std::string value;
  int w = 1;
  for (int r = 1; r < argc; ++r) {
    if (std::strncmp(argv[r], flag, std::strlen(flag)) == 0)
      value = argv[r] + std::strlen(flag);
    else
      argv[w++] = argv[r];
  }
  argc = w;
  argv[argc] = nullptr;
  return value;
}

/// Narrows GoogleTest's filter to the cases written in `sources`; false when none is left.
bool restrict_to_sources(const std::string& sources) {
  const auto files = split(sources, ',');
  const std::string user = ::testing::GTEST_FLAG(filter);
  std::string filter;
  int kept = 0;
  auto* unit = ::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const auto* suite = unit->GetTestSuite(i);
    for (int j = 0; j < suite->total_test_count(); ++j) {
      const auto* info = suite->GetTestInfo(j);
      bool mine = false;
      for (const auto& f : files) mine = mine || base_name(info->file()) == f;
      const std::string name = std::string(info->test_suite_name()) + "." + info->name();
      if (!mine || !matches_filter(name, user)) continue;
      filter += (kept++ ? ":" : "") + name;
    }
  }
  if (kept == 0) {
    std::fprintf(stderr, "--knmf_source=%s: no test case of this program is written in %s%s\n",
                 sources.c_str(), sources.c_str(),
                 user == "*" ? "" : (" and matches --gtest_filter=" + user).c_str());
    return false;
  }
  ::testing::GTEST_FLAG(filter) = filter;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  knmf::ensure_blas_kernels(argc, argv);
  const std::string sources = take_source_flag(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (!sources.empty() && !restrict_to_sources(sources)) return 1;
  Kokkos::ScopeGuard guard(argc, argv);
  knmf::install_device_memory_guard();  // device-kernels build only
  return RUN_ALL_TESTS();
}
