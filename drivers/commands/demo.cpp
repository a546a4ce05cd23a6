// `knmf demo`: the whole pipeline on a built-in simulation, no input needed.
//   simulate counts with planted programs -> cNMF's prepare -> factorize a k range through the
//   library's run path (run_factorize, as `knmf factorize` in native mode: format choice,
//   memory plan, batching, results file) -> k-selection statistics -> consensus at the true k
//   -> how well each planted program was recovered (best-match correlation).
// The prepared matrix and the results file live in a work folder: --out DIR, or a fresh
// temporary folder removed at the end.
#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "command.hpp"
#include "knmf/consensus/consensus.hpp"
#include "knmf/consensus/native_mode.hpp"
#include "knmf/core/error.hpp"
#include "knmf/core/format.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/prepare/evaluate.hpp"
#include "knmf/prepare/prepare.hpp"
#include "knmf/prepare/simulate.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/run/factorize.hpp"
#include "options.hpp"

namespace knmf::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// The demo's work folder: the one given (created if missing, kept), or a fresh one under the
/// system's temporary folder, removed with everything in it when the demo ends.
class WorkDir {
public:
  explicit WorkDir(const std::string& out) {
    if (!out.empty()) {
      path_ = out;
      std::error_code ec;
      fs::create_directories(path_, ec);
      if (ec || !fs::is_directory(path_))
        input_error("--out '", out, "': cannot create the folder (",
                    ec ? ec.message() : "not a folder", ")");
      return;
    }
    std::string name = (fs::temp_directory_path() / "knmf-demo-XXXXXX").string();
    if (!::mkdtemp(name.data())) system_input_error(errno, "cannot create a folder ", name);
    path_ = name;
    temporary_ = true;
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  ~WorkDir() {
    std::error_code ec;
    if (temporary_) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  bool temporary() const { return temporary_; }

private:
  fs::path path_;
  bool temporary_ = false;
};

/// Step 3's outcome: the replicate spectra of every k (iteration order) and their mean
/// iterations, from the results file.
struct Factorized {
  std::vector<int> ks;
  std::vector<consensus::HostRows> spectra;
  std::vector<double> mean_iterations;
};

class DemoCommand : public Command {
public:
  explicit DemoCommand(CLI::App& app) {
    sub_ = app.add_subcommand(
        "demo",
        "Simulate counts with planted gene-expression programs, prepare them as cNMF does, "
        "factorize a k range (as `knmf factorize` does), select k, build the consensus and "
        "report how well the planted programs were recovered. Needs no input.");
    sub_->add_option("--cells", sim_.n_cells, "simulated cells")->capture_default_str();
    sub_->add_option("--genes", sim_.n_genes, "simulated genes")->capture_default_str();
    sub_->add_option("--programs", sim_.n_programs, "identity programs (cell types)")
        ->capture_default_str();
    sub_->add_option("--activity", sim_.n_activity, "activity programs")->capture_default_str();
    sub_->add_option("--seed", sim_.seed, "simulation seed")->capture_default_str();
    sub_->add_option("--numgenes", numgenes_, "highly variable genes kept by prepare")
        ->capture_default_str();
    sub_->add_option("-k,--components", ks_, "k values to factorize (default: true k - 1..+1)");
    sub_->add_option("--n-iter", n_iter_, "replicates per k")->capture_default_str();
    sub_->add_option("--solver", solver_, "mu or cd")->capture_default_str();
    sub_->add_option("--save", save_, "also write the simulated counts here (.h5ad)");
    sub_->add_option("--out", out_,
                     "keep the work folder here: demo.norm_counts.h5ad (the prepared matrix) and "
                     "demo.results.h5 (the factorization, as `knmf factorize -o` writes it; a "
                     "rerun with the same options resumes it). Default: a temporary folder, "
                     "removed at the end");
  }

  int run() override {
    const auto t0 = Clock::now();
    sim_.validate();
    true_k_ = sim_.n_programs + sim_.n_activity;
    if (ks_.empty()) ks_ = {std::max(1, true_k_ - 1), true_k_, true_k_ + 1};
    opt_.solver = parse_solver(solver_, "--solver");
    // the consensus' local density needs int(local_neighborhood_size x replicates) >= 1
    // neighbours (cNMF's rule; 4 replicates at its default 0.30)
    const double lns = consensus::ConsensusOptions{}.local_neighborhood_size;
    if (n_iter_ < 2 || consensus::neighbor_count(lns, size_type(n_iter_), 1) < 1)
      input_error("--n-iter ", n_iter_, " is invalid: the consensus needs at least one neighbour per "
                  "spectrum, int(", format_double(lns), " x replicates) >= 1, so >= ",
                  int(std::ceil(1.0 / lns)), " replicates");
    std::printf("knmf demo on %s (%s)\n", default_execution_space().c_str(),
                device_description().c_str());
    const WorkDir dir(out_);
    const auto sim = simulate();
    const auto prep = prepare(sim);
    Factorized fac;
    if (!factorize(prep, dir, fac)) return 1;
    CsrRowSource source(prep.norm_counts, "simulation");
    select_k(fac, source);
    return recover(sim, prep, fac, source, t0);
  }

private:
  // 1. simulate
  prepare::Simulation simulate() const {
    const auto t = Clock::now();
    auto sim = prepare::simulate(sim_);
    std::printf("1. simulated %lld cells x %lld genes: %d identity + %d activity programs, "
                "%lld counts stored (%.1f%% nonzero)  [%.1f s]\n",
                (long long)sim_.n_cells, (long long)sim_.n_genes, sim_.n_programs,
                sim_.n_activity, (long long)sim.counts.nnz(),
                100.0 * double(sim.counts.nnz()) / double(sim_.n_cells * sim_.n_genes),
                seconds_since(t));
    if (!save_.empty()) {
      io::write_h5ad(save_, sim.counts);
      std::printf("   counts written to %s\n", save_.c_str());
    }
    return sim;
  }

  // 2. prepare as cNMF does
  prepare::PrepareResult prepare(const prepare::Simulation& sim) const {
    const auto t = Clock::now();
    prepare::PrepareOptions popt;
    popt.num_highvar_genes = numgenes_;
    auto prep = prepare::prepare_counts(prepare::count_source(sim.counts), popt);
    const auto& nc = prep.norm_counts;
    const double density = double(nc.nnz()) / (double(nc.rows()) * double(nc.ncols));
    std::printf("2. prepared as cNMF: %lld cells x %lld highly variable genes, unit variance, "
                "%.1f%% nonzero  [%.1f s]\n",
                (long long)nc.rows(), (long long)nc.ncols, 100.0 * density, seconds_since(t));
    return prep;
  }

  // 3. factorize every k through the run path of `knmf factorize` (native mode: cNMF's job
  // table, seed 14; X's format, the memory plan and the batches chosen there), then read the
  // replicates back from its results file. false: replicates failed (reported).
  bool factorize(const prepare::PrepareResult& prep, const WorkDir& dir, Factorized& fac) const {
    const auto t = Clock::now();
    FactorizeConfig c;
    c.input = (dir.path() / "demo.norm_counts.h5ad").string();
    c.results = (dir.path() / "demo.results.h5").string();
    c.ks = ks_;
    c.n_iter = n_iter_;
    c.seed = 14;
    c.solver = opt_;
    c.solver_set = true;
    c.quiet = true;  // the demo prints its own lines; warnings still reach stderr
    prepare::write_norm_counts(c.input, prep);
    std::fflush(stdout);  // the run's warnings (stderr) after the steps printed so far
    const FactorizeSummary sum = run_factorize(c, std::cerr);
    if (sum.jobs_failed > 0) {
      std::fprintf(stderr, "knmf: error: %s\n", sum.failure.c_str());
      return false;
    }
    const auto reader = results::ResultsReader::open(c.results);
    auto ks = reader.ks();
    std::sort(ks.begin(), ks.end());
    for (int k : ks) {
      fac.ks.push_back(k);
      fac.spectra.push_back(consensus::load_results_spectra(c.results, k).values);
      double iters = 0.0;
      for (auto n : reader.table(k).iterations) iters += double(n) / n_iter_;
      fac.mean_iterations.push_back(iters);
    }
    std::string x = sum.x_format.reason.empty()
                        ? std::string("X not loaded: every replicate already in the results file")
                        : std::string("X ") + (sum.x_format.sparse ? "sparse" : "dense") +
                              (sum.x_streamed ? ", streamed" : "");
    std::printf("3. factorized k =");
    for (int k : ks_) std::printf(" %d", k);
    std::printf(", %d replicates each (%s, %s): %lld replicates, mean iterations", n_iter_,
                solver_.c_str(), x.c_str(), (long long)sum.jobs_total);
    for (double v : fac.mean_iterations) std::printf(" %.0f", v);
    std::printf("  [%.1f s]\n", seconds_since(t));
    if (!dir.temporary())
      std::printf("   kept in %s: demo.norm_counts.h5ad, demo.results.h5\n", dir.path().c_str());
    return true;
  }

  // 4. k selection (stability and error per k)
  void select_k(const Factorized& fac, const CsrRowSource& source) const {
    const auto t = Clock::now();
    const auto stats = consensus::k_selection(ExecSpace(), fac.spectra, fac.ks, source, opt_,
                                              consensus::ConsensusOptions());
    std::printf("4. k selection  [%.1f s]\n      k   stability (silhouette)   prediction error\n",
                seconds_since(t));
    for (const auto& s : stats)
      std::printf("   %s%3d   %20.4f   %16.6g\n", s.k == true_k_ ? "->" : "  ", s.k, s.silhouette,
                  s.prediction_error);
  }

  // 5. consensus at the true k, and recovery of the planted programs
  int recover(const prepare::Simulation& sim, const prepare::PrepareResult& prep,
              const Factorized& fac, const CsrRowSource& source, Clock::time_point t0) const {
    const auto at = std::find(fac.ks.begin(), fac.ks.end(), true_k_);
    if (at == fac.ks.end()) {
      std::printf("5. k = %d (the planted number) was not factorized: no recovery report\n", true_k_);
      return 0;
    }
    const auto t = Clock::now();
    const consensus::ConsensusOptions copt;
    const auto cons = consensus::run_consensus(ExecSpace(), fac.spectra[size_t(at - fac.ks.begin())],
                                               true_k_, source, nullptr, opt_, copt);
    const auto rep = prepare::recovery(sim.programs, sim.n_programs_total, sim_.n_genes,
                                       cons.spectra.values, true_k_, prep);
    std::printf("5. consensus at k = %d (density threshold %.2f), recovery of the planted "
                "programs  [%.1f s]\n",
                true_k_, copt.local_density_threshold, seconds_since(t));
    double worst = 1.0;
    for (int p = 0; p < rep.n_programs; ++p) {
      const double c = rep.matched[size_t(p)];
      worst = std::min(worst, c);
      std::printf("   %-12s -> consensus program %d: correlation %.3f\n",
                  sim.program_names[size_t(p)].c_str(), rep.match[size_t(p)] + 1, c);
    }
    std::printf("recovered %d/%d planted programs with correlation >= 0.9 (worst %.3f); "
                "total %.1f s\n",
                int(std::count_if(rep.matched.begin(), rep.matched.end(),
                                   [](double c) { return c >= 0.9; })),
                rep.n_programs, worst, seconds_since(t0));
    return worst >= 0.9 ? 0 : 4;
  }

  CLI::App* sub_ = nullptr;
  prepare::SimulationOptions sim_;
  int numgenes_ = prepare::demo_num_highvar_genes;
  std::vector<int> ks_;
  int n_iter_ = 10;
  std::string solver_ = "cd";
  std::string save_;
  std::string out_;
  int true_k_ = 0;
  SolverOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_demo_command(CLI::App& app) { return std::make_unique<DemoCommand>(app); }

}  // namespace knmf::cli
