// `knmf factorize`: cNMF mode (a drop-in for `cnmf factorize`) and native mode.
#include <signal.h>

#include <csignal>
#include <iostream>
#include <map>
#include <memory>

#include "cli.hpp"
#include "command.hpp"
#include "knmf/version.hpp"
#if KNMF_HAVE_MPI
#include "knmf/mpi/run.hpp"
#endif
#include "knmf/core/error.hpp"
#include "knmf/core/options.hpp"
#include "knmf/run/factorize.hpp"
#include "options.hpp"
#include "progress_line.hpp"

namespace knmf::cli {
namespace {

volatile std::sig_atomic_t interrupted = 0;
void on_interrupt(int) { interrupted = 1; }

class FactorizeCommand : public Command {
public:
  explicit FactorizeCommand(CLI::App& app) {
    sub_ = app.add_subcommand(
        "factorize",
        "Factorize X many times (k values x replicates) with the batched solver.\n"
        "cNMF mode:  knmf factorize --output-dir DIR --name NAME [--worker-index I "
        "--total-workers M] [--skip-completed-runs]\n"
        "native:     knmf factorize INPUT.h5ad -k 5 6 7 --n-iter 100 --seed 14 -o RESULTS.h5");
    sub_->add_option("input", c_.input, "native mode: AnnData .h5ad (cells x genes)");
    auto* g1 = sub_->add_option_group("cNMF mode", "a run directory made by `cnmf prepare`");
    g1->add_option("--output-dir", c_.output_dir, "cNMF output directory");
    g1->add_option("--name", c_.name, "cNMF run name");
    g1->add_option("--worker-index", c_.worker_index, "this worker's index (cNMF's split)")
        ->capture_default_str();
    g1->add_option("--total-workers", c_.total_workers, "number of workers")->capture_default_str();
    g1->add_flag("--skip-completed-runs", c_.skip_completed,
                 "skip jobs whose spectra file exists");
    auto* g2 = sub_->add_option_group("native mode", "");
    g2->add_option("-o,--output", c_.results, "results file (HDF5)");
    g2->add_option("-k,--components", c_.ks, "numbers of components")->expected(1, -1);
    g2->add_option("--n-iter", c_.n_iter, "replicates per k")->capture_default_str();
    g2->add_option("--seed", c_.seed, "seed of the job table (as cnmf prepare)")
        ->capture_default_str();
    g2->add_flag("--save-usages", c_.save_usages, "also store each replicate's usages W");
    numeric_ = sub_->add_option_group("solver");
    // one flag per row of the solver option table, applied in the table's order by run()
    const SolverOptions defaults;
    for (const SolverOptionField& f : solver_option_fields()) {
      std::string help = f.help;
      if ((f.use & SolverOptionField::cnmf_yaml) && !(f.use & SolverOptionField::cli_over_yaml))
        help += " (native mode; cNMF mode: the run's yaml says)";
      numeric_->add_option(f.flag, solver_text_[f.name], help)->default_str(f.get(defaults));
    }
    sub_->add_option("--dtype", dtype_, "compute type: float or double")->capture_default_str();
    sub_->add_option("--format", format_,
                     "X on the device: auto (by density and memory), dense or sparse")
        ->capture_default_str();
    sub_->add_option("--batch", batch_, "replicates per batch: N or auto (memory model)")
        ->capture_default_str();
    sub_->add_option("--device-memory-limit", memory_limit_,
                     "plan as if the device had only this much memory (e.g. 4G)");
    sub_->add_flag("--quiet", c_.quiet, "no progress output");
#if KNMF_HAVE_MPI
    auto* g3 = sub_->add_option_group("MPI", "under mpirun/srun: one rank per device");
    g3->add_option("--distribute", distribute_,
                   "jobs (every rank reads X, takes jobs from rank 0), rows (X partitioned by "
                   "rows, all ranks on every job) or auto (rows when X does not fit one device)")
        ->capture_default_str();
    g3->add_flag("--static", dist_.static_split,
                 "jobs mode: a fixed split (job i on rank i % size) instead of on request");
#endif
    sub_->add_option("--log-json", c_.log_json, "write one JSON object per finished replicate");
  }

