// cNMF's consensus pipeline and k-selection statistics (see knmf/consensus/consensus.hpp).
#include "knmf/core/host_access.hpp"
#include "knmf/consensus/consensus.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <Kokkos_Profiling_ScopedRegion.hpp>

#include "consensus/detail/host_math.hpp"
#include "consensus/detail/refit.hpp"
#include "consensus/detail/stream.hpp"
#include "knmf/core/error.hpp"
#include "knmf/io/dataframe.hpp"

namespace knmf::consensus {

// ---- small dense algebra ---------------------------------------------------------------------

namespace {
/// Cyclic Jacobi eigendecomposition of a symmetric k x k matrix: A = V diag(w) V^T.
void jacobi_eigen(std::vector<double> A, int k, std::vector<double>& w, std::vector<double>& V) {
  V.assign(size_t(k * k), 0.0);
  for (int i = 0; i < k; ++i) V[size_t(i * k + i)] = 1.0;
  auto a = [&](int i, int j) -> double& { return A[size_t(i * k + j)]; };
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0.0, diag = 0.0;
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < k; ++j) (i == j ? diag : off) += a(i, j) * a(i, j);
    if (off <= 1e-32 * diag || off == 0.0) break;
    for (int p = 0; p < k; ++p)
      for (int q = p + 1; q < k; ++q) {
        if (a(p, q) == 0.0) continue;
        const double theta = (a(q, q) - a(p, p)) / (2.0 * a(p, q));
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1.0));
        const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
        for (int r = 0; r < k; ++r) {  // A <- A J (columns p, q)
          const double arp = a(r, p), arq = a(r, q);
          a(r, p) = c * arp - s * arq;
          a(r, q) = s * arp + c * arq;
        }
        for (int r = 0; r < k; ++r) {  // A <- J^T A (rows p, q)
          const double apr = a(p, r), aqr = a(q, r);
          a(p, r) = c * apr - s * aqr;
          a(q, r) = s * apr + c * aqr;
        }
        for (int r = 0; r < k; ++r) {  // V <- V J
          const double vrp = V[size_t(r * k + p)], vrq = V[size_t(r * k + q)];
          V[size_t(r * k + p)] = c * vrp - s * vrq;
          V[size_t(r * k + q)] = s * vrp + c * vrq;
        }
      }
  }
  w.resize(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) w[size_t(i)] = a(i, i);
}
}  // namespace

std::vector<double> gram_lstsq(const std::vector<double>& A, const std::vector<double>& B, int k,
                               size_type m) {
  KNMF_ASSERT(A.size() == size_t(k * k) && B.size() == size_t(k * m), "lstsq shapes");
  std::vector<double> w, V;
  jacobi_eigen(A, k, w, V);
  double wmax = 0.0;
  for (double x : w) wmax = std::max(wmax, std::fabs(x));
  const double cutoff = std::numeric_limits<double>::epsilon() * double(k) * wmax;
  // X = V diag(1/w) V^T B
  std::vector<double> T(size_t(k * m), 0.0);  // V^T B scaled
  for (int i = 0; i < k; ++i) {
    const double inv = std::fabs(w[size_t(i)]) > cutoff ? 1.0 / w[size_t(i)] : 0.0;
    if (inv == 0.0) continue;
    for (int r = 0; r < k; ++r) {
      const double v = V[size_t(r * k + i)] * inv;
      if (v == 0.0) continue;
      for (size_type j = 0; j < m; ++j) T[size_t(i * m + j)] += v * B[size_t(r * m + j)];
    }
  }
  std::vector<double> X(size_t(k * m), 0.0);
  for (int r = 0; r < k; ++r)
    for (int i = 0; i < k; ++i) {
      const double v = V[size_t(r * k + i)];
      if (v == 0.0) continue;
      for (size_type j = 0; j < m; ++j) X[size_t(r * m + j)] += v * T[size_t(i * m + j)];
    }
  return X;
}

// ---- pipeline --------------------------------------------------------------------------------

