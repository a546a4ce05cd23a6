// cNMF mode and native mode on files: combining replicate files like `cnmf combine`, the
// checks on bad input (one-line InputErrors, nothing written), the native results file, and
// the outputs as numpy/pandas load them (when Debian's python3 is present).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "consensus_fixtures.hpp"
#include "knmf/consensus/cnmf_mode.hpp"
#include "knmf/consensus/native_mode.hpp"
#include "knmf/core/error.hpp"
#include "knmf/results/consensus_records.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/results/writer.hpp"

namespace {
using namespace knmf;
using namespace knmf::consensus;
using namespace knmf::test;
namespace fs = std::filesystem;

class CnmfMode : public ::testing::Test {
protected:
  void SetUp() override {
    make_pbmc_run(tmp.path());
    paths = std::make_unique<io::CnmfPaths>(tmp.path().string(), "pbmcA");
  }

  /// The run record of a knmf results file holding cNMF's 20 replicates of k = 7 (`merged`:
  /// cNMF's merged spectra of k = 7, whose columns are the genes).
  results::RunInfo pbmc_k7_run_info(const io::DataFrame& merged) const {
    results::RunInfo info;
    info.input = paths->normalized_counts();
    info.n_cells = 2896;
    for (const auto& c : merged.columns) info.genes.push_back(std::get<std::string>(c));
    info.ks = {7};
    info.n_iter = 20;
    info.seed = 14;
    info.dtype = knmf::Dtype::float64;
    return info;
  }

  /// Replace the merged file of k by one replicate file per iteration (as factorize leaves
  /// them), from cNMF's merged spectra.
  void split_merged(int k) {
    const auto df = io::read_df_npz(paths->merged_spectra(k));
    std::vector<std::string> genes;
    for (const auto& c : df.columns) genes.push_back(std::get<std::string>(c));
    for (std::int64_t r = 0; r < df.rows / k; ++r)
      io::write_cnmf_spectra(paths->iter_spectra(k, int(r)), &df.data[size_t(r * k * df.cols)], k,
                             df.cols, genes);
    fs::remove(paths->merged_spectra(k));
  }

  CnmfConsensusRequest request(std::vector<int> ks) const {
    CnmfConsensusRequest req;
    req.output_dir = tmp.path().string();
    req.name = "pbmcA";
    req.components = std::move(ks);
    return req;
  }

  /// Expect an InputError whose one-line message contains every fragment, and no change to
  /// the files of the run folder.
  template <class F>
  void expect_input_error(F f, std::vector<std::string> fragments) {
    const auto before = list_files(tmp.path());
    try {
      f();
      ADD_FAILURE() << "no InputError";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      for (const auto& fr : fragments) EXPECT_NE(msg.find(fr), std::string::npos) << msg << "\n  lacks: " << fr;
      std::printf("  InputError: %s\n", msg.c_str());
    }
    EXPECT_EQ(list_files(tmp.path()), before) << "files changed after a failed run";
  }

