#include "knmf/run/factorize.hpp"

#include <Kokkos_Core.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "factorize_detail.hpp"
#include "knmf/io/atomic_file.hpp"
#include "knmf/core/error.hpp"
#include "knmf/matrix/load.hpp"
#include "knmf/random/random_state.hpp"
#include "knmf/results/reader.hpp"

namespace knmf {

namespace fs = std::filesystem;

void FactorizeConfig::validate() const {
  if (cnmf_mode()) {
    if (output_dir.empty()) input_error("--output-dir is required with --name (cNMF mode)");
    if (name.empty()) input_error("--name is required with --output-dir (cNMF mode)");
    if (!input.empty())
      input_error("give either INPUT.h5ad (native mode) or --output-dir/--name (cNMF mode), "
                  "not both (INPUT was '", input, "')");
    if (total_workers < 1)
      input_error("--total-workers ", total_workers, " is invalid: it must be >= 1");
    if (worker_index < 0 || worker_index >= total_workers)
      input_error("--worker-index ", worker_index, " is outside [0, ", total_workers, ")");
  } else {
    if (input.empty())
      input_error("no input: give INPUT.h5ad (native mode) or --output-dir DIR --name NAME "
                  "(cNMF mode)");
    if (results.empty()) input_error("native mode needs -o RESULTS.h5");
    if (ks.empty()) input_error("native mode needs -k K [K ...]");
    for (int k : ks)
      if (k < 1) input_error("-k ", k, " is invalid: the number of components must be >= 1");
    if (n_iter < 1) input_error("--n-iter ", n_iter, " is invalid: it must be >= 1");
    if (seed < 0 || seed > std::int64_t(0xffffffffLL))
      input_error("--seed ", seed, " is outside [0, 2^32)");
  }
  if (batch < 0) input_error("--batch ", batch, " is invalid: use a positive number or auto");
  if (device_memory_limit < 0)
    input_error("--device-memory-limit ", device_memory_limit, " is invalid: it must be >= 0");
  solver.validate();
}

FormatChoice choose_format(XFormat requested, bool file_is_sparse, double density,
                           std::int64_t dense_bytes, std::int64_t sparse_bytes,
                           std::int64_t budget) {
  char d[32];
  std::snprintf(d, sizeof d, "%.1f%%", 100.0 * density);
  if (requested == XFormat::dense) return {false, "--format dense"};
  if (requested == XFormat::sparse) return {true, "--format sparse"};
  if (dense_bytes >= budget && sparse_bytes < budget)
    return {true, std::string("dense X would not fit (") + format_bytes(double(dense_bytes)) + ")"};
  if (!file_is_sparse) return {false, "the file stores X densely"};
  if (density < sparse_density_crossover)
    return {true, std::string("density ") + d + " < crossover " +
                      std::to_string(int(100 * sparse_density_crossover)) + "%"};
  return {false, std::string("density ") + d + " >= crossover " +
                     std::to_string(int(100 * sparse_density_crossover)) + "%"};
}

namespace detail {

namespace {

void require_file(const std::string& path, const std::string& what) {
  if (!fs::exists(path)) input_error(path, ": ", what, " not found");
}

/// Fails early (before any compute) when `dir` cannot take new files.
void require_writable_dir(const fs::path& dir, const std::string& option) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    input_error(option, " '", dir.string(), "': not an existing directory");
  io::require_writable_target(dir / ".knmf-write-probe", option + " '" + dir.string() + "'");
}

}  // namespace

RunPlan plan_cnmf(const FactorizeConfig& c) {
  RunPlan p;
  p.paths = io::CnmfPaths(c.output_dir, c.name);
  require_file(p.paths.normalized_counts(), "normalized counts (run `cnmf prepare` first)");
  require_file(p.paths.nmf_run_parameters(), "NMF run parameters (run `cnmf prepare` first)");
  require_file(p.paths.nmf_replicate_parameters(), "job table (run `cnmf prepare` first)");
  require_writable_dir(p.paths.tmp_dir(), "--output-dir");
  const auto params = io::read_nmf_run_params(p.paths.nmf_run_parameters());
  p.solver = c.solver;
  // the yaml's options are the run's; a --solver given wins over the yaml's solver
  p.warnings = apply_cnmf_params(p.solver, params.values, p.paths.nmf_run_parameters(),
                                 c.solver_set, params.non_scalar);
  // cNMF writes solver mu for a loss other than frobenius (scikit-learn's cd handles only it)
  if (p.solver.beta_rule() && p.solver.solver != SolverKind::mu) {
    std::string file_solver;
    for (const auto& [key, value] : params.values)
      if (key == "solver") file_solver = value;
    input_error(p.paths.nmf_run_parameters(), ": beta_loss '", beta_loss_name(p.solver.beta_loss),
                "' needs solver mu",
                c.solver_set ? " (--solver " + to_string(p.solver.solver) + " was given)"
                             : " (the file says solver '" + file_solver + "')");
  }
  p.solver.validate();
  p.x_path = p.paths.normalized_counts();
  auto mine = worker_jobs(io::read_cnmf_job_table(p.paths.nmf_replicate_parameters()),
                          c.worker_index, c.total_workers);
  p.total = std::int64_t(mine.size());
  // A worker killed while writing leaves its temporaries (io/atomic_file.hpp) next to the
  // files; the final names are never touched until complete. Remove those of this worker's
  // own jobs (only this worker writes them, so no live writer elsewhere can own them).
  std::set<std::string> own;
  for (const auto& j : mine) own.insert(fs::path(p.paths.iter_spectra(j.k, j.iter)).filename().string());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(p.paths.tmp_dir(), ec))
    if (own.count(io::temp_target(e.path().filename().string()))) fs::remove(e.path(), ec);
  for (const auto& j : mine) {
    if (c.skip_completed && fs::exists(p.paths.iter_spectra(j.k, j.iter))) {
      ++p.skipped;
      continue;
    }
    p.jobs.push_back(j);
  }
  return p;
}

