// The spectra side of cNMF's consensus: normalization, local density, k-means, silhouette,
// per-cluster medians (see knmf/consensus/clustering.hpp).
#include "knmf/core/host_access.hpp"
#include "knmf/consensus/clustering.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <Kokkos_Profiling_ScopedRegion.hpp>

#include "consensus/detail/device.hpp"
#include "consensus/detail/host_math.hpp"
#include "knmf/core/error.hpp"
#include "knmf/random/random_state.hpp"

namespace knmf::consensus {

// ---- options ---------------------------------------------------------------------------------

void KMeansOptions::validate() const {
  if (n_init < 1) input_error("k-means n_init = ", n_init, " is invalid: it must be >= 1");
  if (max_iter < 1) input_error("k-means max_iter = ", max_iter, " is invalid: it must be >= 1");
  if (!(tol >= 0) || !std::isfinite(tol))
    input_error("k-means tol = ", tol, " is invalid: it must be finite and >= 0");
  RandomState probe(seed);  // InputError for seeds outside [0, 2^32)
}

void ConsensusOptions::validate() const {
  if (!(local_density_threshold > 0.0 && local_density_threshold <= 2.0))
    input_error("--local-density-threshold ", local_density_threshold,
                " is out of range: it must satisfy 0 < t <= 2");
  if (!(local_neighborhood_size > 0.0 && local_neighborhood_size <= 1.0))
    input_error("--local-neighborhood-size ", local_neighborhood_size,
                " is out of range: it must satisfy 0 < s <= 1");
  if (distance_block_bytes < 1) input_error("distance_block_bytes must be positive");
  if (stream_block_nnz < 1) input_error("stream_block_nnz must be positive");
  kmeans.validate();
}

int neighbor_count(double local_neighborhood_size, size_type rows, int k) {
  // Python: int(local_neighborhood_size * merged_spectra.shape[0] / k), left to right.
  const double v = local_neighborhood_size * double(rows) / double(k);
  return int(std::trunc(v));
}

// ---- host helpers ----------------------------------------------------------------------------

HostRows l2_normalize_rows(const HostRows& x) {
  // cNMF: (merged.T / np.sqrt((merged**2).sum(axis=1))).T. The DataFrame's block is stored
  // gene-major, so numpy sums each row's squares sequentially (not pairwise); the cached
  // local densities of near-duplicate spectra depend on these last bits.
  HostRows out = x;
  for (size_type r = 0; r < x.rows; ++r) {
    const double* row = x.row(r);
    double s = 0.0;
    for (size_type c = 0; c < x.cols; ++c) s += row[c] * row[c];
    const double norm = std::sqrt(s);
    if (norm == 0.0) continue;
    double* o = out.row(r);
    for (size_type c = 0; c < x.cols; ++c) o[c] = row[c] / norm;
  }
  return out;
}

std::vector<size_type> nonzero_rows(const HostRows& x) {
  std::vector<size_type> keep;
  for (size_type r = 0; r < x.rows; ++r) {
    const double* row = x.row(r);
    if (std::any_of(row, row + x.cols, [](double v) { return v != 0.0; })) keep.push_back(r);
  }
  return keep;
}

HostRows select_rows(const HostRows& x, const std::vector<size_type>& keep) {
  HostRows out;
  out.rows = size_type(keep.size());
  out.cols = x.cols;
  out.values.resize(size_t(out.rows * out.cols));
  for (size_t i = 0; i < keep.size(); ++i)
    std::copy(x.row(keep[i]), x.row(keep[i]) + x.cols, out.row(size_type(i)));
  return out;
}

// ---- device kernels --------------------------------------------------------------------------

namespace detail {

/// Sum of the m smallest entries of each row of the distance block D (B x n), divided by nn.
void smallest_sums(const ExecSpace& space, const DMatrix& D, int m, int nn, size_type b0,
                   const DVector& out) {
  const size_type B = size_type(D.extent(0)), n = size_type(D.extent(1));
  DMatrix buf = alloc_matrix(space, "knmf::consensus::nearest", B, m);
  Kokkos::parallel_for(
      "knmf::consensus::local_density", Policy64(space, 0, B), KOKKOS_LAMBDA(const size_type i) {
        int cnt = 0;
        for (size_type j = 0; j < n; ++j) {
          const double d = D(i, j);
          int p;
          if (cnt < m) {
            p = cnt++;
          } else if (d < buf(i, m - 1)) {
            p = m - 1;
          } else {
            continue;
          }
          while (p > 0 && buf(i, p - 1) > d) {
            buf(i, p) = buf(i, p - 1);
            --p;
          }
          buf(i, p) = d;
        }
        double s = 0.0;
        for (int p = 0; p < m; ++p) s += buf(i, p);
        out(b0 + i) = s / double(nn);
      });
}

/// Columns `idx` of xt gathered into a g x T matrix.
DMatrix gather_columns(const ExecSpace& space, const DMatrix& xt, const std::vector<size_type>& idx) {
  const size_type g = size_type(xt.extent(0)), T = size_type(idx.size());
  Kokkos::View<size_type*, MemSpace> d_idx(Kokkos::view_alloc(space, "knmf::kmeans::idx"), T);
  auto h_idx = host_mirror(d_idx);
  for (size_type t = 0; t < T; ++t) h_idx(t) = idx[size_t(t)];
  Kokkos::deep_copy(space, d_idx, h_idx);
  DMatrix out = alloc_matrix(space, "knmf::kmeans::gathered", g, T);
  Kokkos::parallel_for(
      "knmf::kmeans::gather", Policy64(space, 0, g * T), KOKKOS_LAMBDA(const size_type e) {
        const size_type f = e % g, t = e / g;
        out(f, t) = xt(f, d_idx(t));
      });
  space.fence();
  return out;
}

/// Labels: argmin_c (|c|^2 + (-2) <c, x_j>) with the first minimum winning (scikit-learn's
/// lloyd chunk update). G = C^T X (k x n).
void assign_labels(const ExecSpace& space, const DMatrix& G, const DVector& csq,
                   const Kokkos::View<int*, MemSpace>& labels) {
  const int k = int(G.extent(0));
  const size_type n = size_type(G.extent(1));
  Kokkos::parallel_for(
      "knmf::kmeans::assign", Policy64(space, 0, n), KOKKOS_LAMBDA(const size_type j) {
        double best = csq(0) + (-2.0 * G(0, j));
        int lab = 0;
        for (int c = 1; c < k; ++c) {
          const double v = csq(c) + (-2.0 * G(c, j));
          if (v < best) {
            best = v;
            lab = c;
          }
        }
        labels(j) = lab;
      });
}

/// sums(f, c) = sum over the members of cluster c (in sample order) of xt(f, member).
void cluster_sums(const ExecSpace& space, const DMatrix& xt,
                  const Kokkos::View<size_type*, MemSpace>& offsets,
                  const Kokkos::View<size_type*, MemSpace>& members, const DMatrix& sums) {
  const size_type g = size_type(xt.extent(0)), k = size_type(sums.extent(1));
  Kokkos::parallel_for(
      "knmf::kmeans::sums", Policy64(space, 0, g * k), KOKKOS_LAMBDA(const size_type e) {
        const size_type f = e % g, c = e / g;
        double s = 0.0;
        for (size_type p = offsets(c); p < offsets(c + 1); ++p) s += xt(f, members(p));
        sums(f, c) = s;
      });
}

/// Squared distance of each sample to its center: sum_f (x_f - c_f)^2.
void sample_sq_dist(const ExecSpace& space, const DMatrix& xt, const DMatrix& C,
                    const Kokkos::View<int*, MemSpace>& labels, const DVector& out) {
  const size_type g = size_type(xt.extent(0)), n = size_type(xt.extent(1));
  Kokkos::parallel_for(
      "knmf::kmeans::inertia", Policy64(space, 0, n), KOKKOS_LAMBDA(const size_type j) {
        const int c = labels(j);
        double s = 0.0;
        for (size_type f = 0; f < g; ++f) {
          const double d = xt(f, j) - C(f, c);
          s += d * d;
        }
        out(j) = s;
      });
}

/// Silhouette of each row of the block from S(i, c) = sum of distances to cluster c.
void silhouette_rows(const ExecSpace& space, const DMatrix& S,
                     const Kokkos::View<int*, MemSpace>& labels, const DVector& freq,
                     size_type b0, const DVector& out) {
  const size_type B = size_type(S.extent(0));
  const int L = int(S.extent(1));
  const double inf = std::numeric_limits<double>::infinity();
  Kokkos::parallel_for(
      "knmf::consensus::silhouette", Policy64(space, 0, B), KOKKOS_LAMBDA(const size_type i) {
        const int own = labels(b0 + i);
        if (freq(own) <= 1.0) {
          out(b0 + i) = 0.0;
          return;
        }
        const double a = S(i, own) / (freq(own) - 1.0);
        double b = inf;
        for (int c = 0; c < L; ++c) {
          if (c == own) continue;
          const double v = S(i, c) / freq(c);
          if (v < b) b = v;
        }
        const double m = a > b ? a : b;
        const double s = (b - a) / m;
        out(b0 + i) = (s == s) ? s : 0.0;  // nan_to_num
      });
}

}  // namespace detail

// ---- local density ---------------------------------------------------------------------------

std::vector<double> local_density(const ExecSpace& space, const HostRows& x, int n_neighbors,
                                  size_type block_bytes) {
  Kokkos::Profiling::ScopedRegion region("knmf::consensus::local_density");
  const size_type n = x.rows;
  if (n_neighbors < 1 || size_type(n_neighbors) >= n)
    input_error("local density: n_neighbors = ", n_neighbors, " is invalid for ", n,
                " spectra: it must satisfy 1 <= n_neighbors < spectra (check "
                "--local-neighborhood-size)");
  auto xt = detail::upload_transposed(space, x, "knmf::consensus::spectra");
  auto sq = detail::column_sq_norms(space, xt);
  auto dens = detail::alloc_vector(space, "knmf::consensus::density", n);
  const size_type B = detail::block_rows(block_bytes, n, n);
  auto G = detail::alloc_matrix(space, "knmf::consensus::distance_block", B, n);
  const size_type g = x.cols;
  for (size_type b0 = 0; b0 < n; b0 += B) {
    const size_type b = std::min(B, n - b0);
    detail::DMatrix Gb(G.data(), b, n);
    detail::DMatrix xb(xt.data() + b0 * g, g, b);
    detail::gemm_tn(space, xb, xt, Gb);
    detail::distances_from_gram(space, Gb, sq, b0, true, false, xt);
    detail::smallest_sums(space, Gb, n_neighbors + 1, n_neighbors, b0, dens);
  }
  return detail::download(space, dens);
}

HostRows pairwise_distances(const ExecSpace& space, const HostRows& x, size_type block_bytes) {
  const size_type n = x.rows, g = x.cols;
  auto xt = detail::upload_transposed(space, x, "knmf::consensus::spectra");
  auto sq = detail::column_sq_norms(space, xt);
  const size_type B = detail::block_rows(block_bytes, n, n);
  auto G = detail::alloc_matrix(space, "knmf::consensus::distance_block", B, n);
  HostRows out{n, n, std::vector<double>(static_cast<size_t>(n * n))};
  for (size_type b0 = 0; b0 < n; b0 += B) {
    const size_type b = std::min(B, n - b0);
    detail::DMatrix Gb(G.data(), b, n);
    detail::DMatrix xb(xt.data() + b0 * g, g, b);
    detail::gemm_tn(space, xb, xt, Gb);
    detail::distances_from_gram(space, Gb, sq, b0, true, false, xt);
    const auto h = detail::download_transposed(space, Gb);  // n x b row-major = columns of D
    for (size_type j = 0; j < n; ++j)
      for (size_type i = 0; i < b; ++i) out.row(b0 + i)[j] = h.values[size_t(j * b + i)];
  }
  return out;
}

// ---- k-means ---------------------------------------------------------------------------------

namespace {

/// Squared distances (scikit-learn's _euclidean_distances(X[idx], X, squared=True)) of the
/// samples `idx` to every sample, as a T x n row-major host array.
std::vector<double> sq_dist_to_samples(const ExecSpace& space, const detail::DMatrix& xt,
                                       const detail::DVector& sq, const std::vector<size_type>& idx) {
  const size_type n = size_type(xt.extent(1)), T = size_type(idx.size());
  auto C = detail::gather_columns(space, xt, idx);
  auto G = detail::alloc_matrix(space, "knmf::kmeans::cand_gram", T, n);
  detail::gemm_tn(space, C, xt, G);
  // the candidates' own squared norms are those of their rows: |x_idx|^2 = sq(idx)
  std::vector<double> cand_sq(idx.size());
  auto sq_h = detail::download(space, sq);
  for (size_t t = 0; t < idx.size(); ++t) cand_sq[t] = sq_h[size_t(idx[t])];
  auto csq = detail::upload(space, cand_sq, "knmf::kmeans::cand_sq");
  Kokkos::parallel_for(
      "knmf::kmeans::cand_dist", detail::Policy64(space, 0, T * n),
      KOKKOS_LAMBDA(const size_type e) {
        const size_type t = e % T, j = e / T;
        const double d = (-2.0 * G(t, j) + csq(t)) + sq(j);
        G(t, j) = d > 0.0 ? d : 0.0;
      });
  auto h = detail::download_transposed(space, G);  // n x T row-major
  std::vector<double> out(size_t(T * n));
  for (size_type j = 0; j < n; ++j)
    for (size_type t = 0; t < T; ++t) out[size_t(t * n + j)] = h.values[size_t(j * T + t)];
  return out;
}

/// scikit-learn's _kmeans_plusplus: indices of the k seeds.
std::vector<size_type> kmeans_plusplus(const ExecSpace& space, const detail::DMatrix& xt,
                                       const detail::DVector& sq, int k, RandomState& rng) {
  const size_type n = size_type(xt.extent(1));
  const int trials = 2 + int(std::log(double(k)));
  std::vector<size_type> centers;
  centers.push_back(size_type(rng.randint(0, n)));
  std::vector<double> closest = sq_dist_to_samples(space, xt, sq, {centers[0]});
  double pot = detail::pairwise_sum(closest.data(), n);
  std::vector<double> cumsum(static_cast<size_t>(n)), pots(static_cast<size_t>(trials));
  for (int c = 1; c < k; ++c) {
    std::vector<double> rand_vals(static_cast<size_t>(trials));
    for (auto& v : rand_vals) v = rng.random_sample() * pot;
    double acc = 0.0;
    for (size_type j = 0; j < n; ++j) cumsum[size_t(j)] = acc += closest[size_t(j)];
    std::vector<size_type> cand(static_cast<size_t>(trials));
    for (int t = 0; t < trials; ++t) {
      const auto it = std::lower_bound(cumsum.begin(), cumsum.end(), rand_vals[size_t(t)]);
      cand[size_t(t)] = std::min<size_type>(size_type(it - cumsum.begin()), n - 1);
    }
    std::vector<double> d = sq_dist_to_samples(space, xt, sq, cand);
    for (int t = 0; t < trials; ++t) {
      double* row = d.data() + size_t(t) * size_t(n);
      for (size_type j = 0; j < n; ++j) row[j] = std::min(closest[size_t(j)], row[j]);
      pots[size_t(t)] = detail::pairwise_sum(row, n);
    }
    const int best = int(std::min_element(pots.begin(), pots.end()) - pots.begin());
    pot = pots[size_t(best)];
    closest.assign(d.begin() + size_t(best) * size_t(n), d.begin() + size_t(best + 1) * size_t(n));
    centers.push_back(cand[size_t(best)]);
  }
  return centers;
}

/// scikit-learn's _is_same_clustering: labels equal up to a permutation of the clusters.
bool same_clustering(const std::vector<int>& a, const std::vector<int>& b, int k) {
  std::vector<int> map(static_cast<size_t>(k), -1);
  for (size_t i = 0; i < a.size(); ++i) {
    int& m = map[size_t(a[i])];
    if (m == -1)
      m = b[i];
    else if (m != b[i])
      return false;
  }
  return true;
}

struct LloydRun {
  std::vector<int> labels;
  std::vector<double> centers;  // k x g row-major
  double inertia = 0.0;
  int n_iter = 0;
};

/// scikit-learn's _relocate_empty_clusters_dense: each empty cluster (count 0) takes, in
/// order, one of the samples farthest from their (old) centers; the sums (k x g row-major)
/// and weights move with it.
void relocate_empty_clusters(const HostRows& xc, const std::vector<double>& centers,
                             const std::vector<int>& labels,
                             const std::vector<size_type>& count, std::vector<double>& sums_h,
                             std::vector<double>& weight) {
  const size_type n = xc.rows, g = xc.cols;
  const int k = int(count.size());
  std::vector<int> empty;
  for (int c = 0; c < k; ++c)
    if (count[size_t(c)] == 0) empty.push_back(c);
  if (!empty.empty()) {
    std::vector<double> dist(static_cast<size_t>(n));
    for (size_type j = 0; j < n; ++j) {
      const double* x = xc.row(j);
      const double* cen = centers.data() + size_t(labels[size_t(j)]) * size_t(g);
      double s = 0.0;
      for (size_type f = 0; f < g; ++f) s += (x[f] - cen[f]) * (x[f] - cen[f]);
      dist[size_t(j)] = s;
    }
    std::vector<size_type> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), size_type(0));
    std::stable_sort(order.begin(), order.end(),
                     [&](size_type a, size_type b) { return dist[size_t(a)] > dist[size_t(b)]; });
    for (size_t e = 0; e < empty.size() && e < order.size(); ++e) {
      const size_type far = order[e];
      const int to = empty[e], from = labels[size_t(far)];
      const double* x = xc.row(far);
      for (size_type f = 0; f < g; ++f) {
        sums_h[size_t(from * g + f)] -= x[f];
        sums_h[size_t(to * g + f)] = x[f];
      }
      weight[size_t(to)] = 1.0;
      weight[size_t(from)] -= 1.0;
    }
  }
}

