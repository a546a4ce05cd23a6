#pragma once
/// \file
/// CLI11 helpers shared by the subcommands: option groups and value parsers.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "knmf/consensus/options.hpp"

namespace knmf::cli {

/// "auto" -> 0, otherwise a positive integer; InputError naming `option` otherwise.
int parse_batch(const std::string& value, const std::string& option = "--batch");
/// Bytes with an optional K/M/G/T suffix (powers of 1024), e.g. "512M", "2G", "1500000000".
std::int64_t parse_bytes(const std::string& value, const std::string& option);

/// The options cNMF's consensus and k_selection_plot share, bound to `sub` (the two differ
/// only in what --local-density-threshold does: `density_help`). Returns the --output-dir
/// and --name options (native mode asks whether they were given).
std::pair<CLI::Option*, CLI::Option*> add_consensus_options(
    CLI::App* sub, std::string& output_dir, std::string& name, std::vector<int>& ks,
    consensus::ConsensusOptions& o, std::string& results, std::string& counts, bool& read_only,
    const std::string& density_help);

/// Native mode: cNMF's files go to OUTPUT_DIR/NAME only when either option was given.
bool cnmf_folder_given(const std::pair<CLI::Option*, CLI::Option*>& opts);

/// Native mode without an output folder: figures go beside the results file,
/// `<folder>/<stem>.<what>` (results.h5 -> results.k_selection.png).
std::string beside_results(const std::string& results, const std::string& what);

}  // namespace knmf::cli