namespace {

float to_f32(double v) { return static_cast<float>(v); }

/// cNMF's float32 outputs as pandas later reads them from the .txt copy: the float64 that
/// the float32's shortest repr parses to.
double f32_txt_value(double v) {
  const std::string s = io::format_float32_repr(to_f32(v));
  return std::strtod(s.c_str(), nullptr);
}

/// Program order: total normalized usage per program, largest first (cNMF's reorder).
std::vector<int> program_order(const HostRows& W) {
  const int k = int(W.cols);
  const size_type n = W.rows;
  std::vector<std::vector<double>> norm(static_cast<size_t>(k), std::vector<double>(static_cast<size_t>(n)));
  for (size_type i = 0; i < n; ++i) {
    double s = 0.0;
    for (int t = 0; t < k; ++t) s += W.row(i)[t];
    for (int t = 0; t < k; ++t) norm[size_t(t)][size_t(i)] = s != 0.0 ? W.row(i)[t] / s : 0.0;
  }
  std::vector<double> total(static_cast<size_t>(k));
  for (int t = 0; t < k; ++t) total[size_t(t)] = detail::pairwise_sum(norm[size_t(t)].data(), n);
  std::vector<int> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return total[size_t(a)] > total[size_t(b)]; });
  return order;
}

HostRows permute_rows(const HostRows& x, const std::vector<int>& order) {
  HostRows out{x.rows, x.cols, std::vector<double>(x.values.size())};
  for (size_t p = 0; p < order.size(); ++p)
    std::copy(x.row(order[p]), x.row(order[p]) + x.cols, out.row(size_type(p)));
  return out;
}

HostRows permute_cols(const HostRows& x, const std::vector<int>& order) {
  HostRows out{x.rows, x.cols, std::vector<double>(x.values.size())};
  for (size_type i = 0; i < x.rows; ++i)
    for (size_t p = 0; p < order.size(); ++p) out.row(i)[p] = x.row(i)[order[p]];
  return out;
}

HostRows transpose(const HostRows& x) {
  HostRows t{x.cols, x.rows, std::vector<double>(x.values.size())};
  for (size_type r = 0; r < x.rows; ++r)
    for (size_type c = 0; c < x.cols; ++c) t.values[size_t(c * x.rows + r)] = x.values[size_t(r * x.cols + c)];
  return t;
}

/// scikit-learn's sparse mean_variance_axis(X, axis=0) (StandardScaler(with_mean=False) on
/// cNMF's TPM): two passes in CSR order with float64 accumulators and the Chan-Golub-LeVeque
/// correction term; for a float32 X the results are rounded to float32 (as scikit-learn
/// returns them) before StandardScaler widens them again.
struct SparseMeanVar {
  std::vector<double> mean, var, corr;
  std::vector<std::uint64_t> nnz;
  size_type n = 0;
  bool round32 = false;
  SparseMeanVar(size_type cols, size_type rows, bool float32)
      : mean(static_cast<size_t>(cols), 0.0), var(static_cast<size_t>(cols), 0.0),
        corr(static_cast<size_t>(cols), 0.0), nnz(static_cast<size_t>(cols), 0), n(rows),
        round32(float32) {}
  void first(const io::CsrBlock<double>& b) {
    for (size_t p = 0; p < b.values.size(); ++p) {
      mean[size_t(b.cols[p])] += b.values[p];
      ++nnz[size_t(b.cols[p])];
    }
  }
  void finish_first() {
    for (auto& m : mean) m /= double(n);
  }
  void second(const io::CsrBlock<double>& b) {
    for (size_t p = 0; p < b.values.size(); ++p) {
      const size_t c = size_t(b.cols[p]);
      const double diff = b.values[p] - mean[c];
      corr[c] += diff;
      var[c] += diff * diff;
    }
  }
  double round(double v) const { return round32 ? double(float(v)) : v; }
  std::vector<double> means() const {
    std::vector<double> out(mean.size());
    for (size_t c = 0; c < mean.size(); ++c) out[c] = round(mean[c]);
    return out;
  }
  std::vector<double> variances() const {
    std::vector<double> out(mean.size());
    const double sw = double(n);
    for (size_t c = 0; c < mean.size(); ++c) {
      const double zeros = sw - double(nnz[c]);
      double cr = corr[c], v = var[c];
      if (nnz[c] != std::uint64_t(n)) cr -= zeros * mean[c];
      cr = cr * cr / sw;
      if (nnz[c] != std::uint64_t(n)) v += zeros * (mean[c] * mean[c]);
      out[c] = round((v - cr) / sw);
    }
    return out;
  }
};

