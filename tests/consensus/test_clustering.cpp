// The spectra side of consensus against cNMF's cache and scikit-learn 1.2.1:
// local density, k-means (labels, inertia, restarts), silhouette, medians.
#include <gtest/gtest.h>

#include <cmath>

#include "consensus_fixtures.hpp"
#include "knmf/consensus/clustering.hpp"
#include "knmf/core/error.hpp"

namespace {
using namespace knmf;
using namespace knmf::consensus;
using namespace knmf::test;

class Pbmc : public ::testing::Test {};

TEST_F(Pbmc, LocalDensityEqualsCnmfCache) {
  const auto merged = merged_spectra(7);
  const auto l2 = l2_normalize_rows(merged);
  const int nn = neighbor_count(0.30, l2.rows, 7);
  EXPECT_EQ(nn, 6);
  const auto cache = ref_frame("pbmcA.local_density_cache.k_7.merged.df.npz");
  ASSERT_EQ(cache.rows, l2.rows);
  // whole matrix in one block, and in blocks of 9 rows (the result must not change)
  for (size_type bytes : {size_type(1) << 30, size_type(9 * 140 * 8)}) {
    const auto dens = local_density(ExecSpace(), l2, nn, bytes);
    double worst = 0.0;
    for (size_type r = 0; r < l2.rows; ++r) worst = std::max(worst, std::fabs(dens[size_t(r)] - cache.at(r, 0)));
    RecordProperty("max_abs_density_diff_" + std::to_string(bytes), std::to_string(worst));
    std::printf("local density k=7: max |knmf - cNMF cache| = %.3g (block %lld bytes)\n", worst,
                (long long)bytes);
    EXPECT_LT(worst, 1e-10);
  }
}

void expect_kmeans_matches(const HostRows& x, const nlohmann::json& g) {
  KMeansOptions o;
  o.n_init = g["n_init"];
  o.seed = g["seed"];
  const int k = g["k"];
  const auto r = kmeans(ExecSpace(), x, k, o);
  const auto want = g["labels"].get<std::vector<int>>();
  ASSERT_EQ(r.labels.size(), want.size());
  int diff = 0;
  for (size_t i = 0; i < want.size(); ++i) diff += r.labels[i] != want[i];
  EXPECT_EQ(diff, 0) << "labels differ from scikit-learn's for k = " << k;
  EXPECT_LT(rel_diff(r.inertia, g["inertia"]), 1e-11) << "k = " << k;
  EXPECT_EQ(r.n_iter, g["n_iter"].get<int>()) << "k = " << k;
  if (!g["silhouette"].is_null()) {
    // scikit-learn's own distances of near-duplicate spectra carry absolute errors of about
    // 1e-16 / d (its GEMM's rounding): the silhouettes agree to ~1e-11 relative, not to ulps.
    const double s = silhouette_score(ExecSpace(), x, r.labels);
    EXPECT_LT(rel_diff(s, g["silhouette"]), 1e-9) << "k = " << k;
  } else {
    EXPECT_TRUE(std::isnan(silhouette_score(ExecSpace(), x, r.labels)));
  }
}

TEST_F(Pbmc, KMeansEqualsScikitLearnOnAllReplicates) {
  for (int k : {5, 6, 7, 8}) {
    const auto l2 = l2_normalize_rows(merged_spectra(k));
    expect_kmeans_matches(l2, consensus_golden()["pbmc"]["k" + std::to_string(k) + "_all"]);
  }
}

TEST_F(Pbmc, DensityFilterAndKMeansAsCnmfConsensus) {
  const auto& g = consensus_golden()["pbmc"]["k7_dt0_5"];
  ConsensusOptions o;
  const auto c = cluster_spectra(ExecSpace(), merged_spectra(7), 7, o, true, true);
  std::vector<size_type> kept(c.used_rows.begin(), c.used_rows.end());
  EXPECT_EQ(kept, g["kept"].get<std::vector<size_type>>());
  EXPECT_EQ(c.labels, g["labels"].get<std::vector<int>>());
  EXPECT_LT(rel_diff(c.silhouette, g["silhouette"]), 1e-9);
  // the median spectra are cNMF's consensus spectra in k-means order (before reordering)
  EXPECT_EQ(c.median_spectra.rows, 7);
  for (int t = 0; t < 7; ++t) {
    double s = 0;
    for (size_type f = 0; f < c.median_spectra.cols; ++f) s += c.median_spectra.row(t)[f];
    EXPECT_NEAR(s, 1.0, 1e-13);
  }
}

HostRows blobs() {
  auto v = read_f64(data_dir() / "consensus" / "blobs.240x10.f64");
  return HostRows{240, 10, v};
}

TEST(KMeans, EqualsScikitLearnOnHardBlobs) {
  for (const auto& g : consensus_golden()["synthetic"]) expect_kmeans_matches(blobs(), g);
}

TEST(KMeans, RejectsTooFewRowsAndBadOptions) {
  HostRows x{3, 2, {0, 1, 1, 0, 1, 1}};
  EXPECT_THROW(kmeans(ExecSpace(), x, 4, KMeansOptions{}), InputError);
  KMeansOptions bad;
  bad.n_init = 0;
  EXPECT_THROW(kmeans(ExecSpace(), x, 2, bad), InputError);
  bad = KMeansOptions{};
  bad.seed = -1;
  EXPECT_THROW(kmeans(ExecSpace(), x, 2, bad), InputError);
}

TEST(KMeans, DuplicatePointsKeepEveryClusterNonEmpty) {
  // 6 copies of one point and 2 of another: k = 3 must still give 3 non-empty clusters
  // or at least a valid labelling (scikit-learn relocates empty clusters).
  HostRows x{8, 2, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1}};
  const auto r = kmeans(ExecSpace(), x, 2, KMeansOptions{});
  ASSERT_EQ(r.labels.size(), 8u);
  EXPECT_NE(r.labels[0], r.labels[7]);
  EXPECT_NEAR(r.inertia, 0.0, 1e-12);
}

