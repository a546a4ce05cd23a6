// `knmf consensus`: cNMF's consensus step (density filter, k-means, median spectra, usage
// refit, TPM spectra and gene scores) on a cNMF run folder or a knmf results file.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "command.hpp"
#include "options.hpp"
#include "knmf/consensus/cnmf_mode.hpp"
#include "knmf/consensus/native_mode.hpp"
#include "knmf/consensus/plot.hpp"
#include "knmf/core/error.hpp"
#include "knmf/core/types.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"

namespace knmf::cli {

namespace {

class ConsensusCommand : public Command {
public:
  explicit ConsensusCommand(CLI::App& app) {
    auto* sub = app.add_subcommand(
        "consensus",
        "cNMF's consensus: combine the replicate spectra of each k, filter outliers by local "
        "density, cluster (k-means), take per-cluster medians, refit the usages and, with "
        "tpm.h5ad, compute TPM spectra and gene scores; writes cNMF's consensus files (native "
        "mode, --results: into the results file, and cNMF's files when --output-dir/--name are "
        "given)");
    folder_opts_ = add_consensus_options(
        sub, output_dir_, name_, ks_, opts_, native_.results, native_.counts, read_only_,
        "keep replicate spectra with local density below this (0 < t <= 2; 2 keeps all)");
    sub->add_flag("--show-clustering", show_clustering_,
                  "also draw NAME.clustering.k_K.dt_T.png (distance heatmap, density histogram)");
    sub->add_option("--tpm", native_.tpm,
                    "native mode: TPM .h5ad over all genes (same cells) for the TPM spectra and "
                    "gene scores");
    sub->add_option("--tpm-stats", native_.tpm_stats,
                    "native mode: cNMF's tpm_stats.df.npz (gene std); default: computed from --tpm");
  }

  int run() override {
    const bool native = !native_.results.empty();
    const bool folder = !native || cnmf_folder_given(folder_opts_);
    std::vector<consensus::CnmfConsensusOutcome> out;
    if (native) {
      native_.output_dir = folder ? output_dir_ : std::string();
      native_.name = name_;
      native_.update_results = !read_only_;
      native_.components = ks_;
      native_.options = opts_;
      out = consensus::run_native_consensus(ExecSpace(), native_, std::cerr);
    } else {
      if (!native_.counts.empty() || !native_.tpm.empty() || !native_.tpm_stats.empty() || read_only_)
        input_error("--counts, --tpm, --tpm-stats and --read-only-results belong to native mode (--results)");
      consensus::CnmfConsensusRequest req;
      req.output_dir = output_dir_;
      req.name = name_;
      req.components = ks_;
      req.options = opts_;
      out = consensus::run_cnmf_consensus(ExecSpace(), req, std::cerr);
    }
    const io::CnmfPaths paths(output_dir_, name_);
    const double dt = opts_.local_density_threshold;
    for (auto& o : out) {
      const auto& r = o.result;
      std::printf("knmf consensus k=%d: %zu of %lld replicate spectra clustered (density < %s), "
                  "stability %.6f, prediction error %.9g, usage refit %d iterations (%s)%s\n",
                  o.k, r.clustering.used_rows.size(), (long long)o.merged.values.rows,
                  io::format_float_repr(dt).c_str(), r.clustering.silhouette,
                  r.prediction_error, r.refit.n_iter, to_string(r.refit.status).c_str(),
                  r.have_tpm ? ", TPM spectra and gene scores" : "");
      if (o.merged.left_out > 0)
        std::printf("  (%d replicate(s) of k=%d left out: non_finite, not factorizations)\n",
                    o.merged.left_out, o.k);
      if (show_clustering_) {
        const std::string png =
            folder ? paths.clustering_plot(o.k, dt)
                   : beside_results(native_.results, "clustering.k_" + std::to_string(o.k) + ".dt_" +
                                                         io::density_threshold_string(dt) + ".png");
        draw_clustering(o, png);
        o.files.push_back(png);
      }
      for (const auto& f : o.files) std::printf("  %s\n", f.c_str());
    }
    return 0;
  }

private:
  void draw_clustering(const consensus::CnmfConsensusOutcome& o, const std::string& png) const {
    using namespace knmf::consensus;
    const auto& c = o.result.clustering;
    // at most 4000 spectra in the figure (evenly spaced): it never needs more pixels
    std::vector<size_type> rows;
    std::vector<int> labels;
    const size_t m = c.used_rows.size(), step = (m + 3999) / 4000;
    for (size_t i = 0; i < m; i += step) {
      rows.push_back(c.used_rows[i]);
      labels.push_back(c.labels[i]);
    }
    ClusteringFigure fig;
    fig.k = o.k;
    fig.density_threshold = opts_.local_density_threshold;
    fig.local_density = c.local_density;
    fig.labels = labels;
    fig.distances = pairwise_distances(ExecSpace(), l2_normalize_rows(select_rows(o.merged.values, rows)));
    write_clustering_plot(png, fig);
  }

  std::string output_dir_ = ".", name_ = "cNMF";
  std::vector<int> ks_;
  consensus::ConsensusOptions opts_;
  consensus::NativeRequest native_;
  bool show_clustering_ = false, read_only_ = false;
  std::pair<CLI::Option*, CLI::Option*> folder_opts_{};
};

}  // namespace

std::unique_ptr<Command> make_consensus_command(CLI::App& app) {
  return std::make_unique<ConsensusCommand>(app);
}

}  // namespace knmf::cli
