#include "knmf/prepare/prepare.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <Kokkos_Profiling_ScopedRegion.hpp>

#include "knmf/io/atomic_file.hpp"
#include "knmf/core/compat.hpp"
#include "knmf/core/error.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/prepare/simulate.hpp"

namespace knmf::prepare {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<std::string> default_names(std::int64_t n) {
  std::vector<std::string> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::to_string(i);
  return v;
}

// numpy.percentile(values, 100 q), method 'linear', NaN dropped first (pandas' quantile).
double numpy_quantile(std::vector<double> v, double q) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const double n = double(v.size());
  // numpy's _compute_virtual_index(n, q, alpha=1, beta=1) = n q + (1 + q (1 - 1 - 1)) - 1
  const double virtual_index = n * q + (1.0 + q * (1.0 - 1.0 - 1.0)) - 1.0;
  const double prev = std::floor(virtual_index);
  const double gamma = virtual_index - prev;
  auto at = [&](double i) {
    const double c = std::min(std::max(i, 0.0), n - 1.0);
    return v[size_t(c)];
  };
  const double a = at(prev), b = at(prev + 1.0);
  // numpy's _lerp: a + (b - a) t, computed from b for t >= 0.5
  const double d = b - a;
  return gamma >= 0.5 ? b - d * (1.0 - gamma) : a + d * gamma;
}

// numpy.median with NaN dropped (pandas' median).
double numpy_median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// Positions sorted by value descending, NaN last; ties (and NaNs) by position.
std::vector<size_t> order_descending(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), size_t(0));
  std::stable_sort(idx.begin(), idx.end(), [&](size_t i, size_t j) {
    const bool ni = std::isnan(v[i]), nj = std::isnan(v[j]);
    if (ni || nj) return !ni && nj;
    return v[i] > v[j];
  });
  return idx;
}

void check_block(const CountSource& src, const io::CsrBlock<float>& b, std::int64_t r0,
                 std::int64_t r1) {
  if (b.row_begin != r0 || b.row_end != r1 || std::int64_t(b.row_offsets.size()) != r1 - r0 + 1 ||
      b.row_offsets.front() != 0 || b.row_offsets.back() != b.nnz() ||
      b.cols.size() != b.values.size())
    input_error(src.name, ": rows [", r0, ", ", r1, ") were not delivered as a consistent CSR block");
  for (std::int64_t i = 0; i < r1 - r0; ++i) {
    for (std::int64_t e = b.row_offsets[size_t(i)]; e < b.row_offsets[size_t(i) + 1]; ++e) {
      const auto col = b.cols[size_t(e)];
      const float x = b.values[size_t(e)];
      if (col < 0 || col >= src.n_vars)
        input_error(src.name, ": column index ", col, " at row ", r0 + i, " is out of range [0, ",
                    src.n_vars, ")");
      if (!std::isfinite(x) || x < 0)
        input_error(src.name, ": value ", x, " at row ", r0 + i, ", column ", col,
                    " is not a finite non-negative count");
    }
  }
}

template <class F>
void for_each_block(const CountSource& src, io::CsrBlock<float>& block, F&& f) {
  const std::int64_t step = std::max<std::int64_t>(1, src.block_rows);
  for (std::int64_t r0 = 0; r0 < src.n_obs; r0 += step) {
    const std::int64_t r1 = std::min(src.n_obs, r0 + step);
    src.read_rows(r0, r1, block);
    check_block(src, block, r0, r1);
    f(block);
  }
}

// Cell total as scipy sums a float32 CSR row: sequentially, in float32.
float row_total(const io::CsrBlock<float>& b, std::int64_t i) {
  float s = 0.0f;
  for (std::int64_t e = b.row_offsets[size_t(i)]; e < b.row_offsets[size_t(i) + 1]; ++e)
    s += b.values[size_t(e)];
  return s;
}

}  // namespace

