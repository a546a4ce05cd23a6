// `knmf compare A B`: do two runs of the same job table (CPU and GPU, knmf and cNMF) agree?
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "command.hpp"
#include "knmf/io/atomic_file.hpp"
#include "knmf/core/error.hpp"
#include "knmf/results/compare.hpp"

namespace knmf::cli {

namespace {

class CompareCommand : public Command {
public:
  explicit CompareCommand(CLI::App& app) {
    auto* sub = app.add_subcommand(
        "compare",
        "Compare two runs of the same job table job by job (knmf results files or cNMF run "
        "folders OUTPUT_DIR/NAME, any mix): programs matched by cosine similarity (Hungarian), "
        "max/median relative difference of matched spectra, min cosine, iteration and final-error "
        "differences per k and overall. Exit status 0: every job within the thresholds; 3: some "
        "job outside them or without a partner; 1: unusable input. See docs/compare.md");
    sub->add_option("A", o_.a, "knmf results file (.h5) or cNMF run folder OUTPUT_DIR/NAME")
        ->required();
    sub->add_option("B", o_.b, "knmf results file (.h5) or cNMF run folder OUTPUT_DIR/NAME")
        ->required();
    sub->add_option("--a-name", o_.a_name, "cNMF run name of A (default: A's folder name)");
    sub->add_option("--b-name", o_.b_name, "cNMF run name of B (default: B's folder name)");
    sub->add_option("--rtol", o_.rtol,
                    "a job fails when a matched program pair differs by more than this: "
                    "max|a-b| / max(max|a|, max|b|) over the pair's genes")
        ->capture_default_str();
    sub->add_option("--min-cos", o_.min_cos,
                    "a job fails when a matched pair's cosine similarity is below this")
        ->capture_default_str();
    sub->add_flag("--allow-unpaired", o_.allow_unpaired,
                  "jobs present on one side only do not fail the comparison (they are listed; "
                  "by default they fail it)");
    sub->add_option("--json", json_, "also write the report as JSON to FILE ('-': stdout, and the "
                                     "table goes to stderr)");
  }

  int run() override {
    // the report must not replace what it reports on (another path or a link included)
    for (const std::string& side : {o_.a, o_.b})
      if (!json_.empty() && json_ != "-" && io::same_file(json_, side))
        input_error("--json '", json_, "': it is the compared file '", side, "'");
    // an unwritable --json is refused before the comparison prints anything
    if (!json_.empty() && json_ != "-") io::require_writable_target(json_, "--json " + json_);
    const results::CompareReport report = results::compare_runs(o_);
    const std::string table = results::format_compare_report(report);
    if (json_ == "-") {
      std::cerr << table;
      std::cout << results::compare_report_json(report);
    } else {
      std::cout << table;
      if (!json_.empty()) {
        io::AtomicFile out(json_, "--json " + json_);
        out.write(results::compare_report_json(report));
        out.commit();
        std::cout << "  JSON report: " << json_ << "\n";
      }
    }
    std::cout.flush();
    return report.passed() ? 0 : results::compare_failed_exit_code;
  }

private:
  results::CompareOptions o_;
  std::string json_;
};

}  // namespace

std::unique_ptr<Command> make_compare_command(CLI::App& app) {
  return std::make_unique<CompareCommand>(app);
}

}  // namespace knmf::cli
