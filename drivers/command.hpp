#pragma once
/// \file
/// A knmf subcommand: its CLI11 definition and what it runs. Each subcommand lives in
/// drivers/commands/<name>.cpp and is listed once in cli.cpp (make_commands).

#include <CLI/CLI.hpp>

#include <memory>
#include <vector>

namespace knmf::cli {

class Command {
public:
  virtual ~Command() = default;
  /// Run after a successful parse. Throw knmf::InputError for user errors; return the exit code.
  virtual int run() = 0;
};

/// Adds its subcommand to `app` (options bound to the returned object) and returns it.
using CommandFactory = std::unique_ptr<Command> (*)(CLI::App& app);

}  // namespace knmf::cli