/// One Lloyd run (scikit-learn's _kmeans_single_lloyd) from the seeds `init` (k x g).
LloydRun lloyd(const ExecSpace& space, const HostRows& xc, const detail::DMatrix& xt,
               std::vector<double> centers, int k, int max_iter, double tol) {
  const size_type n = xc.rows, g = xc.cols;
  Kokkos::View<int*, MemSpace> d_labels(Kokkos::view_alloc(space, "knmf::kmeans::labels"), n);
  auto h_labels = host_mirror(d_labels);
  auto G = detail::alloc_matrix(space, "knmf::kmeans::gram", k, n);
  auto sums = detail::alloc_matrix(space, "knmf::kmeans::sums", g, k);
  Kokkos::View<size_type*, MemSpace> offsets(Kokkos::view_alloc(space, "knmf::kmeans::offsets"), k + 1);
  Kokkos::View<size_type*, MemSpace> members(Kokkos::view_alloc(space, "knmf::kmeans::members"), n);
  auto h_offsets = host_mirror(offsets);
  auto h_members = host_mirror(members);
  std::vector<double> sums_h(size_t(g * k));

  auto label_with = [&](const std::vector<double>& cen) {
    HostRows ch{k, g, cen};
    auto C = detail::upload_transposed(space, ch, "knmf::kmeans::centers");
    std::vector<double> csq_h(static_cast<size_t>(k));
    std::vector<double> tmp(static_cast<size_t>(g));
    for (int c = 0; c < k; ++c) {
      for (size_type f = 0; f < g; ++f) tmp[size_t(f)] = cen[size_t(c * g + f)] * cen[size_t(c * g + f)];
      csq_h[size_t(c)] = detail::pairwise_sum(tmp.data(), g);
    }
    auto csq = detail::upload(space, csq_h, "knmf::kmeans::csq");
    detail::gemm_tn(space, C, xt, G);
    detail::assign_labels(space, G, csq, d_labels);
    Kokkos::deep_copy(space, h_labels, d_labels);
    space.fence();
    std::vector<int> lab(static_cast<size_t>(n));
    for (size_type j = 0; j < n; ++j) lab[size_t(j)] = h_labels(j);
    return lab;
  };

  LloydRun run;
  std::vector<int> labels_old(static_cast<size_t>(n), -1);
  bool strict = false;
  int it = 0;
  for (; it < max_iter; ++it) {
    std::vector<int> labels = label_with(centers);
    // cluster members in sample order
    std::vector<size_type> count(static_cast<size_t>(k), 0);
    for (int l : labels) ++count[size_t(l)];
    h_offsets(0) = 0;
    for (int c = 0; c < k; ++c) h_offsets(c + 1) = h_offsets(c) + count[size_t(c)];
    std::vector<size_type> fill(static_cast<size_t>(k), 0);
    for (size_type j = 0; j < n; ++j) {
      const int c = labels[size_t(j)];
      h_members(h_offsets(c) + fill[size_t(c)]++) = j;
    }
    Kokkos::deep_copy(space, offsets, h_offsets);
    Kokkos::deep_copy(space, members, h_members);
    detail::cluster_sums(space, xt, offsets, members, sums);
    {
      Kokkos::View<double**, Kokkos::LayoutLeft, Kokkos::HostSpace,
                   Kokkos::MemoryTraits<Kokkos::Unmanaged>>
          h(sums_h.data(), g, k);
      Kokkos::deep_copy(space, h, sums);
      space.fence();
    }
    // sums_h is column-major g x k = row-major k x g: the weighted sums of each cluster
    std::vector<double> weight(count.begin(), count.end());
    // empty clusters take the samples farthest from their (old) centers
    relocate_empty_clusters(xc, centers, labels, count, sums_h, weight);
    std::vector<double> centers_new(sums_h);
    for (int c = 0; c < k; ++c) {
      if (weight[size_t(c)] > 0) {
        const double alpha = 1.0 / weight[size_t(c)];
        for (size_type f = 0; f < g; ++f) centers_new[size_t(c * g + f)] *= alpha;
      }
    }
    std::vector<double> shift2(static_cast<size_t>(k));
    for (int c = 0; c < k; ++c) {
      double s = 0.0;
      for (size_type f = 0; f < g; ++f) {
        const double d = centers_new[size_t(c * g + f)] - centers[size_t(c * g + f)];
        s += d * d;
      }
      const double sh = std::sqrt(s);
      shift2[size_t(c)] = sh * sh;
    }
    centers.swap(centers_new);
    run.labels = labels;
    if (labels == labels_old) {
      strict = true;
      break;
    }
    if (detail::pairwise_sum(shift2.data(), k) <= tol) break;
    labels_old = labels;
  }
  run.n_iter = std::min(it + 1, max_iter);
  if (!strict) run.labels = label_with(centers);
  // inertia with the final centers and labels
  {
    HostRows ch{k, g, centers};
    auto C = detail::upload_transposed(space, ch, "knmf::kmeans::centers");
    for (size_type j = 0; j < n; ++j) h_labels(j) = run.labels[size_t(j)];
    Kokkos::deep_copy(space, d_labels, h_labels);
    auto d = detail::alloc_vector(space, "knmf::kmeans::sample_dist", n);
    detail::sample_sq_dist(space, xt, C, d_labels, d);
    auto dh = detail::download(space, d);
    double s = 0.0;
    for (double v : dh) s += v;
    run.inertia = s;
  }
  run.centers = std::move(centers);
  return run;
}

}  // namespace

