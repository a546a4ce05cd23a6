/// \file
/// What differs between the run a results file records and the run asked for, in the
/// words of the command line ("--tol 0.0001 --max-iter 1000"): the message a refused resume
/// prints; and whether the input is the X the file's replicates were computed on.

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "knmf/core/error.hpp"
#include "knmf/io/atomic_file.hpp"
#include "results/internal.hpp"

namespace knmf::results::detail {

/// "--tol 0.0001 --max-iter 1000"-style descriptions of what differs between two runs;
/// empty when they match.
std::pair<std::string, std::string> differences(const RunInfo& a, const RunInfo& b) {
  auto fields = [](const RunInfo& r) {
    // the input path is not compared here: check_input compares X by content
    std::vector<std::pair<std::string, std::string>> f = {
        {"input shape", std::to_string(r.n_cells) + " x " + std::to_string(r.n_genes())},
        {"-k", join_ints(r.ks)},
        {"--n-iter", std::to_string(r.n_iter)},
        {"--seed", std::to_string(r.seed)},
    };
    for (const SolverOptionField& o : solver_option_fields()) f.emplace_back(o.flag, o.get(r.solver));
    f.emplace_back("--dtype", to_string(r.dtype));
    f.emplace_back("--save-usages", r.save_usages ? "on" : "off");
    return f;
  };
  const auto fa = fields(a), fb = fields(b);
  std::string old_text, new_text;
  auto add = [&](const std::string& name, const std::string& va, const std::string& vb) {
    old_text += (old_text.empty() ? "" : " ") + name + " " + va;
    new_text += (new_text.empty() ? "" : " ") + name + " " + vb;
  };
  bool shape_or_plan_differs = false;
  for (std::size_t i = 0; i < fa.size(); ++i) {
    if (fa[i].second == fb[i].second) continue;
    add(fa[i].first, fa[i].second, fb[i].second);
    if (i <= 3) shape_or_plan_differs = true;  // input shape, -k, --n-iter, --seed
  }
  if (a.genes.size() == b.genes.size() && a.genes != b.genes) {
    std::size_t i = 0;
    while (a.genes[i] == b.genes[i]) ++i;
    add("genes", "[" + std::to_string(i) + "] '" + a.genes[i] + "'", "[" + std::to_string(i) + "] '" + b.genes[i] + "'");
  }
  if (!shape_or_plan_differs) {
    for (std::size_t i = 0; i < a.jobs.size() && i < b.jobs.size(); ++i) {
      const Job &x = a.jobs[i], &y = b.jobs[i];
      if (x.k == y.k && x.iter == y.iter && x.seed == y.seed) continue;
      auto row = [i](const Job& j) {
        return "row " + std::to_string(i) + " (k " + std::to_string(j.k) + ", iter " +
               std::to_string(j.iter) + ", seed " + std::to_string(j.seed) + ")";
      };
      add("job table", row(x), row(y));
      break;
    }
  }
  return {old_text, new_text};
}

namespace {
/// "a.h5ad (/data/a.h5ad)": the path as given and, when it says more, the absolute one.
std::string input_text(const RunInfo& r) {
  if (r.input_absolute.empty() || r.input_absolute == r.input) return r.input;
  return r.input + " (" + r.input_absolute + ")";
}
}  // namespace

std::string check_input(const std::string& file, const RunInfo& was, const RunInfo& now) {
  if (!was.input_fingerprint.empty()) {
    if (now.input_fingerprint.empty() || now.input_fingerprint == was.input_fingerprint) return {};
    input_error(file, ": its replicates were computed on input ", input_text(was),
                " with X fingerprint ", was.input_fingerprint, ", but this run's input ",
                input_text(now), " holds another X (fingerprint ", now.input_fingerprint,
                "): use a new -o file or the original input");
  }
  // No fingerprint (a file written before format_version 3): the path must name the file the
  // run recorded, and its content cannot be checked.
  const bool same = was.input == now.input || io::same_file(was.input, now.input) ||
                    (!was.input_absolute.empty() && io::same_file(was.input_absolute, now.input));
  if (!same)
    input_error(file, " was written from input ", input_text(was), ", not ", input_text(now),
                ", and records no fingerprint of its X to compare them by (a file of an earlier "
                "knmf): use a new -o file or the original input path");
  if (now.input_fingerprint.empty()) return {};
  return file + " records no fingerprint of its input (a file of an earlier knmf): resuming "
                "without checking that " + now.input +
         " still holds the X its committed replicates were computed on";
}

}  // namespace knmf::results::detail

namespace knmf::results {

std::string run_input_path(const RunInfo& info) {
  std::error_code ec;
  if (!info.input_absolute.empty() && std::filesystem::exists(info.input_absolute, ec))
    return info.input_absolute;
  return info.input;
}

}  // namespace knmf::results