void require_input(const FactorizeConfig& c) {
  require_file(c.input, "input");
  // -o naming the input itself (by another path, a link): the results file would be created
  // over X while X is open. Files are compared by identity (device and inode), not by name.
  if (io::same_file(c.input, c.results))
    input_error("-o '", c.results, "': output is the input file '", c.input, "'");
}

/// Native mode: the job table cNMF's prepare would make, minus what RESULTS.h5 already holds.
RunPlan plan_native(const FactorizeConfig& c, const io::H5adReader& reader) {
  RunPlan p;
  require_file(c.input, "input");
  const fs::path out = fs::absolute(c.results);
  require_writable_dir(out.parent_path(), "-o");
  p.x_path = c.input;
  p.solver = c.solver;
  results::RunInfo info;
  info.input = c.input;
  info.input_absolute = fs::absolute(c.input).lexically_normal().string();
  info.n_cells = reader.info().n_obs;
  info.genes = reader.var_names();
  info.ks = c.ks;
  info.n_iter = c.n_iter;
  info.seed = c.seed;
  info.solver = c.solver;
  info.dtype = c.dtype;
  info.save_usages = c.save_usages;
  info.batch_size = c.batch;
  info.jobs = cnmf_job_table(c.ks, c.n_iter, c.seed);
  p.total = std::int64_t(info.jobs.size());
  p.jobs = results::ResultsWriter::check(out, info);
  p.results_path = out.string();
  p.results_info = std::move(info);
  p.skipped = p.total - std::int64_t(p.jobs.size());
  p.solver.return_W = c.save_usages;
  return p;
}

void require_writable_log(const FactorizeConfig& c) {
  if (c.log_json.empty()) return;
  const std::string what = "--log-json '" + c.log_json + "'";
  io::require_writable_target(c.log_json, what);
  // the log is opened in place (truncated), not replaced: an existing file must be writable
  std::error_code ec;
  if (fs::exists(c.log_json, ec) && ::access(c.log_json.c_str(), W_OK) != 0)
    input_error(what, ": cannot open for writing (", std::strerror(errno), ")");
}

bool open_results(RunPlan& plan) {
  if (!plan.results_info) return false;
  if (plan.results) return true;
  plan.results = std::make_unique<results::ResultsWriter>(
      results::ResultsWriter::create_or_resume(plan.results_path, *plan.results_info));
  const auto now = plan.results->pending();
  const auto same = [](const Job& a, const Job& b) {
    return a.k == b.k && a.iter == b.iter && a.seed == b.seed && a.index == b.index;
  };
  if (!std::equal(now.begin(), now.end(), plan.jobs.begin(), plan.jobs.end(), same))
    input_error(plan.results_path, ": its pending replicates changed while this run read its "
                "input (", plan.jobs.size(), " when it started, ", now.size(),
                " now: is another knmf run writing it?); run again to resume");
  return true;
}

