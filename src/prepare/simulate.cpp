// Compiled with -ffp-contract=off (see CMakeLists.txt), like sim_random.cpp: the counts must
// not depend on whether the compiler fuses multiply-adds.
#include "knmf/prepare/simulate.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <Kokkos_Profiling_ScopedRegion.hpp>

#include "knmf/core/compat.hpp"
#include "knmf/core/error.hpp"
#include "knmf/io/dataframe.hpp"
#include "prepare/sim_random.hpp"

namespace knmf::prepare {

using detail::SimRng;

namespace {

// Stream keys: (seed, kGeneStream, stage) for gene-level draws, (seed, kCell*, c) per cell.
constexpr std::uint64_t kGeneStream = 0;
constexpr std::uint64_t kCellParamStream = 1;
constexpr std::uint64_t kCellCountStream = 2;
constexpr std::uint64_t kStageBaseMean = 0;
constexpr std::uint64_t kStageOutlier = 1;
constexpr std::uint64_t kStageBcv = 2;
constexpr std::uint64_t kStageIdentity = 1u << 10;  // + p
constexpr std::uint64_t kStageActivity = 1u << 20;  // + a

void check_range(bool ok, const char* flag, double value, const char* rule) {
  if (!ok) input_error("simulation option ", flag, " = ", value, ": ", rule);
}

double median_of(std::vector<double> v) {
  const size_t n = v.size();
  std::sort(v.begin(), v.end());
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// Ratios of one program: 1, or a LogNormal draw (inverted below 1) with probability prob.
std::vector<double> draw_ratios(SimRng& rng, std::int64_t g, double prob, double loc, double sd) {
  std::vector<double> r(size_t(g), 1.0);
  for (auto& x : r) {
    if (rng.uniform() < prob) {
      x = rng.lognormal(loc, sd);
      if (x < 1.0) x = 1.0 / x;
    }
  }
  return r;
}

}  // namespace

void SimulationOptions::validate() const {
  check_range(n_cells >= 1, "--cells", double(n_cells), "must be at least 1");
  check_range(n_genes >= 1 && n_genes <= std::int64_t(2147483647), "--genes", double(n_genes),
              "must be in [1, 2^31)");
  check_range(n_programs >= 1, "--programs", n_programs, "must be at least 1");
  check_range(n_activity >= 0, "--activity", n_activity, "must be at least 0");
  check_range(activity_fraction >= 0 && activity_fraction <= 1, "--activity-fraction",
              activity_fraction, "must be in [0, 1]");
  check_range(min_activity_usage >= 0 && min_activity_usage <= 1, "--min-usage",
              min_activity_usage, "must be in [0, 1]");
  check_range(max_activity_usage >= min_activity_usage && max_activity_usage <= 1, "--max-usage",
              max_activity_usage, "must be in [--min-usage, 1]");
  check_range(std::isfinite(library_log_mean), "--library-log-mean", library_log_mean,
              "must be finite");
  check_range(library_log_sd >= 0 && std::isfinite(library_log_sd), "--library-log-sd",
              library_log_sd, "must be finite and >= 0");
  check_range(gene_mean_shape > 0 && std::isfinite(gene_mean_shape), "gene_mean_shape",
              gene_mean_shape, "must be finite and > 0");
  check_range(gene_mean_rate > 0 && std::isfinite(gene_mean_rate), "gene_mean_rate",
              gene_mean_rate, "must be finite and > 0");
  check_range(outlier_probability >= 0 && outlier_probability <= 1, "outlier_probability",
              outlier_probability, "must be in [0, 1]");
  check_range(std::isfinite(outlier_log_mean), "outlier_log_mean", outlier_log_mean,
              "must be finite");
  check_range(outlier_log_sd >= 0 && std::isfinite(outlier_log_sd), "outlier_log_sd",
              outlier_log_sd, "must be finite and >= 0");
  check_range(de_probability >= 0 && de_probability <= 1, "--de-probability", de_probability,
              "must be in [0, 1]");
  check_range(activity_gene_probability >= 0 && activity_gene_probability <= 1,
              "--activity-gene-probability", activity_gene_probability, "must be in [0, 1]");
  check_range(std::isfinite(de_log_mean), "--de-log-mean", de_log_mean, "must be finite");
  check_range(de_log_sd >= 0 && std::isfinite(de_log_sd), "--de-log-sd", de_log_sd,
              "must be finite and >= 0");
  check_range(bcv_dispersion >= 0 && std::isfinite(bcv_dispersion), "--bcv", bcv_dispersion,
              "must be finite and >= 0");
  check_range(bcv_dof > 0 && std::isfinite(bcv_dof), "bcv_dof", bcv_dof,
              "must be finite and > 0");
}

Simulator::Simulator(const SimulationOptions& opts) : opts_(opts) {
  opts_.validate();
  const std::int64_t g = opts_.n_genes;
  const auto G = size_t(g);

  std::vector<double> base(G);
  {
    SimRng rng(opts_.seed, kGeneStream, kStageBaseMean);
    for (auto& b : base) b = rng.gamma(opts_.gene_mean_shape) / opts_.gene_mean_rate;
  }
  gene_means_ = base;
  {
    SimRng rng(opts_.seed, kGeneStream, kStageOutlier);
    const double med = median_of(base);
    for (auto& m : gene_means_)
      if (rng.uniform() < opts_.outlier_probability)
        m = med * rng.lognormal(opts_.outlier_log_mean, opts_.outlier_log_sd);
  }
  bcv_gene_factor_.resize(G);
  {
    SimRng rng(opts_.seed, kGeneStream, kStageBcv);
    for (auto& f : bcv_gene_factor_) f = std::sqrt(opts_.bcv_dof / rng.chi_square(opts_.bcv_dof));
  }

  const int total = n_programs_total();
  programs_.assign(size_t(total) * G, 0.0);
  for (int p = 0; p < total; ++p) {
    const bool identity = p < opts_.n_programs;
    SimRng rng(opts_.seed, kGeneStream,
               identity ? kStageIdentity + std::uint64_t(p)
                        : kStageActivity + std::uint64_t(p - opts_.n_programs));
    const auto ratio =
        draw_ratios(rng, g, identity ? opts_.de_probability : opts_.activity_gene_probability,
                    opts_.de_log_mean, opts_.de_log_sd);
    double* row = programs_.data() + size_t(p) * G;
    double sum = 0.0;
    for (size_t j = 0; j < G; ++j) {
      row[j] = gene_means_[j] * ratio[j];
      sum += row[j];
    }
    KNMF_ASSERT(sum > 0 && std::isfinite(sum), "program ", p, " has sum ", sum);
    for (size_t j = 0; j < G; ++j) row[j] /= sum;
  }
}

std::vector<std::string> Simulator::program_names() const {
  std::vector<std::string> names;
  for (int p = 0; p < opts_.n_programs; ++p) names.push_back("identity" + std::to_string(p + 1));
  for (int a = 0; a < opts_.n_activity; ++a) names.push_back("activity" + std::to_string(a + 1));
  return names;
}

CellParameters Simulator::cell(std::int64_t c) const {
  KNMF_ASSERT(c >= 0 && c < opts_.n_cells, "cell ", c, " out of range");
  SimRng rng(opts_.seed, kCellParamStream, std::uint64_t(c));
  CellParameters p;
  p.identity = int(rng.below(opts_.n_programs));
  // Always draw every value, so a cell's later draws do not depend on earlier outcomes.
  const bool active = rng.uniform() < opts_.activity_fraction;
  const int which = opts_.n_activity > 0 ? int(rng.below(opts_.n_activity)) : -1;
  const double u = opts_.min_activity_usage +
                   (opts_.max_activity_usage - opts_.min_activity_usage) * rng.uniform();
  p.library_size = rng.lognormal(opts_.library_log_mean, opts_.library_log_sd);
  if (active && which >= 0) {
    p.activity = which;
    p.activity_usage = u;
  }
  return p;
}

std::vector<double> Simulator::usages(std::int64_t r0, std::int64_t r1) const {
  KNMF_ASSERT(0 <= r0 && r0 <= r1 && r1 <= opts_.n_cells, "bad row range");
  const int total = n_programs_total();
  std::vector<double> U(size_t(r1 - r0) * size_t(total), 0.0);
  for (std::int64_t c = r0; c < r1; ++c) {
    const auto p = cell(c);
    double* row = U.data() + size_t(c - r0) * size_t(total);
    row[p.identity] = 1.0 - p.activity_usage;
    if (p.activity >= 0) row[opts_.n_programs + p.activity] = p.activity_usage;
  }
  return U;
}

void Simulator::counts(std::int64_t r0, std::int64_t r1, io::CsrBlock<float>& out) const {
  KNMF_ASSERT(0 <= r0 && r0 <= r1 && r1 <= opts_.n_cells, "bad row range");
  Kokkos::Profiling::ScopedRegion region("knmf::simulate::counts");
  const std::int64_t rows = r1 - r0;
  const auto G = size_t(opts_.n_genes);
  std::vector<std::vector<std::int32_t>> cols(static_cast<size_t>(rows));
  std::vector<std::vector<float>> vals(static_cast<size_t>(rows));
  using Host = Kokkos::DefaultHostExecutionSpace;
  Kokkos::parallel_for(
      "knmf::simulate::cells", Kokkos::RangePolicy<Host>(0, rows), [&](std::int64_t i) {
        const std::int64_t c = r0 + i;
        const auto p = cell(c);
        const double* ident = programs_.data() + size_t(p.identity) * G;
        const double* act =
            p.activity >= 0 ? programs_.data() + size_t(opts_.n_programs + p.activity) * G : nullptr;
        const double w_ident = p.library_size * (1.0 - p.activity_usage);
        const double w_act = p.library_size * p.activity_usage;
        SimRng rng(opts_.seed, kCellCountStream, std::uint64_t(c));
        auto& cc = cols[size_t(i)];
        auto& vv = vals[size_t(i)];
        for (size_t j = 0; j < G; ++j) {
          const double lambda = act ? w_ident * ident[j] + w_act * act[j] : w_ident * ident[j];
          if (!(lambda > 0.0)) continue;
          const double bcv = (opts_.bcv_dispersion + 1.0 / std::sqrt(lambda)) * bcv_gene_factor_[j];
          const double bcv2 = bcv * bcv;
          const double mu = rng.gamma(1.0 / bcv2) * (lambda * bcv2);
          const std::int64_t k = rng.poisson(mu);
          if (k > 0) {
            cc.push_back(std::int32_t(j));
            vv.push_back(float(k));
          }
        }
      });
  Kokkos::fence();
  out.row_begin = r0;
  out.row_end = r1;
  out.ncols = opts_.n_genes;
  out.row_offsets.assign(size_t(rows) + 1, 0);
  for (std::int64_t i = 0; i < rows; ++i)
    out.row_offsets[size_t(i) + 1] = out.row_offsets[size_t(i)] + std::int64_t(cols[size_t(i)].size());
  const auto nnz = size_t(out.row_offsets.back());
  out.cols.resize(nnz);
  out.values.resize(nnz);
  for (std::int64_t i = 0; i < rows; ++i) {
    std::copy(cols[size_t(i)].begin(), cols[size_t(i)].end(),
              out.cols.begin() + out.row_offsets[size_t(i)]);
    std::copy(vals[size_t(i)].begin(), vals[size_t(i)].end(),
              out.values.begin() + out.row_offsets[size_t(i)]);
  }
}

std::vector<std::string> simulated_cell_names(std::int64_t n) {
  std::vector<std::string> v(size_t(std::max<std::int64_t>(n, 0)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = "cell" + std::to_string(i);
  return v;
}

std::vector<std::string> simulated_gene_names(std::int64_t g) {
  std::vector<std::string> v(size_t(std::max<std::int64_t>(g, 0)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = "gene" + std::to_string(i);
  return v;
}

Simulation simulate(const SimulationOptions& opts) {
  const Simulator sim(opts);
  Simulation s;
  sim.counts(0, sim.n_cells(), s.counts);
  s.programs = sim.programs();
  s.usages = sim.usages(0, sim.n_cells());
  s.identity.resize(size_t(sim.n_cells()));
  for (std::int64_t c = 0; c < sim.n_cells(); ++c) s.identity[size_t(c)] = sim.cell(c).identity;
  s.program_names = sim.program_names();
  s.n_programs_total = sim.n_programs_total();
  return s;
}

SimulationFiles simulation_files(const std::string& h5ad_path) {
  std::string stem = h5ad_path;
  const std::string ext = ".h5ad";
  if (stem.size() > ext.size() && stem.compare(stem.size() - ext.size(), ext.size(), ext) == 0)
    stem.resize(stem.size() - ext.size());
  return {h5ad_path, stem + ".truth_programs.df.npz", stem + ".truth_usages.df.npz"};
}

SimulationFiles write_simulation(const Simulator& sim, const std::string& h5ad_path,
                                 std::int64_t block_rows) {
  KNMF_ASSERT(block_rows >= 1, "block_rows must be positive");
  auto files = simulation_files(h5ad_path);
  const std::int64_t n = sim.n_cells(), g = sim.n_genes();
  const auto cell_names = simulated_cell_names(n);
  const auto gene_names = simulated_gene_names(g);
  const auto program_names = sim.program_names();
  const int total = sim.n_programs_total();

  io::H5adWriteOptions wo;
  wo.format = io::StorageFormat::Csr;
  wo.value_type = io::ValueType::Float32;
  io::H5adWriter writer(files.counts, n, g, wo);
  writer.set_obs_names(cell_names);
  writer.set_var_names(gene_names);
  io::CsrBlock<float> block;
  for (std::int64_t r0 = 0; r0 < n; r0 += block_rows) {
    const std::int64_t r1 = std::min(n, r0 + block_rows);
    sim.counts(r0, r1, block);
    writer.write_csr_rows(block);
    files.nnz += block.nnz();
  }

  io::DataFrame programs;
  programs.rows = total;
  programs.cols = g;
  programs.data = sim.programs();
  programs.index.assign(program_names.begin(), program_names.end());
  programs.columns.assign(gene_names.begin(), gene_names.end());
  io::write_df_npz(files.programs, programs);

  io::DataFrame usages;
  usages.rows = n;
  usages.cols = total;
  usages.data = sim.usages(0, n);
  usages.index.assign(cell_names.begin(), cell_names.end());
  usages.columns.assign(program_names.begin(), program_names.end());
  io::write_df_npz(files.usages, usages);

  writer.close();  // the counts last: a finished .h5ad means the truth files are there too
  return files;
}

}  // namespace knmf::prepare
