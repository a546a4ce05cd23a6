// The figures (valid PNGs of the right size whose pixels and embedded data are the table's)
// and the driver's consensus / k-selection commands end to end.
#include <gtest/gtest.h>

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "cli.hpp"
#include "consensus_fixtures.hpp"
#include "knmf/consensus/cnmf_mode.hpp"
#include "knmf/consensus/plot.hpp"
#include "knmf/core/error.hpp"
#include "knmf/results/reader.hpp"

namespace {
using namespace knmf;
using namespace knmf::consensus;
using namespace knmf::test;
namespace fs = std::filesystem;

std::vector<KSelectionRow> reference_rows() {
  const auto ref = io::read_df_npz((pbmc_dir() / "reference" / "pbmcA" / "pbmcA.k_selection_stats.df.npz").string());
  std::vector<KSelectionRow> rows;
  for (std::int64_t r = 0; r < ref.rows; ++r)
    rows.push_back({int(ref.at(r, 0)), ref.at(r, 1), ref.at(r, 2), ref.at(r, 3)});
  return rows;
}

/// The colour of the pixel at (x, y) of a PNG, as (r, g, b) in 0..255.
std::array<int, 3> pixel(cairo_surface_t* s, double x, double y) {
  const unsigned char* d = cairo_image_surface_get_data(s);
  const int stride = cairo_image_surface_get_stride(s);
  const auto* p = reinterpret_cast<const std::uint32_t*>(d + int(std::lround(y)) * stride) + int(std::lround(x));
  return {int((*p >> 16) & 0xff), int((*p >> 8) & 0xff), int(*p & 0xff)};
}

/// Parse the embedded table back.
std::vector<std::vector<double>> embedded_table(const std::string& png) {
  std::string data;
  for (const auto& [key, text] : png_text_chunks(png))
    if (key == "knmf:data") data = text;
  std::istringstream in(data);
  std::string line;
  std::getline(in, line);
  // cNMF's four columns first (the cross-validation's two follow when it ran)
  EXPECT_EQ(line.rfind("k\tlocal_density_threshold\tsilhouette\tprediction_error", 0), 0u) << line;
  std::vector<std::vector<double>> rows;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<double> v;
    std::string cell;
    while (std::getline(ls, cell, '\t')) v.push_back(std::strtod(cell.c_str(), nullptr));
    rows.push_back(v);
  }
  return rows;
}

TEST(Plot, KSelectionPngShowsTheStatsTable) {
  TempDir tmp("knmf-plot");
  const std::string png = (tmp.path() / "k.png").string();
  const auto rows = reference_rows();
  const auto layout = write_k_selection_plot(png, rows);
  // a valid PNG of cNMF's size (6 x 4 inches at 250 dpi)
  cairo_surface_t* s = cairo_image_surface_create_from_png(png.c_str());
  ASSERT_EQ(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
  EXPECT_EQ(cairo_image_surface_get_width(s), 1500);
  EXPECT_EQ(cairo_image_surface_get_height(s), 1000);
  EXPECT_GT(fs::file_size(png), 10000u);
  // the embedded data are the table's, exactly
  const auto table = embedded_table(png);
  ASSERT_EQ(table.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(table[i][0], rows[i].k);
    EXPECT_EQ(table[i][2], rows[i].silhouette);
    EXPECT_EQ(table[i][3], rows[i].prediction_error);
  }
  // the markers sit where the values map to, in the axis' colour
  ASSERT_EQ(layout.stability_points.size(), rows.size());
  double smin = 1e300, smax = -1e300;
  for (const auto& r : rows) {
    smin = std::min(smin, r.silhouette);
    smax = std::max(smax, r.silhouette);
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto [sx, sy] = layout.stability_points[i];
    const auto [ex, ey] = layout.error_points[i];
    EXPECT_NEAR(sx, ex, 1e-9);  // same k
    EXPECT_GT(sx, layout.left);
    EXPECT_LT(sx, layout.right);
    const auto b = pixel(s, sx, sy);
    const auto r = pixel(s, ex, ey);
    EXPECT_TRUE(b[2] > 200 && b[0] < 60 && b[1] < 60) << "blue stability marker " << i;
    // red error marker (unless the blue marker covers it, as at k = 5 where both overlap)
    const bool covered = std::hypot(sx - ex, sy - ey) < 20;
    if (!covered) {
      EXPECT_TRUE(r[0] > 200 && r[1] < 60 && r[2] < 60) << "red error marker " << i;
    }
    if (i > 0) {
      EXPECT_GT(sx, layout.stability_points[i - 1].first);
    }
  }
  // higher stability is drawn higher
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < rows.size(); ++j)
      if (rows[i].silhouette > rows[j].silhouette) {
        EXPECT_LT(layout.stability_points[i].second, layout.stability_points[j].second);
      }
  cairo_surface_destroy(s);
  EXPECT_THROW(write_k_selection_plot(png, {}), InputError);
  EXPECT_THROW(write_k_selection_plot((tmp.path() / "no" / "such" / "dir.png").string(), rows), InputError);
}

