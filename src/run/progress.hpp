#pragma once
// The run's progress hook, FactorizeConfig::on_progress (internal). The library prints no
// progress line: the driver's hook does (drivers/progress_line.hpp).
#include <chrono>
#include <cstdint>
#include <functional>

#include "knmf/run/factorize.hpp"

namespace knmf::detail {

/// Tells the hook where the run stands: after every iteration of a batch (tick) and when a
/// replicate finishes, on the process that sees every finished replicate (the one process, or
/// MPI rank 0). Remembers a false from an iteration call (stop the run) for the job loop; a
/// finished call's is not used (the run stops between iterations: the next call decides).
class ProgressHook {
public:
  ProgressHook(std::function<bool(const RunProgress&)> hook, std::int64_t total,
               std::chrono::steady_clock::time_point t0)
      : hook_(std::move(hook)), total_(total), t0_(t0) {}

  /// A replicate of k finished after `n_iter` iterations.
  void finished(int k, int n_iter) {
    ++done_;
    iterations_ += n_iter;
    call(k, 0, RunProgress::Event::finished);
  }
  /// An iteration of the batch of k finished, `running` replicates in it.
  void tick(int k, int running) { call(k, running, RunProgress::Event::iteration); }
  /// The hook returned false after an iteration.
  bool cancelled() const { return cancelled_; }

private:
  void call(int k, int running, RunProgress::Event event) {
    if (!hook_) return;
    RunProgress p;
    p.k = k;
    p.done = done_;
    p.total = total_;
    p.running = running;
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    p.iterations = iterations_;
    p.event = event;
    if (!hook_(p) && event == RunProgress::Event::iteration) cancelled_ = true;
  }

  std::function<bool(const RunProgress&)> hook_;
  std::int64_t total_, done_ = 0, iterations_ = 0;
  std::chrono::steady_clock::time_point t0_;
  bool cancelled_ = false;
};

}  // namespace knmf::detail
