// cNMF's prepare on small inputs: the highly-variable-gene rule against pandas (goldens from
// tests/scripts/make_golden_prepare.py), TPM and scaling by hand, zero cells and genes,
// given gene lists, sources, errors and the cNMF-format writers.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "knmf/core/error.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/prepare/prepare.hpp"
#include "knmf/prepare/simulate.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
using namespace knmf::prepare;
using namespace knmf::test;

std::vector<double> to_doubles(const nlohmann::json& a) {
  std::vector<double> v;
  for (const auto& x : a) v.push_back(x.is_null() ? std::nan("") : x.get<double>());
  return v;
}

TEST(HighvarGenes, MatchesPandasGoldens) {
  const auto golden = load_json("prepare/hvg_golden.json");
  for (const auto& [name, c] : golden["cases"].items()) {
    SCOPED_TRACE(name);
    const auto mean = to_doubles(c["mean"]), var = to_doubles(c["var"]);
    const auto s = highvar_genes(mean, var, c["numgenes"].get<int>());
    // Same arithmetic as pandas/numpy, operation by operation: equal up to the last bit.
    EXPECT_EQ(s.A, c["A"].get<double>());
    EXPECT_EQ(s.B, c["B"].get<double>());
    const auto ratio = to_doubles(c["fano_ratio"]);
    ASSERT_EQ(s.fano_ratio.size(), ratio.size());
    for (size_t j = 0; j < ratio.size(); ++j) {
      if (std::isnan(ratio[j]))
        EXPECT_TRUE(std::isnan(s.fano_ratio[j])) << j;
      else
        EXPECT_EQ(s.fano_ratio[j], ratio[j]) << j;
    }
    std::vector<int> selected;
    for (size_t j = 0; j < s.high_var.size(); ++j)
      if (s.high_var[j]) selected.push_back(int(j));
    EXPECT_EQ(selected, c["selected"].get<std::vector<int>>());
  }
}

TEST(HighvarGenes, RejectsNonPositiveCount) {
  EXPECT_THROW(highvar_genes({1, 2}, {1, 2}, 0), InputError);
}

// 5 cells x 4 genes with a zero cell (row 2) and a zero gene (column 3).
io::CsrBlock<float> tiny() {
  const std::vector<float> dense = {1, 0, 3, 0,  //
                                    0, 2, 1, 0,  //
                                    0, 0, 0, 0,  //
                                    4, 1, 0, 0,  //
                                    2, 0, 5, 0};
  return knmf::test::dense_to_csr_block<io::CsrBlock<float>>(dense, 4);
}