TEST(Plot, ClusteringFigure) {
  TempDir tmp("knmf-plot");
  // two tight clusters
  HostRows x{6, 2, {0, 0, 0.1, 0, 0, 0.1, 5, 5, 5.1, 5, 5, 5.1}};
  ClusteringFigure fig;
  fig.k = 2;
  fig.density_threshold = 0.5;
  fig.local_density = {0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.9};
  fig.labels = {0, 0, 0, 1, 1, 1};
  fig.distances = HostRows{6, 6, std::vector<double>(36)};
  for (int a = 0; a < 6; ++a)
    for (int b = 0; b < 6; ++b)
      fig.distances.row(a)[b] = std::hypot(x.row(a)[0] - x.row(b)[0], x.row(a)[1] - x.row(b)[1]);
  const auto order = clustering_order(fig.distances, fig.labels);
  ASSERT_EQ(order.size(), 6u);
  for (int p = 0; p < 3; ++p) EXPECT_EQ(fig.labels[size_t(order[size_t(p)])], 0);
  const std::string png = (tmp.path() / "c.png").string();
  write_clustering_plot(png, fig);
  cairo_surface_t* s = cairo_image_surface_create_from_png(png.c_str());
  ASSERT_EQ(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
  EXPECT_EQ(cairo_image_surface_get_width(s), 2625);
  EXPECT_EQ(cairo_image_surface_get_height(s), 2375);
  cairo_surface_destroy(s);
  bool found = false;
  for (const auto& [key, text] : png_text_chunks(png))
    if (key == "knmf:data") {
      found = true;
      EXPECT_NE(text.find("removed\t1\ntotal\t7"), std::string::npos) << text;
    }
  EXPECT_TRUE(found);
}

TEST(Cli, ConsensusAndKSelectionCommands) {
  TempDir tmp("knmf-cli");
  make_pbmc_run(tmp.path());
  const std::string dir = tmp.path().string();
  EXPECT_EQ(cli::run({"knmf", "k-selection", "--output-dir", dir, "--name", "pbmcA", "-k", "6", "7"}), 0);
  const io::CnmfPaths p(dir, "pbmcA");
  ASSERT_TRUE(fs::exists(p.k_selection_plot()));
  ASSERT_TRUE(fs::exists(p.k_selection_stats()));
  const auto stats = io::read_df_npz(p.k_selection_stats());
  const auto table = embedded_table(p.k_selection_plot());
  ASSERT_EQ(table.size(), 2u);
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t c = 0; c < 4; ++c) EXPECT_EQ(table[size_t(r)][size_t(c)], stats.at(r, c));
  EXPECT_EQ(cli::run({"knmf", "consensus", "--output-dir", dir, "--name", "pbmcA", "--components",
                      "7", "--local-density-threshold", "0.5", "--show-clustering"}),
            0);
  EXPECT_TRUE(fs::exists(p.consensus_spectra(7, 0.5)));
  EXPECT_TRUE(fs::exists(p.clustering_plot(7, 0.5)));
  // user errors: exit status 1, nothing written
  const auto before = list_files(tmp.path());
  EXPECT_EQ(cli::run({"knmf", "consensus", "--output-dir", dir, "--name", "pbmcA", "-k", "7",
                      "--local-density-threshold", "2.5"}),
            1);
  EXPECT_EQ(cli::run({"knmf", "consensus", "--output-dir", dir, "--name", "pbmcA", "-k", "11"}), 1);
  EXPECT_EQ(cli::run({"knmf", "consensus", "--output-dir", dir, "--name", "pbmcA", "--tpm", "x.h5ad"}), 1);
  EXPECT_EQ(list_files(tmp.path()), before);
}