KMeansResult kmeans(const ExecSpace& space, const HostRows& x, int k, const KMeansOptions& opts) {
  Kokkos::Profiling::ScopedRegion region("knmf::consensus::kmeans");
  opts.validate();
  const size_type n = x.rows, g = x.cols;
  if (k < 1) input_error("k-means: k = ", k, " is invalid: it must be >= 1");
  if (n < k)
    input_error("k-means: ", n, " spectra cannot form k = ", k,
                " clusters (at least k spectra are needed)");
  // tolerance: mean feature variance * tol (scikit-learn's _tolerance, before centering)
  std::vector<double> mean(static_cast<size_t>(g), 0.0), var(static_cast<size_t>(g), 0.0);
  for (size_type r = 0; r < n; ++r)
    for (size_type f = 0; f < g; ++f) mean[size_t(f)] += x.row(r)[f];
  for (auto& m : mean) m /= double(n);
  for (size_type r = 0; r < n; ++r)
    for (size_type f = 0; f < g; ++f) {
      const double d = x.row(r)[f] - mean[size_t(f)];
      var[size_t(f)] += d * d;
    }
  for (auto& v : var) v /= double(n);
  const double tol = opts.tol == 0 ? 0.0 : detail::pairwise_sum(var.data(), g) / double(g) * opts.tol;
  // centered data (scikit-learn subtracts the feature means for accurate distances)
  HostRows xc = x;
  for (size_type r = 0; r < n; ++r)
    for (size_type f = 0; f < g; ++f) xc.row(r)[f] -= mean[size_t(f)];
  auto xt = detail::upload_transposed(space, xc, "knmf::kmeans::data");
  auto sq = detail::column_sq_norms(space, xt);

  RandomState rng(opts.seed);
  LloydRun best;
  int best_init = -1;
  for (int init = 0; init < opts.n_init; ++init) {
    auto seeds = kmeans_plusplus(space, xt, sq, k, rng);
    std::vector<double> centers(size_t(k * g));
    for (int c = 0; c < k; ++c)
      std::copy(xc.row(seeds[size_t(c)]), xc.row(seeds[size_t(c)]) + g, centers.begin() + c * g);
    LloydRun run = lloyd(space, xc, xt, std::move(centers), k, opts.max_iter, tol);
    if (best_init < 0 ||
        (run.inertia < best.inertia && !same_clustering(run.labels, best.labels, k))) {
      best = std::move(run);
      best_init = init;
    }
  }
  KMeansResult out;
  out.labels = std::move(best.labels);
  out.centers = HostRows{k, g, std::move(best.centers)};
  for (int c = 0; c < k; ++c)
    for (size_type f = 0; f < g; ++f) out.centers.row(c)[f] += mean[size_t(f)];
  out.inertia = best.inertia;
  out.n_iter = best.n_iter;
  out.best_init = best_init;
  return out;
}