  int run() override {
    c_.dtype = parse_dtype(dtype_);
    c_.format = parse_x_format(format_);
    for (const SolverOptionField& f : solver_option_fields())
      if (sub_->count(f.flag) > 0) f.set(c_.solver, solver_text_[f.name], f.flag);
    c_.solver_set = sub_->count("--solver") > 0;
    c_.batch = parse_batch(batch_);
    if (!memory_limit_.empty())
      c_.device_memory_limit = parse_bytes(memory_limit_, "--device-memory-limit");
    if (c_.cnmf_mode())
      for (const SolverOptionField& f : solver_option_fields())
        if ((f.use & SolverOptionField::cnmf_yaml) && !(f.use & SolverOptionField::cli_over_yaml) &&
            sub_->count(f.flag) > 0)
          input_error(f.flag, " cannot be used in cNMF mode: the run's values come from ",
                      c_.name, ".nmf_idvrun_params.yaml (edit it, or use native mode)");
    // native mode's job options would be ignored: the jobs come from the job table
    if (c_.cnmf_mode())
      for (const char* opt : {"-k", "--n-iter", "--seed", "-o", "--save-usages"})
        if (sub_->count(opt) > 0)
          input_error(opt, " cannot be used in cNMF mode: the jobs come from ", c_.name,
                      ".nmf_params.df.npz (or use native mode)");
    // the progress line, printed by the run's progress hook (under MPI: on rank 0)
    ProgressLine line(c_.progress_seconds, c_.quiet, std::cerr);
#if KNMF_HAVE_MPI
    dist_.mode = parse_distribution(distribute_);
    if (world_size() > 1 || sub_->count("--distribute") > 0 || dist_.static_split) {
      // an MPI run cannot be stopped by the hook: Ctrl-C ends it as mpiexec does
      c_.on_progress = [&line](const RunProgress& p) {
        line.update(p);
        return true;
      };
      return exit_code(mpi::run_factorize(c_, dist_, MPI_COMM_WORLD, std::cerr));
    }
#endif
    // Ctrl-C stops the run at the next iteration with its finished replicates committed (the
    // progress hook); a second Ctrl-C kills it at once (SA_RESETHAND)
    struct sigaction stop {}, previous {};
    stop.sa_handler = on_interrupt;
    stop.sa_flags = SA_RESETHAND;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGINT, &stop, &previous);
    c_.on_progress = [&line](const RunProgress& p) {
      line.update(p);
      return interrupted == 0;
    };
    const FactorizeSummary sum = run_factorize(c_, std::cerr);
    sigaction(SIGINT, &previous, nullptr);
    if (sum.cancelled) {
      std::cerr << "knmf: interrupted: " << sum.jobs_run
                << " replicate(s) of this run are committed; run the same command again"
                << (c_.cnmf_mode() ? " with --skip-completed-runs" : "") << " to resume\n";
      return 130;
    }
    return exit_code(sum);
  }

  /// A run with replicates that are not factorizations fails: exit 1, one line (rank 0).
  static int exit_code(const FactorizeSummary& sum) {
    if (sum.jobs_failed == 0) return 0;
    if (rank() == 0) std::cerr << "knmf: error: " << sum.failure << "\n";
    return 1;
  }

private:
  CLI::App* sub_ = nullptr;
  CLI::Option_group* numeric_ = nullptr;
  FactorizeConfig c_;
  std::map<std::string, std::string> solver_text_;  ///< the solver flags as typed, by row name
  // the choice options as typed (parsed into c_ and dist_ by run())
  std::string dtype_ = to_string(FactorizeConfig{}.dtype);
  std::string format_ = to_string(FactorizeConfig{}.format);
  std::string batch_ = "auto";
  std::string memory_limit_;
#if KNMF_HAVE_MPI
  mpi::DistributeOptions dist_;
  std::string distribute_ = to_string(mpi::DistributeOptions{}.mode);
#endif
};

}  // namespace

std::unique_ptr<Command> make_factorize_command(CLI::App& app) {
  return std::make_unique<FactorizeCommand>(app);
}

}  // namespace knmf::cli
