// cNMF run-directory files: the real job table and run parameters of the pbmc-donor-a run,
// path conventions, and per-replicate spectra that cNMF's Python steps can load.
#include <gtest/gtest.h>

#include "io_test_util.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/random/random_state.hpp"
#include "knmf/solver/options.hpp"

namespace {

using knmf::test::io_fixture;

std::string prepared(const std::string& file) {
  return (knmf::test::pbmc_prepare_dir() / "cnmf_tmp" / file).string();
}

TEST(CnmfFiles, RealJobTableEqualsCnmfPrepare) {
  const auto jobs = knmf::io::read_cnmf_job_table(prepared("pbmcA.nmf_params.df.npz"));
  // cnmf prepare -k 5 6 7 8 --n-iter 20 --seed 14
  const auto expected = knmf::cnmf_job_table({5, 6, 7, 8}, 20, 14);
  ASSERT_EQ(jobs.size(), 80u);
  ASSERT_EQ(expected.size(), 80u);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    SCOPED_TRACE("job " + std::to_string(i));
    EXPECT_EQ(jobs[i].k, expected[i].k);
    EXPECT_EQ(jobs[i].iter, expected[i].iter);
    EXPECT_EQ(jobs[i].seed, expected[i].seed);
    EXPECT_EQ(jobs[i].index, std::int64_t(i));
  }
  EXPECT_EQ(jobs.front().seed, 59886188);
  EXPECT_EQ(jobs.back().k, 8);
  EXPECT_EQ(jobs.back().iter, 19);

  // The `completed` column is there too, all False.
  const auto df = knmf::io::read_df_npz(prepared("pbmcA.nmf_params.df.npz"));
  const auto c = df.find_column("completed");
  ASSERT_GE(c, 0);
  for (std::int64_t r = 0; r < df.rows; ++r) EXPECT_EQ(std::get<bool>(df.cell(r, c)), false);
}

TEST(CnmfFiles, JobTableFromAnIntegerFrameAndBadTables) {
  knmf::test::TempDir dir("knmf-cnmf");
  // Without the `completed` column pandas stores an int64 frame, columns in another order.
  knmf::io::DataFrame df;
  df.rows = 2;
  df.cols = 3;
  df.data_descr = "<i8";
  df.data = {11, 7, 3, 12, 7, 4};
  df.index = {knmf::io::Label{std::int64_t{0}}, knmf::io::Label{std::int64_t{1}}};
  df.columns = {knmf::io::Label{"nmf_seed"}, knmf::io::Label{"n_components"}, knmf::io::Label{"iter"}};
  const auto path = (dir / "jobs.df.npz").string();
  knmf::io::write_df_npz(path, df);
  const auto jobs = knmf::io::read_cnmf_job_table(path);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[1].k, 7);
  EXPECT_EQ(jobs[1].iter, 4);
  EXPECT_EQ(jobs[1].seed, 12);

  df.columns[0] = knmf::io::Label{"seed"};
  knmf::io::write_df_npz(path, df);
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_cnmf_job_table(path), path, "no column 'nmf_seed'");
  df.columns[0] = knmf::io::Label{"nmf_seed"};
  df.data[3] = -5;
  knmf::io::write_df_npz(path, df);
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_cnmf_job_table(path), path, "row 1 has nmf_seed -5");
}

// Each (k, iter) job has one spectra file: a table listing one twice would run two jobs into
// one file. It is refused, naming the file and both rows.
TEST(CnmfFiles, JobTableWithADuplicatedJobIsRefused) {
  knmf::test::TempDir dir("knmf-cnmf-dup");
  knmf::io::DataFrame df;
  df.rows = 3;
  df.cols = 3;
  df.data_descr = "<i8";
  df.data = {7, 3, 11, 7, 4, 12, 7, 3, 13};
  df.index = {knmf::io::Label{std::int64_t{0}}, knmf::io::Label{std::int64_t{1}},
              knmf::io::Label{std::int64_t{2}}};
  df.columns = {knmf::io::Label{"n_components"}, knmf::io::Label{"iter"}, knmf::io::Label{"nmf_seed"}};
  const auto path = (dir / "jobs.df.npz").string();
  knmf::io::write_df_npz(path, df);
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_cnmf_job_table(path), path, "rows 0 and 2",
                          "n_components 7, iter 3");
  // the same iter under another k is another job
  df.data[6] = 8;
  knmf::io::write_df_npz(path, df);
  EXPECT_EQ(knmf::io::read_cnmf_job_table(path).size(), 3u);
}