/// cNMF's usages beside their row-normalized copy (rf_usages.div(rf_usages.sum(axis=1),
/// axis=0), cast to the TPM's dtype), n x 2k. A cell with no usage at all gets zeros, where
/// cNMF would get NaN and fail.
HostRows usages_and_normalized(const HostRows& U, bool float32) {
  const size_type n = U.rows;
  const int k = int(U.cols);
  HostRows V{n, 2 * k, std::vector<double>(size_t(n * 2 * k))};
  for (size_type i = 0; i < n; ++i) {
    double s = 0.0;
    for (int t = 0; t < k; ++t) s += U.row(i)[t];
    for (int t = 0; t < k; ++t) {
      V.row(i)[t] = U.row(i)[t];
      const double un = s != 0.0 ? U.row(i)[t] / s : 0.0;
      V.row(i)[k + t] = float32 ? double(to_f32(un)) : un;  // norm_usages.astype(tpm dtype)
    }
  }
  return V;
}

/// out.starcat from out.spectra_tpm (k x gt) and the genes' standard deviations.
void starcat_spectra(const TpmInput& tpm, const RowSource& T, const std::vector<double>& gene_std,
                     ConsensusResult& out) {
  const size_type gt = T.cols();
  const int k = int(out.spectra_tpm.rows);
  // starCAT reference spectra (cNMF's build_reference, from the .txt values). A gene whose
  // TPM has no spread (standard deviation 0: in practice a gene with no counts in any cell)
  // is divided by 0 there, and cNMF writes NaN (or inf) for it. knmf writes 0 instead, the
  // value such a gene's unit-variance column gets in the usage refit below (it carries no
  // signal to match a cell against), and says which genes (ConsensusResult::warnings).
  const size_type gh = size_type(tpm.hvg_columns.size());
  out.starcat = HostRows{k, gh, std::vector<double>(size_t(k * gh))};
  std::vector<size_type> flat;  // HVGs with standard deviation 0
  for (size_type h = 0; h < gh; ++h) {
    const int j = tpm.hvg_columns[size_t(h)];
    if (j >= 0 && j < gt && !(gene_std[size_t(j)] > 0.0)) flat.push_back(h);
  }
  for (int t = 0; t < k; ++t) {
    std::vector<double> row(out.spectra_tpm.row(t), out.spectra_tpm.row(t) + gt);
    if (tpm.float32)
      for (auto& v : row) v = f32_txt_value(v);
    const double s = detail::pairwise_sum(row.data(), gt);
    for (size_type h = 0; h < gh; ++h) {
      const int j = tpm.hvg_columns[size_t(h)];
      const double sd = gene_std[size_t(j)];
      out.starcat.row(t)[h] = sd > 0.0 ? row[size_t(j)] / s * 1e6 / sd : 0.0;
    }
  }
  if (!flat.empty()) {
    const auto names = T.column_names();
    std::string list;
    for (size_t i = 0; i < flat.size() && i < 10; ++i) {
      const int j = tpm.hvg_columns[size_t(flat[i])];
      list += (i ? ", " : "") + (size_t(j) < names.size() ? names[size_t(j)] : std::to_string(j));
    }
    if (flat.size() > 10) list += ", ... (" + std::to_string(flat.size() - 10) + " more)";
    out.warnings.push_back(std::to_string(flat.size()) + " of the " + std::to_string(gh) +
                           " genes have standard deviation 0 in " + T.name() +
                           " (no counts): their starCAT spectra values are 0 (cNMF would write "
                           "NaN): " + list);
  }
}

