// The suite's own helpers (tests/support/test_support.hpp) that other tests' verdicts rest on:
// the dense-to-CSR conversion the solver, io and driver tests build their sparse inputs with,
// and the process runner every test that starts a program reports through (exit code, output,
// and a death by a signal as a failure that names it).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {
using knmf::test::dense_to_csr;
using knmf::test::ProcResult;

struct CsrBlockLike {  // the members of io::CsrBlock
  std::int64_t row_begin = -1, row_end = -1, ncols = -1;
  std::vector<std::int64_t> row_offsets{0};
  std::vector<std::int32_t> cols;
  std::vector<float> values;
};

TEST(DenseToCsr, KeepsTheNonzerosInRowAndColumnOrder) {
  const std::vector<double> x = {0, 1.5, 0, 2,  //
                                 0, 0, 0, 0,    //
                                 3, 0, 0, -4};
  const auto c = dense_to_csr<double>(x, 4);
  EXPECT_EQ(c.row_offsets, (std::vector<std::int64_t>{0, 2, 2, 4}));
  EXPECT_EQ(c.cols, (std::vector<std::int32_t>{1, 3, 0, 3}));
  EXPECT_EQ(c.values, (std::vector<double>{1.5, 2, 3, -4}));
  EXPECT_EQ(c.nnz(), 4);
  // rows [1, 3), numbered from 0, converted to float
  const auto tail = dense_to_csr<float>(x, 4, 1, 3);
  EXPECT_EQ(tail.row_offsets, (std::vector<std::int64_t>{0, 0, 2}));
  EXPECT_EQ(tail.cols, (std::vector<std::int32_t>{0, 3}));
  EXPECT_EQ(tail.values, (std::vector<float>{3.0f, -4.0f}));
  // explicit zeros where asked for (positions in x's numbering)
  const auto z = dense_to_csr<double>(x, 4, 1, 3, [](std::int64_t i, std::int64_t j) { return i == 1 && j == 2; });
  EXPECT_EQ(z.row_offsets, (std::vector<std::int64_t>{0, 1, 3}));
  EXPECT_EQ(z.cols, (std::vector<std::int32_t>{2, 0, 3}));
  EXPECT_EQ(z.values, (std::vector<double>{0, 3, -4}));
  // as a block: rows 0..n, g columns
  const auto b = knmf::test::dense_to_csr_block<CsrBlockLike>(x, 4);
  EXPECT_EQ(b.row_begin, 0);
  EXPECT_EQ(b.row_end, 3);
  EXPECT_EQ(b.ncols, 4);
  EXPECT_EQ(b.row_offsets, c.row_offsets);
  EXPECT_EQ(b.cols, c.cols);
  EXPECT_EQ(b.values, (std::vector<float>{1.5f, 2.0f, 3.0f, -4.0f}));
}

TEST(RunCommand, ReportsTheExitCodeAndBothStreams) {
  const ProcResult r = knmf::test::run_command("echo to-out; echo to-err >&2; exit 3");
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.out, "to-out\nto-err\n");
  EXPECT_EQ(knmf::test::run_command("true").status, 0);
  EXPECT_EQ(knmf::test::run_command("echo 'it'\"'\"'s' " + knmf::test::shell_quote("a 'quoted' arg")).out,
            "it's a 'quoted' arg\n");
}

TEST(RunCommand, ADeathBySignalFailsTheTestAndNamesTheSignal) {
  ProcResult r;
  EXPECT_NONFATAL_FAILURE(r = knmf::test::run_command("echo before; kill -KILL $$"),
                          "killed by signal 9");
  EXPECT_EQ(r.status, knmf::test::killed_by(SIGKILL));
  EXPECT_EQ(r.out, "before\n");
  EXPECT_EQ(knmf::test::describe_status(r.status).rfind("killed by signal 9", 0), 0u);
  EXPECT_EQ(knmf::test::describe_status(2), "exit code 2");
}

TEST(WaitChild, ASignalTheTestSentIsNoFailureAnyOtherIs) {
  const pid_t killed = ::fork();
  if (killed == 0) {
    ::pause();
    ::_exit(0);
  }
  ::kill(killed, SIGKILL);
  EXPECT_EQ(knmf::test::wait_child(killed, SIGKILL, "the killed child"), knmf::test::killed_by(SIGKILL));

  const pid_t terminated = ::fork();
  if (terminated == 0) {
    ::signal(SIGTERM, SIG_DFL);
    ::raise(SIGTERM);  // (no core file, unlike SIGABRT)
    ::_exit(0);
  }
  int status = 0;
  EXPECT_NONFATAL_FAILURE(status = knmf::test::wait_child(terminated, SIGKILL, "the terminated child"),
                          "the terminated child was killed by signal 15");
  EXPECT_EQ(status, knmf::test::killed_by(SIGTERM));

  const pid_t exits = ::fork();
  if (exits == 0) ::_exit(7);
  bool ended = false;
  for (int i = 0; i < 5000 && !ended; ++i) {
    ended = knmf::test::poll_child(exits, status, 0, "the exiting child");
    if (!ended) ::usleep(1000);
  }
  ASSERT_TRUE(ended);
  EXPECT_EQ(status, 7);
}

}  // namespace
