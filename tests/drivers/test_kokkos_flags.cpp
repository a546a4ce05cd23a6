// Kokkos' pass-through flags and the environment Kokkos reads, checked by knmf before Kokkos
// starts (issue 15, defect 4): Kokkos aborts (134) on a bad value and crashes or hangs beyond
// its OpenMP pool of 512 threads, after the results file was begun. Each bad one is one line,
// exit 2 (not an option / not of its type) or 1 (out of range), and nothing is written.
#include <gtest/gtest.h>

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "driver_support.hpp"
#include "test_support.hpp"

namespace {

using knmf::test::lines;
using knmf::test::run_knmf;
using knmf::test::TempDir;
namespace fs = std::filesystem;

class KokkosFlags : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir("knmf-kokkos-flags");
    input_ = (tmp_->path() / "tiny.h5ad").string();
    const auto s = run_knmf({"simulate", "-o", input_, "--cells", "200", "--genes", "100",
                             "--seed", "5", "--programs", "3"});
    ASSERT_EQ(s.status, 0) << s.out;
  }
  static void TearDownTestSuite() { delete tmp_; }

  /// `knmf FLAG factorize tiny.h5ad -k 3 --n-iter 2 -o r.h5`: status, output; r.h5 removed after.
  static knmf::test::ProcResult factorize_with(const std::string& flag) {
    const auto out = tmp_->path() / "r.h5";
    fs::remove(out);
    std::vector<std::string> args;
    if (!flag.empty()) args.push_back(flag);
    for (const char* a : {"factorize", "-k", "3", "--n-iter", "2", "--quiet", "-o"}) args.push_back(a);
    args.push_back(out.string());
    args.push_back(input_);
    auto r = run_knmf(args);
    written_ = fs::exists(out);
    fs::remove(out);
    return r;
  }

  static void expect_refused(const knmf::test::ProcResult& r, int status, const std::string& what,
                             const std::string& value) {
    EXPECT_EQ(r.status, status) << r.out;
    const auto ls = lines(r.out);
    ASSERT_EQ(ls.size(), 1u) << r.out;
    EXPECT_EQ(ls[0].rfind("knmf: error: " + what + " '" + value + "' is invalid: ", 0), 0u) << ls[0];
    EXPECT_FALSE(written_) << what << "=" << value << ": the results file was written";
  }

  static TempDir* tmp_;
  static std::string input_;
  static bool written_;
};
TempDir* KokkosFlags::tmp_ = nullptr;
std::string KokkosFlags::input_;
bool KokkosFlags::written_ = false;

TEST_F(KokkosFlags, ThreadCountsOutsideThePoolAreRefused) {
  for (const char* name : {"--kokkos-num-threads", "--kokkos-threads"}) {
    for (const char* v : {"0", "-5", "1000", "513", "99999999999"}) {
      const auto r = factorize_with(std::string(name) + "=" + v);
      expect_refused(r, 1, name, v);
      EXPECT_NE(r.out.find("from 1 to 512"), std::string::npos) << r.out;
    }
    for (const char* v : {"abc", "3x", ""}) expect_refused(factorize_with(std::string(name) + "=" + v), 2, name, v);
  }
}

TEST_F(KokkosFlags, OtherKokkosFlagsAreChecked) {
  expect_refused(factorize_with("--kokkos-device-id=-1"), 1, "--kokkos-device-id", "-1");
  expect_refused(factorize_with("--kokkos-device-id=x"), 2, "--kokkos-device-id", "x");
  expect_refused(factorize_with("--kokkos-disable-warnings=maybe"), 2, "--kokkos-disable-warnings",
                 "maybe");
  expect_refused(factorize_with("--kokkos-map-device-id-by=foo"), 2, "--kokkos-map-device-id-by",
                 "foo");
  const auto missing = factorize_with("--kokkos-num-threads");
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(lines(missing.out), std::vector<std::string>{
                                    "knmf: error: --kokkos-num-threads needs a value: "
                                    "--kokkos-num-threads=VALUE (see knmf --help)"});
  EXPECT_FALSE(written_);
  const auto unknown = factorize_with("--kokkos-numa=2");
  EXPECT_EQ(unknown.status, 2);
  ASSERT_EQ(lines(unknown.out).size(), 1u) << unknown.out;
  EXPECT_EQ(unknown.out.rfind("knmf: error: --kokkos-numa is not a Kokkos option", 0), 0u)
      << unknown.out;
  EXPECT_FALSE(written_);
}

