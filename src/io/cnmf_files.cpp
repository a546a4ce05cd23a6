// cNMF run-directory helpers: paths, run parameters, job table, per-replicate spectra.
#include "knmf/io/cnmf_files.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <utility>

#include "knmf/core/error.hpp"
#include "knmf/io/dataframe.hpp"

namespace knmf::io {

// ---- paths -----------------------------------------------------------------------------------

std::string density_threshold_string(double threshold) {
  std::string s = format_float_repr(threshold);
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

CnmfPaths::CnmfPaths(std::string output_dir_, std::string name_)
    : output_dir(std::move(output_dir_)), name(std::move(name_)) {}

std::string CnmfPaths::run_dir() const { return (std::filesystem::path(output_dir) / name).string(); }
std::string CnmfPaths::tmp_dir() const {
  return (std::filesystem::path(output_dir) / name / "cnmf_tmp").string();
}
std::string CnmfPaths::in_run(const std::string& file) const {
  return (std::filesystem::path(run_dir()) / (name + file)).string();
}
std::string CnmfPaths::in_tmp(const std::string& file) const {
  return (std::filesystem::path(tmp_dir()) / (name + file)).string();
}

namespace {
std::string k_dt(int k, double dt) {
  return ".k_" + std::to_string(k) + ".dt_" + density_threshold_string(dt);
}
}  // namespace

std::string CnmfPaths::normalized_counts() const { return in_tmp(".norm_counts.h5ad"); }
std::string CnmfPaths::tpm() const { return in_tmp(".tpm.h5ad"); }
std::string CnmfPaths::tpm_stats() const { return in_tmp(".tpm_stats.df.npz"); }
std::string CnmfPaths::nmf_run_parameters() const { return in_tmp(".nmf_idvrun_params.yaml"); }
std::string CnmfPaths::nmf_replicate_parameters() const { return in_tmp(".nmf_params.df.npz"); }
std::string CnmfPaths::nmf_genes_list() const { return in_run(".overdispersed_genes.txt"); }
std::string CnmfPaths::iter_spectra(int k, int iter) const {
  return in_tmp(".spectra.k_" + std::to_string(k) + ".iter_" + std::to_string(iter) + ".df.npz");
}
std::string CnmfPaths::iter_usages(int k, int iter) const {
  return in_tmp(".usages.k_" + std::to_string(k) + ".iter_" + std::to_string(iter) + ".df.npz");
}
std::string CnmfPaths::merged_spectra(int k) const {
  return in_tmp(".spectra.k_" + std::to_string(k) + ".merged.df.npz");
}
std::string CnmfPaths::local_density_cache(int k) const {
  return in_tmp(".local_density_cache.k_" + std::to_string(k) + ".merged.df.npz");
}
std::string CnmfPaths::consensus_spectra(int k, double dt) const {
  return in_tmp(".spectra" + k_dt(k, dt) + ".consensus.df.npz");
}
std::string CnmfPaths::consensus_spectra_txt(int k, double dt) const {
  return in_run(".spectra" + k_dt(k, dt) + ".consensus.txt");
}
std::string CnmfPaths::consensus_usages(int k, double dt) const {
  return in_tmp(".usages" + k_dt(k, dt) + ".consensus.df.npz");
}
std::string CnmfPaths::consensus_usages_txt(int k, double dt) const {
  return in_run(".usages" + k_dt(k, dt) + ".consensus.txt");
}
std::string CnmfPaths::consensus_stats(int k, double dt) const {
  return in_tmp(".stats" + k_dt(k, dt) + ".df.npz");
}
std::string CnmfPaths::clustering_plot(int k, double dt) const {
  return in_run(".clustering" + k_dt(k, dt) + ".png");
}
std::string CnmfPaths::gene_spectra_score(int k, double dt) const {
  return in_tmp(".gene_spectra_score" + k_dt(k, dt) + ".df.npz");
}
std::string CnmfPaths::gene_spectra_score_txt(int k, double dt) const {
  return in_run(".gene_spectra_score" + k_dt(k, dt) + ".txt");
}
std::string CnmfPaths::gene_spectra_tpm(int k, double dt) const {
  return in_tmp(".gene_spectra_tpm" + k_dt(k, dt) + ".df.npz");
}
std::string CnmfPaths::gene_spectra_tpm_txt(int k, double dt) const {
  return in_run(".gene_spectra_tpm" + k_dt(k, dt) + ".txt");
}
std::string CnmfPaths::starcat_spectra(int k, double dt) const {
  return in_tmp(".starcat_spectra" + k_dt(k, dt) + ".df.npz");
}
std::string CnmfPaths::starcat_spectra_txt(int k, double dt) const {
  return in_run(".starcat_spectra" + k_dt(k, dt) + ".txt");
}
std::string CnmfPaths::k_selection_plot() const { return in_run(".k_selection.png"); }
std::string CnmfPaths::k_selection_stats() const { return in_run(".k_selection_stats.df.npz"); }

// ---- NAME.nmf_idvrun_params.yaml -------------------------------------------------------------

NmfRunParams read_nmf_run_params(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    input_error(path, ": cannot open for reading");
  } catch (const YAML::Exception& e) {
    input_error(path, ": malformed YAML at line ", e.mark.line + 1, ": ", e.msg);
  }
  if (!root.IsMap()) input_error(path, ": expected a YAML mapping of NMF parameters");

  NmfRunParams p;
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      // PyYAML (cNMF) keeps the last of two equal keys, yaml-cpp finds the first: refuse
      bool seen = std::find(p.non_scalar.begin(), p.non_scalar.end(), key) != p.non_scalar.end();
      for (const auto& kv_seen : p.values) seen = seen || kv_seen.first == key;
      if (seen) input_error(path, ": key '", key, "' appears twice");
      if (kv.second.IsNull()) {  // `key:` with no value: empty text (no option accepts it)
        p.values.emplace_back(key, std::string());
        continue;
      }
      if (!kv.second.IsScalar()) {  // a list or a mapping: no option takes one
        p.non_scalar.push_back(key);
        continue;
      }
      p.values.emplace_back(key, kv.second.Scalar());
    }
  } catch (const YAML::Exception& e) {
    input_error(path, ": bad NMF parameters: ", e.msg);
  }
  return p;
}

