// Consensus at scale: k = 20, 100 replicates, X = 1,000,000 cells x 2,000 genes sparse.
//
//   knmf_bench_consensus [n] [g] [k] [R] [reads_per_cell] [dense_check_n]
//   defaults:            1000000 2000 20 100 200 0
//
// Synthetic data, deterministic: k true programs (sparse gamma profiles); R replicates of
// each (noisy, rescaled, shuffled; 2% of them replaced by outliers that the density filter
// must remove); cells drawing `reads_per_cell` reads (log-normal library sizes) from one
// program or a mixture of two, so X is a sparse count matrix (~5-6% non-zero at g = 2000).
// X lives in host memory as CSR and is streamed to the device in row blocks, as consensus
// streams it from norm_counts.h5ad.
//
// Prints the seconds of each phase (spectra side on the device: local density, k-means,
// silhouette; the streamed X H^T pass; the refit iterations), peak RSS (the OpenMP backend
// keeps every device allocation in host memory, so RSS is the device footprint plus the
// process), knmf's memory model, and the dense allocations cNMF's consensus and
// k_selection_plot make at this size.
//
// With dense_check_n > 0 it also refits a dense dense_check_n-row X with knmf::refit_usages
// (X resident on the device, the API a CSR matrix type will serve too) and the streamed
// refit on the same rows, and compares their time and results.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "bench_common.hpp"
#include "knmf/consensus/consensus.hpp"
#include "knmf/solver/nmf.hpp"

namespace {
using namespace knmf;
using namespace knmf::consensus;

struct Rng {  // splitmix64: fast, deterministic per stream
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ULL + 1) {}
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  double normal() {
    const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  double gamma_small(double shape) {  // shape < 1: Marsaglia-Tsang on shape + 1, boosted
    const double d = shape + 1.0 - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    double v;
    while (true) {
      double x = normal();
      v = 1.0 + c * x;
      if (v <= 0) continue;
      v = v * v * v;
      const double u = uniform();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) break;
    }
    return d * v * std::pow(uniform(), 1.0 / shape);
  }
};