/// The unit-variance HVG TPM of the final usage refit: each HVG column's map (TPM column ->
/// HVG index, -1 elsewhere) and scale (1 / its ddof-1 standard deviation), the refit's
/// spectra H2 (the HVG TPM spectra / the genes' standard deviations) and the scaled matrix's
/// sum and squared norm.
struct HvgScaling {
  std::vector<int> map;
  std::vector<double> scale;
  HostRows H2;
  double sum = 0.0, norm2 = 0.0;
};
HvgScaling hvg_scaling(const TpmInput& tpm, const HostRows& spectra_tpm,
                       const std::vector<double>& gene_std, const std::vector<double>& colsum,
                       const std::vector<double>& colsq, size_type n) {
  const size_type gt = spectra_tpm.cols, gh = size_type(tpm.hvg_columns.size());
  const int k = int(spectra_tpm.rows);
  std::vector<int> map(static_cast<size_t>(gt), -1);
  std::vector<double> scale(static_cast<size_t>(gt), 0.0);
  double hsum = 0.0, hnorm2 = 0.0;
  for (size_type h = 0; h < gh; ++h) {
    const int j = tpm.hvg_columns[size_t(h)];
    if (j < 0 || j >= gt) input_error("HVG ", h, " has TPM column ", j, " out of range");
    map[size_t(j)] = int(h);
    const double mean = colsum[size_t(j)] / double(n);
    double var = (colsq[size_t(j)] / double(n) - mean * mean);
    var = n > 1 ? var * double(n) / double(n - 1) : 0.0;  // scanpy's scale: ddof = 1
    double sd = var > 0.0 ? std::sqrt(var) : 0.0;
    if (sd == 0.0) sd = 1.0;
    scale[size_t(j)] = 1.0 / sd;
    hsum += colsum[size_t(j)] / sd;
    hnorm2 += colsq[size_t(j)] / (sd * sd);
  }
  HostRows H2{k, gh, std::vector<double>(size_t(k * gh))};
  for (int t = 0; t < k; ++t)
    for (size_type h = 0; h < gh; ++h) {
      const int j = tpm.hvg_columns[size_t(h)];
      double v = spectra_tpm.row(t)[j] / gene_std[size_t(j)];
      if (!std::isfinite(v)) v = 0.0;  // a gene with zero std in tpm_stats
      H2.row(t)[h] = tpm.float32 ? double(to_f32(v)) : v;
    }
  return HvgScaling{std::move(map), std::move(scale), std::move(H2), hsum, hnorm2};
}

/// The genes' standard deviations (ddof 0): cNMF's tpm_stats `__std`, or computed from the
/// TPM's column sums and sums of squares over n cells.
std::vector<double> genes_std(const TpmInput& tpm, const std::vector<double>& colsum,
                              const std::vector<double>& colsq, size_type n) {
  if (!tpm.gene_std.empty()) return tpm.gene_std;
  const size_type gt = size_type(colsum.size());
  std::vector<double> gene_std(static_cast<size_t>(gt));
  for (size_type j = 0; j < gt; ++j) {
    const double mean = colsum[size_t(j)] / double(n);
    const double var = colsq[size_t(j)] / double(n) - mean * mean;
    gene_std[size_t(j)] = var > 0.0 ? std::sqrt(var) : 0.0;
  }
  return gene_std;
}