// ---- silhouette ------------------------------------------------------------------------------

double silhouette_score(const ExecSpace& space, const HostRows& x, const std::vector<int>& labels,
                        size_type block_bytes) {
  Kokkos::Profiling::ScopedRegion region("knmf::consensus::silhouette");
  const size_type n = x.rows;
  KNMF_ASSERT(size_type(labels.size()) == n, "one label per row");
  // LabelEncoder: the distinct labels in sorted order
  std::vector<int> uniq(labels);
  std::sort(uniq.begin(), uniq.end());
  uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
  const int L = int(uniq.size());
  if (L < 2 || L > n - 1) return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> freq(size_t(L), 0.0);
  Kokkos::View<int*, MemSpace> d_lab(Kokkos::view_alloc(space, "knmf::silhouette::labels"), n);
  auto h_lab = host_mirror(d_lab);
  HostRows onehot{n, L, std::vector<double>(size_t(n * L), 0.0)};  // row-major n x L
  for (size_type j = 0; j < n; ++j) {
    const int l = int(std::lower_bound(uniq.begin(), uniq.end(), labels[size_t(j)]) - uniq.begin());
    h_lab(j) = l;
    freq[size_t(l)] += 1.0;
    onehot.row(j)[l] = 1.0;
  }
  Kokkos::deep_copy(space, d_lab, h_lab);
  auto d_freq = detail::upload(space, freq, "knmf::silhouette::freq");
  // LayoutLeft n x L one-hot: the transpose upload of an L x n row-major matrix
  HostRows onehot_t{L, n, std::vector<double>(size_t(n * L))};
  for (size_type j = 0; j < n; ++j)
    for (int l = 0; l < L; ++l) onehot_t.row(l)[j] = onehot.row(j)[l];
  auto M = detail::upload_transposed(space, onehot_t, "knmf::silhouette::onehot");  // n x L
  auto xt = detail::upload_transposed(space, x, "knmf::silhouette::data");
  auto sq = detail::column_sq_norms(space, xt);
  const size_type B = detail::block_rows(block_bytes, n, n);
  auto G = detail::alloc_matrix(space, "knmf::silhouette::distance_block", B, n);
  auto S = detail::alloc_matrix(space, "knmf::silhouette::cluster_sums", B, L);
  auto sil = detail::alloc_vector(space, "knmf::silhouette::samples", n);
  const size_type g = x.cols;
  for (size_type b0 = 0; b0 < n; b0 += B) {
    const size_type b = std::min(B, n - b0);
    detail::DMatrix Gb(G.data(), b, n), Sb(S.data(), b, L), xb(xt.data() + b0 * g, g, b);
    detail::gemm_tn(space, xb, xt, Gb);
    detail::distances_from_gram(space, Gb, sq, b0, true, false, xt);
    detail::gemm_nn(space, Gb, M, Sb);
    detail::silhouette_rows(space, Sb, d_lab, d_freq, b0, sil);
  }
  auto s = detail::download(space, sil);
  return detail::pairwise_sum(s.data(), n) / double(n);
}

