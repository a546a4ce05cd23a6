// The driver's progress line (drivers/progress_line.hpp), from the run's progress hook: its
// text, its period, the line forced by the run's last replicate, --quiet.
#include <gtest/gtest.h>

#include <sstream>

#include "progress_line.hpp"

namespace {
using knmf::RunProgress;
using knmf::cli::ProgressLine;

RunProgress at(RunProgress::Event event, int k, std::int64_t done, int running, double seconds,
               std::int64_t iterations) {
  RunProgress p;
  p.event = event;
  p.k = k;
  p.done = done;
  p.total = 4;
  p.running = running;
  p.seconds = seconds;
  p.iterations = iterations;
  return p;
}
constexpr auto iteration = RunProgress::Event::iteration;
constexpr auto finished = RunProgress::Event::finished;

TEST(ProgressLine, Text) {
  EXPECT_EQ(ProgressLine::format(at(iteration, 5, 0, 3, 2.0, 0)),
            "[k=5] 0/4 replicates, 3 running, elapsed 2.0 s");
  EXPECT_EQ(ProgressLine::format(at(iteration, 5, 1, 3, 2.0, 120)),
            "[k=5] 1/4 replicates, 3 running, mean 120 iterations, 0.50 replicates/s, "
            "elapsed 2.0 s, ETA 6.0 s");
  EXPECT_EQ(ProgressLine::format(at(finished, 6, 4, 0, 8.0, 401)),
            "[k=6] 4/4 replicates, mean 100 iterations, 0.50 replicates/s, elapsed 8.0 s");
}

TEST(ProgressLine, EveryPeriodAndAtTheLastReplicate) {
  std::ostringstream out;
  ProgressLine line(5.0, false, out);
  line.update(at(iteration, 5, 0, 2, 1.0, 0));   // not yet 5 s
  line.update(at(finished, 5, 1, 0, 4.0, 50));   // not yet, and not the last
  line.update(at(iteration, 5, 1, 2, 5.5, 50));  // 5 s since the run started: printed
  line.update(at(iteration, 5, 1, 2, 9.0, 50));  // 3.5 s since the last line
  line.update(at(finished, 6, 4, 0, 10.0, 200));  // the last replicate: printed at once
  EXPECT_EQ(out.str(),
            "[k=5] 1/4 replicates, 2 running, mean 50 iterations, 0.18 replicates/s, elapsed "
            "5.5 s, ETA 16.5 s\n"
            "[k=6] 4/4 replicates, mean 50 iterations, 0.40 replicates/s, elapsed 10.0 s\n");

  std::ostringstream quiet;
  ProgressLine none(0.0, true, quiet);
  none.update(at(iteration, 5, 1, 2, 6.0, 50));
  none.update(at(finished, 6, 4, 0, 10.0, 200));
  EXPECT_EQ(quiet.str(), "");
}

}  // namespace