CountSource count_source(const io::CsrBlock<float>& X, std::vector<std::string> obs_names,
                         std::vector<std::string> var_names, std::string name) {
  KNMF_ASSERT(X.row_begin == 0, "an in-memory source must start at row 0");
  CountSource s;
  s.n_obs = X.rows();
  s.n_vars = X.ncols;
  s.obs_names = std::move(obs_names);
  s.var_names = std::move(var_names);
  s.name = std::move(name);
  s.block_rows = std::max<std::int64_t>(1, X.rows());
  const io::CsrBlock<float>* src = &X;
  s.read_rows = [src](std::int64_t r0, std::int64_t r1, io::CsrBlock<float>& out) {
    const std::int64_t e0 = src->row_offsets[size_t(r0)], e1 = src->row_offsets[size_t(r1)];
    out.row_begin = r0;
    out.row_end = r1;
    out.ncols = src->ncols;
    out.row_offsets.resize(size_t(r1 - r0 + 1));
    for (std::int64_t i = r0; i <= r1; ++i) out.row_offsets[size_t(i - r0)] = src->row_offsets[size_t(i)] - e0;
    out.cols.assign(src->cols.begin() + e0, src->cols.begin() + e1);
    out.values.assign(src->values.begin() + e0, src->values.begin() + e1);
  };
  return s;
}

CountSource count_source(const io::H5adReader& reader, std::int64_t block_rows) {
  CountSource s;
  s.n_obs = reader.info().n_obs;
  s.n_vars = reader.info().n_vars;
  s.obs_names = reader.obs_names();
  s.var_names = reader.var_names();
  s.name = reader.path().string();
  s.block_rows = block_rows;
  const io::H5adReader* r = &reader;
  s.read_rows = [r](std::int64_t r0, std::int64_t r1, io::CsrBlock<float>& out) {
    r->read_csr_rows<float>(r0, r1, out);
  };
  return s;
}

CountSource count_source(const Simulator& sim, std::int64_t block_rows) {
  CountSource s;
  s.n_obs = sim.n_cells();
  s.n_vars = sim.n_genes();
  s.obs_names = simulated_cell_names(s.n_obs);
  s.var_names = simulated_gene_names(s.n_vars);
  s.name = "simulation";
  s.block_rows = block_rows;
  const Simulator* p = &sim;
  s.read_rows = [p](std::int64_t r0, std::int64_t r1, io::CsrBlock<float>& out) {
    p->counts(r0, r1, out);
  };
  return s;
}

GeneStatistics highvar_genes(const std::vector<double>& mean, const std::vector<double>& var,
                             int numgenes) {
  if (numgenes < 1) input_error("--numgenes = ", numgenes, ": must be at least 1");
  KNMF_ASSERT(mean.size() == var.size(), "mean and var differ in length");
  const size_t g = mean.size();
  GeneStatistics s;
  s.mean = mean;
  s.var = var;
  s.fano.resize(g);
  for (size_t j = 0; j < g; ++j) s.fano[j] = var[j] / mean[j];

  // A: the smallest coefficient of variation among the 20 genes of largest mean.
  const auto by_mean = order_descending(mean);
  double A = kNaN;
  for (size_t i = 0; i < std::min<size_t>(20, g); ++i) {
    const size_t j = by_mean[i];
    const double cv = std::sqrt(var[j]) / mean[j];
    if (!std::isnan(cv) && (std::isnan(A) || cv < A)) A = cv;
  }
  // B: sqrt of the median Fano factor inside the 10%-90% box of mean and Fano.
  const double m_lo = numpy_quantile(mean, 0.10), m_hi = numpy_quantile(mean, 0.90);
  const double f_lo = numpy_quantile(s.fano, 0.10), f_hi = numpy_quantile(s.fano, 0.90);
  std::vector<double> boxed;
  for (size_t j = 0; j < g; ++j)
    if (s.fano[j] > f_lo && s.fano[j] < f_hi && mean[j] > m_lo && mean[j] < m_hi)
      boxed.push_back(s.fano[j]);
  const double B = std::sqrt(numpy_median(boxed));
  s.A = A;
  s.B = B;

  s.expected_fano.resize(g);
  s.fano_ratio.resize(g);
  const double A2 = A * A, B2 = B * B;
  for (size_t j = 0; j < g; ++j) {
    s.expected_fano[j] = A2 * mean[j] + B2;
    s.fano_ratio[j] = s.fano[j] / s.expected_fano[j];
  }
  const auto by_ratio = order_descending(s.fano_ratio);
  s.high_var.assign(g, 0);
  for (size_t i = 0; i < std::min<size_t>(size_t(numgenes), g); ++i) s.high_var[by_ratio[i]] = 1;
  return s;
}