/// Gene scores (k x gt): OLS of the z-scored TPM on U (cNMF's efficient_ols_all_cols,
/// normalize_y), from Qh's first k rows (U^T TPM), U^T 1 and U^T U, with scikit-learn's column
/// means and variances (StandardScaler(with_mean=False)).
HostRows gene_scores(const HostRows& Qh, const std::vector<double>& usum,
                     const std::vector<double>& UtU, const SparseMeanVar& mv) {
  const int k = int(usum.size());
  const size_type gt = Qh.cols;
  const std::vector<double> means = mv.means();
  const std::vector<double> vars = mv.variances();
  std::vector<double> XtY(size_t(k * gt));
  for (size_type j = 0; j < gt; ++j) {
    const double mean = means[size_t(j)];
    double var = vars[size_t(j)];
    if (!(var >= 1e-12)) var = 1e-12;  // cNMF: varY[varY < eps] = eps
    const double sd = std::sqrt(var);
    for (int t = 0; t < k; ++t)
      XtY[size_t(t * gt + j)] = (Qh.row(t)[j] - usum[size_t(t)] * mean) / sd;
  }
  return HostRows{k, gt, gram_lstsq(UtU, XtY, k, gt)};
}

/// The TPM outputs of cNMF's consensus from the program-ordered usages U (n x k).
void tpm_outputs(const ExecSpace& space, const TpmInput& tpm, const HostRows& U,
                 const SolverOptions& run, size_type block_nnz, ConsensusResult& out) {
  Kokkos::Profiling::ScopedRegion region("knmf::consensus::tpm");
  const RowSource& T = *tpm.tpm;
  const size_type n = T.rows(), gt = T.cols();
  const int k = int(U.cols);
  if (n != U.rows)
    input_error(T.name(), " has ", n, " cells but the norm_counts matrix has ", U.rows);
  if (!tpm.gene_std.empty() && size_type(tpm.gene_std.size()) != gt)
    input_error("tpm_stats: ", tpm.gene_std.size(), " genes but ", T.name(), " has ", gt);
  const HostRows V = usages_and_normalized(U, tpm.float32);
  auto Vd = detail::upload_transposed(space, V, "knmf::consensus::usages");  // 2k x n
  auto Q = detail::alloc_matrix(space, "knmf::consensus::UtT", 2 * k, gt);
  Kokkos::deep_copy(space, Q, 0.0);
  std::vector<double> colsum(static_cast<size_t>(gt), 0.0), colsq(static_cast<size_t>(gt), 0.0);
  detail::DeviceBlock block(space);
  SparseMeanVar mv(gt, n, tpm.float32);
  // a beta-rule loss: both TPM refits need the TPM itself (refit.hpp), gathered by the passes
  const bool resident = run.beta_rule();
  detail::HostCsr tpm_host;
  // pass 1: U^T TPM, Un^T TPM and the column sums
  T.for_each_block(block_nnz, [&](const io::CsrBlock<double>& b) {
    mv.first(b);
    if (resident) tpm_host.append(b);
    for (size_t p = 0; p < b.values.size(); ++p) {
      const double v = b.values[p];
      colsum[size_t(b.cols[p])] += v;
      colsq[size_t(b.cols[p])] += v * v;
    }
    block.upload(b, false, true);
    detail::accumulate_ut_block(space, block, Vd, Q);
  });
  const HostRows Qh = transpose(detail::download_transposed(space, Q));  // 2k x gt row-major
  const std::vector<double> gene_std = genes_std(tpm, colsum, colsq, n);
  // Grams U^T U and Un^T Un, and U^T 1
  detail::DMatrix Ud(Vd.data(), 2 * k, n);
  std::vector<double> gram_all = detail::gram(space, Ud);  // (2k x 2k)
  std::vector<double> UtU(size_t(k * k)), NtN(size_t(k * k));
  for (int a = 0; a < k; ++a)
    for (int c = 0; c < k; ++c) {
      UtU[size_t(a * k + c)] = gram_all[size_t(a * 2 * k + c)];
      NtN[size_t(a * k + c)] = gram_all[size_t((k + a) * 2 * k + k + c)];
    }
  std::vector<double> usum(static_cast<size_t>(k), 0.0);
  for (size_type i = 0; i < n; ++i)
    for (int t = 0; t < k; ++t) usum[size_t(t)] += U.row(i)[t];

  // TPM spectra: fixed-H refit of TPM^T (genes x cells) on Un^T; P = Un^T TPM
  double tsum = 0.0, tnorm2 = 0.0;
  for (size_type j = 0; j < gt; ++j) {
    tsum += colsum[size_t(j)];
    tnorm2 += colsq[size_t(j)];
  }
  {
    HostRows Pn{k, gt, std::vector<double>(Qh.values.begin() + k * gt, Qh.values.end())};
    auto P = detail::upload_rows(space, Pn, "knmf::consensus::UnT");
    if (resident) {
      // cNMF's refit_spectra: refit_usage(TPM^T, Un^T), the genes as rows
      HostRows UnT{k, n, std::vector<double>(size_t(k * n))};
      for (size_type i = 0; i < n; ++i)
        for (int t = 0; t < k; ++t) UnT.row(t)[i] = V.row(i)[k + t];
      const auto Xt = tpm_host.transposed().to_device(space, T.name() + " (transposed)");
      tpm_host = detail::HostCsr();
      out.tpm_spectra_refit = detail::refit_resident(space, Xt, UnT, P, NtN, tnorm2, run, true);
    } else {
      out.tpm_spectra_refit = detail::refit_device(space, P, NtN, tnorm2,
                                                   tsum / (double(n) * double(gt)), n, run, true);
    }
  }
  out.spectra_tpm = transpose(out.tpm_spectra_refit.W);  // k x gt
  if (tpm.float32)
    for (auto& v : out.spectra_tpm.values) v = double(to_f32(v));

  // final usages: refit of the unit-variance HVG TPM on the HVG TPM spectra / std (the HVG
  // columns checked here, before starCAT's spectra read them)
  const HvgScaling hv = hvg_scaling(tpm, out.spectra_tpm, gene_std, colsum, colsq, n);
  starcat_spectra(tpm, T, gene_std, out);
  const size_type gh = size_type(tpm.hvg_columns.size());
  const auto& map = hv.map;
  const auto& scale = hv.scale;
  const HostRows& H2 = hv.H2;
  const double hsum = hv.sum, hnorm2 = hv.norm2;
  auto H2d = detail::upload_rows(space, H2, "knmf::consensus::H_tpm");
  Kokkos::View<int*, MemSpace> dmap(Kokkos::view_alloc(space, "knmf::consensus::hvg_map"), gt);
  {
    auto hm = host_mirror(dmap);
    for (size_type j = 0; j < gt; ++j) hm(j) = map[size_t(j)];
    Kokkos::deep_copy(space, dmap, hm);
  }
  auto dscale = detail::upload(space, scale, "knmf::consensus::hvg_scale");
  auto P2 = detail::alloc_matrix(space, "knmf::consensus::P_tpm", k, n);
  // pass 2: (scaled HVG TPM) H2^T
  mv.finish_first();
  detail::HostCsr hvg_host;  // the scaled HVG TPM itself, for a beta-rule loss
  T.for_each_block(block_nnz, [&](const io::CsrBlock<double>& b) {
    mv.second(b);
    if (resident) hvg_host.append(b, map, scale, gh);
    block.upload(b, true, false);
    detail::block_times_ht(space, block, H2d, dmap, dscale, P2);
  });
  out.spectra_score = gene_scores(Qh, usum, UtU, mv);

  if (resident)
    out.tpm_usage_refit =
        detail::refit_resident(space, hvg_host.to_device(space, T.name() + " (scaled HVG columns)"),
                               H2, P2, detail::gram(space, H2d), hnorm2, run, true);
  else
    out.tpm_usage_refit = detail::refit_device(space, P2, detail::gram(space, H2d), hnorm2,
                                               hsum / (double(n) * double(gh)), gh, run, true);
  if (tpm.float32)
    for (auto& v : out.tpm_usage_refit.W.values) v = double(to_f32(v));
}

}  // namespace

