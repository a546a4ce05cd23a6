#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include "knmf/core/error.hpp"
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
