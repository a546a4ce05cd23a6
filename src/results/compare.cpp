#include "knmf/results/compare.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "knmf/core/error.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/core/assignment.hpp"
#include "knmf/core/format.hpp"

namespace knmf::results {

namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using JobKey = std::pair<int, int>;  // (k, iter)

/// What a side records about one job besides its spectra.
struct JobMeta {
  std::optional<std::int64_t> iterations;
  std::optional<double> final_error;
  std::optional<std::int64_t> seed;
};

/// `pick` folded over the values, NaN when any value is NaN; `empty` for no values.
template <class Pick>
double nan_fold(const std::vector<double>& v, double empty, Pick pick) {
  double m = empty;
  bool first = true;
  for (double x : v) {
    if (std::isnan(x)) return kNaN;
    m = first ? x : pick(m, x);
    first = false;
  }
  return m;
}
double nan_max(const std::vector<double>& v, double empty) {
  return nan_fold(v, empty, [](double a, double b) { return std::max(a, b); });
}
double nan_min(const std::vector<double>& v, double empty) {
  return nan_fold(v, empty, [](double a, double b) { return std::min(a, b); });
}
/// Median (mean of the two middle values for an even count), NaN when any value is NaN.
double nan_median(std::vector<double> v, double empty) {
  if (v.empty()) return empty;
  for (double x : v)
    if (std::isnan(x)) return kNaN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---------------------------------------------------------------------------------------------
// The two kinds of input

class Side {
public:
  virtual ~Side() = default;
  CompareSide info;
  std::vector<std::string> genes;   ///< this side's gene order
  std::map<JobKey, JobMeta> jobs;   ///< jobs with spectra
  std::int64_t planned = -1;        ///< replicates the run plans (a results file), else -1
  /// Spectra of a job listed in `jobs`: k x genes.size(), row-major, in this side's gene order.
  virtual std::vector<double> spectra(int k, int iter) = 0;

protected:
  void finish_info() {
    info.n_genes = static_cast<std::int64_t>(genes.size());
    info.n_jobs = static_cast<std::int64_t>(jobs.size());
    std::set<int> ks;
    for (const auto& [key, meta] : jobs) ks.insert(key.first);
    info.ks.assign(ks.begin(), ks.end());
  }
};

class ResultsSide : public Side {
public:
  ResultsSide(const std::string& path, ResultsReader reader) : reader_(std::move(reader)) {
    const RunInfo& r = reader_.info();
    genes = r.genes;
    std::int64_t total = 0, failed = 0;
    for (int k : reader_.ks()) {
      const ReplicateTable t = reader_.table(k);
      for (int it = 0; it < reader_.n_iter(); ++it) {
        ++total;
        if (t.completed[size_t(it)] != 1) continue;
        // a failed replicate (not a factorization) has nothing to compare: as if missing
        if (t.status[size_t(it)] == ReplicateState::non_finite) {
          ++failed;
          continue;
        }
        JobMeta m;
        m.iterations = t.iterations[size_t(it)];
        m.final_error = t.final_error[size_t(it)];
        m.seed = t.seeds[size_t(it)];
        jobs[{k, it}] = m;
      }
    }
    info.path = path;
    info.kind = "knmf-results";
    planned = total;
    finish_info();
    std::ostringstream d;
    d << "knmf results file (" << r.backend << ", solver " << to_string(r.solver.solver) << ", dtype "
      << to_string(r.dtype) << "; " << jobs.size() << " of " << total << " replicates committed";
    if (failed > 0) d << " and valid (" << failed << " non_finite, left out)";
    if (!info.ks.empty()) d << ", k = " << join_ints(info.ks);
    d << ")";
    info.description = d.str();
  }

  std::vector<double> spectra(int k, int iter) override { return reader_.spectra(k, iter); }

private:
  ResultsReader reader_;
};

class CnmfSide : public Side {
public:
  CnmfSide(const std::string& given, const fs::path& run_dir, const std::string& name,
           const std::string& label)
      : names_(".", name), tmp_(run_dir / "cnmf_tmp"), label_(label) {
    const fs::path& tmp = tmp_;
    // Every NAME.spectra.k_K.iter_R.df.npz and NAME.spectra.k_K.merged.df.npz in cnmf_tmp.
    std::map<int, std::set<int>> per_job;
    std::set<int> merged;
    std::set<std::string> other_names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(tmp, ec)) {
      const std::string f = e.path().filename().string();
      const auto sn = io::parse_cnmf_spectra_name(f);
      if (!sn) continue;
      if (sn->run != name) {
        other_names.insert(sn->run);
        continue;
      }
      if (sn->iter >= 0)
        per_job[sn->k].insert(sn->iter);
      else
        merged.insert(sn->k);
    }
    if (ec) input_error(label, ": cannot list ", tmp.string(), ": ", ec.message());
    if (per_job.empty() && merged.empty()) {
      std::string hint;
      if (!other_names.empty())
        hint = "; it holds spectra of run name '" + *other_names.begin() + "' (give --" +
               lower(label) + "-name " + *other_names.begin() + ")";
      input_error(label, ": ", tmp.string(), " holds no replicate spectra of run '", name, "' (",
                  name, ".spectra.k_K.iter_R.df.npz or ", name, ".spectra.k_K.merged.df.npz)", hint);
    }
    // Seeds from the job table, when the folder has one. They only serve a warning when A and
    // B pair jobs of different seeds, so an unreadable job table is noted, not an error.
    std::map<JobKey, std::int64_t> seeds;
    std::string seed_note;
    if (fs::exists(tmp_file(names_.nmf_replicate_parameters()))) {
      try {
        for (const Job& j : io::read_cnmf_job_table(tmp_file(names_.nmf_replicate_parameters())))
          seeds[{j.k, j.iter}] = j.seed;
      } catch (const InputError&) {
        seed_note = "; its job table is unreadable: seeds not compared";
      }
    }
    auto meta = [&](int k, int iter) {
      JobMeta m;
      auto s = seeds.find({k, iter});
      if (s != seeds.end()) m.seed = s->second;
      return m;
    };
    std::vector<int> from_files, from_merged;
    for (const auto& [k, iters] : per_job) {
      from_files.push_back(k);
      for (int it : iters) jobs[{k, it}] = meta(k, it);
      if (genes.empty()) genes = io::read_cnmf_replicate_spectra(file_iter(k, *iters.begin()), k, prefix()).genes;
    }
    for (int k : merged) {
      if (per_job.count(k)) continue;  // the replicate files win
      from_merged.push_back(k);
      merged_ks_.insert(k);
      MergedK m = read_merged(k);
      for (const auto& [iter, rows] : m.rows) jobs[{k, iter}] = meta(k, iter);
      if (!cache_) cache_ = std::make_unique<MergedK>(std::move(m));  // the first k compared
    }
    info.path = given;
    info.kind = "cnmf";
    info.name = name;
    finish_info();
    std::ostringstream d;
    d << "cNMF run folder '" << name << "' (";
    if (!from_files.empty()) d << "replicate spectra files of k = " << join_ints(from_files);
    if (!from_files.empty() && !from_merged.empty()) d << "; ";
    if (!from_merged.empty()) d << "merged spectra of k = " << join_ints(from_merged);
    d << "; " << jobs.size() << " replicates" << seed_note << ")";
    info.description = d.str();
  }

  std::vector<double> spectra(int k, int iter) override {
    const size_t g = genes.size();
    if (!merged_ks_.count(k)) {
      const io::CnmfSpectra f = io::read_cnmf_replicate_spectra(file_iter(k, iter), k, prefix());
      check_genes(f);
      return f.frame.data;
    }
    if (!cache_ || cache_->k != k) cache_ = std::make_unique<MergedK>(read_merged(k));
    const auto it = cache_->rows.find(iter);
    KNMF_ASSERT(it != cache_->rows.end(), "merged spectra lack a listed job");
    std::vector<double> out(size_t(k) * g);
    for (int t = 0; t < k; ++t) {
      const std::int64_t row = it->second[size_t(t)];
      std::copy_n(cache_->frame.data.begin() + std::ptrdiff_t(size_t(row) * g), g,
                  out.begin() + std::ptrdiff_t(size_t(t) * g));
    }
    return out;
  }

private:
  using MergedK = io::CnmfMergedSpectra;

  static std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  std::string prefix() const { return label_ + ": "; }

  /// Every spectra file of a run has the genes of its first one.
  void check_genes(const io::CnmfSpectra& f) const {
    if (f.genes != genes)
      input_error(label_, ": ", f.path, ": its genes differ from those of the run's other spectra files");
  }

  MergedK read_merged(int k) {
    MergedK m = io::read_cnmf_merged_spectra(tmp_file(names_.merged_spectra(k)), k, prefix());
    if (genes.empty()) genes = m.genes;
    check_genes(m);
    return m;
  }

  /// A cNMF file of this run: cnmf.py's file name (CnmfPaths) in this run folder's cnmf_tmp
  /// (the folder may be named other than the run, with --a-name/--b-name).
  std::string tmp_file(const std::string& cnmf_path) const {
    return (tmp_ / fs::path(cnmf_path).filename()).string();
  }
  std::string file_iter(int k, int iter) const { return tmp_file(names_.iter_spectra(k, iter)); }

  io::CnmfPaths names_;  ///< cnmf.py's file names (its folders are not used)
  fs::path tmp_;         ///< RUN_FOLDER/cnmf_tmp
  std::string label_;
  std::set<int> merged_ks_;          ///< ks read from merged files (no replicate files)
  std::unique_ptr<MergedK> cache_;   ///< the merged frame of the last k read
};

/// Open one side: a results file, or a cNMF run folder OUTPUT_DIR/NAME.
std::unique_ptr<Side> open_side(const std::string& given, const std::string& name,
                                const std::string& label) {
  if (given.empty()) input_error(label, ": no path given");
  std::error_code ec;
  fs::path p(given);
  if (!fs::exists(p, ec)) input_error(label, ": '", given, "' does not exist");
  if (fs::is_directory(p, ec)) {
    p = p.lexically_normal();
    if (p.filename().empty()) p = p.parent_path();  // trailing slash
    if (p.filename() == "cnmf_tmp" && !fs::exists(p / "cnmf_tmp", ec)) p = p.parent_path();
    if (p.filename() == "." || p.filename() == "..") p = fs::absolute(p, ec).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    if (!fs::is_directory(p / "cnmf_tmp", ec))
      input_error(label, ": '", given, "' is a folder but not a cNMF run folder OUTPUT_DIR/NAME "
                  "(it has no cnmf_tmp/ folder)");
    const std::string run_name = name.empty() ? p.filename().string() : name;
    return std::make_unique<CnmfSide>(given, p, run_name, label);
  }
  if (!name.empty())
    input_error("--", label == "A" ? "a" : "b", "-name '", name, "' is for a cNMF run folder, but ",
                label, " '", given, "' is a file");
  try {
    return std::make_unique<ResultsSide>(given, ResultsReader::open(p));
  } catch (const InputError& e) {
    input_error(label, ": ", e.what(), "; a cNMF run is given as its folder OUTPUT_DIR/NAME");
  }
}

/// Column of B for each gene of A (empty when B's genes are A's in the same order).
std::vector<std::int64_t> align_genes(const Side& a, const Side& b) {
  if (a.genes == b.genes) return {};
  std::unordered_map<std::string, std::int64_t> pos_b;
  for (size_t j = 0; j < b.genes.size(); ++j)
    if (!pos_b.emplace(b.genes[j], std::int64_t(j)).second)
      input_error("B (", b.info.path, ") lists gene '", b.genes[j],
                  "' twice and its genes are not A's in the same order: cannot align them");
  std::vector<std::int64_t> perm;
  std::set<std::string> seen;
  std::int64_t missing = 0;
  std::string first_missing;
  for (const auto& gname : a.genes) {
    if (!seen.insert(gname).second)
      input_error("A (", a.info.path, ") lists gene '", gname,
                  "' twice and its genes are not B's in the same order: cannot align them");
    auto it = pos_b.find(gname);
    if (it == pos_b.end()) {
      if (missing++ == 0) first_missing = gname;
      continue;
    }
    perm.push_back(it->second);
  }
  if (missing > 0 || a.genes.size() != b.genes.size()) {
    std::string first_extra;
    std::int64_t extra = 0;
    for (const auto& gname : b.genes)
      if (!seen.count(gname) && extra++ == 0) first_extra = gname;
    std::ostringstream m;
    m << "A and B have different genes: A (" << a.info.path << ") has " << a.genes.size()
      << ", B (" << b.info.path << ") has " << b.genes.size();
    if (missing > 0) m << "; " << missing << " of A's are not in B (first: '" << first_missing << "')";
    if (extra > 0) m << "; " << extra << " of B's are not in A (first: '" << first_extra << "')";
    throw InputError(m.str());
  }
  return perm;
}

CompareSummary summarize(int k, const std::vector<const JobComparison*>& jobs) {
  CompareSummary s;
  s.k = k;
  s.jobs = std::int64_t(jobs.size());
  std::vector<double> maxes, mins, all_d, err;
  for (const JobComparison* j : jobs) {
    if (!j->passed) ++s.failed;
    maxes.push_back(j->max_rel_diff);
    mins.push_back(j->min_cos);
    all_d.insert(all_d.end(), j->rel_diffs.begin(), j->rel_diffs.end());
    if (auto d = j->iteration_diff()) {
      ++s.iterations_compared;
      if (*d != 0) ++s.iterations_different;
      s.max_abs_iteration_diff = std::max<std::int64_t>(s.max_abs_iteration_diff, std::abs(*d));
    }
    if (auto e = j->final_error_rel_diff()) {
      ++s.final_errors_compared;
      err.push_back(*e);
    }
  }
  s.max_rel_diff = nan_max(maxes, 0.0);
  s.median_rel_diff = nan_median(all_d, 0.0);
  s.min_cos = nan_min(mins, 1.0);
  s.max_final_error_rel_diff = nan_max(err, 0.0);
  s.median_final_error_rel_diff = nan_median(err, 0.0);
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

void CompareOptions::validate() const {
  if (!(rtol >= 0.0)) input_error("--rtol ", rtol, " is invalid: it must be >= 0");
  if (!(min_cos >= -1.0 && min_cos <= 1.0))
    input_error("--min-cos ", min_cos, " is invalid: it must be in [-1, 1]");
}

std::optional<std::int64_t> JobComparison::iteration_diff() const {
  if (!iterations_a || !iterations_b) return std::nullopt;
  return *iterations_a - *iterations_b;
}

std::optional<double> JobComparison::final_error_rel_diff() const {
  if (!final_error_a || !final_error_b) return std::nullopt;
  const double ea = *final_error_a, eb = *final_error_b;
  const double scale = std::max(std::abs(ea), std::abs(eb));
  if (scale == 0.0) return 0.0;
  return std::abs(ea - eb) / scale;
}

JobComparison compare_spectra(int k, std::int64_t g, const std::vector<double>& a,
                              const std::vector<double>& b, const CompareOptions& options) {
  KNMF_ASSERT(k >= 1 && g >= 0 && a.size() == size_t(k) * size_t(g) && b.size() == a.size(),
              "compare_spectra: sizes");
  JobComparison r;
  r.k = k;
  const size_t G = size_t(g);
  auto row = [&](const std::vector<double>& m, int i) { return m.data() + size_t(i) * G; };
  std::vector<double> norm_a(static_cast<size_t>(k)), norm_b(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) {
    double sa = 0.0, sb = 0.0;
    for (size_t j = 0; j < G; ++j) {
      sa += row(a, i)[j] * row(a, i)[j];
      sb += row(b, i)[j] * row(b, i)[j];
    }
    norm_a[size_t(i)] = std::sqrt(sa);
    norm_b[size_t(i)] = std::sqrt(sb);
  }
  // cos(a_i, b_j); both rows zero: 1 (the same), one zero: 0; clamped to [-1, 1] (rounding).
  std::vector<double> cos(static_cast<size_t>(k) * static_cast<size_t>(k));
  for (int i = 0; i < k; ++i)
    for (int j = 0; j < k; ++j) {
      const double na = norm_a[size_t(i)], nb = norm_b[size_t(j)];
      double c;
      if (na == 0.0 && nb == 0.0) {
        c = 1.0;
      } else if (na == 0.0 || nb == 0.0) {
        c = 0.0;
      } else {
        double dot = 0.0;
        for (size_t t = 0; t < G; ++t) dot += row(a, i)[t] * row(b, j)[t];
        c = dot / na / nb;
        if (!std::isnan(c)) c = std::clamp(c, -1.0, 1.0);
      }
      cos[size_t(i) * size_t(k) + size_t(j)] = c;
    }
  r.match = hungarian_max(cos, k, k);
  for (int i = 0; i < k; ++i) {
    const int m = r.match[size_t(i)];
    KNMF_ASSERT(m >= 0 && m < k, "square assignment leaves no row unmatched");
    r.cosines.push_back(cos[size_t(i) * size_t(k) + size_t(m)]);
    double diff = 0.0, scale = 0.0;
    bool nan = false;
    for (size_t t = 0; t < G; ++t) {
      const double x = row(a, i)[t], y = row(b, m)[t];
      if (std::isnan(x) || std::isnan(y)) nan = true;
      diff = std::max(diff, std::abs(x - y));
      scale = std::max({scale, std::abs(x), std::abs(y)});
    }
    double d = scale == 0.0 ? 0.0 : diff / scale;
    if (nan || std::isinf(scale)) d = kNaN;
    r.rel_diffs.push_back(d);
  }
  r.max_rel_diff = nan_max(r.rel_diffs, 0.0);
  r.median_rel_diff = nan_median(r.rel_diffs, 0.0);
  r.min_cos = nan_min(r.cosines, 1.0);
  auto num = [](double v) {
    std::ostringstream s;
    s.precision(3);
    s << v;
    return s.str();
  };
  if (std::isnan(r.max_rel_diff))
    r.reasons.push_back("spectra hold NaN or infinite values");
  else if (r.max_rel_diff > options.rtol)
    r.reasons.push_back("max rel diff " + num(r.max_rel_diff) + " > rtol " + num(options.rtol));
  if (std::isnan(r.min_cos)) {
    if (r.reasons.empty()) r.reasons.push_back("cosine is NaN");
  } else if (r.min_cos < options.min_cos) {
    std::ostringstream s;
    s.precision(10);
    s << "min cosine " << r.min_cos << " < " << options.min_cos;
    r.reasons.push_back(s.str());
  }
  r.passed = r.reasons.empty();
  return r;
}

CompareReport compare_runs(const CompareOptions& options) {
  options.validate();
  CompareReport rep;
  rep.options = options;
  auto a = open_side(options.a, options.a_name, "A");
  auto b = open_side(options.b, options.b_name, "B");
  rep.a = a->info;
  rep.b = b->info;
  const std::vector<std::int64_t> perm = align_genes(*a, *b);
  rep.genes_reordered = !perm.empty();

  std::vector<JobKey> common;
  for (const auto& [key, meta] : a->jobs)
    (b->jobs.count(key) ? common : rep.only_in_a).push_back(key);
  for (const auto& [key, meta] : b->jobs)
    if (!a->jobs.count(key)) rep.only_in_b.push_back(key);
  if (common.empty()) {
    // a side may have none at all: a results file before its first replicate
    auto has = [](const Side& s) {
      if (!s.jobs.empty())
        return std::to_string(s.jobs.size()) + " jobs of k = " + join_ints(s.info.ks);
      return "no completed replicate" +
             (s.planned >= 0 ? " (0 of " + std::to_string(s.planned) + " committed)" : std::string());
    };
    const bool other = !a->jobs.empty() && !b->jobs.empty() && a->info.ks == b->info.ks;
    input_error("A and B have no (k, iter) job in common: A (", a->info.path, ") has ", has(*a),
                ", B (", b->info.path, ") has ", has(*b), other ? " (other replicates)" : "");
  }

  const std::int64_t g = std::int64_t(a->genes.size());
  for (const auto& [k, iter] : common) {
    const std::vector<double> sa = a->spectra(k, iter);
    std::vector<double> sb = b->spectra(k, iter);
    KNMF_ASSERT(sa.size() == size_t(k) * size_t(g) && sb.size() == sa.size(),
                "spectra shape of a listed job");
    if (!perm.empty()) {
      std::vector<double> re(sb.size());
      for (int t = 0; t < k; ++t)
        for (std::int64_t j = 0; j < g; ++j)
          re[size_t(t) * size_t(g) + size_t(j)] = sb[size_t(t) * size_t(g) + size_t(perm[size_t(j)])];
      sb.swap(re);
    }
    JobComparison c = compare_spectra(k, g, sa, sb, options);
    c.iter = iter;
    const JobMeta& ma = a->jobs.at({k, iter});
    const JobMeta& mb = b->jobs.at({k, iter});
    c.iterations_a = ma.iterations;
    c.iterations_b = mb.iterations;
    c.final_error_a = ma.final_error;
    c.final_error_b = mb.final_error;
    c.seed_a = ma.seed;
    c.seed_b = mb.seed;
    if (c.seed_a && c.seed_b && *c.seed_a != *c.seed_b) ++rep.seed_mismatches;
    rep.jobs.push_back(std::move(c));
  }

  std::map<int, std::vector<const JobComparison*>> by_k;
  std::vector<const JobComparison*> all;
  for (const auto& j : rep.jobs) {
    by_k[j.k].push_back(&j);
    all.push_back(&j);
  }
  for (const auto& [k, jobs] : by_k) rep.per_k.push_back(summarize(k, jobs));
  rep.overall = summarize(0, all);
  return rep;
}

// ---------------------------------------------------------------------------------------------
// Output

namespace {

std::string fmt(const char* f, double v) {
  if (std::isnan(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

constexpr const char* kRowFormat = "  %4s %6s %6s  %12s %15s  %17s %10s  %-17s %s\n";

std::string summary_header() {
  char buf[512];
  std::snprintf(buf, sizeof buf, kRowFormat, "k", "jobs", "failed", "max_rel_diff",
                "median_rel_diff", "min_cosine", "1-min_cos", "iters_differ(max)",
                "final_err_rel_diff max / median");
  return buf;
}

std::string summary_line(const std::string& k, const CompareSummary& s) {
  char buf[512];
  const std::string iters =
      s.iterations_compared == 0
          ? "n/a"
          : std::to_string(s.iterations_different) + " (max " +
                std::to_string(s.max_abs_iteration_diff) + ")";
  const std::string err = s.final_errors_compared == 0
                              ? "n/a"
                              : fmt("%.2e", s.max_final_error_rel_diff) + " / " +
                                    fmt("%.2e", s.median_final_error_rel_diff);
  std::snprintf(buf, sizeof buf, kRowFormat, k.c_str(), std::to_string(s.jobs).c_str(),
                std::to_string(s.failed).c_str(), fmt("%.3e", s.max_rel_diff).c_str(),
                fmt("%.3e", s.median_rel_diff).c_str(), fmt("%.15f", s.min_cos).c_str(),
                fmt("%.3e", 1.0 - s.min_cos).c_str(), iters.c_str(), err.c_str());
  return buf;
}

std::string jobs_text(const std::vector<std::pair<int, int>>& v) {
  if (v.empty()) return "0";
  std::map<int, int> per_k;
  for (const auto& [k, it] : v) ++per_k[k];
  std::string s = std::to_string(v.size()) + " (";
  bool first = true;
  for (const auto& [k, n] : per_k) {
    s += (first ? "" : ", ") + std::string("k = ") + std::to_string(k) + ": " + std::to_string(n);
    first = false;
  }
  return s + ")";
}

nlohmann::json summary_json(const CompareSummary& s) {
  nlohmann::json j;
  if (s.k > 0) j["k"] = s.k;
  j["jobs"] = s.jobs;
  j["failed"] = s.failed;
  j["max_rel_diff"] = s.max_rel_diff;
  j["median_rel_diff"] = s.median_rel_diff;
  j["min_cos"] = s.min_cos;
  if (s.iterations_compared > 0)
    j["iterations"] = {{"compared", s.iterations_compared},
                       {"different", s.iterations_different},
                       {"max_abs_diff", s.max_abs_iteration_diff}};
  else
    j["iterations"] = nullptr;
  if (s.final_errors_compared > 0)
    j["final_error_rel_diff"] = {{"compared", s.final_errors_compared},
                                 {"max", s.max_final_error_rel_diff},
                                 {"median", s.median_final_error_rel_diff}};
  else
    j["final_error_rel_diff"] = nullptr;
  return j;
}

template <class T>
nlohmann::json opt_json(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json side_json(const CompareSide& s) {
  nlohmann::json j = {{"path", s.path},       {"kind", s.kind},   {"description", s.description},
                      {"n_genes", s.n_genes}, {"jobs", s.n_jobs}, {"ks", s.ks}};
  if (!s.name.empty()) j["name"] = s.name;
  return j;
}

}  // namespace

std::string format_compare_report(const CompareReport& r) {
  std::ostringstream o;
  o << "knmf compare\n";
  o << "  A: " << r.a.path << "  " << r.a.description << "\n";
  o << "  B: " << r.b.path << "  " << r.b.description << "\n";
  o << "  genes: " << r.a.n_genes << (r.genes_reordered ? " (B's reordered to A's order)" : " (same order)")
    << "\n";
  o << "  jobs: " << r.overall.jobs << " compared; only in A: " << jobs_text(r.only_in_a)
    << "; only in B: " << jobs_text(r.only_in_b) << "\n";
  if (r.seed_mismatches > 0)
    o << "  warning: " << r.seed_mismatches
      << " compared jobs have different seeds in A and B (not the same job table?)\n";
  o << "  thresholds: max rel diff <= " << fmt("%g", r.options.rtol)
    << ", min cosine >= " << fmt("%.10g", r.options.min_cos) << "\n";
  o << "  rel diff of a matched program pair: max|a-b| / max(max|a|, max|b|); final err: |eA-eB| / "
       "max(eA, eB)\n\n";
  o << summary_header();
  for (const auto& s : r.per_k) o << summary_line(std::to_string(s.k), s);
  o << summary_line("all", r.overall);
  o << "\n";
  const std::size_t unpaired = r.only_in_a.size() + r.only_in_b.size();
  if (r.passed()) {
    o << "PASS: all " << r.overall.jobs << " compared jobs are within the thresholds";
    if (unpaired > 0) o << " (" << unpaired << " jobs without a partner not compared: --allow-unpaired)";
    o << "\n";
    return o.str();
  }
  if (r.unpaired_fail()) {
    o << "FAIL: " << unpaired << " jobs have no partner on the other side (A: " << r.a.path
      << ", B: " << r.b.path << "); --allow-unpaired compares only the paired ones:\n";
    for (const auto* side : {&r.only_in_a, &r.only_in_b}) {
      if (side->empty()) continue;
      o << "  only in " << (side == &r.only_in_a ? "A" : "B") << ":";
      std::size_t shown = 0;
      for (const auto& [k, it] : *side) {
        if (shown++ == 20) {
          o << " ... (" << side->size() << " in all)";
          break;
        }
        o << (shown > 1 ? "," : "") << " (k = " << k << ", iter = " << it << ")";
      }
      o << "\n";
    }
  }
  if (r.overall.failed > 0) {
    o << "FAIL: " << r.overall.failed << " of " << r.overall.jobs
      << " compared jobs are outside the thresholds:\n";
    for (const auto& j : r.jobs) {
      if (j.passed) continue;
      o << "  k = " << j.k << ", iter = " << j.iter << ": ";
      for (size_t i = 0; i < j.reasons.size(); ++i) o << (i ? "; " : "") << j.reasons[i];
      o << "\n";
    }
  }
  return o.str();
}

std::string compare_report_json(const CompareReport& r) {
  nlohmann::json j;
  j["a"] = side_json(r.a);
  j["b"] = side_json(r.b);
  j["thresholds"] = {{"rtol", r.options.rtol}, {"min_cos", r.options.min_cos}};
  j["allow_unpaired"] = r.options.allow_unpaired;
  j["genes"] = {{"count", r.a.n_genes}, {"reordered", r.genes_reordered}};
  auto pairs = [](const std::vector<std::pair<int, int>>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& [k, it] : v) a.push_back({{"k", k}, {"iter", it}});
    return a;
  };
  j["only_in_a"] = pairs(r.only_in_a);
  j["only_in_b"] = pairs(r.only_in_b);
  j["seed_mismatches"] = r.seed_mismatches;
  j["passed"] = r.passed();
  j["overall"] = summary_json(r.overall);
  j["per_k"] = nlohmann::json::array();
  for (const auto& s : r.per_k) j["per_k"].push_back(summary_json(s));
  j["jobs"] = nlohmann::json::array();
  j["failures"] = nlohmann::json::array();
  for (const auto& c : r.jobs) {
    nlohmann::json e = {{"k", c.k},
                        {"iter", c.iter},
                        {"passed", c.passed},
                        {"max_rel_diff", c.max_rel_diff},
                        {"median_rel_diff", c.median_rel_diff},
                        {"min_cos", c.min_cos},
                        {"match", c.match},
                        {"rel_diffs", c.rel_diffs},
                        {"cosines", c.cosines},
                        {"iterations_a", opt_json(c.iterations_a)},
                        {"iterations_b", opt_json(c.iterations_b)},
                        {"iteration_diff", opt_json(c.iteration_diff())},
                        {"final_error_a", opt_json(c.final_error_a)},
                        {"final_error_b", opt_json(c.final_error_b)},
                        {"final_error_rel_diff", opt_json(c.final_error_rel_diff())},
                        {"seed_a", opt_json(c.seed_a)},
                        {"seed_b", opt_json(c.seed_b)},
                        {"reasons", c.reasons}};
    if (!c.passed) j["failures"].push_back(e);
    j["jobs"].push_back(std::move(e));
  }
  return j.dump(1) + "\n";
}

}  // namespace knmf::results
