#include "knmf/prepare/cnmf_prepare.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <ostream>
#include <random>
#include <sstream>
#include <system_error>

#include "knmf/core/error.hpp"
#include "knmf/io/atomic_file.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/prepare/count_inputs.hpp"
#include "knmf/prepare/prepare.hpp"
#include "knmf/random/random_state.hpp"
#include "knmf/version.hpp"

namespace knmf::prepare {

namespace fs = std::filesystem;

namespace {

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += char(c);
    }
  }
  return o + "\"";
}

void write_text(const fs::path& path, const std::string& text) {
  io::AtomicFile f(path);
  f.write(text);
  f.commit();
}

std::vector<std::string> read_genes_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) input_error("--genes-file ", path, ": cannot open it");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  // Python's str.rstrip() then split('\n')
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  std::vector<std::string> genes;
  std::size_t start = 0;
  for (;;) {
    const auto p = text.find('\n', start);
    genes.push_back(text.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  if (genes.size() == 1 && genes[0].empty()) input_error("--genes-file ", path, ": lists no gene");
  return genes;
}

// Removes what this run created unless dismissed: OUTPUT_DIR's folders when they were
// created here and are still empty (the staging folder, an io::AtomicFolder, removes itself).
struct Cleanup {
  std::vector<fs::path> created;  // outermost first
  bool done = false;
  ~Cleanup() {
    if (done) return;
    std::error_code ec;
    for (auto it = created.rbegin(); it != created.rend(); ++it) fs::remove(*it, ec);  // only if empty
  }
};

// knmf before issue 27 staged into `.NAME.knmf-prepare-PID`, which a killed run left behind
// and no later run removed: removed here when that process no longer runs.
void remove_legacy_staging(const fs::path& out_dir, const std::string& name) {
  const std::string prefix = "." + name + ".knmf-prepare-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out_dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(prefix, 0) != 0 || f.size() == prefix.size()) continue;
    const std::string pid = f.substr(prefix.size());
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
    if (io::writer_alive(pid_t(std::stol(pid)))) continue;
    std::error_code rm;
    fs::remove_all(e.path(), rm);
  }
}

// ---- the steps of cnmf_prepare -----------------------------------------------------------

/// cNMF prepare's --beta-loss choices and the solver its yaml then names (scikit-learn's cd
/// handles only Frobenius).
const char* cnmf_solver_for(const std::string& loss_name) {
  for (const auto& [loss, solver] : {std::pair{"frobenius", "cd"}, std::pair{"kullback-leibler", "mu"},
                                     std::pair{"itakura-saito", "mu"}})
    if (loss_name == loss) return solver;
  return nullptr;
}

// The options: cNMF's argparse choices and what its code would fail on.
void check_options(const CnmfPrepareOptions& o) {
  if (!cnmf_solver_for(o.beta_loss))
    input_error("--beta-loss '", o.beta_loss, "': expected frobenius, kullback-leibler or itakura-saito");
  if (o.init != "random" && o.init != "nndsvd")
    input_error("--init '", o.init, "': expected random or nndsvd");
  if (o.counts.empty()) input_error("-c/--counts: no count matrix given");
  if (o.name.empty() || o.name.find('/') != std::string::npos || o.name == "." || o.name == "..")
    input_error("--name '", o.name, "': must be a non-empty file name without '/'");
  if (o.output_dir.empty()) input_error("--output-dir: empty path");
  if (o.genes_file.empty() && o.num_highvar_genes < 1)
    input_error("--numgenes ", o.num_highvar_genes, " is invalid: it must be >= 1");
  if (o.max_nmf_iter < 1) input_error("--max-nmf-iter ", o.max_nmf_iter, " is invalid: it must be >= 1");
  if (o.seed && (*o.seed < 0 || *o.seed > 0xffffffffLL))
    input_error("--seed ", *o.seed, " is invalid: numpy's seed must be between 0 and 2**32 - 1");
}

