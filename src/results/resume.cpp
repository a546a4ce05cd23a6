/// \file
/// What differs between the run a results file records and the run asked for, in the
/// words of the command line ("--tol 0.0001 --max-iter 1000"): the message a refused resume
/// prints.

#include <string>
#include <utility>
#include <vector>

#include "results/internal.hpp"

namespace knmf::io::detail::results {

/// "--tol 0.0001 --max-iter 1000"-style descriptions of what differs between two runs;
/// empty when they match.
std::pair<std::string, std::string> differences(const RunInfo& a, const RunInfo& b) {
  auto fields = [](const RunInfo& r) {
    std::vector<std::pair<std::string, std::string>> f = {
        {"input", r.input},
        {"input shape", std::to_string(r.n_cells) + " x " + std::to_string(r.n_genes())},
        {"-k", join_ints(r.ks)},
        {"--n-iter", std::to_string(r.n_iter)},
        {"--seed", std::to_string(r.seed)},
        {"--solver", to_string(r.solver.solver)},
        {"--tol", format_double(r.solver.tol)},
        {"--max-iter", std::to_string(r.solver.max_iter)},
        {"--check-every", std::to_string(r.solver.check_every)},
        {"--alpha-usage", format_double(r.solver.alpha_W)},
        {"--alpha-spectra", format_double(r.solver.alpha_H)},
        {"--l1-ratio", format_double(r.solver.l1_ratio)},
        {"--zero-guard", to_string(r.solver.zero_guard)},
        {"--eps", format_double(r.solver.eps)},
        {"--dtype", to_string(r.dtype)},
        {"--beta-loss", r.beta_loss},
        {"--save-usages", r.save_usages ? "on" : "off"},
    };
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
    if (i == 1 || i == 2 || i == 3 || i == 4) shape_or_plan_differs = true;
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

}  // namespace knmf::io::detail::results