// ---- medians ---------------------------------------------------------------------------------

HostRows cluster_median_spectra(const HostRows& x, const std::vector<int>& labels, int k) {
  KNMF_ASSERT(size_type(labels.size()) == x.rows, "one label per row");
  std::vector<std::vector<size_type>> members(static_cast<size_t>(k));
  for (size_type r = 0; r < x.rows; ++r) {
    const int l = labels[size_t(r)];
    KNMF_ASSERT(l >= 0 && l < k, "label out of range");
    members[size_t(l)].push_back(r);
  }
  HostRows out{k, x.cols, std::vector<double>(size_t(k * x.cols))};
  std::vector<double> vals;
  for (int c = 0; c < k; ++c) {
    const auto& m = members[size_t(c)];
    if (m.empty()) input_error("consensus: k-means cluster ", c + 1, " of k = ", k, " is empty");
    const size_t cnt = m.size();
    double* o = out.row(c);
    for (size_type f = 0; f < x.cols; ++f) {
      vals.resize(cnt);
      for (size_t i = 0; i < cnt; ++i) vals[i] = x.row(m[i])[f];
      std::nth_element(vals.begin(), vals.begin() + long(cnt / 2), vals.end());
      const double hi = vals[cnt / 2];
      if (cnt % 2) {
        o[f] = hi;
      } else {
        const double lo = *std::max_element(vals.begin(), vals.begin() + long(cnt / 2));
        o[f] = (hi + lo) / 2;
      }
    }
    const double sum = detail::pairwise_sum(o, x.cols);
    if (!(sum > 0.0) || !std::isfinite(sum))
      input_error("consensus: the median spectrum of k-means cluster ", c + 1, " of k = ", k,
                  " sums to ", sum, " and cannot be normalized");
    for (size_type f = 0; f < x.cols; ++f) o[f] = o[f] / sum;
  }
  return out;
}