// Refuses a gene selection cNMF would refuse (or silently get wrong): --numgenes above the genes
// with non-zero variance, and cells without a count in the selected genes.
void check_selection(int num_highvar_genes, const std::string& numgenes_option,
                     bool genes_listed, const CountSource& src, const PrepareResult& res,
                     const std::vector<std::string>& obs_names) {
  if (!genes_listed) {
    std::int64_t varying = 0;
    for (double v : res.stats.var) varying += v > 0;
    if (num_highvar_genes > varying)
      input_error(numgenes_option, " ", num_highvar_genes, " is larger than the ", varying,
                  " genes of ", src.name, " with non-zero variance");
  }
  // cNMF's check: every cell needs a count in the selected genes (cells without any count
  // at all included: knmf's statistics leave them out, cNMF would stop here)
  std::vector<std::int64_t> zero;
  std::size_t next = 0;
  for (std::int64_t c = 0; c < src.n_obs; ++c) {
    if (next < res.cells.size() && res.cells[next] == c) {
      const auto i = next++;
      if (res.norm_counts.row_offsets[i] == res.norm_counts.row_offsets[i + 1]) zero.push_back(c);
    } else {
      zero.push_back(c);
    }
  }
  if (!zero.empty()) {
    std::string examples;
    for (std::size_t i = 0; i < std::min<std::size_t>(4, zero.size()); ++i)
      examples += (i ? ", " : "") + obs_names[std::size_t(zero[i])];
    input_error(src.name, ": ", zero.size(), " cells have zero counts of overdispersed genes. E.g. ",
                examples, ". Filter those cells and re-run or adjust the number of overdispersed "
                "genes (cNMF stops here too)");
  }
}

// Creates OUTPUT_DIR and the folders above it that are missing, outermost first, each recorded
// in `cleanup` (removed again, when still empty, should the command fail).
void create_output_dir(const CnmfPrepareOptions& o, const fs::path& out_dir, Cleanup& cleanup) {
  std::vector<fs::path> missing;
  for (fs::path p = out_dir; !p.empty() && !fs::exists(p); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    std::error_code ec;
    if (!fs::create_directory(*it, ec) && ec)
      input_error("--output-dir ", o.output_dir, ": cannot create ", it->string(), ": ", ec.message());
    cleanup.created.push_back(*it);
  }
}

// NAME.knmf_prepare.json: the options, the seed and the sizes of the input.
std::string knmf_prepare_json(const CnmfPrepareOptions& o, CountFormat counts_format,
                              const CnmfPrepareReport& rep) {
  std::string ks;
  for (std::size_t i = 0; i < o.components.size(); ++i) ks += (i ? ", " : "") + std::to_string(o.components[i]);
  std::string j = "{\n";
  j += "  \"knmf_version\": " + json_string(KNMF_VERSION_STRING) + ",\n";
  j += "  \"counts\": " + json_string(o.counts) + ",\n";
  j += "  \"counts_format\": " + json_string(to_string(counts_format)) + ",\n";
  j += "  \"tpm\": " + (o.tpm.empty() ? std::string("null") : json_string(o.tpm)) + ",\n";
  j += "  \"components\": [" + ks + "],\n";
  j += "  \"n_iter\": " + std::to_string(o.n_iter) + ",\n";
  j += "  \"seed\": " + std::to_string(rep.seed) + ",\n";
  j += std::string("  \"seed_source\": ") + (rep.seed_drawn ? "\"drawn (std::random_device)\"" : "\"--seed\"") + ",\n";
  j += "  \"numgenes\": " + std::to_string(o.num_highvar_genes) + ",\n";
  j += "  \"genes_file\": " + (o.genes_file.empty() ? std::string("null") : json_string(o.genes_file)) + ",\n";
  j += "  \"max_nmf_iter\": " + std::to_string(o.max_nmf_iter) + ",\n";
  j += "  \"beta_loss\": " + json_string(o.beta_loss) + ",\n";
  j += "  \"init\": " + json_string(o.init) + ",\n";
  j += std::string("  \"densify\": ") + (o.densify ? "true" : "false") + ",\n";
  j += "  \"cells\": " + std::to_string(rep.cells) + ",\n";
  j += "  \"genes\": " + std::to_string(rep.genes) + ",\n";
  j += "  \"selected_genes\": " + std::to_string(rep.selected_genes) + "\n}\n";
  return j;
}

