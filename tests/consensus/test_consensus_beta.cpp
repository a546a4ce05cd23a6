// knmf's cNMF-mode consensus and k-selection of a Kullback-Leibler run against cNMF's own:
// cNMF refits the usages, the TPM spectra and the final usages with the run's beta_loss (its
// refit_usage loads the whole nmf_idvrun_params.yaml), so these refits must be the
// beta-divergence MU, not the Frobenius refit from X's products.
// Fixture: tests/data/real/cnmf-pbmc1k-kl (tests/scripts/make_cnmf_variant_fixtures.py: real
// cNMF 1.7.1 on pbmc1k-v3-chr21, 150 genes, k = 3 and 4, 3 replicates, KL, solver mu).
//
// The TPM outputs are compared with reference/csr_refit/: cNMF's consensus with one change,
// refit_spectra given TPM^T as CSR instead of CSC, because scikit-learn 1.2.1's beta MU
// misaligns a CSC X (it divides X.data in CSC order by W H at the stored entries in CSR order),
// so cNMF's own TPM spectra of a KL run come from a scrambled ratio X / (W H). knmf computes the
// refit of the matrix itself, as scikit-learn does for the same matrix as CSR or dense.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "consensus_fixtures.hpp"
#include "knmf/consensus/cnmf_mode.hpp"
#include "knmf/core/error.hpp"

