// `knmf k-selection`: cNMF's k_selection_plot (stability and prediction error per k, and
// the plot) on a cNMF run folder or a knmf results file.
#include <cmath>
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
#include "knmf/io/atomic_file.hpp"
#include "knmf/io/cnmf_files.hpp"

namespace knmf::cli {

namespace {

class KSelectionCommand : public Command {
public:
  explicit KSelectionCommand(CLI::App& app) {
    auto* sub = sub_ = app.add_subcommand(
        "k-selection",
        "cNMF's k_selection_plot: stability (silhouette of the k-means clustering of all "
        "replicate spectra) and prediction error ||X - WH||^2 of the consensus for each k; "
        "writes NAME.k_selection_stats.df.npz and the plot NAME.k_selection.png (native mode, "
        "--results: the table goes into the results file's /k_selection)");
    folder_opts_ = add_consensus_options(
        sub, output_dir_, name_, ks_, opts_, results_, counts_, read_only_,
        "recorded in the stats table's local_density_threshold column (0 < t <= 2); as in "
                  "cNMF, k-selection clusters every replicate spectrum without a density filter");
    sub->add_option("--plot", plot_,
                    "where to write the PNG (default: OUTPUT_DIR/NAME/NAME.k_selection.png; native "
                    "mode without --output-dir/--name: RESULTS_STEM.k_selection.png beside the "
                    "results file)");
    sub->add_flag("--cross-validate", cross_validate_,
                  "also choose k by prediction: bi-cross-validation of the NMF (Owen & Perry "
                  "2009): for each k and each held-out block of a cells x genes fold grid, the "
                  "other cells and genes factorized with the run's solver options, the block "
                  "predicted by the two fixed-factor refits; adds cv_prediction_error and "
                  "cv_prediction_error_sd to the table and prints the k it chooses");
    sub->add_option("--cv-cell-folds", cv_.cell_folds, "cross-validation: groups of cells")
        ->capture_default_str();
    sub->add_option("--cv-gene-folds", cv_.gene_folds, "cross-validation: groups of genes")
        ->capture_default_str();
    sub->add_option("--cv-replicates", cv_.replicates,
                    "cross-validation: factorizations of each block per k (different seeds)")
        ->capture_default_str();
    sub->add_option("--cv-seed", cv_.seed, "cross-validation: seed of the folds and replicates")
        ->capture_default_str();
    sub->add_option("--cv-rule", rule_name_,
                    "cross-validation: how k is chosen from the prediction errors: 3se, the "
                    "smallest k within three standard errors of the smallest mean (the standard "
                    "error of a paired difference between neighbouring k, pooled over k); 1se, "
                    "the smallest k within one standard error of the paired differences to the "
                    "smallest mean; min, the smallest mean. The other rules' choices are "
                    "printed beside it")
        ->capture_default_str();
  }

