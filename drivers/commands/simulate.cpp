// `knmf simulate`: single-cell counts with planted gene-expression programs, and their truth.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "command.hpp"
#include "knmf/core/error.hpp"
#include "knmf/prepare/simulate.hpp"

namespace knmf::cli {

namespace {

class SimulateCommand : public Command {
public:
  explicit SimulateCommand(CLI::App& app) {
    auto* sub = app.add_subcommand(
        "simulate",
        "simulate single-cell UMI counts with planted gene-expression programs (scsim/splatter-"
        "like, as in the cNMF paper): writes OUT.h5ad and the ground truth "
        "OUT.truth_programs.df.npz, OUT.truth_usages.df.npz");
    sub->add_option("-o,--output", output_, "output .h5ad (cells x genes, CSR float32)")->required();
    sub->add_option("--cells", o_.n_cells, "number of cells")->capture_default_str();
    sub->add_option("--genes", o_.n_genes, "number of genes")->capture_default_str();
    sub->add_option("--programs", o_.n_programs, "identity programs (cell types)")->capture_default_str();
    sub->add_option("--activity", o_.n_activity, "activity programs shared across cell types")
        ->capture_default_str();
    sub->add_option("--activity-fraction", o_.activity_fraction,
                    "fraction of cells with an activity program")->capture_default_str();
    sub->add_option("--min-usage", o_.min_activity_usage, "smallest activity usage")->capture_default_str();
    sub->add_option("--max-usage", o_.max_activity_usage, "largest activity usage")->capture_default_str();
    sub->add_option("--library-log-mean", o_.library_log_mean, "mean of log library size")
        ->capture_default_str();
    sub->add_option("--library-log-sd", o_.library_log_sd, "sd of log library size")->capture_default_str();
    sub->add_option("--de-probability", o_.de_probability,
                    "probability that a gene is differentially expressed in an identity program")
        ->capture_default_str();
    sub->add_option("--activity-gene-probability", o_.activity_gene_probability,
                    "probability that a gene belongs to an activity program")->capture_default_str();
    sub->add_option("--de-log-mean", o_.de_log_mean, "mean of the log DE ratio")->capture_default_str();
    sub->add_option("--de-log-sd", o_.de_log_sd, "sd of the log DE ratio")->capture_default_str();
    sub->add_option("--bcv", o_.bcv_dispersion, "biological coefficient of variation")->capture_default_str();
    sub->add_option("--seed", o_.seed, "random seed (same seed, same data on any machine)")
        ->capture_default_str();
    sub->add_option("--block-rows", block_rows_, "cells simulated and written per block")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
  }

  int run() override {
    // a folder as -o: found before the ground-truth files beside it are written
    std::error_code ec;
    if (std::filesystem::is_directory(output_, ec))
      input_error("-o '", output_, "': is a folder, not a file");
    const prepare::Simulator sim(o_);
    const auto files = prepare::write_simulation(sim, output_, block_rows_);
    std::printf("knmf simulate: %lld cells x %lld genes, %lld non-zero counts (%.1f%%), "
                "%d identity + %d activity programs, seed %llu\n",
                (long long)o_.n_cells, (long long)o_.n_genes, (long long)files.nnz,
                100.0 * double(files.nnz) / (double(o_.n_cells) * double(o_.n_genes)),
                o_.n_programs, o_.n_activity, (unsigned long long)o_.seed);
    std::printf("  counts:   %s\n  programs: %s\n  usages:   %s\n", files.counts.c_str(),
                files.programs.c_str(), files.usages.c_str());
    return 0;
  }

private:
  std::string output_;
  prepare::SimulationOptions o_;
  std::int64_t block_rows_ = 4096;
};

}  // namespace

std::unique_ptr<Command> make_simulate_command(CLI::App& app) {
  return std::make_unique<SimulateCommand>(app);
}

}  // namespace knmf::cli