namespace {

// The count matrix and the options, checked before anything is read.
void check_prepare_input(const CountSource& src, const PrepareOptions& opts) {
  if (src.n_obs <= 0 || src.n_vars <= 0)
    input_error(src.name, ": the count matrix is empty (", src.n_obs, " cells x ", src.n_vars,
                " genes)");
  if (!src.obs_names.empty() && std::int64_t(src.obs_names.size()) != src.n_obs)
    input_error(src.name, ": ", src.obs_names.size(), " cell names for ", src.n_obs, " cells");
  if (!src.var_names.empty() && std::int64_t(src.var_names.size()) != src.n_vars)
    input_error(src.name, ": ", src.var_names.size(), " gene names for ", src.n_vars, " genes");
  if (opts.genes.empty() && opts.num_highvar_genes < 1)
    input_error("--numgenes = ", opts.num_highvar_genes, ": must be at least 1");
  if (!(opts.target_sum > 0) || !std::isfinite(opts.target_sum))
    input_error("target sum = ", opts.target_sum, ": must be finite and positive");
}

// Pass 1: cell totals (float32, as scipy) and gene totals.
void count_totals(const CountSource& src, io::CsrBlock<float>& block, std::vector<float>& totals,
                  std::vector<double>& gene_total) {
  Kokkos::Profiling::ScopedRegion r("knmf::prepare::totals");
  for_each_block(src, block, [&](const io::CsrBlock<float>& b) {
    for (std::int64_t i = 0; i < b.rows(); ++i) {
      totals[size_t(b.row_begin + i)] = row_total(b, i);
      for (std::int64_t e = b.row_offsets[size_t(i)]; e < b.row_offsets[size_t(i) + 1]; ++e)
        gene_total[size_t(b.cols[size_t(e)])] += b.values[size_t(e)];
    }
  });
}

// A given TPM matrix (--tpm) must have the counts' shape and genes.
void check_tpm_input(const CountSource& t, const CountSource& src) {
  const auto g = size_t(src.n_vars);
  if (t.n_obs != src.n_obs || t.n_vars != src.n_vars)
    input_error(t.name, ": the TPM matrix is ", t.n_obs, " cells x ", t.n_vars, " genes, the counts ",
                src.n_obs, " x ", src.n_vars);
  if (!t.var_names.empty() && !src.var_names.empty())
    for (size_t j = 0; j < g; ++j)
      if (t.var_names[j] != src.var_names[j])
        input_error(t.name, ": gene ", j, " of the TPM matrix is '", t.var_names[j], "', of the counts '",
                    src.var_names[j], "' (the genes must be the same, in the same order)");
}

// Pass 2: TPM (the counts' scaled to `target` per cell, or the given TPM's), its gene means and
// E[x^2] over the kept cells (total > 0); with keep_tpm, the TPM rows of those cells in `tpm`.
void tpm_moments(const CountSource& src, const PrepareOptions& opts, io::CsrBlock<float>& block,
                 const std::vector<float>& totals, double inv_n, std::vector<double>& tpm_mean,
                 std::vector<double>& tpm_sq, io::CsrBlock<float>& tpm) {
  const float target = float(opts.target_sum);
  Kokkos::Profiling::ScopedRegion r("knmf::prepare::tpm");
  for_each_block(opts.tpm ? *opts.tpm : src, block, [&](const io::CsrBlock<float>& b) {
    for (std::int64_t i = 0; i < b.rows(); ++i) {
      const float total = totals[size_t(b.row_begin + i)];
      if (!(total > 0)) continue;
      const float scale = opts.tpm ? 1.0f : target / total;
      for (std::int64_t e = b.row_offsets[size_t(i)]; e < b.row_offsets[size_t(i) + 1]; ++e) {
        const float t = opts.tpm ? b.values[size_t(e)] : b.values[size_t(e)] * scale;
        const auto j = size_t(b.cols[size_t(e)]);
        tpm_mean[j] += double(t) * inv_n;
        tpm_sq[j] += (double(t) * double(t)) * inv_n;
        if (opts.keep_tpm) {
          tpm.cols.push_back(b.cols[size_t(e)]);
          tpm.values.push_back(t);
        }
      }
      if (opts.keep_tpm) tpm.row_offsets.push_back(tpm.nnz());
    }
  });
}

// The genes of the normalized counts: the highly variable ones (their statistics from the TPM
// moments of the genes with counts, or of every gene with zero_genes_in_statistics), or those
// of opts.genes (in their order). Every gene's statistics go to `st`.
std::vector<std::int32_t> select_genes(const CountSource& src, const PrepareOptions& opts,
                                       const std::vector<std::string>& var_names,
                                       const std::vector<double>& gene_total,
                                       const std::vector<double>& tpm_mean,
                                       const std::vector<double>& tpm_sq, GeneStatistics& st) {
  const auto g = size_t(src.n_vars);
  std::vector<std::int32_t> selected;
  std::vector<double> m, v;
  std::vector<std::int32_t> pos;
  for (size_t j = 0; j < g; ++j) {
    if (!(gene_total[j] > 0) && !opts.zero_genes_in_statistics) continue;
    pos.push_back(std::int32_t(j));
    m.push_back(tpm_mean[j]);
    v.push_back(tpm_sq[j] - tpm_mean[j] * tpm_mean[j]);
  }
  const int numgenes = opts.genes.empty() ? opts.num_highvar_genes : 1;
  const auto hv = highvar_genes(m, v, numgenes);
  st.A = hv.A;
  st.B = hv.B;
  st.mean.assign(g, 0.0);
  st.var.assign(g, 0.0);
  st.fano.assign(g, kNaN);
  st.expected_fano.assign(g, kNaN);
  st.fano_ratio.assign(g, kNaN);
  st.high_var.assign(g, 0);
  for (size_t i = 0; i < pos.size(); ++i) {
    const auto j = size_t(pos[i]);
    st.mean[j] = hv.mean[i];
    st.var[j] = hv.var[i];
    st.fano[j] = hv.fano[i];
    st.expected_fano[j] = hv.expected_fano[i];
    st.fano_ratio[j] = hv.fano_ratio[i];
    if (opts.genes.empty()) st.high_var[j] = hv.high_var[i];
  }
  if (opts.genes.empty()) {
    for (size_t j = 0; j < g; ++j)
      if (st.high_var[j]) selected.push_back(std::int32_t(j));
  } else {
    std::unordered_map<std::string, std::int32_t> where;
    for (size_t j = g; j-- > 0;) where[var_names[j]] = std::int32_t(j);  // first occurrence wins
    for (const auto& name : opts.genes) {
      const auto it = where.find(name);
      if (it == where.end())
        input_error(src.name, ": gene '", name, "' of the given gene list is not among the ",
                    g, " genes of the count matrix");
      selected.push_back(it->second);
      st.high_var[size_t(it->second)] = 1;
    }
  }
  return selected;
}

// Pass 3: raw counts of the selected genes (`out_col`: each gene's column, -1 for the others)
// for the kept cells, duplicate entries summed, appended to X; column means and E[x^2] in
// `mean` and `sq`; the cells without a count of them counted in zero_hvg_cells.
void selected_counts(const CountSource& src, io::CsrBlock<float>& block,
                     const std::vector<float>& totals, const std::vector<std::int32_t>& out_col,
                     double inv_n, io::CsrBlock<double>& X, std::vector<double>& mean,
                     std::vector<double>& sq, std::int64_t& zero_hvg_cells) {
  Kokkos::Profiling::ScopedRegion r("knmf::prepare::scale");
  std::vector<std::pair<std::int32_t, double>> row;
  for_each_block(src, block, [&](const io::CsrBlock<float>& b) {
    for (std::int64_t i = 0; i < b.rows(); ++i) {
      if (!(totals[size_t(b.row_begin + i)] > 0)) continue;
      row.clear();
      for (std::int64_t e = b.row_offsets[size_t(i)]; e < b.row_offsets[size_t(i) + 1]; ++e) {
        const auto c = out_col[size_t(b.cols[size_t(e)])];
        if (c >= 0) row.emplace_back(c, double(b.values[size_t(e)]));
      }
      std::stable_sort(row.begin(), row.end(),
                       [](const auto& a, const auto& b2) { return a.first < b2.first; });
      for (size_t e = 0; e < row.size(); ++e) {
        if (e > 0 && row[e].first == X.cols.back()) {
          X.values.back() += row[e].second;  // duplicate entry: summed
          continue;
        }
        X.cols.push_back(row[e].first);
        X.values.push_back(row[e].second);
      }
      const std::int64_t row_start = X.row_offsets.back();
      if (X.nnz() == row_start) ++zero_hvg_cells;
      for (std::int64_t e = row_start; e < X.nnz(); ++e) {
        const double x = X.values[size_t(e)];
        mean[size_t(X.cols[size_t(e)])] += x * inv_n;
        sq[size_t(X.cols[size_t(e)])] += (x * x) * inv_n;
      }
      X.row_offsets.push_back(X.nnz());
    }
  });
}

// Unit variance without centering: var (ddof 1) = (E[x^2] - E[x]^2) n / (n - 1). The genes'
// standard deviations (1 where 0 or NaN) in gene_std.
void scale_to_unit_variance(io::CsrBlock<double>& X, const std::vector<double>& mean,
                            const std::vector<double>& sq, std::int64_t n,
                            std::vector<double>& gene_std) {
  const auto k = mean.size();
  gene_std.resize(k);
  std::vector<double> inv_std(k);
  for (size_t c = 0; c < k; ++c) {
    const double var = (sq[c] - mean[c] * mean[c]) * double(n) / double(n - 1);
    double sd = std::sqrt(var);
    if (sd == 0.0 || std::isnan(sd)) sd = 1.0;
    gene_std[c] = sd;
    inv_std[c] = 1.0 / sd;
  }
  for (size_t e = 0; e < X.values.size(); ++e) X.values[e] *= inv_std[size_t(X.cols[e])];
}

}  // namespace