// ---- the whole spectra side -------------------------------------------------------------------

SpectraClustering cluster_spectra(const ExecSpace& space, const HostRows& merged, int k,
                                  const ConsensusOptions& opts, bool filter,
                                  bool compute_silhouette) {
  opts.validate();
  if (k < 1) input_error("consensus: k = ", k, " is invalid: it must be >= 1");
  SpectraClustering out;
  out.k = k;
  out.nonzero_rows = nonzero_rows(merged);
  const HostRows l2 = l2_normalize_rows(select_rows(merged, out.nonzero_rows));
  const size_type n = l2.rows;
  out.n_neighbors = neighbor_count(opts.local_neighborhood_size, n, k);
  HostRows used;
  if (filter) {
    out.local_density = local_density(space, l2, out.n_neighbors, opts.distance_block_bytes);
    std::vector<size_type> keep;
    for (size_type r = 0; r < n; ++r)
      if (out.local_density[size_t(r)] < opts.local_density_threshold) keep.push_back(r);
    for (size_type r : keep) out.used_rows.push_back(out.nonzero_rows[size_t(r)]);
    used = select_rows(l2, keep);
  } else {
    out.used_rows = out.nonzero_rows;
    used = l2;
  }
  if (used.rows < k) {
    if (filter)
      input_error("consensus k = ", k, ": only ", used.rows, " of ", merged.rows,
                  " replicate spectra have a local density below --local-density-threshold ",
                  opts.local_density_threshold, "; k-means needs at least k (raise the threshold)");
    input_error("consensus k = ", k, ": only ", used.rows, " of ", merged.rows,
                " replicate spectra are not all zero; k-means needs at least k");
  }
  auto km = kmeans(space, used, k, opts.kmeans);
  out.labels = km.labels;
  out.kmeans_inertia = km.inertia;
  out.median_spectra = cluster_median_spectra(used, km.labels, k);
  out.silhouette = compute_silhouette
                       ? silhouette_score(space, used, km.labels, opts.distance_block_bytes)
                       : std::numeric_limits<double>::quiet_NaN();
  return out;
}

}  // namespace knmf::consensus
