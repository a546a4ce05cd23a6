#pragma once
/// \file
/// Figures of the consensus step, drawn with cairo (PNG): cNMF's k-selection plot
/// (stability and error against k on two y axes) and its clustering figure (distance
/// heatmap of the clustered replicate spectra, cluster bars, local density histogram).
///
/// Part of the `knmf_plot` library (linked by the driver and the tests), not of libknmf, so
/// that the library itself does not depend on cairo. Every PNG is written atomically
/// (temporary file + rename) and carries its data in a tEXt chunk (keyword
/// `knmf:data`, tab-separated), so a figure can be checked against the table it shows.

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "knmf/consensus/clustering.hpp"
#include "knmf/consensus/consensus.hpp"

namespace knmf::consensus {

/// Where things landed on the k-selection figure (pixels, origin top-left).
struct KSelectionPlotLayout {
  int width = 0, height = 0;
  std::vector<std::pair<double, double>> stability_points;  ///< one per row, in row order
  std::vector<std::pair<double, double>> error_points;
  double left = 0, right = 0, top = 0, bottom = 0;          ///< the plot area
  /// With the bi-cross-validation's columns: its panel below (the same x), its points, and
  /// the x of the chosen k's line (NaN without one).
  double cv_top = 0, cv_bottom = 0;
  std::vector<std::pair<double, double>> cv_points;
  double cv_chosen_x = std::numeric_limits<double>::quiet_NaN();
};

/// cNMF's `k_selection.png`: 6 x 4 inches at 250 dpi (1500 x 1000 pixels); stability
/// (silhouette) in blue on the left axis, prediction error in red on the right axis, k on
/// the x axis, markers joined by lines, a grid. Rows with a NaN silhouette are left out of
/// the stability line. InputError when `rows` is empty or the file cannot be written.
/// Rows with the bi-cross-validation's columns (cv_prediction_error finite) add a panel
/// below, 1500 x 600 pixels more: the mean relative prediction error per k with bars of one
/// standard deviation, and a dashed line at `cv_chosen_k` (0: none); the embedded table then
/// has the two cv_ columns too.
KSelectionPlotLayout write_k_selection_plot(const std::string& path,
                                            const std::vector<KSelectionRow>& rows,
                                            int cv_chosen_k = 0);

/// Inputs of the clustering figure of one k.
struct ClusteringFigure {
  int k = 0;
  double density_threshold = 0.5;
  std::vector<double> local_density;   ///< every (non-zero) replicate spectrum
  HostRows distances;                  ///< m x m distances of the clustered spectra, in `order`
  std::vector<int> labels;             ///< cluster of each of the m spectra (same order)
};

/// Order the clustered spectra for the figure: by cluster, then by distance to the cluster's
/// medoid. Returns positions into `labels`.
std::vector<size_type> clustering_order(const HostRows& distances, const std::vector<int>& labels);

/// cNMF's `clustering.k_K.dt_T.png` (10.5 x 9.5 inches at 250 dpi, down-sampled heatmap when
/// there are more spectra than pixels).
void write_clustering_plot(const std::string& path, const ClusteringFigure& fig);

/// The tEXt chunks (keyword, text) of a PNG file; InputError if it is not a PNG.
std::vector<std::pair<std::string, std::string>> png_text_chunks(const std::string& path);

}  // namespace knmf::consensus