PrepareResult prepare_counts(const CountSource& src, const PrepareOptions& opts) {
  Kokkos::Profiling::ScopedRegion region("knmf::prepare");
  check_prepare_input(src, opts);

  const auto g = size_t(src.n_vars);
  const auto var_names = src.var_names.empty() ? default_names(src.n_vars) : src.var_names;
  io::CsrBlock<float> block;
  PrepareResult res;

  std::vector<float> totals(size_t(src.n_obs));
  std::vector<double> gene_total(g, 0.0);
  count_totals(src, block, totals, gene_total);
  for (std::int64_t c = 0; c < src.n_obs; ++c)
    if (totals[size_t(c)] > 0) res.cells.push_back(c);
  res.zero_cells = src.n_obs - std::int64_t(res.cells.size());
  for (double t : gene_total) res.zero_genes += t > 0 ? 0 : 1;
  const auto n = std::int64_t(res.cells.size());
  if (n < 2)
    input_error(src.name, ": ", n, " cell(s) with counts; at least 2 are needed to scale genes");
  if (res.zero_genes == src.n_vars) input_error(src.name, ": every gene has total count 0");
  const double inv_n = 1.0 / double(n);

  std::vector<double> tpm_mean(g, 0.0), tpm_sq(g, 0.0);
  if (opts.keep_tpm) {
    res.tpm = io::CsrBlock<float>{};
    res.tpm.row_begin = 0;
    res.tpm.row_end = n;
    res.tpm.ncols = src.n_vars;
  }
  if (opts.tpm) check_tpm_input(*opts.tpm, src);
  tpm_moments(src, opts, block, totals, inv_n, tpm_mean, tpm_sq, res.tpm);

  const std::vector<std::int32_t> selected =
      select_genes(src, opts, var_names, gene_total, tpm_mean, tpm_sq, res.stats);
  const auto k = selected.size();
  std::vector<std::int32_t> out_col(g, -1);
  for (size_t c = 0; c < k; ++c) {
    if (out_col[size_t(selected[c])] >= 0)
      input_error(src.name, ": gene '", var_names[size_t(selected[c])], "' is listed twice");
    out_col[size_t(selected[c])] = std::int32_t(c);
  }

  auto& X = res.norm_counts;
  X = io::CsrBlock<double>{};
  X.row_begin = 0;
  X.row_end = n;
  X.ncols = std::int64_t(k);
  std::vector<double> mean(k, 0.0), sq(k, 0.0);
  selected_counts(src, block, totals, out_col, inv_n, X, mean, sq, res.zero_hvg_cells);
  scale_to_unit_variance(X, mean, sq, n, res.gene_std);

  res.genes = selected;
  res.gene_names.resize(k);
  for (size_t c = 0; c < k; ++c) res.gene_names[c] = var_names[size_t(selected[c])];
  res.cell_names.resize(size_t(n));
  for (std::int64_t i = 0; i < n; ++i)
    res.cell_names[size_t(i)] = src.obs_names.empty() ? std::to_string(res.cells[size_t(i)])
                                                      : src.obs_names[size_t(res.cells[size_t(i)])];
  return res;
}

