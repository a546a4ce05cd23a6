// `knmf demo`: the whole pipeline on a built-in simulation, no input needed.
//   simulate counts with planted programs -> cNMF's prepare -> batched factorize over a k range
//   -> k-selection statistics -> consensus at the true k -> how well each planted program was
//   recovered (best-match correlation).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

#include "command.hpp"
#include "knmf/consensus/consensus.hpp"
#include "knmf/core/error.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/csr_matrix.hpp"
#include "knmf/prepare/evaluate.hpp"
#include "knmf/prepare/prepare.hpp"
#include "knmf/prepare/simulate.hpp"
#include "knmf/random/random_state.hpp"
#include "knmf/run/factorize.hpp"
#include "knmf/solver/nmf.hpp"
#include "options.hpp"

namespace knmf::cli {
namespace {

class DemoCommand : public Command {
public:
  explicit DemoCommand(CLI::App& app) {
    sub_ = app.add_subcommand(
        "demo",
        "Simulate counts with planted gene-expression programs, prepare them as cNMF does, "
        "factorize a k range, select k, build the consensus and report how well the planted "
        "programs were recovered. Needs no input.");
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
  }

  int run() override {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    auto secs = [&](clock::time_point a) {
      return std::chrono::duration<double>(clock::now() - a).count();
    };
    sim_.validate();
    const int true_k = sim_.n_programs + sim_.n_activity;
    if (ks_.empty()) ks_ = {std::max(1, true_k - 1), true_k, true_k + 1};
    SolverOptions opt;
    opt.solver = parse_solver(solver_, "--solver");
    if (n_iter_ < 2) input_error("--n-iter ", n_iter_, " is invalid: the consensus needs >= 2 replicates");
    std::printf("knmf demo on %s (%s)\n", default_execution_space().c_str(),
                device_description().c_str());

    // 1. simulate
    auto t = clock::now();
    const auto sim = prepare::simulate(sim_);
    std::printf("1. simulated %lld cells x %lld genes: %d identity + %d activity programs, "
                "%lld counts stored (%.1f%% nonzero)  [%.1f s]\n",
                (long long)sim_.n_cells, (long long)sim_.n_genes, sim_.n_programs,
                sim_.n_activity, (long long)sim.counts.nnz(),
                100.0 * double(sim.counts.nnz()) / double(sim_.n_cells * sim_.n_genes), secs(t));
    if (!save_.empty()) {
      io::write_h5ad(save_, sim.counts);
      std::printf("   counts written to %s\n", save_.c_str());
    }

    // 2. prepare as cNMF does
    t = clock::now();
    prepare::PrepareOptions popt;
    popt.num_highvar_genes = numgenes_;
    const auto prep = prepare::prepare_counts(prepare::count_source(sim.counts), popt);
    const auto& nc = prep.norm_counts;
    const double density = double(nc.nnz()) / (double(nc.rows()) * double(nc.ncols));
    std::printf("2. prepared as cNMF: %lld cells x %lld highly variable genes, unit variance, "
                "%.1f%% nonzero  [%.1f s]\n",
                (long long)nc.rows(), (long long)nc.ncols, 100.0 * density, secs(t));

    // 3. factorize every k: cNMF's job table (seed 14), batched replicates
    t = clock::now();
    ExecSpace space;
    const auto jobs = cnmf_job_table(ks_, n_iter_, 14);
    std::vector<ReplicateResult> res;
    const bool sparse = density < sparse_density_crossover;  // as `knmf factorize --format auto`
    if (sparse) {
      auto X = CsrMatrix<double>::from_host(space, nc.rows(), nc.ncols, nc.row_offsets.data(),
                                            nc.cols.data(), nc.values.data(), "simulation");
      res = factorize(space, X, jobs, n_iter_, opt);
    } else {
      std::vector<double> dense(size_t(nc.rows() * nc.ncols), 0.0);
      for (std::int64_t i = 0; i < nc.rows(); ++i)
        for (auto p = nc.row_offsets[size_t(i)]; p < nc.row_offsets[size_t(i) + 1]; ++p)
          dense[size_t(i * nc.ncols + nc.cols[size_t(p)])] = nc.values[size_t(p)];
      auto X = DenseMatrix<double>::from_host(space, nc.rows(), nc.ncols, dense.data(), "simulation");
      res = factorize(space, X, jobs, n_iter_, opt);
    }
    const std::int64_t n_genes = nc.ncols;
    std::map<int, consensus::HostRows> merged;
    std::map<int, double> iters;
    for (const auto& r : res) {
      auto& m = merged[r.job.k];
      m.cols = n_genes;
      m.rows += r.job.k;
      m.values.insert(m.values.end(), r.H.begin(), r.H.end());
      iters[r.job.k] += double(r.n_iter) / n_iter_;
    }
    std::printf("3. factorized k =");
    for (int k : ks_) std::printf(" %d", k);
    std::printf(", %d replicates each (%s, X %s): %zu replicates, mean iterations", n_iter_,
                solver_.c_str(), sparse ? "sparse" : "dense", res.size());
    for (auto& [k, v] : iters) std::printf(" %.0f", v);
    std::printf("  [%.1f s]\n", secs(t));

    // 4. k selection (stability and error per k)
    t = clock::now();
    CsrRowSource source(nc, "simulation");
    consensus::ConsensusOptions copt;
    std::vector<consensus::HostRows> stacks;
    std::vector<int> kv;
    for (auto& [k, m] : merged) {
      kv.push_back(k);
      stacks.push_back(m);
    }
    const auto stats = consensus::k_selection(space, stacks, kv, source, opt, copt);
    std::printf("4. k selection  [%.1f s]\n      k   stability (silhouette)   prediction error\n",
                secs(t));
    for (const auto& s : stats)
      std::printf("   %s%3d   %20.4f   %16.6g\n", s.k == true_k ? "->" : "  ", s.k, s.silhouette,
                  s.prediction_error);

    // 5. consensus at the true k, and recovery of the planted programs
    if (!merged.count(true_k)) {
      std::printf("5. k = %d (the planted number) was not factorized: no recovery report\n", true_k);
      return 0;
    }
    t = clock::now();
    const auto cons = consensus::run_consensus(space, merged[true_k], true_k, source, nullptr, opt, copt);
    const auto rep = prepare::recovery(sim.programs, sim.n_programs_total, sim_.n_genes,
                                       cons.spectra.values, true_k, prep);
    std::printf("5. consensus at k = %d (density threshold %.2f), recovery of the planted "
                "programs  [%.1f s]\n",
                true_k, copt.local_density_threshold, secs(t));
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
                rep.n_programs, worst, secs(t0));
    return worst >= 0.9 ? 0 : 4;
  }

private:
  CLI::App* sub_ = nullptr;
  prepare::SimulationOptions sim_;
  int numgenes_ = prepare::demo_num_highvar_genes;
  std::vector<int> ks_;
  int n_iter_ = 10;
  std::string solver_ = "cd";
  std::string save_;
};

}  // namespace

std::unique_ptr<Command> make_demo_command(CLI::App& app) { return std::make_unique<DemoCommand>(app); }

}  // namespace knmf::cli