double gb(double bytes) { return bytes / 1e9; }

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  const size_type n = argc > 1 ? std::atoll(argv[1]) : 1000000;
  const size_type g = argc > 2 ? std::atoll(argv[2]) : 2000;
  const int k = argc > 3 ? std::atoi(argv[3]) : 20;
  const int R = argc > 4 ? std::atoi(argv[4]) : 100;
  const int reads = argc > 5 ? std::atoi(argv[5]) : 200;
  const size_type dense_n = argc > 6 ? std::atoll(argv[6]) : 0;
  std::printf("context: %s\n", bench::context_line().c_str());
  const double rss0 = bench::current_rss_bytes();

  // ---- programs and replicate spectra
  Kokkos::Timer t;
  Rng rng(2024);
  HostRows truth{k, g, std::vector<double>(size_t(k * g))};
  for (int p = 0; p < k; ++p) {
    double s = 0;
    for (size_type j = 0; j < g; ++j) s += truth.row(p)[j] = rng.gamma_small(0.3);
    for (size_type j = 0; j < g; ++j) truth.row(p)[j] /= s;
  }
  HostRows merged{size_type(R) * k, g, std::vector<double>(size_t(R) * k * g)};
  int outliers = 0;
  for (int r = 0; r < R; ++r) {
    std::vector<int> perm(static_cast<size_t>(k));
    std::iota(perm.begin(), perm.end(), 0);
    for (int i = k - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[rng.next() % size_t(i + 1)]);
    for (int t2 = 0; t2 < k; ++t2) {
      double* row = merged.row(size_type(r) * k + t2);
      const double scale = 50.0 * (0.5 + rng.uniform());
      if (rng.uniform() < 0.02) {  // an outlier: a mixture of three programs
        ++outliers;
        for (size_type j = 0; j < g; ++j)
          row[j] = scale * (truth.row(int(rng.next() % k))[j] + truth.row(perm[size_t(t2)])[j]) *
                   (1 + 0.5 * rng.uniform());
      } else {
        for (size_type j = 0; j < g; ++j)
          row[j] = scale * truth.row(perm[size_t(t2)])[j] * std::exp(0.05 * rng.normal());
      }
    }
  }
  // ---- X: sparse counts, generated in parallel chunks (deterministic per chunk)
  std::vector<std::vector<double>> cdf(static_cast<size_t>(k), std::vector<double>(static_cast<size_t>(g)));
  for (int p = 0; p < k; ++p) std::partial_sum(truth.row(p), truth.row(p) + g, cdf[size_t(p)].begin());
  const size_type chunks = 512;
  std::vector<std::vector<std::int64_t>> c_off(chunks);
  std::vector<std::vector<std::int32_t>> c_col(chunks);
  std::vector<std::vector<double>> c_val(chunks);
  Kokkos::parallel_for(
      "bench::make_x", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, chunks),
      [&](const size_type c) {
        Rng r(1000 + std::uint64_t(c));
        const size_type i0 = c * n / chunks, i1 = (c + 1) * n / chunks;
        std::vector<std::int32_t> genes;
        for (size_type i = i0; i < i1; ++i) {
          const int p = int(r.next() % k);
          const int q = r.uniform() < 0.3 ? int(r.next() % k) : p;
          const double wq = q == p ? 0.0 : 0.2 + 0.3 * r.uniform();
          const int m = std::max(1, int(reads * std::exp(0.5 * r.normal() - 0.125)));
          genes.clear();
          for (int d = 0; d < m; ++d) {
            const auto& f = cdf[size_t(r.uniform() < wq ? q : p)];
            const double u = r.uniform() * f.back();
            genes.push_back(std::int32_t(std::min<size_type>(
                g - 1, size_type(std::upper_bound(f.begin(), f.end(), u) - f.begin()))));
          }
          std::sort(genes.begin(), genes.end());
          for (size_t a = 0; a < genes.size();) {
            size_t b = a;
            while (b < genes.size() && genes[b] == genes[a]) ++b;
            c_col[size_t(c)].push_back(genes[a]);
            c_val[size_t(c)].push_back(double(b - a));
            a = b;
          }
          c_off[size_t(c)].push_back(std::int64_t(c_val[size_t(c)].size()));
        }
      });
  io::CsrBlock<double> X;
  X.ncols = g;
  X.row_end = n;
  std::int64_t base = 0;
  for (size_type c = 0; c < chunks; ++c) {
    for (auto o : c_off[size_t(c)]) X.row_offsets.push_back(base + o);
    X.cols.insert(X.cols.end(), c_col[size_t(c)].begin(), c_col[size_t(c)].end());
    X.values.insert(X.values.end(), c_val[size_t(c)].begin(), c_val[size_t(c)].end());
    base = std::int64_t(X.values.size());
    std::vector<std::int64_t>().swap(c_off[size_t(c)]);
    std::vector<std::int32_t>().swap(c_col[size_t(c)]);
    std::vector<double>().swap(c_val[size_t(c)]);
  }
  const double nnz = double(X.nnz());
  const double gen_s = t.seconds();
  std::printf("data: X %lld x %lld, %.0f non-zeros (%.2f%%), CSR in host memory %.3f GB; "
              "%d x %d replicate spectra (%d outliers); generated in %.1f s\n",
              (long long)n, (long long)g, nnz, 100.0 * nnz / (double(n) * double(g)),
              gb(nnz * 12 + 8.0 * n), R, k, outliers, gen_s);
  CsrRowSource src(std::move(X), "synthetic X");
  const double rss_data = bench::current_rss_bytes();

  // ---- consensus, phase by phase (the steps run_consensus chains)
  ConsensusOptions opts;
  SolverOptions run;  // cNMF's defaults: cd, tol 1e-4, max_iter 1000
  Kokkos::fence();
  t.reset();
  const auto l2 = l2_normalize_rows(merged);
  const int nn = neighbor_count(opts.local_neighborhood_size, l2.rows, k);
  const auto dens = local_density(ExecSpace(), l2, nn);
  std::vector<size_type> keep;
  for (size_type r = 0; r < l2.rows; ++r)
    if (dens[size_t(r)] < opts.local_density_threshold) keep.push_back(r);
  const auto used = select_rows(l2, keep);
  Kokkos::fence();
  const double t_density = t.seconds();
  t.reset();
  const auto km = kmeans(ExecSpace(), used, k, opts.kmeans);
  Kokkos::fence();
  const double t_kmeans = t.seconds();
  t.reset();
  const double sil = silhouette_score(ExecSpace(), used, km.labels);
  Kokkos::fence();
  const double t_sil = t.seconds();
  t.reset();
  const auto medians = cluster_median_spectra(used, km.labels, k);
  const double t_median = t.seconds();
  t.reset();
  auto refit = refit_usages_streamed(ExecSpace(), src, {medians}, run, opts.stream_block_nnz, true);
  Kokkos::fence();
  const double t_refit = t.seconds();
  std::printf("spectra side (%d x %lld on the device): local density %.3f s (%zu of %lld kept, "
              "n_neighbors %d), k-means %.3f s (%d restarts, inertia %.6g), silhouette %.3f s "
              "(%.6f), medians %.3f s\n",
              R * k, (long long)g, t_density, keep.size(), (long long)l2.rows, nn, t_kmeans,
              opts.kmeans.n_init, km.inertia, t_sil, sil, t_median);
  std::printf("usage refit (X streamed once, %lld-entry blocks): %.3f s, %d iterations (%s), "
              "prediction error %.9g (relative %.4f)\n",
              (long long)opts.stream_block_nnz, t_refit, refit[0].n_iter,
              to_string(refit[0].status).c_str(), refit[0].squared_error,
              refit[0].squared_error / (refit[0].error_at_init * refit[0].error_at_init));
  const double total = t_density + t_kmeans + t_sil + t_median + t_refit;
  const double peak = bench::peak_rss_bytes();
  std::printf("consensus total %.2f s; peak RSS %.3f GB (before X %.3f GB, with X in memory %.3f GB)\n",
              total, gb(peak), gb(rss0), gb(rss_data));
  const double pw = 2.0 * 8.0 * double(n) * k;
  const double blk = 2.0 * 12.0 * double(std::min<size_type>(opts.stream_block_nnz, size_type(nnz)));
  const double spec = 3.0 * 8.0 * double(R) * k * double(g);
  std::printf("knmf memory model: P = X H^T and W (2 n k doubles) %.3f GB + one streamed block "
              "(host and device copies) %.3f GB + spectra side (3 x Rk x g doubles) %.3f GB = "
              "%.3f GB beyond X's own storage\n",
              gb(pw), gb(blk), gb(spec), gb(pw + blk + spec));
  const double ng = double(n) * double(g) * 8.0;
  std::printf("cNMF at this size (float64): prediction error in k_selection_plot densifies X "
              "(norm_counts.X.todense() %.1f GB), forms W H (%.1f GB), X - W H (%.1f GB) and its "
              "square (%.1f GB): %.1f GB alive at once, per k; rf_usages.dot(spectra) %.1f GB; "
              "older cNMF also densified TPM over all genes (n x 30,000 genes: %.1f GB)\n",
              gb(ng), gb(ng), gb(ng), gb(ng), gb(4 * ng), gb(ng), gb(double(n) * 30000 * 8));

  if (dense_n > 0) {
    // the same refit with X resident on the device (knmf::refit_usages) on dense_n rows
    io::CsrBlock<double> sub;
    const auto& M = src.matrix();
    sub.ncols = g;
    sub.row_end = dense_n;
    sub.row_offsets.assign(M.row_offsets.begin(), M.row_offsets.begin() + dense_n + 1);
    sub.cols.assign(M.cols.begin(), M.cols.begin() + sub.row_offsets.back());
    sub.values.assign(M.values.begin(), M.values.begin() + sub.row_offsets.back());
    std::vector<double> dense(size_t(dense_n * g), 0.0);
    for (size_type i = 0; i < dense_n; ++i)
      for (auto p = sub.row_offsets[size_t(i)]; p < sub.row_offsets[size_t(i + 1)]; ++p)
        dense[size_t(i * g + sub.cols[size_t(p)])] = sub.values[size_t(p)];
    CsrRowSource small(std::move(sub), "rows of X");
    auto Xd = DenseMatrix<double>::from_host(ExecSpace(), dense_n, g, dense.data());
    Kokkos::fence();
    t.reset();
    auto a = refit_usages(ExecSpace(), Xd, {medians.values}, k, 1, run)[0];
    Kokkos::fence();
    const double t_dev = t.seconds();
    t.reset();
    auto b = refit_usages_streamed(ExecSpace(), small, {medians}, run);
    Kokkos::fence();
    const double t_str = t.seconds();
    double diff = 0, ref = 0;
    for (size_t e = 0; e < a.W.size(); ++e) {
      diff = std::max(diff, std::fabs(a.W[e] - b[0].W.values[e]));
      ref = std::max(ref, std::fabs(a.W[e]));
    }
    std::printf("dense check, %lld rows: knmf::refit_usages (dense X on the device, %.2f GB) "
                "%.3f s, %d iterations; streamed %.3f s, %d iterations; max |dW| / max |W| = %.3g\n",
                (long long)dense_n, gb(double(dense_n) * g * 8), t_dev, a.n_iter, t_str,
                b[0].n_iter, diff / ref);
  }
  return 0;
}
