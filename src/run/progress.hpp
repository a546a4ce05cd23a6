#pragma once
// Progress lines on the run's log stream for long runs (internal).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>

#include "knmf/core/format.hpp"

namespace knmf::detail {

using knmf::format_seconds;

/// One line every `period` seconds (and when a k finishes): k, replicates done / total,
/// mean iterations, elapsed, rate, ETA.
class Progress {
public:
  Progress(std::int64_t total, double period, bool quiet, std::ostream& out)
      : total_(total), period_(period), quiet_(quiet), out_(out),
        start_(std::chrono::steady_clock::now()), last_(start_) {}

  void finished(int k, int n_iter) {
    ++done_;
    iters_ += n_iter;
    maybe_print(k, -1, done_ == total_);
  }
  void tick(int k, int running) { maybe_print(k, running, false); }

private:
  void maybe_print(int k, int running, bool force) {
    if (quiet_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!force && std::chrono::duration<double>(now - last_).count() < period_) return;
    last_ = now;
    const double el = std::chrono::duration<double>(now - start_).count();
    const double rate = done_ > 0 ? double(done_) / el : 0.0;
    char buf[256];
    std::snprintf(buf, sizeof buf, "[k=%d] %lld/%lld replicates", k, (long long)done_,
                  (long long)total_);
    std::string line = buf;
    if (running >= 0) line += ", " + std::to_string(running) + " running";
    if (done_ > 0) {
      std::snprintf(buf, sizeof buf, ", mean %.0f iterations, %.2f replicates/s",
                    double(iters_) / double(done_), rate);
      line += buf;
    }
    line += ", elapsed " + format_seconds(el);
    if (done_ > 0 && done_ < total_)
      line += ", ETA " + format_seconds(double(total_ - done_) / rate);
    out_ << line << "\n" << std::flush;
  }

  std::int64_t total_, done_ = 0, iters_ = 0;
  double period_;
  bool quiet_;
  std::ostream& out_;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace knmf::detail