  TempDir tmp{"knmf-cnmf-mode"};
  std::unique_ptr<io::CnmfPaths> paths;
};

TEST_F(CnmfMode, CombinesReplicateFilesLikeCnmfCombine) {
  const auto ref = io::read_df_npz(paths->merged_spectra(6));
  split_merged(6);
  const auto jobs = io::read_cnmf_job_table(paths->nmf_replicate_parameters());
  const auto m = load_replicate_spectra(*paths, 6, jobs, true);
  ASSERT_TRUE(fs::exists(paths->merged_spectra(6)));
  const auto got = io::read_df_npz(paths->merged_spectra(6));
  EXPECT_EQ(got.index, ref.index);
  EXPECT_EQ(got.columns, ref.columns);
  EXPECT_EQ(got.data, ref.data);
  EXPECT_EQ(m.values.values, ref.data);
  // consensus from the replicate files equals consensus from cNMF's merged file
  auto from_files = run_cnmf_consensus(ExecSpace(), request({6}), std::cerr);
  const auto spectra_files = io::read_df_npz(paths->consensus_spectra(6, 0.5));
  fs::remove(paths->iter_spectra(6, 0));  // now only the merged file can serve (others exist:
  for (int r = 1; r < 20; ++r) fs::remove(paths->iter_spectra(6, r));  // remove them all)
  auto from_merged = run_cnmf_consensus(ExecSpace(), request({6}), std::cerr);
  EXPECT_EQ(io::read_df_npz(paths->consensus_spectra(6, 0.5)).data, spectra_files.data);
  EXPECT_EQ(from_files[0].result.refit.W.values, from_merged[0].result.refit.W.values);
}

TEST_F(CnmfMode, BadInputsAreOneLineErrorsAndWriteNothing) {
  for (double t : {0.0, -1.0, 2.5}) {
    auto req = request({7});
    req.options.local_density_threshold = t;
    expect_input_error([&] { run_cnmf_consensus(ExecSpace(), req, std::cerr); },
                       {"--local-density-threshold", "0 < t <= 2"});
  }
  // a k with no replicate files (and no merged file); k = 7 before it is not written either
  expect_input_error([&] { run_cnmf_consensus(ExecSpace(), request({7, 9}), std::cerr); },
                     {"k = 9", "no replicate spectra", "pbmcA.nmf_params.df.npz", "pbmcA.spectra.k_9.merged.df.npz"});
  // one replicate file missing among the others
  split_merged(5);
  fs::remove(paths->iter_spectra(5, 13));
  expect_input_error([&] { run_cnmf_consensus(ExecSpace(), request({5}), std::cerr); },
                     {paths->iter_spectra(5, 13), "missing", "19 of the 20"});
  // mismatched gene lists between replicates
  split_merged(8);
  {
    auto df = io::read_df_npz(paths->iter_spectra(8, 4));
    std::vector<std::string> genes;
    for (const auto& c : df.columns) genes.push_back(std::get<std::string>(c));
    std::swap(genes[10], genes[11]);
    io::write_cnmf_spectra(paths->iter_spectra(8, 4), df.data.data(), 8, df.cols, genes);
  }
  expect_input_error([&] { run_cnmf_consensus(ExecSpace(), request({8}), std::cerr); },
                     {paths->iter_spectra(8, 4), "genes differ", "gene 10"});
  CnmfKSelectionRequest ks;
  ks.output_dir = tmp.path().string();
  ks.name = "pbmcA";
  ks.components = {6, 8};
  expect_input_error([&] { run_cnmf_k_selection(ExecSpace(), ks, std::cerr); }, {paths->iter_spectra(8, 4)});
  // a beta_loss the refits cannot run: unknown, or not frobenius with solver cd (a KL run
  // with solver mu is refitted with its loss: test_consensus_beta.cpp)
  {
    std::ofstream y(paths->nmf_run_parameters());
    y << "alpha_H: 0.0\nalpha_W: 0.0\nbeta_loss: poisson\ninit: random\nl1_ratio: 0.0\n"
         "max_iter: 1000\nsolver: mu\ntol: 0.0001\n";
  }
  expect_input_error([&] { run_cnmf_consensus(ExecSpace(), request({7}), std::cerr); },
                     {"nmf_idvrun_params.yaml", "beta_loss", "'poisson'"});
  {
    std::ofstream y(paths->nmf_run_parameters());
    y << "alpha_H: 0.0\nalpha_W: 0.0\nbeta_loss: kullback-leibler\ninit: random\nl1_ratio: 0.0\n"
         "max_iter: 1000\nsolver: cd\ntol: 0.0001\n";
  }
  expect_input_error([&] { run_cnmf_consensus(ExecSpace(), request({7}), std::cerr); },
                     {"nmf_idvrun_params.yaml", "solver cd", "kullback-leibler"});
}

TEST_F(CnmfMode, NativeResultsFileGivesTheSameConsensus) {
  // a knmf results file holding cNMF's 20 replicates of k = 7
  const auto merged = io::read_df_npz(paths->merged_spectra(7));
  const results::RunInfo info = pbmc_k7_run_info(merged);
  const std::string results = (tmp.path() / "run.knmf.h5").string();
  {
    auto w = results::ResultsWriter::create_or_resume(results, info);
    for (const Job& j : w.pending()) {
      if (j.iter == 19) continue;  // left pending for the error check below
      ReplicateResult r;
      r.job = j;
      r.n = 2896;
      r.g = merged.cols;
      r.H.assign(merged.data.begin() + size_t(j.iter) * 7 * merged.cols,
                 merged.data.begin() + size_t(j.iter + 1) * 7 * merged.cols);
      r.status = ReplicateStatus::converged;
      w.write(r);
    }
    w.commit();
  }
  NativeRequest req;
  req.results = results;
  req.output_dir = (tmp.path() / "native").string();
  req.name = "pbmcA";
  EXPECT_THROW(
      {
        try {
          run_native_consensus(ExecSpace(), req, std::cerr);
        } catch (const InputError& e) {
          EXPECT_NE(std::string(e.what()).find("iter 19"), std::string::npos) << e.what();
          throw;
        }
      },
      InputError);
  {
    auto w = results::ResultsWriter::create_or_resume(results, info);
    for (const Job& j : w.pending()) {
      ReplicateResult r;
      r.job = j;
      r.n = 2896;
      r.g = merged.cols;
      r.H.assign(merged.data.begin() + size_t(j.iter) * 7 * merged.cols,
                 merged.data.begin() + size_t(j.iter + 1) * 7 * merged.cols);
      r.status = ReplicateStatus::converged;
      w.write(r);
    }
    EXPECT_TRUE(w.finish());
  }
  req.tpm = paths->tpm();
  req.tpm_stats = paths->tpm_stats();
  const auto native = run_native_consensus(ExecSpace(), req, std::cerr);
  const auto cnmf = run_cnmf_consensus(ExecSpace(), request({7}), std::cerr);
  const io::CnmfPaths np(req.output_dir, "pbmcA");
  // the results file holds the consensus, equal to cNMF mode's files
  {
    const auto reader = results::ResultsReader::open(results);
    EXPECT_EQ(reader.format_version(), 3);
    ASSERT_EQ(reader.consensus_list().size(), 1u);
    EXPECT_EQ(reader.consensus_list()[0].group, "/consensus/k_7/dt_0_5");
    const results::ConsensusRecord rec = reader.consensus(7, 0.5);
    const auto spectra = io::read_df_npz(paths->consensus_spectra(7, 0.5));
    const auto usages = io::read_df_npz(paths->consensus_usages(7, 0.5));
    const auto tpm = io::read_df_npz(paths->gene_spectra_tpm(7, 0.5));
    const auto score = io::read_df_npz(paths->gene_spectra_score(7, 0.5));
    const auto starcat = io::read_df_npz(paths->starcat_spectra(7, 0.5));
    const auto density = io::read_df_npz(paths->local_density_cache(7));
    EXPECT_EQ(rec.spectra, spectra.data);
    EXPECT_EQ(rec.usages, usages.data);
    EXPECT_TRUE(rec.float32);
    EXPECT_EQ(usages.data_descr, "<f4");
    ASSERT_TRUE(rec.has_tpm);
    EXPECT_EQ(rec.spectra_tpm, tpm.data);
    EXPECT_EQ(rec.spectra_score, score.data);
    EXPECT_EQ(rec.starcat, starcat.data);
    EXPECT_EQ(rec.local_density, density.data);
    std::vector<std::string> tpm_genes, cells;
    for (const auto& c : tpm.columns) tpm_genes.push_back(std::get<std::string>(c));
    for (const auto& c : usages.index) cells.push_back(std::get<std::string>(c));
    EXPECT_EQ(rec.tpm_genes, tpm_genes);
    EXPECT_EQ(reader.consensus_cells(), cells);
    // the replicate rows are the density cache's rows (iter<r>_topic<t> = row r * 7 + t - 1)
    ASSERT_EQ(rec.replicate_rows.size(), density.index.size());
    for (size_t i = 0; i < rec.replicate_rows.size(); ++i) {
      const auto row = rec.replicate_rows[i];
      EXPECT_EQ(std::get<std::string>(density.index[i]),
                "iter" + std::to_string(row / 7) + "_topic" + std::to_string(row % 7 + 1));
    }
    // clusters: programs 1..7 for the rows under the threshold, 0 for the others
    const auto& c = cnmf[0].result.clustering;
    std::vector<int> per_program(8, 0);
    for (size_t i = 0; i < rec.cluster.size(); ++i) {
      EXPECT_EQ(rec.cluster[i] != 0, rec.local_density[i] < 0.5) << i;
      per_program[size_t(rec.cluster[i])] += 1;
    }
    EXPECT_EQ(size_t(std::count_if(rec.cluster.begin(), rec.cluster.end(), [](int x) { return x > 0; })),
              c.used_rows.size());
    for (int p = 1; p <= 7; ++p) EXPECT_GT(per_program[size_t(p)], 0) << "program " << p;
    // the median of each program's normalized replicate spectra, normalized, is its spectrum
    {
      const auto l2 = l2_normalize_rows(HostRows{merged.rows, merged.cols, merged.data});
      for (int p = 1; p <= 7; ++p) {
        std::vector<size_type> rows;
        for (size_t i = 0; i < rec.cluster.size(); ++i)
          if (rec.cluster[i] == p) rows.push_back(rec.replicate_rows[i]);
        const auto med = cluster_median_spectra(select_rows(l2, rows), std::vector<int>(rows.size(), 0), 1);
        for (std::int64_t j = 0; j < merged.cols; ++j)
          ASSERT_NEAR(med.values[size_t(j)], rec.spectra[size_t((p - 1) * merged.cols + j)], 1e-15)
              << "program " << p << " gene " << j;
      }
    }
    EXPECT_EQ(rec.silhouette, c.silhouette);
    EXPECT_EQ(rec.prediction_error, cnmf[0].result.prediction_error);
    EXPECT_EQ(rec.n_neighbors, c.n_neighbors);
    EXPECT_EQ(rec.settings.local_density_threshold, 0.5);
    EXPECT_EQ(rec.settings.kmeans_seed, 1);
    EXPECT_EQ(rec.settings.kmeans_n_init, 10);
    EXPECT_EQ(rec.settings.counts, paths->normalized_counts());
    EXPECT_EQ(rec.settings.tpm, paths->tpm());
    EXPECT_EQ(rec.refit_n_iter, cnmf[0].result.refit.n_iter);
  }
  for (auto [a, b] : {std::pair{np.consensus_spectra(7, 0.5), paths->consensus_spectra(7, 0.5)},
                      std::pair{np.consensus_usages(7, 0.5), paths->consensus_usages(7, 0.5)},
                      std::pair{np.gene_spectra_score(7, 0.5), paths->gene_spectra_score(7, 0.5)},
                      std::pair{np.merged_spectra(7), paths->merged_spectra(7)}}) {
    const auto x = io::read_df_npz(a), y = io::read_df_npz(b);
    EXPECT_EQ(x.index, y.index) << a;
    EXPECT_EQ(x.columns, y.columns) << a;
    EXPECT_EQ(x.data, y.data) << a;
  }
  // k-selection from the results file equals the one from the cNMF folder, and lands in
  // /k_selection (and in the stats file of the output folder)
  const auto rows = run_native_k_selection(ExecSpace(), req);
  CnmfKSelectionRequest kr;
  kr.output_dir = tmp.path().string();
  kr.name = "pbmcA";
  kr.components = {7};
  const auto rows2 = run_cnmf_k_selection(ExecSpace(), kr, std::cerr);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].silhouette, rows2[0].silhouette);
  EXPECT_EQ(rows[0].prediction_error, rows2[0].prediction_error);
  {
    const auto table = results::ResultsReader::open(results).k_selection();
    ASSERT_TRUE(table);
    EXPECT_EQ(table->k, std::vector<int>{7});
    EXPECT_EQ(table->silhouette, std::vector<double>{rows2[0].silhouette});
    EXPECT_EQ(table->prediction_error, std::vector<double>{rows2[0].prediction_error});
    EXPECT_EQ(table->local_density_threshold, std::vector<double>{0.5});
    const auto stats = io::read_df_npz(np.k_selection_stats());
    EXPECT_EQ(stats.data, io::read_df_npz(paths->k_selection_stats()).data);
  }
  // without an output folder only the results file is written; the same (k, threshold) again
  // replaces its group, another threshold adds one
  const auto before = list_files(tmp.path());
  NativeRequest only;
  only.results = results;
  only.components = {7};
  only.options.local_density_threshold = 0.3;
  const auto at03 = run_native_consensus(ExecSpace(), only, std::cerr);
  run_native_consensus(ExecSpace(), only, std::cerr);
  EXPECT_EQ(list_files(tmp.path()), before) << "files written without an output folder";
  {
    const auto reader = results::ResultsReader::open(results);
    const auto list = reader.consensus_list();
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(list[0].group, "/consensus/k_7/dt_0_3");
    EXPECT_EQ(list[1].group, "/consensus/k_7/dt_0_5");
    const auto rec = reader.consensus(7, 0.3);
    EXPECT_FALSE(rec.has_tpm);
    EXPECT_FALSE(rec.float32);
    EXPECT_EQ(rec.spectra, at03[0].result.spectra.values);
    EXPECT_EQ(rec.usages, at03[0].result.refit.W.values);
    EXPECT_TRUE(reader.consensus(7, 0.5).has_tpm);  // untouched
  }
  // nothing to write, or a results file another process writes: refused before any work
  only.update_results = false;
  expect_input_error([&] { run_native_consensus(ExecSpace(), only, std::cerr); }, {"nothing to write"});
}

