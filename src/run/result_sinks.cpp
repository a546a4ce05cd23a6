// Where a run's finished replicates go: the sinks and the store (result_sinks.hpp).
#include "result_sinks.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "factorize_detail.hpp"
#include "knmf/core/error.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/zip.hpp"
#include "knmf/results/writer.hpp"
#include "knmf/run/factorize.hpp"

namespace knmf::detail {

namespace {

/// The results file: plan.results, made by open() (open_results).
class ResultsFileSink : public ResultSink {
public:
  explicit ResultsFileSink(RunPlan& plan)
      : plan_(plan), last_commit_(std::chrono::steady_clock::now()) {}

  void open(const std::string& x_fingerprint, bool) override {
    if (plan_.results_info && !plan_.results && !x_fingerprint.empty())
      plan_.results_info->input_fingerprint = x_fingerprint;
    open_results(plan_);
  }
  std::vector<Job> recorded_failures() const override {
    // replicates an earlier run of this results file stored as failed (not pending: not run
    // again, and the file is not complete while they are there)
    return plan_.results ? plan_.results->failed() : std::vector<Job>{};
  }
  void begin_k(int R) override { commit_every_ = R; }
  void store(const ReplicateResult& r) override {
    if (!plan_.results) return;
    plan_.results->write(r);
    const auto now = std::chrono::steady_clock::now();
    if (++uncommitted_ >= commit_every_ || now - last_commit_ > std::chrono::seconds(30)) {
      plan_.results->commit();
      uncommitted_ = 0;
      last_commit_ = now;
    }
  }
  void end_k() override {
    if (!plan_.results) return;
    plan_.results->commit();
    uncommitted_ = 0;
  }
  bool finish() override { return plan_.results && plan_.results->finish(); }

private:
  RunPlan& plan_;
  int commit_every_ = 1, uncommitted_ = 0;
  std::chrono::steady_clock::time_point last_commit_;
};

/// cNMF mode: the run directory's spectra file of each replicate that is a factorization.
class CnmfSpectraSink : public ResultSink {
public:
  CnmfSpectraSink(const io::CnmfPaths& paths, std::vector<std::string> genes)
      : paths_(paths), genes_(std::move(genes)) {}
  void open(const std::string&, bool) override {}
  void store(const ReplicateResult& r) override {
    // a non_finite replicate is not a factorization: cNMF would take its file for a completed
    // replicate
    if (r.status == ReplicateStatus::non_finite) return;
    io::write_cnmf_spectra(paths_.iter_spectra(r.job.k, r.job.iter), r.H.data(), r.job.k, r.g,
                           genes_, &memo_);
  }

private:
  io::CnmfPaths paths_;
  std::vector<std::string> genes_;
  io::DeflateMemo memo_;  // the gene names, deflated once for every file
};

/// --log-json: one line per replicate.
class JsonLogSink : public ResultSink {
public:
  explicit JsonLogSink(std::string path) : path_(std::move(path)) {}
  void open(const std::string&, bool computing) override {
    if (!computing || json_.is_open()) return;
    json_.open(path_, std::ios::trunc);
    if (!json_) input_error("--log-json '", path_, "': cannot open for writing");
  }
  void store(const ReplicateResult& r) override {
    if (!json_.is_open()) return;
    nlohmann::json j{{"k", r.job.k},
                     {"iter", r.job.iter},
                     {"seed", r.job.seed},
                     {"n_iter", r.n_iter},
                     {"error_at_init", r.error_at_init},
                     {"final_error", r.final_error},
                     {"status", to_string(r.status)},
                     {"seconds", r.seconds}};
    json_ << j.dump() << "\n" << std::flush;
    // a log that stops short on a full disk would say less than the run did
    if (!json_) {
      const int err = errno;
      system_input_error(err, "cannot write ", path_);
    }
  }

private:
  std::string path_;
  std::ofstream json_;
};

}  // namespace

std::unique_ptr<ResultSink> results_file_sink(RunPlan& plan) {
  return std::make_unique<ResultsFileSink>(plan);
}

std::unique_ptr<ResultSink> cnmf_spectra_sink(const RunPlan& plan, std::vector<std::string> genes) {
  return std::make_unique<CnmfSpectraSink>(plan.paths, std::move(genes));
}

std::unique_ptr<ResultSink> json_log_sink(const std::string& path) {
  return std::make_unique<JsonLogSink>(path);
}

// -------------------------------------------------------------------------------- the store

ResultStore::ResultStore(const FactorizeConfig& c, RunPlan& plan, std::vector<std::string> genes) {
  // Chosen once: a replicate this process computed goes to every sink; one another process
  // sent (MPI) to those of the whole run, not to the spectra files (its own process wrote
  // them). The order is the order of the writes.
  if (plan.results_info) {
    sinks_.push_back(results_file_sink(plan));
    received_.push_back(sinks_.back().get());
  }
  if (c.cnmf_mode()) sinks_.push_back(cnmf_spectra_sink(plan, std::move(genes)));
  if (!c.log_json.empty()) {
    sinks_.push_back(json_log_sink(c.log_json));
    received_.push_back(sinks_.back().get());
  }
  for (const auto& s : sinks_) own_.push_back(s.get());
}

void ResultStore::open_sinks(const std::string& x_fingerprint, bool computing) {
  for (const auto& s : sinks_) {
    s->open(x_fingerprint, computing);
    if (opened_) continue;
    for (const Job& j : s->recorded_failures()) ++outcomes_[j.k].failed_before;
  }
  opened_ = true;
}

void ResultStore::open_results_only(const std::string& x_fingerprint) {
  open_sinks(x_fingerprint, false);
}

void ResultStore::open(const std::string& x_fingerprint) { open_sinks(x_fingerprint, true); }

void ResultStore::begin_k(int R) {
  for (const auto& s : sinks_) s->begin_k(R);
}

void ResultStore::count(const ReplicateResult& r) {
  // A non_finite replicate is not a factorization: the results file records it as failed
  // (its status), cNMF mode writes no spectra file for it, and the run fails
  // (report_failures).
  auto& o = outcomes_[r.job.k];
  ++o.ran;
  if (r.status == ReplicateStatus::non_finite) ++o.failed;
}

void ResultStore::store(const ReplicateResult& r) {
  count(r);
  for (ResultSink* s : own_) s->store(r);
}

void ResultStore::store_received(const ReplicateResult& r) {
  count(r);
  for (ResultSink* s : received_) s->store(r);
}

void ResultStore::end_k() {
  for (const auto& s : sinks_) s->end_k();
}

bool ResultStore::finish() {
  bool complete = false;
  for (const auto& s : sinks_) complete = s->finish() || complete;
  return complete;
}

void ResultStore::report_failures(FactorizeSummary& sum, const FactorizeConfig& c,
                                  double x_max, std::int64_t n, std::int64_t g) const {
  std::int64_t failed = 0, total = 0, before = 0;
  std::vector<std::string> per_k;
  for (const auto& [k, o] : outcomes_) {
    const std::int64_t f = o.failed + o.failed_before;
    // native mode: the replicates of k in the run; cNMF mode: those this run ran
    const std::int64_t of = c.cnmf_mode() ? o.ran : std::int64_t(c.n_iter);
    total += of;
    if (f == 0) continue;
    failed += f;
    before += o.failed_before;
    per_k.push_back("k = " + std::to_string(k) + ": " + std::to_string(f) + " of " +
                    std::to_string(of));
  }
  sum.jobs_failed = failed;
  sum.failure.clear();
  if (failed == 0) return;
  std::ostringstream m;
  if (per_k.size() == 1) {
    const auto colon = per_k[0].find(':');
    m << per_k[0].substr(colon + 2) << " replicates (" << per_k[0].substr(0, colon) << ")";
  } else {
    m << failed << " of " << total << " replicates (";
    for (size_t i = 0; i < per_k.size(); ++i) m << (i ? "; " : "") << per_k[i];
    m << ")";
  }
  m << " became non-finite (NaN/Inf in their factors or reconstruction error): they are not "
       "factorizations";
  if (c.cnmf_mode())
    m << ", no spectra file was written for them";
  else
    m << ", " << c.results << " is not complete";
  if (before > 0)
    m << " (" << before << " recorded by an earlier run, not run again: the same input and "
         "options give the same result)";
  const bool fp32 = c.dtype == Dtype::float32;
  if (x_max > 0) {
    // the bound of check_float32_scale, here against the range of the compute type
    const double range = fp32 ? double(std::numeric_limits<float>::max())
                              : std::numeric_limits<double>::max();
    const bool beyond = x_max * x_max * double(std::max(n, g)) > range * 0x1p-24;
    char v[32];
    std::snprintf(v, sizeof v, "%.3g", x_max);
    m << "; X's values reach " << v;
    if (beyond) {
      m << ", beyond what " << (fp32 ? "float32" : "double") << " arithmetic can hold: "
        << (fp32 ? "use --dtype double or rescale X" : "rescale X");
      sum.failure = m.str();
      return;
    }
  }
  m << (fp32 ? "; check X and the solver options, or use --dtype double"
             : "; check X and the solver options");
  sum.failure = m.str();
}

}  // namespace knmf::detail
