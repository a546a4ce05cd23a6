#include "progress_line.hpp"

#include <cstdio>
#include <ostream>

#include "knmf/core/format.hpp"

namespace knmf::cli {

void ProgressLine::update(const RunProgress& p) {
  if (quiet_) return;
  const bool last = p.event == RunProgress::Event::finished && p.done == p.total;
  if (!last && p.seconds - last_ < period_) return;
  last_ = p.seconds;
  out_ << format(p) << "\n" << std::flush;
}

std::string ProgressLine::format(const RunProgress& p) {
  const double rate = p.done > 0 ? double(p.done) / p.seconds : 0.0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "[k=%d] %lld/%lld replicates", p.k, (long long)p.done,
                (long long)p.total);
  std::string line = buf;
  if (p.event == RunProgress::Event::iteration) line += ", " + std::to_string(p.running) + " running";
  if (p.done > 0) {
    std::snprintf(buf, sizeof buf, ", mean %.0f iterations, %.2f replicates/s",
                  double(p.iterations) / double(p.done), rate);
    line += buf;
  }
  line += ", elapsed " + format_seconds(p.seconds);
  if (p.done > 0 && p.done < p.total)
    line += ", ETA " + format_seconds(double(p.total - p.done) / rate);
  return line;
}

}  // namespace knmf::cli