/// Every file consensus and k-selection write stores its data with the dtype of cNMF's own
/// file (float32 for the usages and gene_spectra_tpm, as cNMF's TPM is float32; float64
/// for the rest), and labels of the same kind (int or str).
TEST_F(CnmfMode, OutputDtypesAreCnmfs) {
  run_cnmf_consensus(ExecSpace(), request({7}), std::cerr);
  CnmfKSelectionRequest ks;
  ks.output_dir = tmp.path().string();
  ks.name = "pbmcA";
  ks.components = {7};
  run_cnmf_k_selection(ExecSpace(), ks, std::cerr);
  const fs::path ref = pbmc_dir() / "reference" / "pbmcA";
  const std::vector<std::string> files = {
      "cnmf_tmp/pbmcA.spectra.k_7.dt_0_5.consensus.df.npz",
      "cnmf_tmp/pbmcA.usages.k_7.dt_0_5.consensus.df.npz",
      "cnmf_tmp/pbmcA.gene_spectra_tpm.k_7.dt_0_5.df.npz",
      "cnmf_tmp/pbmcA.gene_spectra_score.k_7.dt_0_5.df.npz",
      "cnmf_tmp/pbmcA.starcat_spectra.k_7.dt_0_5.df.npz",
      "cnmf_tmp/pbmcA.local_density_cache.k_7.merged.df.npz",
      "pbmcA.k_selection_stats.df.npz"};
  int f32 = 0;
  for (const auto& f : files) {
    SCOPED_TRACE(f);
    const auto ours = io::read_df_npz((tmp.path() / "pbmcA" / f).string());
    const auto theirs = io::read_df_npz((ref / f).string());
    EXPECT_EQ(ours.data_descr, theirs.data_descr);
    f32 += theirs.data_descr == "<f4";
    ASSERT_FALSE(ours.index.empty());
    ASSERT_EQ(ours.columns.size(), theirs.columns.size());
    EXPECT_EQ(ours.index[0].index(), theirs.index[0].index());      // int or str labels
    EXPECT_EQ(ours.columns[0].index(), theirs.columns[0].index());
  }
  EXPECT_EQ(f32, 2) << "cNMF's float32 files: usages and gene_spectra_tpm";
}

