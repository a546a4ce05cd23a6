#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cstdlib>
#include <string>

#include "knmf/core/error.hpp"
#include "knmf/core/kokkos_settings.hpp"
#include "knmf/core/runtime.hpp"

TEST(Runtime, ReportsKokkosAndBackends) {
  const int v = KOKKOS_VERSION;
  EXPECT_EQ(knmf::kokkos_version().substr(0, 1), std::to_string(v / 10000));
  const auto backends = knmf::enabled_backends();
  EXPECT_FALSE(backends.empty());
  EXPECT_EQ(knmf::default_execution_space(), Kokkos::DefaultExecutionSpace::name());
  const auto report = knmf::build_report();
  EXPECT_NE(report.find("Kokkos " + knmf::kokkos_version()), std::string::npos);
  // The bootstrap builds Kokkos and Kokkos Kernels as a matching pair.
  EXPECT_EQ(knmf::kokkos_kernels_version(), knmf::kokkos_version());
  EXPECT_NE(report.find("Kokkos Kernels " + knmf::kokkos_kernels_version()), std::string::npos);
  EXPECT_NE(report.find(knmf::default_execution_space()), std::string::npos);
  EXPECT_GT(knmf::concurrency(), 0);
}

TEST(Runtime, InputErrorCarriesTheMessage) {
  try {
    knmf::input_error("option --k value ", 0, " is invalid");
    FAIL();
  } catch (const knmf::InputError& e) {
    EXPECT_STREQ(e.what(), "option --k value 0 is invalid");
  }
}

// The one thread limit the driver and the Python module check before Kokkos starts
// (knmf/core/kokkos_settings.hpp): beyond the OpenMP pool Kokkos crashes or hangs.
TEST(KokkosSettings, ThreadCountsWithinThePool) {
  using knmf::KokkosSetting;
  const int most = knmf::max_host_threads();
#ifdef KOKKOS_ENABLE_OPENMP
  EXPECT_EQ(most, Kokkos::Impl::OpenMPTraits::MAX_THREAD_COUNT);
#endif
  EXPECT_FALSE(knmf::check_kokkos_setting(KokkosSetting::threads, "1"));
  for (const char* bad : {"0", "-3", "99999999999999999999999"}) {
    const auto r = knmf::check_kokkos_setting(KokkosSetting::threads, bad);
    ASSERT_TRUE(r) << bad;
    EXPECT_FALSE(r->wrong_type) << bad;
  }
  for (const char* bad : {"", "two", "1.5", "4x"}) {
    const auto r = knmf::check_kokkos_setting(KokkosSetting::threads, bad);
    ASSERT_TRUE(r) << bad;
    EXPECT_TRUE(r->wrong_type) << bad;
  }
  if (most > 0) {
    EXPECT_FALSE(knmf::check_kokkos_setting(KokkosSetting::threads, std::to_string(most)));
    const auto r = knmf::check_kokkos_setting(KokkosSetting::threads, std::to_string(most + 1));
    ASSERT_TRUE(r);
    EXPECT_NE(r->reason.find("at most " + std::to_string(most)), std::string::npos) << r->reason;
  }
}

TEST(KokkosSettings, EnvironmentBeyondThePoolIsRefusedNamingTheVariable) {
  const int most = knmf::max_host_threads();
  if (most <= 0) GTEST_SKIP() << "no OpenMP pool limit in this build";
  const char* saved = std::getenv("OMP_NUM_THREADS");
  const std::string keep = saved ? saved : "";
  const std::string over = std::to_string(most + 1) + ",2";
  setenv("OMP_NUM_THREADS", over.c_str(), 1);
  try {
    knmf::check_kokkos_environment(false, "knmf.set_num_threads(n)");
    ADD_FAILURE() << "OMP_NUM_THREADS=" << over << " passed";
  } catch (const knmf::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("OMP_NUM_THREADS '" + over + "'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("knmf.set_num_threads(n)"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(knmf::check_kokkos_environment(true, "x"));  // a count of its own: not read
  setenv("OMP_NUM_THREADS", "3", 1);
  if (!std::getenv("KOKKOS_NUM_THREADS")) {
    EXPECT_EQ(knmf::environment_host_threads(), 3);
  }
  EXPECT_EQ(knmf::default_host_threads(), 0);  // OMP_NUM_THREADS set: OpenMP's count
  if (saved)
    setenv("OMP_NUM_THREADS", keep.c_str(), 1);
  else
    unsetenv("OMP_NUM_THREADS");
}