// The plot is k-selection's last output: a --plot that cannot be written stops the command
// before the stats table (cNMF mode) or /k_selection (native mode) is written.
TEST(Cli, UnwritablePlotStopsKSelectionBeforeAnyOutput) {
  TempDir tmp("knmf-cli-plot");
  make_pbmc_run(tmp.path(), false);
  const fs::path results = tmp.path() / "run.h5";
  make_pbmc_results(results, tmp.path(), {6});
  const auto bytes = [&] { return read_bytes(results); };
  const std::string kept = bytes();
  const auto before = list_files(tmp.path());
  const std::string dir = tmp.path().string();
  for (const std::string& png : {(tmp.path() / "no" / "such" / "k.png").string(), dir}) {
    EXPECT_EQ(cli::run({"knmf", "k-selection", "--output-dir", dir, "--name", "pbmcA", "-k", "6",
                        "--plot", png}),
              1)
        << png;
    EXPECT_EQ(cli::run({"knmf", "k-selection", "--results", results.string(), "--plot", png}), 1) << png;
    EXPECT_EQ(list_files(tmp.path()), before) << png;
    EXPECT_TRUE(bytes() == kept) << png << ": the results file changed";
  }
  EXPECT_FALSE(results::ResultsReader::open(results).k_selection());
}

// Native mode from the command line: the outputs go into the results file (and the figures
// beside it), cNMF's files only when --output-dir/--name are given.
TEST(Cli, NativeModeWritesIntoTheResultsFile) {
  TempDir tmp("knmf-cli-native");
  make_pbmc_run(tmp.path(), false);
  const fs::path results = tmp.path() / "run.h5";
  make_pbmc_results(results, tmp.path(), {6, 7});
  const std::string r = results.string();
  const auto before = list_files(tmp.path());
  EXPECT_EQ(cli::run({"knmf", "k-selection", "--results", r}), 0);
  {
    const auto table = results::ResultsReader::open(results).k_selection();
    ASSERT_TRUE(table);
    EXPECT_EQ(table->k, (std::vector<int>{6, 7}));
    const fs::path png = tmp.path() / "run.k_selection.png";
    ASSERT_TRUE(fs::exists(png));
    const auto shown = embedded_table(png.string());
    ASSERT_EQ(shown.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(shown[i][0], table->k[i]);
      EXPECT_EQ(shown[i][2], table->silhouette[i]);
      EXPECT_EQ(shown[i][3], table->prediction_error[i]);
    }
  }
  EXPECT_EQ(cli::run({"knmf", "consensus", "--results", r, "-k", "7", "--show-clustering"}), 0);
  EXPECT_TRUE(results::ResultsReader::open(results).has_consensus(7, 0.5));
  EXPECT_TRUE(fs::exists(tmp.path() / "run.clustering.k_7.dt_0_5.png"));
  auto after = before;
  for (const char* f : {"run.clustering.k_7.dt_0_5.png", "run.k_selection.png"}) after.push_back(f);
  std::sort(after.begin(), after.end());
  EXPECT_EQ(list_files(tmp.path()), after) << "native mode without --output-dir wrote other files";
  // with --output-dir/--name, cNMF's files too
  const std::string out = (tmp.path() / "out").string();
  EXPECT_EQ(cli::run({"knmf", "consensus", "--results", r, "-k", "6", "--output-dir", out, "--name", "n"}), 0);
  const io::CnmfPaths p(out, "n");
  EXPECT_TRUE(fs::exists(p.consensus_spectra(6, 0.5)));
  EXPECT_TRUE(fs::exists(p.consensus_usages_txt(6, 0.5)));
  {
    const auto reader = results::ResultsReader::open(results);
    EXPECT_EQ(reader.consensus_list().size(), 2u);
    EXPECT_EQ(reader.consensus(6, 0.5).spectra, io::read_df_npz(p.consensus_spectra(6, 0.5)).data);
  }
  // --read-only-results: the results file stays as it is
  const auto bytes = [&] { return read_bytes(results); };
  const std::string kept = bytes();
  EXPECT_EQ(cli::run({"knmf", "k-selection", "--results", r, "-k", "6", "--read-only-results", "--output-dir",
                      out, "--name", "n"}),
            0);
  EXPECT_TRUE(fs::exists(p.k_selection_stats()));
  EXPECT_TRUE(fs::exists(p.k_selection_plot()));
  EXPECT_EQ(bytes(), kept);
  // user errors: nothing to write; a native option in cNMF mode
  EXPECT_EQ(cli::run({"knmf", "consensus", "--results", r, "-k", "7", "--read-only-results"}), 1);
  EXPECT_EQ(cli::run({"knmf", "consensus", "--output-dir", tmp.path().string(), "--name", "pbmcA",
                      "--read-only-results"}),
            1);
  EXPECT_EQ(bytes(), kept);
}