TEST(Medians, PandasGroupbyMedianThenSumToOne) {
  // cluster 0: rows 0, 2 (even count: mean of the middle two); cluster 1: rows 1, 3, 4
  HostRows x{5, 3, {1, 2, 3,  10, 0, 5,  3, 4, 1,  20, 2, 1,  30, 1, 3}};
  const auto m = cluster_median_spectra(x, {0, 1, 0, 1, 1}, 2);
  const double r0[] = {2, 3, 2}, r1[] = {20, 1, 3};
  for (int f = 0; f < 3; ++f) {
    EXPECT_DOUBLE_EQ(m.row(0)[f], r0[f] / 7.0);
    EXPECT_DOUBLE_EQ(m.row(1)[f], r1[f] / 24.0);
  }
  EXPECT_THROW(cluster_median_spectra(x, {0, 0, 0, 0, 0}, 2), InputError);  // empty cluster
}

TEST(LocalDensity, BruteForceOnBlobsAndBadNeighbourCounts) {
  const auto x = blobs();
  const int nn = 5;
  const auto d = local_density(ExecSpace(), x, nn, 7 * 240 * 8);
  for (size_type i = 0; i < x.rows; i += 17) {
    std::vector<double> dist;
    for (size_type j = 0; j < x.rows; ++j) {
      double s = 0;
      for (int f = 0; f < 10; ++f) s += (x.row(i)[f] - x.row(j)[f]) * (x.row(i)[f] - x.row(j)[f]);
      if (j != i) dist.push_back(std::sqrt(s));
    }
    std::sort(dist.begin(), dist.end());
    double m = 0;
    for (int p = 0; p < nn; ++p) m += dist[size_t(p)];
    EXPECT_NEAR(d[size_t(i)], m / nn, 1e-12) << "row " << i;
  }
  EXPECT_THROW(local_density(ExecSpace(), x, 0), InputError);
  EXPECT_THROW(local_density(ExecSpace(), x, 240), InputError);
}

TEST(ConsensusOptions, DensityThresholdRange) {
  ConsensusOptions o;
  for (double t : {0.0, -0.1, 2.0000001, 3.0, std::nan("")}) {
    o.local_density_threshold = t;
    try {
      o.validate();
      ADD_FAILURE() << "threshold " << t << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--local-density-threshold"), std::string::npos);
    }
  }
  for (double t : {0.01, 0.5, 2.0}) {
    o.local_density_threshold = t;
    EXPECT_NO_THROW(o.validate());
  }
}

}  // namespace