// ---- NAME.nmf_params.df.npz ------------------------------------------------------------------

std::vector<Job> read_cnmf_job_table(const std::string& path) {
  const DataFrame df = read_df_npz(path);
  auto column = [&](const char* name) {
    const std::int64_t c = df.find_column(name);
    if (c < 0) input_error(path, ": job table has no column '", name, "'");
    return c;
  };
  const std::int64_t ck = column("n_components"), ci = column("iter"), cs = column("nmf_seed");
  auto value = [&](std::int64_t r, std::int64_t c, const char* name) -> std::int64_t {
    if (df.is_object()) {
      const Cell& cell = df.cell(r, c);
      if (const auto* i = std::get_if<std::int64_t>(&cell)) return *i;
      input_error(path, ": row ", r, " column '", name, "' is '", cell_to_string(cell), "', not an integer");
    }
    const double x = df.at(r, c);
    if (std::trunc(x) != x || std::fabs(x) > 9.0e15)
      input_error(path, ": row ", r, " column '", name, "' is ", x, ", not an integer");
    return static_cast<std::int64_t>(x);
  };
  std::vector<Job> jobs;
  jobs.reserve(static_cast<std::size_t>(df.rows));
  std::map<std::pair<int, int>, std::int64_t> row_of;  // (k, iter) -> first row
  for (std::int64_t r = 0; r < df.rows; ++r) {
    Job j;
    const std::int64_t k = value(r, ck, "n_components");
    const std::int64_t it = value(r, ci, "iter");
    j.seed = value(r, cs, "nmf_seed");
    if (k < 1 || k > std::numeric_limits<int>::max())
      input_error(path, ": row ", r, " has n_components ", k);
    if (it < 0 || it > std::numeric_limits<int>::max()) input_error(path, ": row ", r, " has iter ", it);
    // scikit-learn's random_state must lie in [0, 2^32).
    if (j.seed < 0 || j.seed > 0xFFFFFFFFll) input_error(path, ": row ", r, " has nmf_seed ", j.seed);
    j.k = static_cast<int>(k);
    j.iter = static_cast<int>(it);
    j.index = r;
    // Each (k, iter) job has one spectra file (and one slot of a results file): a second row
    // would silently run into the first one's file.
    const auto [at, fresh] = row_of.emplace(std::pair{j.k, j.iter}, r);
    if (!fresh)
      input_error(path, ": rows ", at->second, " and ", r, " are both the job n_components ", j.k,
                  ", iter ", j.iter, " (each (n_components, iter) must appear once)");
    jobs.push_back(j);
  }
  return jobs;
}

// ---- spectra ---------------------------------------------------------------------------------

MergedSpectraLabel parse_merged_spectra_label(const std::string& label, const std::string& what) {
  auto bad = [&]() { input_error(what, ": row label '", label, "' is not of the form iter<r>_topic<t>"); };
  auto number = [&](std::size_t& p, std::size_t end) {
    if (p >= end || end - p > 9) bad();
    int v = 0;
    for (; p < end; ++p) {
      if (label[p] < '0' || label[p] > '9') bad();
      v = v * 10 + (label[p] - '0');
    }
    return v;
  };
  if (label.rfind("iter", 0) != 0) bad();
  const std::size_t sep = label.find("_topic");
  if (sep == std::string::npos) bad();
  MergedSpectraLabel m;
  std::size_t p = 4;
  m.iter = number(p, sep);
  p = sep + 6;
  m.topic = number(p, label.size());
  if (m.topic < 1) bad();
  return m;
}