  int run() override {
    if (!cross_validate_)
      for (const char* o : {"--cv-cell-folds", "--cv-gene-folds", "--cv-replicates", "--cv-seed",
                            "--cv-rule"})
        if (sub_->count(o) > 0) input_error(o, " needs --cross-validate");
    const auto rule = consensus::parse_k_choice_rule(rule_name_, "--cv-rule");
    if (cross_validate_) cv_.validate();
    std::vector<consensus::KSelectionRow> rows;
    const bool native = !results_.empty();
    const bool folder = !native || cnmf_folder_given(folder_opts_);
    const io::CnmfPaths paths(output_dir_, name_);
    const std::string png = !plot_.empty() ? plot_
                            : folder       ? paths.k_selection_plot()
                                           : beside_results(results_, "k_selection.png");
    // The plot is written last: a --plot that cannot be written stops the command before the
    // results file or the stats table change. (The default places are the folders of those.)
    if (!plot_.empty()) io::require_writable_target(png, "--plot '" + png + "'");
    if (native) {
      consensus::NativeRequest req;
      req.results = results_;
      req.counts = counts_;
      req.output_dir = folder ? output_dir_ : std::string();
      req.name = name_;
      req.update_results = !read_only_;
      req.components = ks_;
      req.options = opts_;
      req.cross_validate = cross_validate_;
      req.cross_validation = cv_;
      rows = consensus::run_native_k_selection(ExecSpace(), req);
    } else {
      if (!counts_.empty() || read_only_)
        input_error("--counts and --read-only-results belong to native mode (--results)");
      consensus::CnmfKSelectionRequest req;
      req.output_dir = output_dir_;
      req.name = name_;
      req.components = ks_;
      req.options = opts_;
      req.cross_validate = cross_validate_;
      req.cross_validation = cv_;
      rows = consensus::run_cnmf_k_selection(ExecSpace(), req, std::cerr);
    }
    const int chosen = cross_validate_ ? cv_choice(rows, rule) : 0;
    consensus::write_k_selection_plot(png, rows, chosen);
    std::printf("knmf k-selection (%s):\n   k  silhouette          prediction_error%s\n",
                native ? "knmf results file" : "cNMF run folder",
                cross_validate_ ? "    cv_prediction_error (sd)" : "");
    for (const auto& r : rows) {
      if (!cross_validate_)
        std::printf("%4d  %-18.12g  %.12g\n", r.k, r.silhouette, r.prediction_error);
      else
        std::printf("%4d  %-18.12g  %-18.12g  %.6g (%.3g)\n", r.k, r.silhouette,
                    r.prediction_error, r.cv_prediction_error, r.cv_prediction_error_sd);
    }
    if (cross_validate_) print_choice(rows, rule, chosen);
    if (native && !read_only_) std::printf("  %s:/k_selection\n", results_.c_str());
    if (folder) std::printf("  %s\n", paths.k_selection_stats().c_str());
    std::printf("  %s\n", png.c_str());
    return 0;
  }

private:
  /// The k cross-validation chooses (consensus::choose_k over the rows' cv_ columns).
  int cv_choice(const std::vector<consensus::KSelectionRow>& rows,
                consensus::KChoiceRule rule) const {
    std::vector<consensus::CrossValidationK> table;
    const double count = double(cv_.cell_folds) * cv_.gene_folds * cv_.replicates;
    for (const auto& r : rows) {
      consensus::CrossValidationK t;
      t.k = r.k;
      t.mean = r.cv_prediction_error;
      t.sd = r.cv_prediction_error_sd;
      t.std_error = t.sd / std::sqrt(count);
      t.errors = r.cv_errors;
      table.push_back(t);
    }
    return consensus::choose_k(table, rule);
  }
  /// The k cross-validation chose, beside the most stable k.
  void print_choice(const std::vector<consensus::KSelectionRow>& rows,
                    consensus::KChoiceRule rule, int chosen) const {
    size_t stable = 0;
    for (size_t i = 0; i < rows.size(); ++i)
      if (rows[i].silhouette > rows[stable].silhouette) stable = i;
    std::printf("  cross-validation chooses k = %d (%s); the most stable k is %d\n", chosen,
                consensus::k_choice_rule_description(rule), rows.empty() ? 0 : rows[stable].k);
    std::string others;
    for (const auto r : consensus::k_choice_rules)
      if (r != rule)
        others += std::string(others.empty() ? "" : ", ") + "--cv-rule " +
                  consensus::k_choice_rule_name(r) + ": k = " + std::to_string(cv_choice(rows, r));
    std::printf("  (%s)\n", others.c_str());
  }

  CLI::App* sub_ = nullptr;
  bool cross_validate_ = false;
  std::string rule_name_ = consensus::k_choice_rule_name(consensus::k_choice_rules[0]);
  consensus::CrossValidationOptions cv_;
  std::string output_dir_ = ".", name_ = "cNMF", results_, counts_, plot_;
  std::vector<int> ks_;
  consensus::ConsensusOptions opts_;
  bool read_only_ = false;
  std::pair<CLI::Option*, CLI::Option*> folder_opts_{};
};

}  // namespace

std::unique_ptr<Command> make_k_selection_command(CLI::App& app) {
  return std::make_unique<KSelectionCommand>(app);
}

}  // namespace knmf::cli