// Every file of the run folder, written into the staging folder.
void write_staged_files(const CnmfPrepareOptions& o, const io::CnmfPaths& paths,
                        const fs::path& staging, const PrepareResult& res,
                        const std::vector<std::string>& var_names, const std::vector<Job>& jobs,
                        const std::vector<bool>& completed, const std::string& prepare_json) {
  const fs::path run_dir(paths.run_dir());
  auto in_staging = [&](const std::string& final_path) {
    return staging / fs::path(final_path).lexically_relative(run_dir);
  };
  write_gene_list(in_staging(paths.nmf_genes_list()).string(), res);
  {
    io::H5adWriteOptions wo;
    wo.format = io::StorageFormat::Csr;
    wo.value_type = io::ValueType::Float64;
    wo.indptr_int32 = res.norm_counts.nnz() <= std::numeric_limits<std::int32_t>::max();  // as scipy
    io::write_h5ad(in_staging(paths.normalized_counts()), res.norm_counts, res.cell_names, res.gene_names, wo);
  }
  {
    io::H5adWriteOptions wo;
    wo.format = io::StorageFormat::Csr;
    wo.value_type = io::ValueType::Float32;
    wo.indptr_int32 = res.tpm.nnz() <= std::numeric_limits<std::int32_t>::max();  // as scipy
    io::write_h5ad(in_staging(paths.tpm()), res.tpm, res.cell_names, var_names, wo);
  }
  write_tpm_stats(in_staging(paths.tpm_stats()).string(), res, var_names);
  io::write_cnmf_job_table(in_staging(paths.nmf_replicate_parameters()).string(), jobs, completed);
  write_text(in_staging(paths.nmf_run_parameters()),
             cnmf_run_params_yaml(o.beta_loss, o.init, o.max_nmf_iter));
  write_text(staging / "cnmf_tmp" / (o.name + ".knmf_prepare.json"), prepare_json);
}

// The staged run folder moved into place: renamed as a whole when the run folder is new, else
// file by file over an existing one (a previous prepare's files replaced, the rest kept).
void move_staged_run(io::AtomicFolder& stage, const fs::path& run_dir, CnmfPrepareReport& rep) {
  const fs::path& staging = stage.path();
  if (!fs::exists(run_dir)) {
    io::move_into_place(staging, run_dir, run_dir.string() + ": cannot move the prepared run folder into place");
    stage.dismiss();
  } else {
    rep.replaced_existing = true;
    std::error_code ec;
    fs::create_directories(run_dir / "cnmf_tmp", ec);
    if (ec) input_error((run_dir / "cnmf_tmp").string(), ": cannot create: ", ec.message());
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(staging))
      if (entry.is_regular_file()) files.push_back(entry.path().lexically_relative(staging));
    for (const auto& rel : files) io::move_into_place(staging / rel, run_dir / rel);
    // the staging folder, now empty folders only, is removed by `stage` (AtomicFolder) on return
    io::sync_path(run_dir / "cnmf_tmp", true, (run_dir / "cnmf_tmp").string());
  }
}

}  // namespace

std::string cnmf_run_params_yaml(const std::string& beta_loss, const std::string& init, int max_iter) {
  const char* solver = cnmf_solver_for(beta_loss);
  if (!solver) input_error("--beta-loss '", beta_loss, "': expected frobenius, kullback-leibler or itakura-saito");
  return "alpha_H: 0.0\nalpha_W: 0.0\nbeta_loss: " + beta_loss + "\ninit: " + init +
         "\nl1_ratio: 0.0\nmax_iter: " + std::to_string(max_iter) + "\nsolver: " + std::string(solver) +
         "\ntol: 0.0001\n";
}

PrepareResult cnmf_prepare_counts(const CountSource& src, int num_highvar_genes,
                                  const std::vector<std::string>& genes, const CountSource* tpm,
                                  const std::string& numgenes_option) {
  PrepareOptions popt;
  popt.num_highvar_genes = num_highvar_genes;
  popt.genes = genes;
  popt.keep_tpm = true;
  popt.zero_genes_in_statistics = true;
  popt.tpm = tpm;
  PrepareResult res = prepare_counts(src, popt);
  std::vector<std::string> obs_names = src.obs_names;
  if (obs_names.empty())
    for (std::int64_t i = 0; i < src.n_obs; ++i) obs_names.push_back(std::to_string(i));
  check_selection(num_highvar_genes, numgenes_option, !genes.empty(), src, res, obs_names);
  return res;
}

