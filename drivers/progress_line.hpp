#pragma once
// `knmf factorize`'s progress line, printed by the run's progress hook
// (FactorizeConfig::on_progress): "[k=K] DONE/TOTAL replicates, N running, mean I iterations,
// R replicates/s, elapsed T, ETA T" every `period` seconds, and when the run's last replicate
// finishes.
#include <iosfwd>
#include <string>

#include "knmf/run/factorize.hpp"

namespace knmf::cli {

class ProgressLine {
public:
  /// `quiet`: print nothing.
  ProgressLine(double period, bool quiet, std::ostream& out)
      : period_(period), quiet_(quiet), out_(out) {}
  /// One call of the hook: prints the line when `period` seconds passed since the last one
  /// (since the run started for the first), or when `p` is the run's last replicate.
  void update(const RunProgress& p);
  /// The line for `p` (without its newline).
  static std::string format(const RunProgress& p);

private:
  double period_, last_ = 0.0;
  bool quiet_;
  std::ostream& out_;
};

}  // namespace knmf::cli