ConsensusResult run_consensus(const ExecSpace& space, const HostRows& merged, int k,
                              const RowSource& X, const TpmInput* tpm, const SolverOptions& run,
                              const ConsensusOptions& opts) {
  Kokkos::Profiling::ScopedRegion region("knmf::consensus::run");
  opts.validate();
  run.validate();
  if (merged.cols != X.cols())
    input_error("consensus k = ", k, ": the replicate spectra have ", merged.cols, " genes but ",
                X.name(), " has ", X.cols());
  ConsensusResult out;
  out.clustering = cluster_spectra(space, merged, k, opts, true, true);
  auto refits = refit_usages_streamed(space, X, {out.clustering.median_spectra}, run,
                                      opts.stream_block_nnz, true);
  RefitOutcome refit = std::move(refits[0]);
  out.order = program_order(refit.W);
  out.spectra = permute_rows(out.clustering.median_spectra, out.order);
  refit.W = permute_cols(refit.W, out.order);
  out.prediction_error = refit.squared_error;
  out.refit = std::move(refit);
  if (tpm != nullptr && tpm->tpm != nullptr) {
    out.have_tpm = true;
    if (size_type(tpm->hvg_columns.size()) != X.cols())
      input_error("consensus: ", tpm->hvg_columns.size(), " HVG columns for ", X.cols(),
                  " genes of ", X.name());
    tpm_outputs(space, *tpm, out.refit.W, run, opts.stream_block_nnz, out);
  }
  // No output is returned (so none written) unless every value is finite: the rule the
  // factorization's results follow.
  const std::pair<const char*, const HostRows*> outputs[] = {
      {"consensus spectra", &out.spectra},       {"usages", &out.refit.W},
      {"TPM spectra", &out.spectra_tpm},         {"gene scores", &out.spectra_score},
      {"starCAT spectra", &out.starcat},         {"TPM usages", &out.tpm_usage_refit.W}};
  for (const auto& [what, m] : outputs)
    for (size_t i = 0; i < m->values.size(); ++i)
      if (!std::isfinite(m->values[i]))
        input_error("consensus k = ", k, ": the ", what, " hold a non-finite value (", m->values[i],
                    " at row ", i / size_t(std::max<size_type>(m->cols, 1)) + 1, ", column ",
                    i % size_t(std::max<size_type>(m->cols, 1)) + 1, "); nothing is written");
  return out;
}