CnmfPrepareReport cnmf_prepare(const CnmfPrepareOptions& o, std::ostream& log) {
  check_options(o);
  CnmfPrepareReport rep;
  rep.seed_drawn = !o.seed;
  if (o.seed) {
    rep.seed = *o.seed;
  } else {
    std::random_device rd;
    rep.seed = std::int64_t(rd());  // 32 bits
  }
  auto jobs = cnmf_job_table(o.components, o.n_iter, rep.seed);  // k and n-iter checked here

  const io::CnmfPaths paths(o.output_dir, o.name);
  const fs::path out_dir(o.output_dir), run_dir(paths.run_dir());
  rep.run_dir = run_dir.string();
  if (fs::exists(out_dir) && !fs::is_directory(out_dir))
    input_error("--output-dir ", o.output_dir, ": exists and is not a folder");
  if (fs::exists(run_dir) && !fs::is_directory(run_dir))
    input_error(run_dir.string(), ": exists and is not a folder (--output-dir/--name)");

  // ---- read and compute (nothing is written before everything is known) ------------------
  const auto genes = o.genes_file.empty() ? std::vector<std::string>{} : read_genes_file(o.genes_file);
  const auto counts = CountFile::open(o.counts, o.densify, o.block_rows);
  const auto& src = counts.source();
  std::optional<CountFile> tpm;
  if (!o.tpm.empty()) tpm.emplace(CountFile::open(o.tpm, o.densify, o.block_rows));
  const PrepareResult res = cnmf_prepare_counts(src, o.num_highvar_genes, genes,
                                                tpm ? &tpm->source() : nullptr, "--numgenes");
  rep.cells = src.n_obs;
  rep.genes = src.n_vars;
  rep.selected_genes = std::int64_t(res.genes.size());
  std::vector<std::string> var_names = src.var_names;
  if (var_names.empty())
    for (std::int64_t j = 0; j < src.n_vars; ++j) var_names.push_back(std::to_string(j));
  KNMF_ASSERT(std::int64_t(res.cell_names.size()) == src.n_obs, "every cell is kept");

  // ---- stage every file, then move them into place ----------------------------------------
  Cleanup cleanup;
  create_output_dir(o, out_dir, cleanup);
  // The run folder is built in a staging folder beside it (io::AtomicFolder: a temporary
  // name that the next command writing here removes if this process is killed), then moved
  // into place.
  remove_legacy_staging(out_dir, o.name);
  io::AtomicFolder stage(run_dir, "--output-dir " + o.output_dir);
  const fs::path staging = stage.path();
  {
    std::error_code ec;
    if (!fs::create_directories(staging / "cnmf_tmp", ec) || ec)
      input_error("--output-dir ", o.output_dir, ": cannot create ", (staging / "cnmf_tmp").string(),
                  ": ", ec ? ec.message() : "failed");
  }
  std::vector<bool> completed(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    completed[i] = fs::exists(paths.iter_spectra(jobs[i].k, jobs[i].iter));
    rep.completed_jobs += completed[i];
  }
  rep.jobs = std::int64_t(jobs.size());

  write_staged_files(o, paths, staging, res, var_names, jobs, completed,
                     knmf_prepare_json(o, counts.format(), rep));
  move_staged_run(stage, run_dir, rep);
  io::sync_path(run_dir, true, run_dir.string());
  io::sync_path(out_dir, true, out_dir.string());
  cleanup.done = true;
  if (rep.completed_jobs > 0)
    log << "knmf prepare: warning: " << rep.completed_jobs
        << " runs already appear completed (their spectra files exist in "
        << (run_dir / "cnmf_tmp").string()
        << "). If this is unexpected, consider a different --name or --output-dir\n";
  return rep;
}

}  // namespace knmf::prepare
