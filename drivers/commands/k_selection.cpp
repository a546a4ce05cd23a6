// `knmf k-selection`: cNMF's k_selection_plot (stability and prediction error per k, and
// the plot) on a cNMF run folder or a knmf results file.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "command.hpp"
#include "knmf/consensus/cnmf_mode.hpp"
#include "knmf/consensus/native_mode.hpp"
#include "knmf/consensus/plot.hpp"
#include "knmf/core/error.hpp"
#include "knmf/io/cnmf_files.hpp"

namespace knmf::cli {

namespace {

/// The options cNMF's k_selection_plot shares with consensus, bound to `sub`.
void add_consensus_options(CLI::App* sub, std::string& output_dir, std::string& name,
                           std::vector<int>& ks, consensus::ConsensusOptions& o,
                           std::string& results, std::string& counts) {
  sub->add_option("--output-dir", output_dir,
                  "cNMF run folder parent: files are read from and written to OUTPUT_DIR/NAME/")
      ->capture_default_str();
  sub->add_option("--name", name, "run name (cNMF's --name)")->capture_default_str();
  sub->add_option("-k,--components", ks,
                  "k values (default: every k of the job table or results file)");
  sub->add_option("--local-density-threshold", o.local_density_threshold,
                  "recorded in the stats table's local_density_threshold column (0 < t <= 2); as in "
                  "cNMF, k-selection clusters every replicate spectrum without a density filter")
      ->capture_default_str();
  sub->add_option("--local-neighborhood-size", o.local_neighborhood_size,
                  "neighbours for the local density, as a fraction of the replicates")
      ->capture_default_str();
  sub->add_option("--results", results,
                  "native mode: read the replicates from this knmf results file (knmf factorize) "
                  "instead of the cNMF run folder's spectra files");
  sub->add_option("--counts", counts,
                  "native mode: X (.h5ad) the replicates were computed on (default: the input "
                  "recorded in the results file)");
}

class KSelectionCommand : public Command {
public:
  explicit KSelectionCommand(CLI::App& app) {
    auto* sub = app.add_subcommand(
        "k-selection",
        "cNMF's k_selection_plot: stability (silhouette of the k-means clustering of all "
        "replicate spectra) and prediction error ||X - WH||^2 of the consensus for each k; "
        "writes NAME.k_selection_stats.df.npz and the plot NAME.k_selection.png");
    add_consensus_options(sub, output_dir_, name_, ks_, opts_, results_, counts_);
    sub->add_option("--plot", plot_, "where to write the PNG (default: OUTPUT_DIR/NAME/NAME.k_selection.png)");
  }

  int run() override {
    std::vector<consensus::KSelectionRow> rows;
    if (!results_.empty()) {
      consensus::NativeRequest req;
      req.results = results_;
      req.counts = counts_;
      req.output_dir = output_dir_;
      req.name = name_;
      req.components = ks_;
      req.options = opts_;
      rows = consensus::run_native_k_selection(ExecSpace(), req);
    } else {
      if (!counts_.empty()) input_error("--counts belongs to native mode (--results)");
      consensus::CnmfKSelectionRequest req;
      req.output_dir = output_dir_;
      req.name = name_;
      req.components = ks_;
      req.options = opts_;
      rows = consensus::run_cnmf_k_selection(ExecSpace(), req);
    }
    const io::CnmfPaths paths(output_dir_, name_);
    const std::string png = plot_.empty() ? paths.k_selection_plot() : plot_;
    consensus::write_k_selection_plot(png, rows);
    std::printf("knmf k-selection (%s):\n   k  silhouette          prediction_error\n",
                results_.empty() ? "cNMF run folder" : "knmf results file");
    for (const auto& r : rows)
      std::printf("%4d  %-18.12g  %.12g\n", r.k, r.silhouette, r.prediction_error);
    std::printf("  %s\n  %s\n", paths.k_selection_stats().c_str(), png.c_str());
    return 0;
  }

private:
  std::string output_dir_ = ".", name_ = "cNMF", results_, counts_, plot_;
  std::vector<int> ks_;
  consensus::ConsensusOptions opts_;
};

}  // namespace

std::unique_ptr<Command> make_k_selection_command(CLI::App& app) {
  return std::make_unique<KSelectionCommand>(app);
}

}  // namespace knmf::cli