std::vector<KSelectionRow> k_selection(const ExecSpace& space, const std::vector<HostRows>& merged,
                                       const std::vector<int>& ks, const RowSource& X,
                                       const SolverOptions& run, const ConsensusOptions& opts) {
  Kokkos::Profiling::ScopedRegion region("knmf::consensus::k_selection");
  opts.validate();
  run.validate();
  KNMF_ASSERT(merged.size() == ks.size(), "one spectra stack per k");
  std::vector<KSelectionRow> rows(ks.size());
  std::vector<HostRows> medians;
  for (size_t i = 0; i < ks.size(); ++i) {
    if (merged[i].cols != X.cols())
      input_error("k-selection k = ", ks[i], ": the replicate spectra have ", merged[i].cols,
                  " genes but ", X.name(), " has ", X.cols());
    auto c = cluster_spectra(space, merged[i], ks[i], opts, false, true);
    rows[i].k = ks[i];
    rows[i].local_density_threshold = opts.local_density_threshold;
    rows[i].silhouette = c.silhouette;
    medians.push_back(std::move(c.median_spectra));
  }
  // refits in groups whose products fit the budget, one pass over X per group
  const size_type budget = opts.product_bytes;
  size_t i = 0;
  while (i < ks.size()) {
    size_t j = i;
    size_type rows_k = 0;
    while (j < ks.size() &&
           (j == i || (rows_k + ks[j]) * X.rows() * size_type(sizeof(double)) * 2 <= budget))
      rows_k += ks[j++];
    std::vector<HostRows> group(medians.begin() + long(i), medians.begin() + long(j));
    auto refits = refit_usages_streamed(space, X, group, run, opts.stream_block_nnz, false);
    for (size_t s = i; s < j; ++s) rows[s].prediction_error = refits[s - i].squared_error;
    i = j;
  }
  return rows;
}

}  // namespace knmf::consensus