void log_warnings(const results::ResultsWriter& w, std::ostream& log) {
  for (const auto& line : w.warnings()) log << "knmf: warning: " << line << "\n";
}

std::string full_disk_note(const FactorizeConfig& c, const InputError& e) {
  if (c.cnmf_mode() || c.results.empty() || e.system_errno() != ENOSPC) return {};
  std::error_code ec;
  if (!fs::is_regular_file(c.results, ec)) return {};
  const auto bytes = fs::file_size(c.results, ec);
  std::string held;
  try {
    const auto rd = results::ResultsReader::open(c.results);
    std::int64_t done = 0, all = 0;
    for (int k : rd.ks())
      for (auto flag : rd.completed(k)) {
        done += flag != 0;
        ++all;
      }
    held = " keeps " + std::to_string(done) + " of " + std::to_string(all) + " replicates committed";
  } catch (const std::exception&) {
    held = " is left incomplete";
  }
  char size[32];
  std::snprintf(size, sizeof size, "%.1f MB", double(ec ? 0 : bytes) / 1e6);
  return "; " + c.results + held + " (" + size + "): free space and run the same command again to "
         "resume it, or remove " + c.results;
}

std::string x_fingerprint_of(const io::H5adReader& reader) {
  const std::int64_t n = reader.info().n_obs, g = reader.info().n_vars;
  const std::int64_t band = std::max<std::int64_t>(1, (std::int64_t(1) << 22) / std::max<std::int64_t>(g, 1));
  io::XFingerprint fp;
  io::CsrBlock<double> block;
  for (std::int64_t r0 = 0; r0 < n; r0 += band)
    reader.read_csr_rows<double>(r0, std::min(n, r0 + band), block, &fp);
  return fp.text(n, g);
}

QueueChannel::QueueChannel(const std::vector<Job>& jobs, ProgressHook& progress)
    : progress_(progress) {
  for (const auto& j : jobs) {
    if (!by_k_.count(j.k)) order_.push_back(j.k);
    by_k_[j.k].push_back(j);
  }
}

int QueueChannel::max_jobs(int k) const {
  auto it = by_k_.find(k);
  return it == by_k_.end() ? 0 : int(it->second.size());
}

std::optional<Job> QueueChannel::next(int k) {
  auto it = by_k_.find(k);
  if (it == by_k_.end()) return std::nullopt;
  size_t& i = next_[k];
  if (i == it->second.size()) return std::nullopt;
  return it->second[i++];
}

void QueueChannel::finished(ReplicateResult&& r) {
  const int k = r.job.k, n_iter = r.n_iter;
  keep(std::move(r));
  ++done_;
  progress_.finished(k, n_iter);
}

namespace {
std::vector<Job> by_increasing_k(std::vector<Job> jobs) {
  std::stable_sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.k < b.k; });
  return jobs;
}
}  // namespace

LocalChannel::LocalChannel(const std::vector<Job>& jobs, ResultStore& store, ProgressHook& progress)
    : QueueChannel(by_increasing_k(jobs), progress), store_(store) {}

std::int64_t run_budget(const FactorizeConfig& c) {
  std::int64_t budget = available_device_bytes();
  if (c.device_memory_limit > 0) budget = std::min(budget, c.device_memory_limit);
  return budget;
}

XFormatPlan plan_x_format(const FactorizeConfig& c, std::int64_t n, std::int64_t g,
                          std::int64_t nnz, bool sparse_in, int s, std::int64_t budget) {
  const std::int64_t dense_bytes = n * g * s;
  const std::int64_t sparse_bytes = CsrMatrix<float>::bytes_for(n, g, nnz, s);
  XFormatPlan f;
  f.choice = choose_format(c.format, sparse_in, double(nnz) / (double(n) * double(g)),
                           dense_bytes, sparse_bytes, budget);
  f.bytes_x = f.choice.sparse ? sparse_bytes : dense_bytes;
  return f;
}