// --cross-validate: the cross-validation's columns in cNMF's stats table (after cNMF's four)
// and in the results file's /k_selection with its grid; the same numbers by both routes (the
// same X, folds and seeds); its options refused without it.
TEST(Cli, KSelectionCrossValidatesByBothRoutes) {
  TempDir tmp("knmf-cli-cv");
  make_pbmc_run(tmp.path(), false);
  const std::string dir = tmp.path().string();
  const std::vector<std::string> cv = {"--cross-validate", "--cv-replicates", "2", "--cv-seed", "3"};
  auto with = [&](std::vector<std::string> a) {
    a.insert(a.end(), cv.begin(), cv.end());
    return a;
  };
  ASSERT_EQ(cli::run(with({"knmf", "k-selection", "--output-dir", dir, "--name", "pbmcA", "-k", "6", "7"})), 0);
  const io::CnmfPaths p(dir, "pbmcA");
  // the resume checkpoint is gone once the outputs are written
  EXPECT_FALSE(fs::exists(fs::path(p.tmp_dir()) / "pbmcA.k_selection.cross_validation.checkpoint"));
  const auto stats = io::read_df_npz(p.k_selection_stats());
  ASSERT_EQ(stats.cols, 6);
  EXPECT_EQ(io::label_to_string(stats.columns[4]), "cv_prediction_error");
  EXPECT_EQ(io::label_to_string(stats.columns[5]), "cv_prediction_error_sd");
  for (std::int64_t r = 0; r < 2; ++r) {
    EXPECT_GT(stats.at(r, 4), 0.0);
    EXPECT_LT(stats.at(r, 4), 1.0) << "relative to the held-out blocks' norm";
    EXPECT_GE(stats.at(r, 5), 0.0);
  }

  const fs::path results = tmp.path() / "run.h5";
  make_pbmc_results(results, tmp.path(), {6, 7});
  ASSERT_EQ(cli::run(with({"knmf", "k-selection", "--results", results.string()})), 0);
  EXPECT_FALSE(fs::exists(results.string() + ".cross_validation.checkpoint"));
  const auto table = results::ResultsReader::open(results).k_selection();
  ASSERT_TRUE(table);
  ASSERT_TRUE(table->cross_validation);
  EXPECT_EQ(table->cross_validation->cell_folds, 2);
  EXPECT_EQ(table->cross_validation->replicates, 2);
  EXPECT_EQ(table->cross_validation->seed, 3);
  ASSERT_EQ(table->cv_prediction_error.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(table->cv_prediction_error[r], stats.at(std::int64_t(r), 4)) << "k " << table->k[r];
    EXPECT_EQ(table->cv_prediction_error_sd[r], stats.at(std::int64_t(r), 5));
  }
  // the figure: the cross-validation panel below, its table with the cv_ columns
  {
    const fs::path png = tmp.path() / "run.k_selection.png";
    const auto shown = embedded_table(png.string());
    ASSERT_EQ(shown.size(), 2u);
    ASSERT_EQ(shown[0].size(), 6u);
    EXPECT_EQ(shown[1][4], table->cv_prediction_error[1]);
    cairo_surface_t* s = cairo_image_surface_create_from_png(png.string().c_str());
    ASSERT_EQ(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
    EXPECT_EQ(cairo_image_surface_get_height(s), 1600);
    cairo_surface_destroy(s);
  }
  // without --cross-validate the table has cNMF's four columns and no cross-validation
  ASSERT_EQ(cli::run({"knmf", "k-selection", "--results", results.string()}), 0);
  EXPECT_FALSE(results::ResultsReader::open(results).k_selection()->cross_validation);
  // the options need the flag; bad values name the option
  const auto before = list_files(tmp.path());
  EXPECT_EQ(cli::run({"knmf", "k-selection", "--results", results.string(), "--cv-replicates", "3"}), 1);
  EXPECT_EQ(cli::run(with({"knmf", "k-selection", "--results", results.string(), "--cv-cell-folds", "1"})), 1);
  EXPECT_EQ(cli::run({"knmf", "k-selection", "--results", results.string(), "--cv-rule", "1se"}), 1);
  EXPECT_EQ(cli::run(with({"knmf", "k-selection", "--results", results.string(), "--cv-rule", "2se"})), 1);
  EXPECT_EQ(list_files(tmp.path()), before);
}

}  // namespace