/// The yaml read (io) and applied to solver options through the option table, as the
/// commands do; `warnings` gets the unknown-key warnings.
knmf::SolverOptions run_options(const std::string& path, std::vector<std::string>* warnings = nullptr) {
  knmf::SolverOptions o;
  const auto p = knmf::io::read_nmf_run_params(path);
  auto w = knmf::apply_cnmf_params(o, p.values, path, false, p.non_scalar);
  if (warnings) *warnings = std::move(w);
  return o;
}

TEST(CnmfFiles, RealRunParameters) {
  const std::string path = prepared("pbmcA.nmf_idvrun_params.yaml");
  const auto p = knmf::io::read_nmf_run_params(path);
  EXPECT_EQ(p.values.size(), 8u);
  std::vector<std::string> warnings;
  const auto o = run_options(path, &warnings);
  EXPECT_EQ(o.solver, knmf::SolverKind::cd);
  EXPECT_EQ(o.tol, 1e-4);
  EXPECT_EQ(o.max_iter, 1000);
  EXPECT_EQ(o.beta_loss, 2.0);
  EXPECT_EQ(o.init, knmf::InitKind::random);
  EXPECT_EQ(o.alpha_W, 0.0);
  EXPECT_EQ(o.alpha_H, 0.0);
  EXPECT_EQ(o.l1_ratio, 0.0);
  EXPECT_TRUE(warnings.empty());
}

TEST(CnmfFiles, RunParameterProblemsNameFileAndKey) {
  const std::string extra_path = io_fixture("params_ok_extra_key.yaml");
  std::vector<std::string> warnings;
  const auto extra = run_options(extra_path, &warnings);
  EXPECT_EQ(extra.max_iter, 1000);
  // the warnings the commands print: one line per key, naming the file and the key
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0].rfind(extra_path + ": unknown key 'random_state' is ignored", 0), 0u) << warnings[0];
  EXPECT_NE(warnings[1].find("'verbose'"), std::string::npos) << warnings[1];
  for (const auto& w : warnings) EXPECT_EQ(w.find('\n'), std::string::npos) << w;

  // `alpha_H: same` (older cNMF): scikit-learn's alpha_H = alpha_W
  const auto same = run_options(io_fixture("params_alpha_same.yaml"));
  EXPECT_EQ(same.alpha_H, 0.25);
  EXPECT_EQ(same.alpha_H, same.alpha_W);

  const std::string missing = io_fixture("params_missing_tol.yaml");
  KNMF_EXPECT_INPUT_ERROR(run_options(missing), missing, "missing key 'tol'");
  const std::string bad_int = io_fixture("params_bad_max_iter.yaml");
  KNMF_EXPECT_INPUT_ERROR(run_options(bad_int), bad_int, "'max_iter'", "lots");
  const std::string bad_solver = io_fixture("params_bad_solver.yaml");
  KNMF_EXPECT_INPUT_ERROR(run_options(bad_solver), bad_solver, "'solver'");
  const std::string not_yaml = io_fixture("params_not_yaml.yaml");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_nmf_run_params(not_yaml), not_yaml, "malformed YAML");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_nmf_run_params("/nonexistent/p.yaml"), "/nonexistent/p.yaml");
}