XPlan plan_x(const FactorizeConfig& c, const io::H5adInfo& info, int k_max, int s,
             std::int64_t budget) {
  XPlan x;
  const bool file_sparse = info.format != io::StorageFormat::Dense;
  static_cast<XFormatPlan&>(x) =
      plan_x_format(c, info.n_obs, info.n_vars, file_sparse ? info.nnz : info.n_obs * info.n_vars,
                    file_sparse, s, budget);
  // one replicate next to X: what the solver's batch allocates for one slot and per batch
  x.one = bytes_per_replicate(info.n_obs, info.n_vars, k_max, s, false) +
          batch_fixed_bytes(info.n_obs, info.n_vars, k_max, s, false);
  x.in_core = x.bytes_x + x.one <= budget;
  if (!x.in_core) {
    x.stream_buffer = (budget - x.one) / 4;
    if (x.stream_buffer <= 0)
      input_error("not enough device memory: one replicate of k = ", k_max, " needs ",
                  format_bytes(double(x.one)), " next to X's streaming buffers, but only ",
                  format_bytes(double(budget)), " are available");
  }
  return x;
}

Placement place_whole_x(const FactorizeConfig& c, const io::H5adInfo& info, int k_max, int s,
                        std::int64_t budget) {
  Placement p;
  p.x = plan_x(c, info, k_max, s, budget);
  p.device_rows = info.n_obs;
  p.device_x_bytes = p.x.in_core ? p.x.bytes_x : 2 * p.x.stream_buffer;
  return p;
}

std::vector<int> ks_of(const std::vector<Job>& jobs) {
  std::vector<int> ks;
  for (const auto& j : jobs)
    if (std::find(ks.begin(), ks.end(), j.k) == ks.end()) ks.push_back(j.k);
  return ks;
}

void log_header(const FactorizeConfig& c, const RunPlan& plan, const io::H5adInfo& info,
                std::ostream& log) {
  if (c.quiet) return;
  log << "knmf factorize: " << plan.x_path << " (" << info.n_obs << " cells x " << info.n_vars
      << " genes, " << (info.format == io::StorageFormat::Dense ? "dense" : "sparse") << "); "
      << plan.jobs.size() << " job(s) to run, " << plan.skipped << " already complete; solver "
      << to_string(plan.solver.solver) << ", tol " << plan.solver.tol << ", max_iter "
      << plan.solver.max_iter << ", " << to_string(c.dtype) << "\n";
}

void log_summary(const FactorizeConfig& c, const FactorizeSummary& sum, int ranks,
                 std::ostream& log) {
  if (c.quiet) return;
  log << "knmf factorize: " << sum.jobs_run << " job(s)";
  if (ranks > 1) log << " on " << ranks << " rank(s)";
  log << " in " << format_seconds(sum.seconds) << ", peak device memory "
      << (ranks > 1 ? "per rank " : "") << format_bytes(double(sum.peak_device_bytes)) << "\n";
}

namespace {

/// One process: the plan is made here, X is whole on this device (in device memory or
/// streamed from host memory), the jobs come from a queue per k.
struct LocalParts {
  int ranks() const { return 1; }
  std::int64_t budget(std::int64_t own) const { return own; }
  template <class F>
  void share_plan(RunPlan&, const FactorizeConfig&, F&& make) {
    make();
  }
  Placement place(const FactorizeConfig& c, const io::H5adReader& reader, int k, int s,
                  std::int64_t budget) const {
    return place_whole_x(c, reader.info(), k, s, budget);
  }
  template <class T, class F>
  FactorizeSummary run_on_x(const RunContext& run, const Placement& where, F&& f) {
    LocalChannel channel(run.plan.jobs, run.store, run.progress);
    return with_whole_x<T>(run, where, "", [&](const auto& X, std::int64_t bytes_x) {
      return f(X, bytes_x, channel);
    });
  }
  void reduce(FactorizeSummary&) const {}
  void share_failures(FactorizeSummary&) const {}
};

}  // namespace
}  // namespace detail

FactorizeSummary run_factorize(const FactorizeConfig& config, std::ostream& log) {
  config.validate();
  detail::LocalParts parts;
  try {
    return config.dtype == Dtype::float32 ? detail::run_factorize_with<float>(config, parts, log)
                                          : detail::run_factorize_with<double>(config, parts, log);
  } catch (const InputError& e) {
    const std::string note = detail::full_disk_note(config, e);
    if (note.empty()) throw;
    throw InputError(e.what() + note, e.system_errno());
  }
}

}  // namespace knmf
