#include "knmf/prepare/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "knmf/core/assignment.hpp"
#include "knmf/core/error.hpp"
#include "knmf/prepare/prepare.hpp"

namespace knmf::prepare {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Rows centred and scaled to unit norm (all NaN for a constant row).
void standardize(std::vector<double>& m, int rows, size_t len) {
  for (int r = 0; r < rows; ++r) {
    double* x = m.data() + size_t(r) * len;
    double mean = 0.0;
    for (size_t j = 0; j < len; ++j) mean += x[j];
    mean /= double(len);
    double ss = 0.0;
    for (size_t j = 0; j < len; ++j) {
      x[j] -= mean;
      ss += x[j] * x[j];
    }
    const double inv = ss > 0 ? 1.0 / std::sqrt(ss) : kNaN;
    for (size_t j = 0; j < len; ++j) x[j] *= inv;
  }
}

double dot(const double* a, const double* b, size_t len) {
  double s = 0.0;
  for (size_t j = 0; j < len; ++j) s += a[j] * b[j];
  return s;
}

}  // namespace

double RecoveryReport::min_matched() const {
  double m = std::numeric_limits<double>::infinity();
  for (double v : matched) {
    if (std::isnan(v)) return kNaN;
    m = std::min(m, v);
  }
  return matched.empty() ? kNaN : m;
}


RecoveryReport match_programs(const std::vector<double>& truth, int n_programs,
                              std::int64_t n_truth_genes, const std::vector<double>& spectra,
                              int n_components, const std::vector<std::int32_t>& gene_index,
                              const std::vector<double>& gene_weight) {
  const size_t g = gene_index.size();
  KNMF_ASSERT(n_programs >= 0 && n_components >= 0, "negative counts");
  KNMF_ASSERT(truth.size() == size_t(n_programs) * size_t(n_truth_genes), "truth size");
  KNMF_ASSERT(spectra.size() == size_t(n_components) * g, "spectra size");
  KNMF_ASSERT(gene_weight.empty() || gene_weight.size() == g, "gene_weight size");
  std::vector<double> T(size_t(n_programs) * g);
  for (int p = 0; p < n_programs; ++p)
    for (size_t j = 0; j < g; ++j) {
      const auto col = gene_index[j];
      KNMF_ASSERT(col >= 0 && col < n_truth_genes, "gene index ", col, " out of range");
      T[size_t(p) * g + j] = truth[size_t(p) * size_t(n_truth_genes) + size_t(col)] *
                             (gene_weight.empty() ? 1.0 : gene_weight[j]);
    }
  std::vector<double> S = spectra;
  standardize(T, n_programs, g);
  standardize(S, n_components, g);

  RecoveryReport r;
  r.n_programs = n_programs;
  r.n_components = n_components;
  r.correlation.resize(size_t(n_programs) * size_t(n_components));
  r.best.assign(size_t(n_programs), kNaN);
  r.closest_other.assign(size_t(n_programs), kNaN);
  for (int p = 0; p < n_programs; ++p) {
    for (int t = 0; t < n_components; ++t) {
      const double c = dot(T.data() + size_t(p) * g, S.data() + size_t(t) * g, g);
      r.correlation[size_t(p) * size_t(n_components) + size_t(t)] = c;
      if (!std::isnan(c) && (std::isnan(r.best[size_t(p)]) || c > r.best[size_t(p)]))
        r.best[size_t(p)] = c;
    }
    for (int q = 0; q < n_programs; ++q) {
      if (q == p) continue;
      const double c = dot(T.data() + size_t(p) * g, T.data() + size_t(q) * g, g);
      if (!std::isnan(c) && (std::isnan(r.closest_other[size_t(p)]) || c > r.closest_other[size_t(p)]))
        r.closest_other[size_t(p)] = c;
    }
  }
  r.match = knmf::hungarian_max(r.correlation, n_programs, n_components);
  r.matched.assign(size_t(n_programs), kNaN);
  for (int p = 0; p < n_programs; ++p)
    if (r.match[size_t(p)] >= 0)
      r.matched[size_t(p)] = r.correlation[size_t(p) * size_t(n_components) + size_t(r.match[size_t(p)])];
  return r;
}

RecoveryReport recovery(const std::vector<double>& truth, int n_programs,
                        std::int64_t n_truth_genes, const std::vector<double>& spectra,
                        int n_components, const PrepareResult& prep) {
  std::vector<double> w(prep.gene_std.size());
  for (size_t j = 0; j < w.size(); ++j) w[j] = 1.0 / prep.gene_std[j];
  return match_programs(truth, n_programs, n_truth_genes, spectra, n_components, prep.genes, w);
}

}  // namespace knmf::prepare