TEST(CnmfFiles, PathsFollowCnmf) {
  const knmf::io::CnmfPaths p("/out", "pbmcA");
  EXPECT_EQ(p.run_dir(), "/out/pbmcA");
  EXPECT_EQ(p.normalized_counts(), "/out/pbmcA/cnmf_tmp/pbmcA.norm_counts.h5ad");
  EXPECT_EQ(p.tpm(), "/out/pbmcA/cnmf_tmp/pbmcA.tpm.h5ad");
  EXPECT_EQ(p.tpm_stats(), "/out/pbmcA/cnmf_tmp/pbmcA.tpm_stats.df.npz");
  EXPECT_EQ(p.nmf_run_parameters(), "/out/pbmcA/cnmf_tmp/pbmcA.nmf_idvrun_params.yaml");
  EXPECT_EQ(p.nmf_replicate_parameters(), "/out/pbmcA/cnmf_tmp/pbmcA.nmf_params.df.npz");
  EXPECT_EQ(p.nmf_genes_list(), "/out/pbmcA/pbmcA.overdispersed_genes.txt");
  EXPECT_EQ(p.iter_spectra(7, 12), "/out/pbmcA/cnmf_tmp/pbmcA.spectra.k_7.iter_12.df.npz");
  EXPECT_EQ(p.iter_usages(7, 12), "/out/pbmcA/cnmf_tmp/pbmcA.usages.k_7.iter_12.df.npz");
  EXPECT_EQ(p.merged_spectra(5), "/out/pbmcA/cnmf_tmp/pbmcA.spectra.k_5.merged.df.npz");
  EXPECT_EQ(p.local_density_cache(7), "/out/pbmcA/cnmf_tmp/pbmcA.local_density_cache.k_7.merged.df.npz");
  EXPECT_EQ(p.consensus_spectra(7, 0.5), "/out/pbmcA/cnmf_tmp/pbmcA.spectra.k_7.dt_0_5.consensus.df.npz");
  EXPECT_EQ(p.consensus_spectra_txt(7, 0.5), "/out/pbmcA/pbmcA.spectra.k_7.dt_0_5.consensus.txt");
  EXPECT_EQ(p.consensus_usages(7, 0.5), "/out/pbmcA/cnmf_tmp/pbmcA.usages.k_7.dt_0_5.consensus.df.npz");
  EXPECT_EQ(p.consensus_usages_txt(7, 0.01), "/out/pbmcA/pbmcA.usages.k_7.dt_0_01.consensus.txt");
  EXPECT_EQ(p.consensus_stats(7, 2.0), "/out/pbmcA/cnmf_tmp/pbmcA.stats.k_7.dt_2_0.df.npz");
  EXPECT_EQ(p.clustering_plot(7, 0.5), "/out/pbmcA/pbmcA.clustering.k_7.dt_0_5.png");
  EXPECT_EQ(p.gene_spectra_score(7, 0.5), "/out/pbmcA/cnmf_tmp/pbmcA.gene_spectra_score.k_7.dt_0_5.df.npz");
  EXPECT_EQ(p.gene_spectra_score_txt(7, 0.5), "/out/pbmcA/pbmcA.gene_spectra_score.k_7.dt_0_5.txt");
  EXPECT_EQ(p.gene_spectra_tpm(7, 0.5), "/out/pbmcA/cnmf_tmp/pbmcA.gene_spectra_tpm.k_7.dt_0_5.df.npz");
  EXPECT_EQ(p.gene_spectra_tpm_txt(7, 0.5), "/out/pbmcA/pbmcA.gene_spectra_tpm.k_7.dt_0_5.txt");
  EXPECT_EQ(p.starcat_spectra(7, 0.5), "/out/pbmcA/cnmf_tmp/pbmcA.starcat_spectra.k_7.dt_0_5.df.npz");
  EXPECT_EQ(p.starcat_spectra_txt(7, 0.5), "/out/pbmcA/pbmcA.starcat_spectra.k_7.dt_0_5.txt");
  EXPECT_EQ(p.k_selection_plot(), "/out/pbmcA/pbmcA.k_selection.png");
  EXPECT_EQ(p.k_selection_stats(), "/out/pbmcA/pbmcA.k_selection_stats.df.npz");
  EXPECT_EQ(knmf::io::density_threshold_string(0.1), "0_1");
}

TEST(CnmfFiles, ReferenceFilesSitWhereThePathsSay) {
  const auto base = knmf::test::real_dir() / "cnmf-pbmc-donor-a";
  const knmf::io::CnmfPaths prep((base / "prepare").string(), "pbmcA");
  const knmf::io::CnmfPaths ref((base / "reference").string(), "pbmcA");
  // tpm.h5ad is not committed (tests derive it); its fingerprint records where cNMF wrote it.
  const auto fp = knmf::test::load_json("real/cnmf-pbmc-donor-a/tpm_fingerprint.json");
  EXPECT_EQ(prep.tpm(), (knmf::test::real_dir() / fp["file"].get<std::string>()).string());
  for (const auto& f : {prep.normalized_counts(), prep.tpm_stats(), prep.nmf_run_parameters(),
                        prep.nmf_replicate_parameters(), prep.nmf_genes_list(), ref.merged_spectra(5),
                        ref.merged_spectra(8), ref.local_density_cache(7), ref.consensus_spectra(7, 0.5),
                        ref.consensus_usages(7, 0.5), ref.gene_spectra_score(7, 0.5),
                        ref.gene_spectra_tpm(7, 0.5), ref.starcat_spectra(7, 0.5), ref.k_selection_plot(),
                        ref.k_selection_stats()})
    EXPECT_TRUE(std::filesystem::exists(f)) << f;
}

