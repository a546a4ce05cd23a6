// `knmf prepare`: cNMF's `cnmf prepare` natively (same options, defaults and run folder).
#include <cstdio>
#include <iostream>
#include <memory>

#include "command.hpp"
#include "knmf/prepare/cnmf_prepare.hpp"
#include "knmf/prepare/count_inputs.hpp"

namespace knmf::cli {
namespace {

class PrepareCommand : public Command {
public:
  explicit PrepareCommand(CLI::App& app) {
    sub_ = app.add_subcommand(
        "prepare",
        "cNMF's prepare: TPM, highly variable genes, unit-variance counts and the job table, "
        "written as cNMF's run folder OUTPUT_DIR/NAME (read by `knmf factorize --output-dir "
        "--name` and by cNMF's own factorize/combine/consensus).\n"
        "  knmf prepare --output-dir DIR --name NAME -c COUNTS -k 5 6 7 -n 100 --seed 14\n"
        "COUNTS: .h5ad, a 10x matrix.mtx[.gz] (with features/genes and barcodes beside it), a "
        "10x Cell Ranger .h5, a DataFrame .df.npz or a tab-separated table.");
    sub_->add_option("--output-dir", o_.output_dir, "output directory")->capture_default_str();
    sub_->add_option("--name", o_.name, "run name")->capture_default_str();
    sub_->add_option("-c,--counts", o_.counts, "input (cell x gene) counts matrix")->required();
    sub_->add_option("-k,--components", o_.components, "numbers of components (several: -k 8 9 10)")
        ->expected(1, -1)
        ->required();
    sub_->add_option("-n,--n-iter", o_.n_iter, "factorization replicates per k")->capture_default_str();
    seed_opt_ = sub_->add_option("--seed", seed_,
                                 "seed of the job table, 0 <= S < 2^32 (numpy's); not given: "
                                 "drawn, printed and recorded in cnmf_tmp/NAME.knmf_prepare.json");
    sub_->add_option("--genes-file", o_.genes_file, "genes to use, one per line (instead of --numgenes)");
    sub_->add_option("--numgenes", o_.num_highvar_genes, "number of highly variable genes")
        ->capture_default_str();
    sub_->add_option("--tpm", o_.tpm, "pre-computed (cell x gene) TPM, any format of -c (default: computed from the counts)");
    sub_->add_option("--max-nmf-iter", o_.max_nmf_iter, "iteration limit of each NMF run")
        ->capture_default_str();
    sub_->add_option("--beta-loss", o_.beta_loss, "frobenius, kullback-leibler or itakura-saito")
        ->capture_default_str();
    sub_->add_option("--init", o_.init, "random or nndsvd")->capture_default_str();
    sub_->add_flag("--densify", o_.densify, "hold the input as one dense matrix (same outputs)");
    sub_->add_option("--block-rows", o_.block_rows, "cells read at once")->capture_default_str();
  }

  int run() override {
    if (seed_opt_->count()) o_.seed = seed_;
    const auto rep = prepare::cnmf_prepare(o_, std::cerr);
    if (rep.seed_drawn)
      std::printf("knmf prepare: no --seed given: drew seed %lld (recorded in %s/cnmf_tmp/%s.knmf_prepare.json; "
                  "pass --seed %lld to repeat this job table)\n",
                  (long long)rep.seed, rep.run_dir.c_str(), o_.name.c_str(), (long long)rep.seed);
    std::printf("knmf prepare: %lld cells x %lld genes (%s) -> %lld genes; %lld jobs (seed %lld) in %s%s\n",
                (long long)rep.cells, (long long)rep.genes,
                prepare::to_string(prepare::count_format(o_.counts)), (long long)rep.selected_genes,
                (long long)rep.jobs, (long long)rep.seed, rep.run_dir.c_str(),
                rep.replaced_existing ? " (prepare files of the existing run replaced)" : "");
    return 0;
  }

private:
  CLI::App* sub_ = nullptr;
  CLI::Option* seed_opt_ = nullptr;
  std::int64_t seed_ = 0;
  prepare::CnmfPrepareOptions o_;
};

}  // namespace

std::unique_ptr<Command> make_prepare_command(CLI::App& app) {
  return std::make_unique<PrepareCommand>(app);
}

}  // namespace knmf::cli
