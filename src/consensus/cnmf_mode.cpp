// cNMF mode of the consensus step: cNMF run directories in, cNMF's files out
// (see knmf/consensus/cnmf_mode.hpp).
#include "knmf/consensus/cnmf_mode.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <system_error>
#include <unordered_map>

#include "knmf/core/error.hpp"
#include "knmf/consensus/native_mode.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/results/consensus_records.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/results/run_info.hpp"

namespace knmf::consensus {

namespace fs = std::filesystem;

namespace {

/// A consensus' warnings on the log stream, "knmf: warning: ...", each once per command (the
/// same genes are flagged for every k).
void print_warnings(const ConsensusResult& r, std::set<std::string>& printed, std::ostream& log) {
  for (const auto& w : r.warnings)
    if (printed.insert(w).second) log << "knmf: warning: " << w << "\n";
}

std::vector<io::Label> to_labels(const std::vector<std::string>& v) {
  return std::vector<io::Label>(v.begin(), v.end());
}

std::vector<io::Label> int_labels(std::int64_t first, std::int64_t count) {
  std::vector<io::Label> out;
  for (std::int64_t i = 0; i < count; ++i) out.emplace_back(first + i);
  return out;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) input_error(path, ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  // Python: open(...).read().split('\n') (cNMF writes '\n'.join(genes), no trailing newline)
  std::vector<std::string> out;
  size_t p = 0;
  while (true) {
    const size_t q = text.find('\n', p);
    out.push_back(text.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  if (!out.empty() && out.back().empty()) out.pop_back();  // tolerate a final newline
  return out;
}

std::vector<int> job_ks(const std::vector<Job>& jobs) {
  std::set<int> ks;
  for (const auto& j : jobs) ks.insert(j.k);
  return {ks.begin(), ks.end()};
}

/// Everything a consensus or k-selection run reads besides the spectra.
struct RunInputs {
  std::vector<Job> jobs;
  SolverOptions solver;
  std::unique_ptr<H5adRowSource> X;
  std::vector<std::string> genes;
};

RunInputs read_run_inputs(const io::CnmfPaths& paths, std::ostream& log) {
  RunInputs in;
  in.jobs = io::read_cnmf_job_table(paths.nmf_replicate_parameters());
  const auto params = io::read_nmf_run_params(paths.nmf_run_parameters());
  std::vector<std::string> unknown_keys;
  in.solver = solver_options_from(params, paths.nmf_run_parameters(), &unknown_keys);
  for (const auto& w : unknown_keys) log << "knmf: warning: " << w << "\n";
  in.X = std::make_unique<H5adRowSource>(paths.normalized_counts());
  in.genes = in.X->column_names();
  return in;
}

std::vector<int> requested_ks(const std::vector<int>& components, const std::vector<Job>& jobs,
                              const std::string& table) {
  std::vector<int> ks = components.empty() ? job_ks(jobs) : components;
  if (ks.empty()) input_error(table, ": the job table lists no jobs, and no --components were given");
  for (int k : ks)
    if (k < 1) input_error("--components ", k, " is invalid: k must be >= 1");
  return ks;
}

void check_genes(const MergedSpectra& m, const std::vector<std::string>& genes,
                 const std::string& x_path) {
  const std::string d = io::gene_list_difference(genes, m.genes);
  if (!d.empty())
    input_error(m.source, ": the genes of the k = ", m.k, " spectra differ from those of ", x_path,
                " (", d, ")");
}

void ensure_dirs(const io::CnmfPaths& paths) {
  std::error_code ec;
  fs::create_directories(paths.tmp_dir(), ec);
  if (ec) input_error(paths.tmp_dir(), ": cannot create the folder (", ec.message(), ")");
}

io::DataFrame frame(const HostRows& x, std::vector<io::Label> index, std::vector<io::Label> columns,
                    bool float32 = false) {
  io::DataFrame df;
  df.rows = x.rows;
  df.cols = x.cols;
  df.data_descr = float32 ? "<f4" : "<f8";
  df.data = x.values;
  df.index = std::move(index);
  df.columns = std::move(columns);
  return df;
}


/// TPM inputs when the TPM file exists (source null otherwise).
struct TpmFiles {
  std::unique_ptr<H5adRowSource> source;
  TpmInput input;
  std::vector<std::string> genes, hvgs;
};

/// Open `tpm_path` (if it exists) with its stats (`stats_path`, optional: empty or missing
/// means the genes' std is computed from TPM) and the HVG list (`hvg_path`, optional: X's
/// genes otherwise), checked against X.
TpmFiles open_tpm(const std::string& tpm_path, const std::string& stats_path,
                  const std::string& hvg_path, const std::vector<std::string>& x_genes,
                  const RowSource& X) {
  TpmFiles tf;
  if (tpm_path.empty() || !fs::exists(tpm_path)) return tf;
  tf.source = std::make_unique<H5adRowSource>(tpm_path);
  auto& tpm = tf.input;
  tpm.tpm = tf.source.get();
  tpm.float32 = tf.source->reader().info().value_type == io::ValueType::Float32;
  tf.genes = tf.source->column_names();
  if (tf.source->rows() != X.rows())
    input_error(tpm_path, ": ", tf.source->rows(), " cells but ", X.name(), " has ", X.rows());
  if (tf.source->row_names() != X.row_names())
    input_error(tpm_path, ": its cells (obs names) differ from those of ", X.name());
  if (!stats_path.empty() && fs::exists(stats_path)) {
    const io::DataFrame stats = io::read_df_npz(stats_path);
    const auto c_std = stats.find_column("__std");
    if (c_std < 0 || stats.is_object()) input_error(stats_path, ": no numeric '__std' column");
    if (stats.rows != tf.source->cols())
      input_error(stats_path, ": ", stats.rows, " genes but ", tpm_path, " has ", tf.source->cols());
    for (std::int64_t r = 0; r < stats.rows; ++r) tpm.gene_std.push_back(stats.at(r, c_std));
  }
  tf.hvgs = (!hvg_path.empty() && fs::exists(hvg_path)) ? read_lines(hvg_path) : x_genes;
  const std::string d = io::gene_list_difference(x_genes, tf.hvgs);
  if (!d.empty())
    input_error(hvg_path, ": the HVG list differs from the genes of ", X.name(), " (", d, ")");
  std::unordered_map<std::string, int> pos;
  for (size_t j = 0; j < tf.genes.size(); ++j) pos.emplace(tf.genes[j], int(j));
  std::set<std::string> seen;
  for (const auto& gname : tf.hvgs) {
    auto it = pos.find(gname);
    if (it == pos.end()) input_error(tpm_path, ": gene '", gname, "' of ", X.name(), " is not one of its genes");
    if (!seen.insert(gname).second) input_error(X.name(), ": gene '", gname, "' is listed twice");
    tpm.hvg_columns.push_back(it->second);
  }
  return tf;
}

/// Record the output dtypes and TPM genes of an outcome.
void set_output_types(CnmfConsensusOutcome& o, const TpmFiles& tf) {
  o.float32 = o.result.have_tpm && tf.source && tf.input.float32;
  if (o.result.have_tpm) o.tpm_genes = tf.genes;
}

/// Write every outcome's files (cNMF's names, labels and dtypes) into the run folder.
void write_outcomes(const io::CnmfPaths& paths, double dt, const std::vector<std::string>& cell_names,
                    const std::vector<std::string>& gene_names, const TpmFiles& tf,
                    std::vector<CnmfConsensusOutcome>& outcomes) {
  ensure_dirs(paths);
  const auto cells = to_labels(cell_names);
  const auto genes = to_labels(gene_names);
  for (auto& o : outcomes) {
    const bool f32 = o.float32;
    const int k = o.k;
    const auto& r = o.result;
    auto put = [&](const std::string& npz, const std::string& txt, const io::DataFrame& df) {
      io::write_df_npz(npz, df);
      o.files.push_back(npz);
      if (!txt.empty()) {
        io::write_df_txt(txt, df);
        o.files.push_back(txt);
      }
    };
    if (o.merged.source.rfind("combined", 0) == 0 || o.merged.source.rfind("results", 0) == 0)
      put(paths.merged_spectra(k), "",
          frame(o.merged.values, to_labels(o.merged.row_labels), to_labels(o.merged.genes)));
    {
      std::vector<std::string> labels;
      for (size_type row : r.clustering.nonzero_rows) labels.push_back(o.merged.row_labels[size_t(row)]);
      HostRows dens{size_type(labels.size()), 1, r.clustering.local_density};
      put(paths.local_density_cache(k), "",
          frame(dens, to_labels(labels), {io::Label(std::string("local_density"))}));
    }
    put(paths.consensus_spectra(k, dt), paths.consensus_spectra_txt(k, dt),
        frame(r.spectra, int_labels(1, k), genes));
    put(paths.consensus_usages(k, dt), paths.consensus_usages_txt(k, dt),
        frame(r.usages(), cells, int_labels(1, k), f32));
    if (r.have_tpm) {
      const auto tg = to_labels(tf.genes);
      put(paths.gene_spectra_score(k, dt), paths.gene_spectra_score_txt(k, dt),
          frame(r.spectra_score, int_labels(1, k), tg));
      put(paths.gene_spectra_tpm(k, dt), paths.gene_spectra_tpm_txt(k, dt),
          frame(r.spectra_tpm, int_labels(1, k), tg, f32));
      std::vector<io::Label> geps;
      for (int t = 1; t <= k; ++t) geps.emplace_back("GEP" + std::to_string(t));
      put(paths.starcat_spectra(k, dt), paths.starcat_spectra_txt(k, dt),
          frame(r.starcat, geps, to_labels(tf.hvgs)));
    }
  }
}

}  // namespace

SolverOptions solver_options_from(const io::NmfRunParams& p, const std::string& source,
                                  std::vector<std::string>* unknown_keys) {
  // cNMF's refits run with the run's beta_loss (refit_usage loads the whole yaml)
  SolverOptions o;
  auto warnings = apply_cnmf_params(o, p.values, source, false, p.non_scalar);
  if (unknown_keys) *unknown_keys = std::move(warnings);
  try {
    o.validate();
  } catch (const InputError& e) {  // name the file the options came from
    input_error(source, ": ", e.what());
  }
  return o;
}

MergedSpectra load_replicate_spectra(const io::CnmfPaths& paths, int k,
                                     const std::vector<Job>& jobs, bool write_merged) {
  std::vector<Job> mine;
  for (const auto& j : jobs)
    if (j.k == k) mine.push_back(j);
  std::sort(mine.begin(), mine.end(), [](const Job& a, const Job& b) { return a.iter < b.iter; });
  size_t present = 0;
  std::string first_missing;
  for (const auto& j : mine) {
    if (fs::exists(paths.iter_spectra(k, j.iter)))
      ++present;
    else if (first_missing.empty())
      first_missing = paths.iter_spectra(k, j.iter);
  }
  MergedSpectra out;
  out.k = k;
  if (present > 0 && present < mine.size())
    input_error(first_missing, ": replicate spectra file missing (k = ", k, " has ", present,
                " of the ", mine.size(), " replicate files of the job table)");
  if (present == 0) {
    const std::string merged = paths.merged_spectra(k);
    if (!fs::exists(merged)) {
      if (mine.empty())
        input_error("k = ", k, ": no replicate spectra: the job table ", paths.nmf_replicate_parameters(),
                    " lists no job of k = ", k, " and ", merged, " does not exist");
      input_error("k = ", k, ": no replicate spectra: neither ", paths.iter_spectra(k, mine.front().iter),
                  " (nor any other of its ", mine.size(), " replicate files) nor ", merged, " exists");
    }
    io::CnmfMergedSpectra m = io::read_cnmf_merged_spectra(merged, k);
    out.values = HostRows{m.frame.rows, m.frame.cols, std::move(m.frame.data)};
    out.genes = std::move(m.genes);
    out.row_labels = std::move(m.row_labels);
    out.source = merged;
    return out;
  }
  // combine, as `cnmf combine` does
  for (const auto& j : mine) {
    const std::string path = paths.iter_spectra(k, j.iter);
    io::CnmfSpectra f = io::read_cnmf_replicate_spectra(path, k);
    if (out.genes.empty() && out.values.rows == 0) {
      out.genes = f.genes;
      out.values.cols = f.frame.cols;
    } else {
      const std::string d = io::gene_list_difference(out.genes, f.genes);
      if (!d.empty())
        input_error(path, ": its genes differ from those of ", paths.iter_spectra(k, mine.front().iter),
                    " (", d, ")");
    }
    const std::vector<double>& v = f.frame.data;
    out.values.values.insert(out.values.values.end(), v.begin(), v.end());
    out.values.rows += k;
    for (int t = 0; t < k; ++t)
      out.row_labels.push_back("iter" + std::to_string(j.iter) + "_topic" + std::to_string(t + 1));
  }
  out.source = "combined replicate files of k = " + std::to_string(k) + " (" +
               paths.iter_spectra(k, mine.front().iter) + ", ...)";
  if (write_merged) {
    ensure_dirs(paths);
    io::write_df_npz(paths.merged_spectra(k),
                     frame(out.values, to_labels(out.row_labels), to_labels(out.genes)));
  }
  return out;
}

std::vector<CnmfConsensusOutcome> run_cnmf_consensus(const ExecSpace& space,
                                                     const CnmfConsensusRequest& req,
                                                     std::ostream& log) {
  req.options.validate();
  const io::CnmfPaths paths(req.output_dir, req.name);
  RunInputs in = read_run_inputs(paths, log);
  const auto ks = requested_ks(req.components, in.jobs, paths.nmf_replicate_parameters());

  // every input is read and checked before anything is written
  std::vector<MergedSpectra> merged;
  for (int k : ks) {
    merged.push_back(load_replicate_spectra(paths, k, in.jobs, false));
    check_genes(merged.back(), in.genes, in.X->name());
  }
  TpmFiles tf = open_tpm(paths.tpm(), paths.tpm_stats(), paths.nmf_genes_list(), in.genes, *in.X);

  std::vector<CnmfConsensusOutcome> outcomes;
  std::set<std::string> printed;
  for (size_t i = 0; i < ks.size(); ++i) {
    CnmfConsensusOutcome o;
    o.k = ks[i];
    o.result = run_consensus(space, merged[i].values, ks[i], *in.X, tf.source ? &tf.input : nullptr,
                             in.solver, req.options);
    print_warnings(o.result, printed, log);
    o.merged = std::move(merged[i]);
    set_output_types(o, tf);
    outcomes.push_back(std::move(o));
  }
  write_outcomes(paths, req.options.local_density_threshold, in.X->row_names(), in.genes, tf, outcomes);
  return outcomes;
}

io::DataFrame k_selection_frame(const std::vector<KSelectionRow>& rows) {
  // cNMF's four columns, then the cross-validation's two when it ran
  const bool cv = !rows.empty() && !std::isnan(rows.front().cv_prediction_error);
  io::DataFrame df;
  df.rows = std::int64_t(rows.size());
  df.cols = cv ? 6 : 4;
  for (const auto& r : rows) {
    df.data.push_back(double(r.k));
    df.data.push_back(r.local_density_threshold);
    df.data.push_back(r.silhouette);
    df.data.push_back(r.prediction_error);
    if (cv) {
      df.data.push_back(r.cv_prediction_error);
      df.data.push_back(r.cv_prediction_error_sd);
    }
  }
  df.index = int_labels(0, df.rows);
  for (const char* c : {"k", "local_density_threshold", "silhouette", "prediction_error"})
    df.columns.emplace_back(std::string(c));
  if (cv)
    for (const char* c : {"cv_prediction_error", "cv_prediction_error_sd"})
      df.columns.emplace_back(std::string(c));
  return df;
}

namespace {
/// The bi-cross-validation of the rows' k on X with the run's solver options, when asked,
/// resumable through `checkpoint` (a file; none when null): a run killed part way takes up the
/// units it finished. The caller removes the checkpoint once its outputs are written.
void add_cross_validation(const ExecSpace& space, std::vector<KSelectionRow>& rows,
                          const RowSource& X, const SolverOptions& solver, bool asked,
                          const CrossValidationOptions& cv, CrossValidationCheckpoint* checkpoint,
                          std::ostream* log) {
  if (!asked) return;
  std::vector<int> ks;
  for (const auto& r : rows) ks.push_back(r.k);
  const auto table = cross_validate(space, X, ks, solver, cv, checkpoint);
  if (checkpoint && checkpoint->resumed() > 0 && log)
    *log << "k-selection: cross-validation took up " << checkpoint->resumed()
         << " finished held-out block(s) x k from " << checkpoint->path().string() << "\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].cv_prediction_error = table[i].mean;
    rows[i].cv_prediction_error_sd = table[i].sd;
    rows[i].cv_errors = table[i].errors;
  }
}
}  // namespace

std::vector<KSelectionRow> run_cnmf_k_selection(const ExecSpace& space,
                                                const CnmfKSelectionRequest& req,
                                                std::ostream& log) {
  req.options.validate();
  const io::CnmfPaths paths(req.output_dir, req.name);
  RunInputs in = read_run_inputs(paths, log);
  const auto ks = requested_ks(req.components, in.jobs, paths.nmf_replicate_parameters());
  std::vector<HostRows> stacks;
  for (int k : ks) {
    MergedSpectra m = load_replicate_spectra(paths, k, in.jobs, false);
    check_genes(m, in.genes, in.X->name());
    stacks.push_back(std::move(m.values));
  }
  auto rows = k_selection(space, stacks, ks, *in.X, in.solver, req.options);
  std::optional<CrossValidationCheckpoint> checkpoint;
  if (req.cross_validate)
    checkpoint.emplace(std::filesystem::path(paths.tmp_dir()) /
                       (req.name + ".k_selection.cross_validation.checkpoint"));
  add_cross_validation(space, rows, *in.X, in.solver, req.cross_validate, req.cross_validation,
                       checkpoint ? &*checkpoint : nullptr, &log);
  ensure_dirs(paths);
  io::write_df_npz(paths.k_selection_stats(), k_selection_frame(rows));
  if (checkpoint) checkpoint->remove();
  return rows;
}

// ---- native mode -------------------------------------------------------------------------------

MergedSpectra load_results_spectra(const std::string& results, int k) {
  const auto reader = results::ResultsReader::open(results);
  const auto& ks = reader.ks();
  if (std::find(ks.begin(), ks.end(), k) == ks.end()) {
    std::ostringstream have;
    for (size_t i = 0; i < ks.size(); ++i) have << (i ? ", " : "") << ks[i];
    input_error(results, ": k = ", k, " has no replicates (the file holds k = ", have.str(), ")");
  }
  const auto done = reader.completed(k);
  std::vector<int> missing;
  for (size_t r = 0; r < done.size(); ++r)
    if (!done[r]) missing.push_back(int(r));
  if (!missing.empty())
    input_error(results, ": k = ", k, ": ", missing.size(), " of ", done.size(),
                " replicates are not committed (the first is iter ", missing[0],
                "); finish the run with knmf factorize first");
  MergedSpectra out;
  out.k = k;
  out.genes = reader.info().genes;
  const size_type g = size_type(out.genes.size());
  out.values = HostRows{size_type(reader.n_iter()) * k, g, reader.spectra(k)};
  for (int r = 0; r < reader.n_iter(); ++r)
    for (int t = 0; t < k; ++t)
      out.row_labels.push_back("iter" + std::to_string(r) + "_topic" + std::to_string(t + 1));
  out.source = "results file " + results;
  // non_finite replicates are failed attempts, not factorizations: left out of the stack
  const auto status = reader.table(k).status;
  std::vector<int> valid;
  for (int r = 0; r < reader.n_iter(); ++r)
    if (status[size_t(r)] != results::ReplicateState::non_finite) valid.push_back(r);
  if (valid.empty())
    input_error(results, ": k = ", k, ": all ", reader.n_iter(), " replicates are non_finite "
                "(not valid factorizations): nothing to combine");
  if (int(valid.size()) == reader.n_iter()) return out;
  out.left_out = reader.n_iter() - int(valid.size());
  HostRows kept{size_type(valid.size()) * k, g, {}};
  kept.values.reserve(size_t(kept.rows * g));
  std::vector<std::string> labels;
  for (int r : valid)
    for (int t = 0; t < k; ++t) {
      const size_type row = size_type(r) * k + t;
      kept.values.insert(kept.values.end(), out.values.row(row), out.values.row(row) + g);
      labels.push_back(out.row_labels[size_t(row)]);
      out.stack_rows.push_back(row);
    }
  out.values = std::move(kept);
  out.row_labels = std::move(labels);
  return out;
}

namespace {

struct NativeInputs {
  std::vector<int> ks;
  SolverOptions solver;
  std::string counts;
  std::unique_ptr<H5adRowSource> X;
  std::vector<std::string> genes;
  std::vector<MergedSpectra> merged;
};

/// Where the outputs go, checked before any work: the results file must be updatable, an
/// output folder (for cNMF's files) is optional.
/// The folder `dir` exists or can be made: its nearest existing ancestor is a folder. Checked
/// before the results file is updated, creating nothing.
void check_folder_creatable(const std::string& dir) {
  std::error_code ec;
  for (fs::path p = fs::absolute(dir, ec); !p.empty(); p = p.parent_path()) {
    const auto st = fs::status(p, ec);
    if (fs::exists(st)) {
      if (!fs::is_directory(st))
        input_error(dir, ": cannot create the folder (", p.string(), " is not a folder)");
      return;
    }
    if (p == p.parent_path()) return;
  }
}

void check_native_outputs(const NativeRequest& req) {
  if (!req.update_results && req.output_dir.empty())
    input_error(req.results, ": nothing to write: the results file is left unchanged and no "
                "--output-dir/--name was given for cNMF's files");
  if (!req.output_dir.empty() && req.name.empty())
    input_error("--name is empty: cNMF's files need a run name");
  if (!req.output_dir.empty()) check_folder_creatable(io::CnmfPaths(req.output_dir, req.name).tmp_dir());
  if (req.update_results) results::check_results_updatable(req.results);
}

NativeInputs read_native(const NativeRequest& req) {
  NativeInputs in;
  const auto reader = results::ResultsReader::open(req.results);
  const auto& info = reader.info();
  in.ks = req.components.empty() ? reader.ks() : req.components;
  for (int k : in.ks)
    if (k < 1) input_error("--components ", k, " is invalid: k must be >= 1");
  in.solver = info.solver;
  in.solver.return_W = false;
  // the run's input: by its absolute path where it still exists (another working folder)
  in.counts = req.counts.empty() ? results::run_input_path(info) : req.counts;
  if (in.counts.empty()) input_error(req.results, ": no input recorded; give --counts");
  in.X = std::make_unique<H5adRowSource>(in.counts);
  // the run's own input must still hold its X (checked during the first pass over it)
  if (req.counts.empty() && !info.input_fingerprint.empty())
    in.X->expect_fingerprint(info.input_fingerprint, "the run in " + req.results);
  in.genes = in.X->column_names();
  if (in.X->rows() != info.n_cells)
    input_error(in.counts, ": ", in.X->rows(), " cells but ", req.results, " was computed on ",
                info.n_cells);
  for (int k : in.ks) {
    in.merged.push_back(load_results_spectra(req.results, k));
    check_genes(in.merged.back(), in.genes, in.counts);
  }
  return in;
}

results::ConsensusSettings native_settings(const NativeRequest& req, const NativeInputs& in) {
  results::ConsensusSettings s;
  s.local_density_threshold = req.options.local_density_threshold;
  s.local_neighborhood_size = req.options.local_neighborhood_size;
  s.kmeans_n_init = req.options.kmeans.n_init;
  s.kmeans_seed = req.options.kmeans.seed;
  s.kmeans_max_iter = req.options.kmeans.max_iter;
  s.kmeans_tol = req.options.kmeans.tol;
  s.refit = in.solver;
  s.counts = in.counts;
  s.tpm = req.tpm;
  return s;
}

}  // namespace

results::ConsensusRecord consensus_record(const CnmfConsensusOutcome& o, const results::ConsensusSettings& settings) {
  const ConsensusResult& r = o.result;
  const SpectraClustering& c = r.clustering;
  results::ConsensusRecord rec;
  rec.k = o.k;
  rec.settings = settings;
  rec.n_neighbors = c.n_neighbors;
  rec.silhouette = c.silhouette;
  rec.prediction_error = r.prediction_error;
  rec.refit_n_iter = r.refit.n_iter;
  rec.refit_status = results::to_state(r.refit.status);
  // rows of the run's whole stack (the merged rows leave out non_finite replicates)
  for (size_type row : c.nonzero_rows)
    rec.replicate_rows.push_back(o.merged.stack_rows.empty() ? row : o.merged.stack_rows[size_t(row)]);
  rec.local_density = c.local_density;
  // program (1..k) of each clustered row: k-means cluster order[p] is program p + 1
  std::vector<std::int32_t> program_of(size_t(o.k), 0);
  for (size_t p = 0; p < r.order.size(); ++p) program_of[size_t(r.order[p])] = std::int32_t(p + 1);
  std::unordered_map<size_type, std::int32_t> cluster_of;
  for (size_t i = 0; i < c.used_rows.size(); ++i) cluster_of[c.used_rows[i]] = program_of[size_t(c.labels[i])];
  rec.cluster.reserve(c.nonzero_rows.size());
  for (size_type row : c.nonzero_rows) {
    const auto it = cluster_of.find(row);
    rec.cluster.push_back(it == cluster_of.end() ? 0 : it->second);
  }
  rec.spectra = r.spectra.values;
  rec.usages = r.usages().values;
  rec.has_tpm = r.have_tpm;
  rec.float32 = o.float32;
  if (r.have_tpm) {
    rec.tpm_genes = o.tpm_genes;
    rec.spectra_tpm = r.spectra_tpm.values;
    rec.spectra_score = r.spectra_score.values;
    rec.starcat = r.starcat.values;
  }
  return rec;
}

std::vector<CnmfConsensusOutcome> run_native_consensus(const ExecSpace& space,
                                                       const NativeRequest& req,
                                                       std::ostream& log) {
  req.options.validate();
  check_native_outputs(req);
  NativeInputs in = read_native(req);
  // (checked before the TPM is read: a --tpm-stats that does not exist was ignored, the
  // standard deviations then computed from the TPM without a word)
  if (!req.tpm_stats.empty() && req.tpm.empty())
    input_error("--tpm-stats ", req.tpm_stats, ": needs --tpm (the TPM matrix it describes)");
  if (!req.tpm_stats.empty() && !fs::is_regular_file(req.tpm_stats))
    input_error("--tpm-stats ", req.tpm_stats, ": no such file");
  TpmFiles tf = open_tpm(req.tpm, req.tpm_stats, "", in.genes, *in.X);
  if (!req.tpm.empty() && !tf.source) input_error("--tpm ", req.tpm, ": no such file");
  std::vector<CnmfConsensusOutcome> outcomes;
  std::set<std::string> printed;
  for (size_t i = 0; i < in.ks.size(); ++i) {
    CnmfConsensusOutcome o;
    o.k = in.ks[i];
    o.result = run_consensus(space, in.merged[i].values, in.ks[i], *in.X,
                             tf.source ? &tf.input : nullptr, in.solver, req.options);
    print_warnings(o.result, printed, log);
    o.merged = std::move(in.merged[i]);
    set_output_types(o, tf);
    outcomes.push_back(std::move(o));
  }
  if (req.update_results) {
    results::ResultsAdditions add;
    const auto settings = native_settings(req, in);
    for (const auto& o : outcomes) add.consensus.push_back(consensus_record(o, settings));
    add.cells = in.X->row_names();
    results::update_results_file(req.results, add);
    for (auto& o : outcomes) o.files.push_back(req.results + ":" + results::consensus_group(o.k, req.options.local_density_threshold));
  }
  if (!req.output_dir.empty())
    write_outcomes(io::CnmfPaths(req.output_dir, req.name), req.options.local_density_threshold,
                   in.X->row_names(), in.genes, tf, outcomes);
  return outcomes;
}

std::vector<KSelectionRow> run_native_k_selection(const ExecSpace& space, const NativeRequest& req) {
  req.options.validate();
  check_native_outputs(req);
  NativeInputs in = read_native(req);
  std::vector<HostRows> stacks;
  for (auto& m : in.merged) stacks.push_back(std::move(m.values));
  auto rows = k_selection(space, stacks, in.ks, *in.X, in.solver, req.options);
  // the checkpoint beside the results file, or in the cNMF folder when the file stays read-only
  std::optional<CrossValidationCheckpoint> checkpoint;
  if (req.cross_validate && req.update_results) {
    checkpoint.emplace(req.results + ".cross_validation.checkpoint");
  } else if (req.cross_validate && !req.output_dir.empty()) {
    const io::CnmfPaths paths(req.output_dir, req.name);
    ensure_dirs(paths);
    checkpoint.emplace(paths.k_selection_stats() + ".cross_validation.checkpoint");
  }
  add_cross_validation(space, rows, *in.X, in.solver, req.cross_validate, req.cross_validation,
                       checkpoint ? &*checkpoint : nullptr, nullptr);
  if (req.update_results) {
    results::ResultsAdditions add;
    results::KSelectionTable t;
    t.settings = native_settings(req, in);
    t.settings.tpm.clear();
    for (const auto& r : rows) {
      t.k.push_back(r.k);
      t.local_density_threshold.push_back(r.local_density_threshold);
      t.silhouette.push_back(r.silhouette);
      t.prediction_error.push_back(r.prediction_error);
      if (req.cross_validate) {
        t.cv_prediction_error.push_back(r.cv_prediction_error);
        t.cv_prediction_error_sd.push_back(r.cv_prediction_error_sd);
      }
    }
    if (req.cross_validate)
      t.cross_validation = results::CrossValidationSettings{
          req.cross_validation.cell_folds, req.cross_validation.gene_folds,
          req.cross_validation.replicates, std::int64_t(req.cross_validation.seed)};
    add.k_selection = std::move(t);
    results::update_results_file(req.results, add);
  }
  if (!req.output_dir.empty()) {
    const io::CnmfPaths paths(req.output_dir, req.name);
    ensure_dirs(paths);
    io::write_df_npz(paths.k_selection_stats(), k_selection_frame(rows));
  }
  if (checkpoint) checkpoint->remove();
  return rows;
}

}  // namespace knmf::consensus
