// `knmf factorize --output-dir --name` on real cNMF runs prepared with the options knmf used to
// refuse (--beta-loss kullback-leibler, --init nndsvd): every replicate's spectra against the
// spectra cNMF's own factorize wrote (tests/scripts/make_cnmf_variant_fixtures.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "driver_support.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;
namespace fs = std::filesystem;

/// Max over the replicates of max|knmf - cNMF| / max|cNMF| for the run `variant` (its name is
/// chr21<variant>: k = 3, 4 and 3 replicates each), after `knmf factorize` in cNMF mode.
double worst_relative_difference(const std::string& variant) {
  const auto fixture = real_dir() / ("cnmf-pbmc1k-" + variant);
  const std::string name = "chr21" + variant;
  TempDir tmp("knmf-cnmf-" + variant);
  fs::copy(fixture / "prepare", tmp.path(), fs::copy_options::recursive);
  for (auto& e : fs::recursive_directory_iterator(tmp.path()))
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  const auto r = run_knmf({"factorize", "--output-dir", tmp.path().string(), "--name", name});
  EXPECT_EQ(r.status, 0) << r.out;
  if (r.status != 0) return INFINITY;
  io::CnmfPaths paths(tmp.path().string(), name);
  double worst = 0;
  int compared = 0;
  for (int k : {3, 4})
    for (int it = 0; it < 3; ++it) {
      const auto mine = io::read_df_npz(paths.iter_spectra(k, it));
      const auto file = name + ".spectra.k_" + std::to_string(k) + ".iter_" + std::to_string(it) +
                        ".df.npz";
      const auto ref = io::read_df_npz((fixture / "reference" / file).string());
      EXPECT_EQ(mine.rows, ref.rows);
      EXPECT_EQ(mine.cols, ref.cols);
      EXPECT_EQ(mine.columns, ref.columns);
      EXPECT_EQ(mine.index, ref.index);
      if (mine.rows != ref.rows || mine.cols != ref.cols) return INFINITY;
      double dmax = 0, smax = 0;
      for (std::int64_t t = 0; t < ref.rows; ++t)
        for (std::int64_t j = 0; j < ref.cols; ++j) {
          dmax = std::max(dmax, std::abs(mine.at(t, j) - ref.at(t, j)));
          smax = std::max(smax, std::abs(ref.at(t, j)));
        }
      worst = std::max(worst, dmax / smax);
      ++compared;
    }
  EXPECT_EQ(compared, 6);
  std::printf("%s: 6 replicates, worst relative difference to cNMF's spectra %.3g\n",
              variant.c_str(), worst);
  return worst;
}

TEST(CnmfModeVariants, KullbackLeiblerRunMatchesCnmfsSpectra) {
  EXPECT_LT(worst_relative_difference("kl"), 1e-6);
}

TEST(CnmfModeVariants, NndsvdInitRunMatchesCnmfsSpectra) {
  EXPECT_LT(worst_relative_difference("nndsvd"), 1e-6);
}

}  // namespace