TEST_F(KokkosFlags, GoodFlagsStillRun) {
  for (const char* flag : {"--kokkos-threads=1", "--kokkos-num-threads=2", "--kokkos-disable-warnings",
                           "--kokkos-disable-warnings=no"}) {
    const auto r = factorize_with(flag);
    EXPECT_EQ(r.status, 0) << flag << ": " << r.out;
    EXPECT_TRUE(written_) << flag;
    EXPECT_EQ(r.out.find("not recognized"), std::string::npos) << flag << ": " << r.out;
  }
}

/// Sets an environment variable for the life of the object (run_knmf's child inherits it).
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST_F(KokkosFlags, EnvironmentKokkosReadsIsChecked) {
  for (const char* v : {"0", "abc", "1000"}) {
    ScopedEnv e("KOKKOS_NUM_THREADS", v);
    expect_refused(factorize_with(""), 1, "environment variable KOKKOS_NUM_THREADS", v);
  }
  {
    ScopedEnv e("KOKKOS_DEVICE_ID", "-1");
    expect_refused(factorize_with(""), 1, "environment variable KOKKOS_DEVICE_ID", "-1");
  }
  {
    ScopedEnv e("KOKKOS_DISABLE_WARNINGS", "maybe");
    expect_refused(factorize_with(""), 1, "environment variable KOKKOS_DISABLE_WARNINGS", "maybe");
  }
  {
    // OpenMP's thread count becomes Kokkos' pool size when Kokkos is given none
    ScopedEnv e("OMP_NUM_THREADS", "1000");
    expect_refused(factorize_with(""), 1, "environment variable OMP_NUM_THREADS", "1000");
    const auto r = factorize_with("--kokkos-num-threads=2");
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(written_);
  }
  {
    // ... and sizes the parallel region Kokkos runs before it takes its own count: OpenMP is
    // given the count too (it crashed, SIGSEGV, on 100000 threads it cannot start)
    ScopedEnv e("OMP_NUM_THREADS", "100000");
    auto r = factorize_with("--kokkos-num-threads=2");
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(written_);
    ScopedEnv k("KOKKOS_NUM_THREADS", "2");
    r = factorize_with("");
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(written_);
  }
}

// Where OMP_PROC_BIND is not set, the driver binds its threads (spread) only when they take
// every CPU it may use: with fewer, bound threads start on the first CPUs of the set, so
// several one-thread processes on a node (cNMF's --total-workers) would all run on core 0.
// `knmf --version` says what was decided.
std::string host_threads_line(const std::string& env, const std::string& flag = "") {
  std::string cmd = "env -u OMP_PROC_BIND -u OMP_PLACES -u OMP_NUM_THREADS -u KOKKOS_NUM_THREADS " + env +
                    " " + knmf::test::shell_quote(knmf::test::driver_path()) + " " + flag + " --version";
  const auto r = knmf::test::run_command(cmd);
  const std::string& out = r.out;
  EXPECT_EQ(r.status, 0) << out;
  EXPECT_EQ(out.find("OMP_PROC_BIND environment variable not set"), std::string::npos) << out;
  for (const auto& l : lines(out))
    if (l.rfind("host threads: ", 0) == 0) return l;
  ADD_FAILURE() << "no host threads line: " << out;
  return "";
}

TEST(ThreadBinding, BoundOnlyWhenTheThreadsTakeEveryCpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int cpus = CPU_COUNT(&set);  // the driver inherits this process's set
  const std::string spread =
      "host threads: OMP_PROC_BIND=spread (set by knmf: the threads take every CPU this process may use)";
  const std::string one = cpus > 1 ? "host threads: OMP_PROC_BIND=false (set by knmf: 1 thread(s) on " +
                                         std::to_string(cpus) + " CPUs, left to the system)"
                                   : spread;
  EXPECT_EQ(host_threads_line(""), spread);
  EXPECT_EQ(host_threads_line("OMP_NUM_THREADS=" + std::to_string(cpus)), spread);
  EXPECT_EQ(host_threads_line("OMP_NUM_THREADS=1"), one);
  EXPECT_EQ(host_threads_line("OMP_NUM_THREADS=1,1"), one);  // OpenMP's nested list: the first
  EXPECT_EQ(host_threads_line("KOKKOS_NUM_THREADS=1"), one);
  EXPECT_EQ(host_threads_line("", "--kokkos-num-threads=1"), one);
  EXPECT_EQ(host_threads_line("", "--kokkos-threads=1"), one);  // Kokkos 3's name, renamed
  EXPECT_EQ(host_threads_line("OMP_PROC_BIND=close"), "host threads: OMP_PROC_BIND=close (given)");
}

}  // namespace
