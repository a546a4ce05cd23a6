// knmf's cNMF-mode consensus and k-selection on cNMF's own pbmcA run (k = 5..8, 20
// replicates), against the files cNMF wrote.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "consensus_fixtures.hpp"
#include "knmf/consensus/cnmf_mode.hpp"
#include "knmf/core/error.hpp"

namespace {
using namespace knmf;
using namespace knmf::consensus;
using namespace knmf::test;
namespace fs = std::filesystem;

void make_run(const fs::path& out, bool with_tpm = true) { make_pbmc_run(out, with_tpm); }

class Reference : public ::testing::Test {};

TEST_F(Reference, ConsensusK7MatchesCnmf) {
  TempDir tmp("knmf-consensus");
  make_run(tmp.path());
  CnmfConsensusRequest req;
  req.output_dir = tmp.path().string();
  req.name = "pbmcA";
  req.components = {7};
  req.options.local_density_threshold = 0.5;
  const auto out = run_cnmf_consensus(ExecSpace(), req, std::cerr);
  ASSERT_EQ(out.size(), 1u);
  const auto& r = out[0].result;
  std::printf("k=7: %zu of 140 spectra kept, usage refit %d iterations (%s), TPM spectra refit %d, "
              "final usage refit %d\n",
              r.clustering.used_rows.size(), r.refit.n_iter, to_string(r.refit.status).c_str(),
              r.tpm_spectra_refit.n_iter, r.tpm_usage_refit.n_iter);
  const io::CnmfPaths mine(req.output_dir, "pbmcA");

  // consensus spectra: Hungarian matching on correlation, then per program
  const auto ref = ref_frame("pbmcA.spectra.k_7.dt_0_5.consensus.df.npz");
  const auto got = io::read_df_npz(mine.consensus_spectra(7, 0.5));
  ASSERT_EQ(got.rows, 7);
  ASSERT_EQ(got.cols, ref.cols);
  std::vector<std::vector<double>> corr(7, std::vector<double>(7));
  for (int a = 0; a < 7; ++a)
    for (int b = 0; b < 7; ++b)
      corr[size_t(a)][size_t(b)] = correlation(&got.data[size_t(a * got.cols)], &ref.data[size_t(b * ref.cols)], size_t(got.cols));
  const auto match = hungarian_max(corr);
  double worst_corr = 1.0;
  for (int a = 0; a < 7; ++a) {
    worst_corr = std::min(worst_corr, corr[size_t(a)][size_t(match[size_t(a)])]);
    EXPECT_EQ(match[size_t(a)], a) << "programs are ordered as cNMF orders them";
  }
  EXPECT_GE(worst_corr, 0.999);
  const double spectra_diff = table_rel_diff(got, ref);
  std::printf("consensus spectra: min matched correlation %.15f, max rel diff %.3g\n", worst_corr, spectra_diff);
  EXPECT_LT(spectra_diff, 1e-12);
  EXPECT_EQ(got.index, ref.index);
  EXPECT_EQ(got.columns, ref.columns);

  // usages (float32 in cNMF: the final refit on the scaled HVG TPM)
  const auto ref_u = ref_frame("pbmcA.usages.k_7.dt_0_5.consensus.df.npz");
  const auto got_u = io::read_df_npz(mine.consensus_usages(7, 0.5));
  EXPECT_EQ(got_u.index, ref_u.index);
  EXPECT_EQ(got_u.columns, ref_u.columns);
  const double usage_diff = table_rel_diff(got_u, ref_u);
  // TPM spectra and gene scores
  const auto ref_t = ref_frame("pbmcA.gene_spectra_tpm.k_7.dt_0_5.df.npz");
  const auto got_t = io::read_df_npz(mine.gene_spectra_tpm(7, 0.5));
  EXPECT_EQ(got_t.index, ref_t.index);
  EXPECT_EQ(got_t.columns, ref_t.columns);
  const double tpm_diff = table_rel_diff(got_t, ref_t);
  const auto ref_s = ref_frame("pbmcA.gene_spectra_score.k_7.dt_0_5.df.npz");
  const auto got_s = io::read_df_npz(mine.gene_spectra_score(7, 0.5));
  EXPECT_EQ(got_s.index, ref_s.index);
  EXPECT_EQ(got_s.columns, ref_s.columns);
  const double score_diff = table_rel_diff(got_s, ref_s);
  const auto ref_c = ref_frame("pbmcA.starcat_spectra.k_7.dt_0_5.df.npz");
  const auto got_c = io::read_df_npz(mine.starcat_spectra(7, 0.5));
  EXPECT_EQ(got_c.index, ref_c.index);
  EXPECT_EQ(got_c.columns, ref_c.columns);
  const double starcat_diff = table_rel_diff(got_c, ref_c);
  std::printf("max |knmf - cNMF| / max |cNMF|: usages %.3g, gene_spectra_tpm %.3g, "
              "gene_spectra_score %.3g, starcat_spectra %.3g\n",
              usage_diff, tpm_diff, score_diff, starcat_diff);
  EXPECT_LT(usage_diff, 1e-5);
  EXPECT_LT(tpm_diff, 1e-5);
  EXPECT_LT(score_diff, 1e-10);
  EXPECT_LT(starcat_diff, 1e-5);
}

TEST_F(Reference, KSelectionStatsMatchCnmf) {
  TempDir tmp("knmf-kselection");
  make_run(tmp.path(), false);
  CnmfKSelectionRequest req;
  req.output_dir = tmp.path().string();
  req.name = "pbmcA";
  const auto rows = run_cnmf_k_selection(ExecSpace(), req, std::cerr);
  const auto ref = io::read_df_npz((pbmc_dir() / "reference" / "pbmcA" / "pbmcA.k_selection_stats.df.npz").string());
  const auto got = io::read_df_npz(io::CnmfPaths(req.output_dir, "pbmcA").k_selection_stats());
  ASSERT_EQ(rows.size(), 4u);
  ASSERT_EQ(got.rows, 4);
  expect_k_selection_stats(got, ref, 1e-9);
}

}  // namespace
