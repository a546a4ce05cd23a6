#pragma once
// Shared helpers of the consensus tests: the pbmcA reference run and the golden file.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "knmf/consensus/clustering.hpp"
#include "knmf/io/dataframe.hpp"
#include "test_support.hpp"

namespace knmf::test {

inline std::filesystem::path pbmc_dir() { return real_dir() / "cnmf-pbmc-donor-a"; }
inline std::filesystem::path pbmc_ref_tmp() { return pbmc_dir() / "reference" / "pbmcA" / "cnmf_tmp"; }
inline std::filesystem::path pbmc_prepare() { return pbmc_dir() / "prepare" / "pbmcA"; }

inline io::DataFrame ref_frame(const std::string& file) {
  return io::read_df_npz((pbmc_ref_tmp() / file).string());
}

inline consensus::HostRows merged_spectra(int k) {
  const auto df = ref_frame("pbmcA.spectra.k_" + std::to_string(k) + ".merged.df.npz");
  return consensus::HostRows{df.rows, df.cols, df.data};
}

inline const nlohmann::json& consensus_golden() {
  static const nlohmann::json g = load_json("consensus/golden.json");
  return g;
}

/// A writable cNMF run folder `out/pbmcA`: cNMF's prepare outputs (with or without the TPM
/// files; pbmcA.tpm.h5ad from pbmc_tpm_h5ad()) plus its merged spectra of k = 5..8.
void make_pbmc_run(const std::filesystem::path& out, bool with_tpm = true);

/// A finished knmf results file at `path` holding cNMF's 20 replicates of each of `ks` (from
/// its merged spectra), computed on the pbmcA run's norm_counts under `run_dir`/pbmcA.
void make_pbmc_results(const std::filesystem::path& path, const std::filesystem::path& run_dir,
                       const std::vector<int>& ks);

/// Every regular file under `dir` (relative paths, sorted).
std::vector<std::string> list_files(const std::filesystem::path& dir);

/// max |a - b| / max |b| over two whole tables, after checking that their shapes and labels
/// agree (non-finite entries of either are skipped).
inline double table_rel_diff(const io::DataFrame& a, const io::DataFrame& b) {
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.columns, b.columns);
  double num = 0, den = 0;
  for (size_t e = 0; e < b.data.size() && e < a.data.size(); ++e) {
    num = std::max(num, std::fabs(a.data[e] - b.data[e]));
    den = std::max(den, std::fabs(b.data[e]));
  }
  return num / den;
}

/// knmf's k_selection_stats table against cNMF's: the same k and threshold columns, silhouette
/// and prediction error within `bound` relative (printed row by row).
void expect_k_selection_stats(const io::DataFrame& got, const io::DataFrame& ref, double bound);

/// Hungarian assignment (maximizing the total score) of rows to columns of a square
/// score matrix; returns the column of each row.
std::vector<int> hungarian_max(const std::vector<std::vector<double>>& score);

}  // namespace knmf::test