/// numpy/pandas load every output exactly as cNMF loads it: same shape, labels and label
/// dtypes as cNMF's own files, and the .txt copies read back as the same table.
TEST_F(CnmfMode, PandasLoadsTheOutputsAsCnmfWritesThem) {
  run_cnmf_consensus(ExecSpace(), request({7}), std::cerr);
  CnmfKSelectionRequest ks;
  ks.output_dir = tmp.path().string();
  ks.name = "pbmcA";
  run_cnmf_k_selection(ExecSpace(), ks, std::cerr);
  const char* py = "/usr/bin/python3";
  if (!fs::exists(py) ||
      knmf::test::run_command("/usr/bin/python3 -c 'import numpy, pandas'").status != 0) {
    // cmake/bootstrap.sh installs python3-numpy and python3-pandas: a missing one fails
    FAIL() << "/usr/bin/python3 with numpy and pandas is missing (cmake/bootstrap.sh installs "
              "python3-numpy, python3-pandas): the outputs cannot be loaded with pandas";
  }
  const fs::path script = tmp.path() / "check.py";
  {
    std::ofstream s(script);
    s << R"PY(
import sys, numpy as np, pandas as pd
ref, run = sys.argv[1], sys.argv[2]
def load(f):
    with np.load(f, allow_pickle=True) as d:
        return pd.DataFrame(**d), {k: d[k].dtype for k in d.files}
files = [("cnmf_tmp/pbmcA.spectra.k_7.dt_0_5.consensus.df.npz", "pbmcA.spectra.k_7.dt_0_5.consensus.txt"),
         ("cnmf_tmp/pbmcA.usages.k_7.dt_0_5.consensus.df.npz", "pbmcA.usages.k_7.dt_0_5.consensus.txt"),
         ("cnmf_tmp/pbmcA.gene_spectra_tpm.k_7.dt_0_5.df.npz", "pbmcA.gene_spectra_tpm.k_7.dt_0_5.txt"),
         ("cnmf_tmp/pbmcA.gene_spectra_score.k_7.dt_0_5.df.npz", "pbmcA.gene_spectra_score.k_7.dt_0_5.txt"),
         ("cnmf_tmp/pbmcA.starcat_spectra.k_7.dt_0_5.df.npz", "pbmcA.starcat_spectra.k_7.dt_0_5.txt"),
         ("cnmf_tmp/pbmcA.local_density_cache.k_7.merged.df.npz", None),
         ("pbmcA.k_selection_stats.df.npz", None)]
bad = 0
for npz, txt in files:
    a, ad = load(run + "/" + npz)
    b, bd = load(ref + "/" + npz)
    ok = (a.shape == b.shape and list(a.index) == list(b.index) and list(a.columns) == list(b.columns)
          and a.index.dtype == b.index.dtype and a.columns.dtype == b.columns.dtype)
    dt = a.values.dtype == b.values.dtype and ad["data"] == bd["data"]
    close = np.allclose(a.values, b.values, rtol=1e-4, atol=1e-5 * np.abs(b.values).max())
    if txt:
        t = pd.read_csv(run + "/" + txt, sep="\t", index_col=0)
        tx = (t.shape == a.shape and [str(x) for x in t.index] == [str(x) for x in a.index]
              and [str(x) for x in t.columns] == [str(x) for x in a.columns]
              and np.allclose(t.values, a.values, rtol=1e-6, atol=0))
    else:
        tx = True
    print("%-60s labels %s dtype %s (%s) values %s txt %s" % (npz, ok, dt, ad["data"], close, tx))
    bad += not (ok and dt and close and tx)
sys.exit(1 if bad else 0)
)PY";
  }
  const fs::path refdir = pbmc_dir() / "reference" / "pbmcA";
  const std::string cmd = std::string(py) + " " + script.string() + " " + refdir.string() + " " +
                          tmp.path().string() + "/pbmcA";
  const auto r = knmf::test::run_command(cmd);
  std::fputs(r.out.c_str(), stdout);  // the script's line per file, in the test's log
  EXPECT_EQ(r.status, 0) << cmd << "\n" << r.out;
}

