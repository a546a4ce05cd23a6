#pragma once
/// \file
/// CLI11 helpers shared by the subcommands: option groups and value parsers.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "knmf/solver/options.hpp"

namespace knmf::cli {

/// "auto" -> 0, otherwise a positive integer; InputError naming `option` otherwise.
int parse_batch(const std::string& value, const std::string& option = "--batch");
/// Bytes with an optional K/M/G/T suffix (powers of 1024), e.g. "512M", "2G", "1500000000".
std::int64_t parse_bytes(const std::string& value, const std::string& option);

/// Solver options every solving subcommand shares (bound to `o`; `solver` set by --solver).
struct SolverFlags {
  std::string solver;       ///< empty = not given
  std::string zero_guard = "replace-zero";
  /// Apply to `o` after parsing; returns whether --solver was given.
  bool apply(SolverOptions& o) const;
};
void add_solver_flags(CLI::App& sub, SolverOptions& o, SolverFlags& f, bool with_numeric);

}  // namespace knmf::cli
