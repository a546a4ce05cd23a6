#include "consensus_fixtures.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>

#include "knmf/core/assignment.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/results/writer.hpp"

namespace knmf::test {

namespace fs = std::filesystem;

void make_pbmc_run(const fs::path& out, bool with_tpm) {
  const fs::path run = out / "pbmcA";
  fs::create_directories(run / "cnmf_tmp");
  for (const auto& e : fs::directory_iterator(pbmc_prepare() / "cnmf_tmp")) {
    const auto name = e.path().filename().string();
    if (!with_tpm && name.find(".tpm") != std::string::npos) continue;
    fs::copy_file(e.path(), run / "cnmf_tmp" / name);
  }
  // cNMF's tpm.h5ad is not committed: the copy derived from the raw counts, checked to be
  // cNMF's file by its fingerprint (test_support.hpp).
  if (with_tpm) fs::copy_file(pbmc_tpm_h5ad(), run / "cnmf_tmp" / "pbmcA.tpm.h5ad");
  fs::copy_file(pbmc_prepare() / "pbmcA.overdispersed_genes.txt", run / "pbmcA.overdispersed_genes.txt");
  for (int k : {5, 6, 7, 8}) {
    const std::string f = "pbmcA.spectra.k_" + std::to_string(k) + ".merged.df.npz";
    fs::copy_file(pbmc_ref_tmp() / f, run / "cnmf_tmp" / f);
  }
  for (const auto& e : fs::recursive_directory_iterator(run))
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
}

void make_pbmc_results(const fs::path& path, const fs::path& run_dir, const std::vector<int>& ks) {
  const io::CnmfPaths paths(run_dir.string(), "pbmcA");
  std::map<int, io::DataFrame> merged;
  for (int k : ks) merged[k] = io::read_df_npz(paths.merged_spectra(k));
  results::RunInfo info;
  info.input = paths.normalized_counts();
  info.n_cells = 2896;
  for (const auto& c : merged.begin()->second.columns) info.genes.push_back(std::get<std::string>(c));
  info.ks = ks;
  info.n_iter = 20;
  info.seed = 14;
  info.dtype = knmf::Dtype::float64;
  auto w = results::ResultsWriter::create_or_resume(path, info);
  for (const Job& j : w.pending()) {
    const auto& m = merged.at(j.k);
    ReplicateResult r;
    r.job = j;
    r.n = info.n_cells;
    r.g = m.cols;
    r.H.assign(m.data.begin() + std::ptrdiff_t(j.iter) * j.k * m.cols,
               m.data.begin() + std::ptrdiff_t(j.iter + 1) * j.k * m.cols);
    r.status = ReplicateStatus::converged;
    w.write(r);
  }
  w.finish();
}

std::vector<std::string> list_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> hungarian_max(const std::vector<std::vector<double>>& score) {
  const int n = int(score.size());
  std::vector<double> w;
  for (const auto& row : score) {
    EXPECT_EQ(int(row.size()), n) << "square score matrix";
    w.insert(w.end(), row.begin(), row.end());
  }
  return knmf::hungarian_max(w, n, n);
}

void expect_k_selection_stats(const io::DataFrame& got, const io::DataFrame& ref, double bound) {
  EXPECT_EQ(got.index, ref.index);
  EXPECT_EQ(got.columns, ref.columns);
  ASSERT_EQ(got.rows, ref.rows);
  for (std::int64_t r = 0; r < ref.rows; ++r) {
    EXPECT_EQ(got.at(r, 0), ref.at(r, 0));
    EXPECT_EQ(got.at(r, 1), ref.at(r, 1));
    const double ds = rel_diff(got.at(r, 2), ref.at(r, 2));
    const double de = rel_diff(got.at(r, 3), ref.at(r, 3));
    std::printf("k=%g: silhouette %.12f (cNMF %.12f, rel diff %.3g), prediction error %.9e "
                "(cNMF %.9e, rel diff %.3g)\n",
                got.at(r, 0), got.at(r, 2), ref.at(r, 2), ds, got.at(r, 3), ref.at(r, 3), de);
    EXPECT_LT(ds, bound);
    EXPECT_LT(de, bound);
  }
}

}  // namespace knmf::test
