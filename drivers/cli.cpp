#include "cli.hpp"

#include <CLI/CLI.hpp>

#include <iostream>
#include <algorithm>
#include <map>

#include "command.hpp"
#include "knmf/core/error.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/run/memory.hpp"

namespace knmf::cli {

std::unique_ptr<Command> make_prepare_command(CLI::App& app);
std::unique_ptr<Command> make_factorize_command(CLI::App& app);
std::unique_ptr<Command> make_demo_command(CLI::App& app);
std::unique_ptr<Command> make_simulate_command(CLI::App& app);
std::unique_ptr<Command> make_consensus_command(CLI::App& app);
std::unique_ptr<Command> make_k_selection_command(CLI::App& app);
std::unique_ptr<Command> make_compare_command(CLI::App& app);

// Each subcommand, in the order `knmf --help` lists them.
std::vector<CommandFactory> command_factories() {
  return {make_prepare_command, make_factorize_command, make_consensus_command, make_k_selection_command,
          make_compare_command, make_simulate_command, make_demo_command};
}

namespace {
int g_rank = 0, g_size = 1;
}  // namespace
void set_rank(int r, int s) {
  g_rank = r;
  g_size = s;
}
int rank() { return g_rank; }
int world_size() { return g_size; }

SplitArgs split_kokkos_args(int argc, const char* const* argv) {
  SplitArgs s;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0 && a.rfind("--kokkos-", 0) == 0)
      s.kokkos.push_back(a);
    else
      s.rest.push_back(a);
  }
  return s;
}

int run(const std::vector<std::string>& args) {
  CLI::App app{"knmf: batched consensus NMF (cNMF) factorization on Kokkos (CUDA, OpenMP)\n"
               "Kokkos flags (--kokkos-num-threads=N, --kokkos-device-id=D, ...) pass through."};
  app.name("knmf");
  app.require_subcommand(0, 1);
  bool show_version = false;
  app.add_flag("--version", show_version,
               "print knmf's version, the Kokkos version, the enabled backends and the default "
               "execution space");
  std::map<CLI::App*, std::unique_ptr<Command>> commands;
  for (auto factory : command_factories()) {
    auto before = app.get_subcommands({});
    auto cmd = factory(app);
    auto after = app.get_subcommands({});
    for (auto* sub : after)
      if (std::find(before.begin(), before.end(), sub) == before.end()) commands[sub] = std::move(cmd);
  }

  try {
    std::vector<std::string> rev(args.rbegin(), args.rend() - 1);  // CLI11 wants reversed
    app.parse(rev);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return g_rank == 0 ? app.exit(e) : 0;
    if (g_rank == 0) std::cerr << "knmf: error: " << e.what() << " (see knmf --help)\n";
    return 2;
  }
  try {
    if (show_version) {
      std::cout << build_report();
      std::cout << "device: " << device_description() << "\n";
      std::cout << "host threads: " << thread_binding() << "\n";
      // the memory plan's own figures, exact (perf/gpu/check.sh sizes its limits from them)
      const auto rules = allocation_rules();
      std::cout << "memory plan: free " << available_device_bytes() << " bytes, unplanned "
                << unplanned_bytes(rules) << " bytes (slack " << rules.slack << ", granule "
                << rules.granule << " per View)\n";
      return 0;
    }
    for (auto& [sub, cmd] : commands)
      if (sub->parsed()) return cmd->run();
    std::cout << app.help();
    return 0;
  } catch (const LogicError& e) {
    // knmf's own bug, whichever rank meets it: say where, ask for a report
    std::cerr << "knmf: " << e.what() << " (a bug in knmf: please report it)\n";
    return 70;
  } catch (const std::exception& e) {
    // every rank meets the same argument errors: rank 0 reports them
    if (g_rank == 0) std::cerr << "knmf: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace knmf::cli