TEST(CnmfFiles, MergedSpectraLabels) {
  const auto m = knmf::io::parse_merged_spectra_label("iter19_topic7", "t");
  EXPECT_EQ(m.iter, 19);
  EXPECT_EQ(m.topic, 7);
  for (const char* bad : {"iter_topic1", "iter1_topic0", "iter1_topicx", "GEP1", "iter1-topic2", "iter1_topic"})
    KNMF_EXPECT_INPUT_ERROR(knmf::io::parse_merged_spectra_label(bad, "t.npz"), "t.npz", bad);
}

std::vector<double> spectra_values(int k, int g) {
  std::vector<double> h(static_cast<std::size_t>(k) * g);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = (i % 11 == 0) ? 0.0 : 1.0 / (1.0 + double(i));
  return h;
}

TEST(CnmfFiles, WrittenSpectraReadBackExactly) {
  knmf::test::TempDir dir("knmf-cnmf");
  const knmf::io::CnmfPaths paths(dir.path().string(), "run");
  std::filesystem::create_directories(paths.tmp_dir());
  const int k = 3, g = 5;
  const auto h = spectra_values(k, g);
  const std::vector<std::string> genes = {"TTLL10", "AL627309.1", "MT-CO1", "HLA-DRB1", "G\xc3\xa9ne"};
  const auto path = paths.iter_spectra(k, 4);
  knmf::io::write_cnmf_spectra(path, h.data(), k, g, genes);
  const auto df = knmf::io::read_df_npz(path);
  EXPECT_EQ(df.rows, k);
  EXPECT_EQ(df.cols, g);
  EXPECT_EQ(df.data, h);
  for (int t = 0; t < k; ++t) EXPECT_EQ(std::get<std::int64_t>(df.index[t]), t + 1);
  for (int j = 0; j < g; ++j) EXPECT_EQ(std::get<std::string>(df.columns[j]), genes[j]);
  KNMF_EXPECT_INPUT_ERROR(knmf::io::write_cnmf_spectra(path, h.data(), k, 4, genes), path, "5 gene names for 4 genes");
}

TEST(CnmfFiles, SpectraFileNames) {
  const auto a = knmf::io::parse_cnmf_spectra_name("pbmcA.spectra.k_7.iter_13.df.npz");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->run, "pbmcA");
  EXPECT_EQ(a->k, 7);
  EXPECT_EQ(a->iter, 13);
  const auto m = knmf::io::parse_cnmf_spectra_name("my.run.spectra.k_12.merged.df.npz");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->run, "my.run");
  EXPECT_EQ(m->k, 12);
  EXPECT_EQ(m->iter, -1);
  for (const char* other : {"pbmcA.usages.k_7.iter_1.df.npz", "pbmcA.spectra.k_0.iter_1.df.npz",
                            ".spectra.k_7.iter_1.df.npz", "pbmcA.spectra.k_7.iter_.df.npz",
                            "pbmcA.spectra.k_7.iter_1.df.npz.tmp", "pbmcA.spectra.k_7.dt_0_5.consensus.df.npz"})
    EXPECT_FALSE(knmf::io::parse_cnmf_spectra_name(other).has_value()) << other;
}