namespace {
using namespace knmf;
using namespace knmf::consensus;
using namespace knmf::test;
namespace fs = std::filesystem;

const std::string kName = "chr21kl";

fs::path kl_dir() { return real_dir() / "cnmf-pbmc1k-kl"; }
io::DataFrame kl_ref(const std::string& file) {
  return io::read_df_npz((kl_dir() / "reference" / (kName + "." + file)).string());
}
io::DataFrame kl_csr_ref(const std::string& file) {
  return io::read_df_npz((kl_dir() / "reference" / "csr_refit" / (kName + "." + file)).string());
}

/// A writable copy of cNMF's KL run folder with its merged spectra of k = 3 and 4.
void make_kl_run(const fs::path& out) {
  fs::copy(kl_dir() / "prepare" / kName, out / kName, fs::copy_options::recursive);
  for (int k : {3, 4}) {
    const std::string f = kName + ".spectra.k_" + std::to_string(k) + ".merged.df.npz";
    fs::copy_file(kl_dir() / "reference" / f, out / kName / "cnmf_tmp" / f);
  }
}

CnmfConsensusRequest request(const fs::path& dir, int k) {
  CnmfConsensusRequest req;
  req.output_dir = dir.string();
  req.name = kName;
  req.components = {k};
  req.options.local_density_threshold = 2.0;
  req.options.local_neighborhood_size = 0.5;
  return req;
}

TEST(ConsensusBeta, KullbackLeiblerConsensusMatchesCnmf) {
  for (int k : {3, 4}) {
    TempDir tmp("knmf-consensus-kl");
    make_kl_run(tmp.path());
    const auto out = run_cnmf_consensus(ExecSpace(), request(tmp.path(), k), std::cerr);
    ASSERT_EQ(out.size(), 1u);
    const auto& r = out[0].result;
    EXPECT_TRUE(out[0].float32);
    const io::CnmfPaths mine(tmp.path().string(), kName);
    const std::string ks = std::to_string(k);
    const double spectra = table_rel_diff(io::read_df_npz(mine.consensus_spectra(k, 2.0)),
                                          kl_ref("spectra.k_" + ks + ".dt_2_0.consensus.df.npz"));
    const double usages = table_rel_diff(io::read_df_npz(mine.consensus_usages(k, 2.0)),
                                         kl_csr_ref("usages.k_" + ks + ".dt_2_0.consensus.df.npz"));
    const double tpm = table_rel_diff(io::read_df_npz(mine.gene_spectra_tpm(k, 2.0)),
                                      kl_csr_ref("gene_spectra_tpm.k_" + ks + ".dt_2_0.df.npz"));
    const double score = table_rel_diff(io::read_df_npz(mine.gene_spectra_score(k, 2.0)),
                                        kl_csr_ref("gene_spectra_score.k_" + ks + ".dt_2_0.df.npz"));
    const double starcat = table_rel_diff(io::read_df_npz(mine.starcat_spectra(k, 2.0)),
                                          kl_csr_ref("starcat_spectra.k_" + ks + ".dt_2_0.df.npz"));
    // the usages on X (before the TPM steps) are cNMF's own: its gene scores come from them
    const double score_cnmf =
        table_rel_diff(io::read_df_npz(mine.gene_spectra_score(k, 2.0)),
                       kl_ref("gene_spectra_score.k_" + ks + ".dt_2_0.df.npz"));
    // cNMF's unpatched TPM spectra (CSC) are far from both
    const double csc_tpm = table_rel_diff(kl_ref("gene_spectra_tpm.k_" + ks + ".dt_2_0.df.npz"),
                                          kl_csr_ref("gene_spectra_tpm.k_" + ks + ".dt_2_0.df.npz"));
    std::printf("k=%d: refits %d (%s), TPM spectra %d (%s), final usages %d (%s) MU iterations; "
                "max |knmf - cNMF| / max |cNMF|: spectra %.3g, usages %.3g, gene_spectra_tpm "
                "%.3g, gene_spectra_score %.3g (%.3g from cNMF's own), starcat_spectra %.3g; cNMF's "
                "TPM spectra with the CSC refit %.3g from the CSR one\n",
                k, r.refit.n_iter, to_string(r.refit.status).c_str(), r.tpm_spectra_refit.n_iter,
                to_string(r.tpm_spectra_refit.status).c_str(), r.tpm_usage_refit.n_iter,
                to_string(r.tpm_usage_refit.status).c_str(), spectra, usages, tpm, score,
                score_cnmf, starcat, csc_tpm);
    // the spectra are medians of cNMF's own replicate spectra: only the summation order differs
    EXPECT_LT(spectra, 1e-12);
    // cNMF's TPM refits run in float32 (its tpm.h5ad), knmf's in float64 from the same
    // float32 inputs, 20-30 MU iterations each; the outputs are float32. Measured: at most
    // 1.1e-6 (usages), 6.9e-7 (TPM spectra), 3.6e-7 (starCAT); the bound leaves about 10x.
    EXPECT_LT(usages, 1e-5);
    EXPECT_LT(tpm, 1e-5);
    EXPECT_LT(score, 1e-10);
    EXPECT_LT(starcat, 1e-5);
    EXPECT_LT(score_cnmf, 1e-10);
    EXPECT_GT(csc_tpm, 1e-2);
  }
}

TEST(ConsensusBeta, FrobeniusRefitsWouldNotMatch) {
  // The same folder with the yaml saying frobenius (solver cd): the usages move far beyond the
  // bound above, so the test above does check that the refits use the run's beta_loss.
  TempDir tmp("knmf-consensus-kl-as-frobenius");
  make_kl_run(tmp.path());
  const io::CnmfPaths paths(tmp.path().string(), kName);
  std::ofstream(paths.nmf_run_parameters())
      << "alpha_H: 0.0\nalpha_W: 0.0\nbeta_loss: frobenius\ninit: random\nl1_ratio: 0.0\n"
         "max_iter: 1000\nsolver: cd\ntol: 0.0001\n";
  run_cnmf_consensus(ExecSpace(), request(tmp.path(), 3), std::cerr);
  const double usages = table_rel_diff(io::read_df_npz(paths.consensus_usages(3, 2.0)),
                                       kl_csr_ref("usages.k_3.dt_2_0.consensus.df.npz"));
  std::printf("k=3 refit as frobenius: usages %.3g from cNMF's KL consensus\n", usages);
  EXPECT_GT(usages, 1e-2);
}

TEST(ConsensusBeta, KullbackLeiblerKSelectionMatchesCnmf) {
  TempDir tmp("knmf-kselection-kl");
  make_kl_run(tmp.path());
  CnmfKSelectionRequest req;
  req.output_dir = tmp.path().string();
  req.name = kName;
  req.options.local_neighborhood_size = 0.5;
  const auto rows = run_cnmf_k_selection(ExecSpace(), req, std::cerr);
  ASSERT_EQ(rows.size(), 2u);
  const auto got = io::read_df_npz(io::CnmfPaths(req.output_dir, kName).k_selection_stats());
  ASSERT_EQ(got.rows, 2);
  // the prediction error: the usages of a KL MU refit (float64 on both sides), then the
  // Frobenius error
  expect_k_selection_stats(got, kl_ref("k_selection_stats.df.npz"), 1e-9);
}

}  // namespace