TEST(Prepare, TpmScalingAndZeroCellsAndGenesByHand) {
  const auto X = tiny();
  PrepareOptions o;
  o.num_highvar_genes = 10;  // more than there are: every gene with counts
  o.keep_tpm = true;
  const auto r = prepare_counts(count_source(X, {"a", "b", "c", "d", "e"}, {"g0", "g1", "g2", "g3"}), o);
  EXPECT_EQ(r.zero_cells, 1);
  EXPECT_EQ(r.zero_genes, 1);
  EXPECT_EQ(r.cells, (std::vector<std::int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(r.cell_names, (std::vector<std::string>{"a", "b", "d", "e"}));
  EXPECT_EQ(r.genes, (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(r.gene_names, (std::vector<std::string>{"g0", "g1", "g2"}));
  EXPECT_TRUE(std::isnan(r.stats.fano_ratio[3]));
  // TPM row 0: totals 4 -> x * float(1e6 / 4).
  ASSERT_EQ(r.tpm.rows(), 4);
  EXPECT_EQ(r.tpm.values[0], 250000.0f);
  EXPECT_EQ(r.tpm.values[1], 750000.0f);
  // Scaling: column 0 over the 4 kept cells = {1, 0, 4, 2}: mean 7/4, E[x^2] = 21/4,
  // var ddof 1 = (21/4 - 49/16) * 4 / 3 = 35/12.
  const double sd0 = std::sqrt((21.0 / 4 - 49.0 / 16) * 4 / 3);
  EXPECT_NEAR(r.gene_std[0], sd0, 1e-15);
  EXPECT_NEAR(r.norm_counts.values[0], 1.0 / sd0, 1e-15);
  // Every column has unit variance (ddof 1) over the kept cells.
  std::vector<double> s(3, 0), s2(3, 0);
  for (size_t e = 0; e < r.norm_counts.values.size(); ++e) {
    s[size_t(r.norm_counts.cols[e])] += r.norm_counts.values[e];
    s2[size_t(r.norm_counts.cols[e])] += r.norm_counts.values[e] * r.norm_counts.values[e];
  }
  for (int j = 0; j < 3; ++j) EXPECT_NEAR((s2[size_t(j)] - s[size_t(j)] * s[size_t(j)] / 4) / 3, 1.0, 1e-14);
  EXPECT_EQ(r.zero_hvg_cells, 0);
}

TEST(Prepare, GivenGeneListInGivenOrder) {
  const auto X = tiny();
  PrepareOptions o;
  o.genes = {"g2", "g0"};
  const auto r = prepare_counts(count_source(X, {}, {"g0", "g1", "g2", "g3"}), o);
  EXPECT_EQ(r.genes, (std::vector<std::int32_t>{2, 0}));
  EXPECT_EQ(r.gene_names, (std::vector<std::string>{"g2", "g0"}));
  // Row 0 = counts (g2: 3, g0: 1): columns sorted by output position.
  EXPECT_EQ(std::vector<std::int32_t>(r.norm_counts.cols.begin(), r.norm_counts.cols.begin() + 2),
            (std::vector<std::int32_t>{0, 1}));
  EXPECT_NEAR(r.norm_counts.values[0] * r.gene_std[0], 3.0, 1e-14);
  EXPECT_NEAR(r.norm_counts.values[1] * r.gene_std[1], 1.0, 1e-14);
  EXPECT_EQ(r.zero_hvg_cells, 0);
  EXPECT_EQ(r.cell_names.front(), "0");
  o.genes = {"g1"};  // cells 0 and 4 have no count there: kept as zero rows, and counted
  const auto r1 = prepare_counts(count_source(X, {}, {"g0", "g1", "g2", "g3"}), o);
  EXPECT_EQ(r1.zero_hvg_cells, 2);
  EXPECT_EQ(r1.norm_counts.row_offsets, (std::vector<std::int64_t>{0, 0, 1, 2, 2}));
  o.genes = {"g0", "nope"};
  try {
    prepare_counts(count_source(X, {}, {"g0", "g1", "g2", "g3"}), o);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos) << e.what();
  }
}

TEST(Prepare, BadInputIsAnInputError) {
  auto X = tiny();
  X.values[2] = -1;
  try {
    prepare_counts(count_source(X, {}, {}, "my.h5ad"));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("my.h5ad"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("row 1"), std::string::npos) << e.what();
  }
  X = tiny();
  X.values[0] = std::nanf("");
  EXPECT_THROW(prepare_counts(count_source(X)), InputError);
  X = tiny();
  X.cols[0] = 9;
  EXPECT_THROW(prepare_counts(count_source(X)), InputError);
  io::CsrBlock<float> one;  // one cell: no variance to scale by
  one.row_end = 1;
  one.ncols = 2;
  one.cols = {0};
  one.values = {3};
  one.row_offsets = {0, 1};
  EXPECT_THROW(prepare_counts(count_source(one)), InputError);
  PrepareOptions o;
  o.num_highvar_genes = 0;
  EXPECT_THROW(prepare_counts(count_source(tiny()), o), InputError);
}

// Sources agree: in memory, from an .h5ad file, straight from the simulator, any block size.
TEST(Prepare, SourcesAndBlockSizesGiveTheSameResult) {
  SimulationOptions so;
  so.n_cells = 400;
  so.n_genes = 600;
  so.seed = 5;
  const Simulator sim(so);
  const auto mem = simulate(so);
  PrepareOptions o;
  o.num_highvar_genes = 150;
  const auto a = prepare_counts(count_source(mem.counts, simulated_cell_names(400), simulated_gene_names(600)), o);
  const auto b = prepare_counts(count_source(sim, 37), o);
  TempDir dir("knmf-prep");
  write_simulation(sim, (dir / "s.h5ad").string());
  auto reader = io::H5adReader::open(dir / "s.h5ad");
  const auto c = prepare_counts(count_source(reader, 100), o);
  for (const auto* r : {&b, &c}) {
    EXPECT_EQ(r->genes, a.genes);
    EXPECT_EQ(r->gene_names, a.gene_names);
    EXPECT_EQ(r->cell_names, a.cell_names);
    EXPECT_EQ(r->norm_counts.row_offsets, a.norm_counts.row_offsets);
    EXPECT_EQ(r->norm_counts.cols, a.norm_counts.cols);
    EXPECT_EQ(r->norm_counts.values, a.norm_counts.values);
  }
  EXPECT_EQ(a.norm_counts.ncols, 150);
}

TEST(Prepare, WritesCnmfFiles) {
  const auto X = tiny();
  PrepareOptions o;
  o.num_highvar_genes = 2;
  const auto r = prepare_counts(count_source(X, {"a", "b", "c", "d", "e"}, {"g0", "g1", "g2", "g3"}), o);
  TempDir dir("knmf-prep-files");
  write_norm_counts((dir / "x.norm_counts.h5ad").string(), r);
  write_gene_list((dir / "x.overdispersed_genes.txt").string(), r);
  write_tpm_stats((dir / "x.tpm_stats.df.npz").string(), r);
  auto reader = io::H5adReader::open(dir / "x.norm_counts.h5ad");
  EXPECT_EQ(reader.info().value_type, io::ValueType::Float64);
  EXPECT_EQ(reader.var_names(), r.gene_names);
  EXPECT_EQ(reader.obs_names(), r.cell_names);
  io::CsrBlock<double> Y;
  reader.read_csr_rows<double>(0, reader.info().n_obs, Y);
  EXPECT_EQ(Y.values, r.norm_counts.values);
  std::ifstream f(dir / "x.overdispersed_genes.txt");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, r.gene_names[0] + "\n" + r.gene_names[1]);
  const auto st = io::read_df_npz((dir / "x.tpm_stats.df.npz").string());
  EXPECT_EQ(st.rows, 4);
  EXPECT_EQ(io::label_to_string(st.columns[1]), "__std");
  EXPECT_EQ(st.at(0, 0), r.stats.mean[0]);
  EXPECT_EQ(st.at(3, 1), 0.0);
}

}  // namespace