TEST(CnmfFiles, ReplicateAndMergedSpectraAreChecked) {
  knmf::test::TempDir dir("knmf-cnmf");
  const knmf::io::CnmfPaths paths(dir.path().string(), "run");
  std::filesystem::create_directories(paths.tmp_dir());
  const int k = 2, g = 3;
  const std::vector<std::string> genes = {"A", "B", "C"};
  const auto h = spectra_values(k, g);
  const auto one = paths.iter_spectra(k, 0);
  knmf::io::write_cnmf_spectra(one, h.data(), k, g, genes);
  const auto r = knmf::io::read_cnmf_replicate_spectra(one, k, "A: ");
  EXPECT_EQ(r.genes, genes);
  EXPECT_EQ(r.frame.data, h);
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_cnmf_replicate_spectra(one, 3, "A: "), "A: ", one,
                          "2 spectra rows, expected k = 3");

  // a merged frame of two replicates, rows out of order; then broken variants
  auto merged = [&](std::vector<std::string> labels) {
    knmf::io::DataFrame df;
    df.rows = std::int64_t(labels.size());
    df.cols = g;
    df.data.assign(std::size_t(df.rows * g), 0.5);
    for (auto& l : labels) df.index.emplace_back(l);
    for (auto& c : genes) df.columns.emplace_back(c);
    knmf::io::write_df_npz(paths.merged_spectra(k), df);
    return paths.merged_spectra(k);
  };
  const auto path = merged({"iter1_topic2", "iter0_topic1", "iter0_topic2", "iter1_topic1"});
  const auto m = knmf::io::read_cnmf_merged_spectra(path, k);
  EXPECT_EQ(m.genes, genes);
  ASSERT_EQ(m.rows.size(), 2u);
  EXPECT_EQ(m.rows.at(0), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(m.rows.at(1), (std::vector<std::int64_t>{3, 0}));
  EXPECT_EQ(m.row_labels.front(), "iter1_topic2");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_cnmf_merged_spectra(
                              merged({"iter0_topic1", "iter0_topic1", "iter1_topic1", "iter1_topic2"}), k),
                          path, "'iter0_topic1' appears twice");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_cnmf_merged_spectra(
                              merged({"iter0_topic1", "iter0_topic2", "iter1_topic1", "iter2_topic1"}), k),
                          path, "replicate 1 lacks row iter1_topic2");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_cnmf_merged_spectra(
                              merged({"iter0_topic1", "iter0_topic3"}), k),
                          path, "names topic 3 > k = 2");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_cnmf_merged_spectra(merged({"iter0_topic1"}), k), path,
                          "1 rows is not a positive multiple of k = 2");
  EXPECT_EQ(knmf::io::gene_list_difference(genes, {"A", "X", "C"}), "gene 1 is 'X' instead of 'B'");
  EXPECT_EQ(knmf::io::gene_list_difference(genes, {"A"}), "1 genes instead of 3");
  EXPECT_EQ(knmf::io::gene_list_difference(genes, genes), "");
}

TEST(CnmfFiles, CnmfCombineCanLoadOurSpectra) {
  ASSERT_TRUE(knmf::test::python_with_pandas());
  knmf::test::TempDir dir("knmf-cnmf");
  const knmf::io::CnmfPaths paths(dir.path().string(), "run");
  std::filesystem::create_directories(paths.tmp_dir());
  const int k = 4, g = 6;
  const auto h = spectra_values(k, g);
  const std::vector<std::string> genes = {"A", "BB", "C-1", "D.2", "E_3", "F\xc3\xa9"};
  for (int r = 0; r < 2; ++r) knmf::io::write_cnmf_spectra(paths.iter_spectra(k, r), h.data(), k, g, genes);
  // What `cnmf combine` does with the per-replicate files (load_df_from_npz + relabel + concat),
  // also without pickles.
  const std::string script = R"(
import sys
import numpy as np, pandas as pd
k, g = int(sys.argv[2]), int(sys.argv[3])
combined = []
for r in range(2):
    fn = sys.argv[1] % (k, r)
    with np.load(fn, allow_pickle=True) as f:
        spectra = pd.DataFrame(**f)
    with np.load(fn, allow_pickle=False) as f:
        strict = pd.DataFrame(**f)
    assert spectra.equals(strict)
    assert spectra.shape == (k, g), spectra.shape
    assert list(spectra.index) == list(range(1, k + 1)), list(spectra.index)
    assert spectra.index.dtype == np.int64
    assert list(spectra.columns) == ['A', 'BB', 'C-1', 'D.2', 'E_3', 'F\u00e9'], list(spectra.columns)
    assert spectra.values.dtype == np.float64
    spectra.index = ['iter%d_topic%d' % (r, i + 1) for i in range(k)]
    combined.append(spectra)
merged = pd.concat(combined, axis=0)
assert merged.shape == (2 * k, g)
assert merged.values[1, 1] == 1.0 / (1.0 + 7.0)
)";
  const std::string pattern = (std::filesystem::path(paths.tmp_dir()) / "run.spectra.k_%d.iter_%d.df.npz").string();
  const auto py = knmf::test::run_python(dir.path(), script, pattern + " " + std::to_string(k) + " " + std::to_string(g));
  EXPECT_EQ(py.status, 0) << py.out;
}

}  // namespace