std::optional<CnmfSpectraName> parse_cnmf_spectra_name(const std::string& f) {
  const std::string mid = ".spectra.k_";
  const std::size_t p = f.rfind(mid);
  if (p == std::string::npos || p == 0) return std::nullopt;
  CnmfSpectraName out;
  out.run = f.substr(0, p);
  std::size_t q = p + mid.size();
  auto number = [&](int& v) {
    const std::size_t start = q;
    long long x = 0;
    while (q < f.size() && f[q] >= '0' && f[q] <= '9' && q - start < 9) x = x * 10 + (f[q++] - '0');
    v = int(x);
    return q > start;
  };
  if (!number(out.k) || out.k < 1) return std::nullopt;
  const std::string rest = f.substr(q);
  if (rest == ".merged.df.npz") {
    out.iter = -1;
    return out;
  }
  if (rest.rfind(".iter_", 0) != 0) return std::nullopt;
  q += 6;
  if (!number(out.iter) || f.substr(q) != ".df.npz") return std::nullopt;
  return out;
}

namespace {
CnmfSpectra read_spectra_frame(const std::string& path, const std::string& what) {
  CnmfSpectra s;
  s.path = path;
  s.frame = read_df_npz(path);
  if (s.frame.is_object()) input_error(what, path, ": data is an object array, expected numbers");
  s.genes.reserve(s.frame.columns.size());
  for (std::size_t j = 0; j < s.frame.columns.size(); ++j) {
    const auto* g = std::get_if<std::string>(&s.frame.columns[j]);
    if (g == nullptr)
      input_error(what, path, ": column label ", j, " is the integer ",
                  label_to_string(s.frame.columns[j]), ", expected a gene name");
    s.genes.push_back(*g);
  }
  return s;
}
}  // namespace

CnmfSpectra read_cnmf_replicate_spectra(const std::string& path, int k, const std::string& what) {
  CnmfSpectra s = read_spectra_frame(path, what);
  if (s.frame.rows != k) input_error(what, path, ": ", s.frame.rows, " spectra rows, expected k = ", k);
  return s;
}

CnmfMergedSpectra read_cnmf_merged_spectra(const std::string& path, int k, const std::string& what) {
  CnmfMergedSpectra m;
  static_cast<CnmfSpectra&>(m) = read_spectra_frame(path, what);
  m.k = k;
  const DataFrame& df = m.frame;
  if (df.rows == 0 || df.rows % k != 0)
    input_error(what, path, ": ", df.rows, " rows is not a positive multiple of k = ", k);
  if (df.index.size() != std::size_t(df.rows))
    input_error(what, path, ": ", df.index.size(), " row labels for ", df.rows, " rows");
  for (std::int64_t r = 0; r < df.rows; ++r) {
    const auto* s = std::get_if<std::string>(&df.index[std::size_t(r)]);
    if (s == nullptr) input_error(what, path, ": row label ", r, " is not of the form iter<r>_topic<t>");
    const MergedSpectraLabel l = parse_merged_spectra_label(*s, what + path);
    if (l.topic > k)
      input_error(what, path, ": row label '", *s, "' names topic ", l.topic, " > k = ", k);
    auto& rows = m.rows[l.iter];
    if (rows.empty()) rows.assign(std::size_t(k), -1);
    if (rows[std::size_t(l.topic - 1)] >= 0)
      input_error(what, path, ": row label '", *s, "' appears twice");
    rows[std::size_t(l.topic - 1)] = r;
    m.row_labels.push_back(*s);
  }
  for (const auto& [iter, rows] : m.rows)
    for (int t = 0; t < k; ++t)
      if (rows[std::size_t(t)] < 0)
        input_error(what, path, ": replicate ", iter, " lacks row iter", iter, "_topic", t + 1,
                    " (k = ", k, ")");
  return m;
}

std::string gene_list_difference(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  if (a.size() != b.size()) return std::to_string(b.size()) + " genes instead of " + std::to_string(a.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return "gene " + std::to_string(i) + " is '" + b[i] + "' instead of '" + a[i] + "'";
  return "";
}

void write_cnmf_spectra(const std::string& path, const double* H_row_major, int k, std::int64_t g,
                        const std::vector<std::string>& gene_names, DeflateMemo* memo) {
  if (k < 1 || g < 0) input_error(path, ": invalid spectra shape ", k, " x ", g);
  if (static_cast<std::int64_t>(gene_names.size()) != g)
    input_error(path, ": ", gene_names.size(), " gene names for ", g, " genes");
  DataFrame df;
  df.rows = k;
  df.cols = g;
  df.data.assign(H_row_major, H_row_major + static_cast<std::size_t>(k) * static_cast<std::size_t>(g));
  df.index.reserve(static_cast<std::size_t>(k));
  for (int t = 1; t <= k; ++t) df.index.emplace_back(std::int64_t{t});
  df.columns.assign(gene_names.begin(), gene_names.end());
  write_df_npz(path, df, memo);
}

}  // namespace knmf::io