void write_norm_counts(const std::string& path, const PrepareResult& result) {
  io::H5adWriteOptions wo;
  wo.format = io::StorageFormat::Csr;
  wo.value_type = io::ValueType::Float64;
  io::write_h5ad(path, result.norm_counts, result.cell_names, result.gene_names, wo);
}

void write_gene_list(const std::string& path, const PrepareResult& result) {
  std::string text;
  for (size_t i = 0; i < result.gene_names.size(); ++i) text += (i ? "\n" : "") + result.gene_names[i];
  io::AtomicFile out(path);
  out.write(text);
  out.commit();
}

void write_tpm_stats(const std::string& path, const PrepareResult& result) {
  write_tpm_stats(path, result, {});
}

void write_tpm_stats(const std::string& path, const PrepareResult& result,
                     const std::vector<std::string>& gene_names) {
  const auto& st = result.stats;
  if (!gene_names.empty() && gene_names.size() != st.mean.size())
    input_error(path, ": ", gene_names.size(), " gene names for ", st.mean.size(), " genes");
  io::DataFrame df;
  df.rows = std::int64_t(st.mean.size());
  df.cols = 2;
  df.data.resize(st.mean.size() * 2);
  for (size_t j = 0; j < st.mean.size(); ++j) {
    df.data[2 * j] = st.mean[j];
    df.data[2 * j + 1] = std::sqrt(std::max(st.var[j], 0.0));
  }
  for (std::int64_t j = 0; j < df.rows; ++j) {
    if (gene_names.empty())
      df.index.emplace_back(j);
    else
      df.index.emplace_back(gene_names[size_t(j)]);
  }
  df.columns = {std::string("__mean"), std::string("__std")};
  io::write_df_npz(path, df);
}

}  // namespace knmf::prepare