// Issue 15, defect 3: a replicate of status non_finite is not a factorization. Consensus and
// k-selection from a results file leave it out: the outcome is that of the same file whose
// replicate holds zeros (rows of zeros are never clustered), rows numbered in the whole stack;
// a k whose every replicate failed is refused.
TEST_F(CnmfMode, NativeModeLeavesOutNonFiniteReplicates) {
  const auto merged = io::read_df_npz(paths->merged_spectra(7));
  const results::RunInfo info = pbmc_k7_run_info(merged);
  // iter 3 replaced as `how` says (0: cNMF's spectra, 1: NaN and non_finite, 2: zeros)
  auto write = [&](const std::string& file, int how, bool all = false) {
    auto w = results::ResultsWriter::create_or_resume(file, info);
    for (const Job& j : w.pending()) {
      ReplicateResult r;
      r.job = j;
      r.n = 2896;
      r.g = merged.cols;
      r.H.assign(merged.data.begin() + size_t(j.iter) * 7 * merged.cols,
                 merged.data.begin() + size_t(j.iter + 1) * 7 * merged.cols);
      r.status = ReplicateStatus::converged;
      if (j.iter == 3 || all) {
        if (how == 1) {
          std::fill(r.H.begin(), r.H.end(), std::numeric_limits<double>::quiet_NaN());
          r.status = ReplicateStatus::non_finite;
        } else if (how == 2) {
          std::fill(r.H.begin(), r.H.end(), 0.0);
        }
      }
      w.write(r);
    }
    w.finish();
  };
  const std::string failed = (tmp.path() / "failed.h5").string();
  const std::string zeroed = (tmp.path() / "zeroed.h5").string();
  write(failed, 1);
  write(zeroed, 2);
  const MergedSpectra m = load_results_spectra(failed, 7);
  EXPECT_EQ(m.left_out, 1);
  EXPECT_EQ(m.values.rows, 19 * 7);
  EXPECT_EQ(std::count(m.row_labels.begin(), m.row_labels.end(), "iter3_topic1"), 0);
  for (double v : m.values.values) ASSERT_TRUE(std::isfinite(v));
  NativeRequest a;
  a.results = failed;
  a.components = {7};
  NativeRequest b = a;
  b.results = zeroed;
  const auto ca = run_native_consensus(ExecSpace(), a, std::cerr);
  const auto cb = run_native_consensus(ExecSpace(), b, std::cerr);
  ASSERT_EQ(ca.size(), 1u);
  ASSERT_EQ(cb.size(), 1u);
  EXPECT_EQ(ca[0].result.spectra.values, cb[0].result.spectra.values);
  EXPECT_EQ(ca[0].result.clustering.silhouette, cb[0].result.clustering.silhouette);
  EXPECT_EQ(ca[0].result.prediction_error, cb[0].result.prediction_error);
  const auto ra = results::ResultsReader::open(failed).consensus(7, 0.5);
  const auto rb = results::ResultsReader::open(zeroed).consensus(7, 0.5);
  EXPECT_EQ(ra.replicate_rows, rb.replicate_rows);
  EXPECT_EQ(ra.cluster, rb.cluster);
  EXPECT_EQ(std::count_if(ra.replicate_rows.begin(), ra.replicate_rows.end(),
                          [](std::int64_t r) { return r >= 21 && r < 28; }), 0);
  const auto ka = run_native_k_selection(ExecSpace(), a);
  const auto kb = run_native_k_selection(ExecSpace(), b);
  ASSERT_EQ(ka.size(), 1u);
  EXPECT_TRUE(std::isfinite(ka[0].silhouette));
  EXPECT_EQ(ka[0].silhouette, kb[0].silhouette);
  EXPECT_EQ(ka[0].prediction_error, kb[0].prediction_error);
  // every replicate failed: nothing to combine
  const std::string none = (tmp.path() / "none.h5").string();
  write(none, 1, true);
  NativeRequest c = a;
  c.results = none;
  expect_input_error([&] { run_native_consensus(ExecSpace(), c, std::cerr); },
                     {none, "k = 7", "all 20 replicates are non_finite"});
  expect_input_error([&] { run_native_k_selection(ExecSpace(), c); },
                     {none, "all 20 replicates are non_finite"});
}

}  // namespace
