#include "options.hpp"

#include <cctype>
#include <filesystem>

#include "knmf/core/error.hpp"

namespace knmf::cli {

int parse_batch(const std::string& v, const std::string& option) {
  if (v == "auto") return 0;
  try {
    size_t pos = 0;
    const long b = std::stol(v, &pos);
    if (pos == v.size() && b >= 1 && b <= 1000000) return int(b);
  } catch (const std::exception&) {
  }
  input_error(option, " '", v, "' is invalid: expected a positive integer or auto");
}

std::int64_t parse_bytes(const std::string& v, const std::string& option) {
  try {
    size_t pos = 0;
    const double x = std::stod(v, &pos);
    std::string suffix = v.substr(pos);
    for (auto& ch : suffix) ch = char(std::toupper(static_cast<unsigned char>(ch)));
    if (!suffix.empty() && suffix.back() == 'B') suffix.pop_back();
    if (!suffix.empty() && suffix.back() == 'I') suffix.pop_back();
    double mult = 1;
    if (suffix == "K") mult = 1024.0;
    else if (suffix == "M") mult = 1024.0 * 1024;
    else if (suffix == "G") mult = 1024.0 * 1024 * 1024;
    else if (suffix == "T") mult = 1024.0 * 1024 * 1024 * 1024;
    else if (!suffix.empty()) throw std::invalid_argument(suffix);
    if (x > 0) return std::int64_t(x * mult);
  } catch (const std::exception&) {
  }
  input_error(option, " '", v, "' is invalid: expected a byte count such as 2000000000, 512M or 4G");
}

std::pair<CLI::Option*, CLI::Option*> add_consensus_options(
    CLI::App* sub, std::string& output_dir, std::string& name, std::vector<int>& ks,
    consensus::ConsensusOptions& o, std::string& results, std::string& counts, bool& read_only,
    const std::string& density_help) {
  auto* dir_opt = sub->add_option("--output-dir", output_dir,
                                  "cNMF run folder parent: files are read from and written to "
                                  "OUTPUT_DIR/NAME/ (native mode: optional, cNMF's files are "
                                  "written there too when given)")
                      ->capture_default_str();
  auto* name_opt = sub->add_option("--name", name, "run name (cNMF's --name)")->capture_default_str();
  sub->add_option("-k,--components", ks,
                  "k values (default: every k of the job table or results file)");
  sub->add_option("--local-density-threshold", o.local_density_threshold, density_help)
      ->capture_default_str();
  sub->add_option("--local-neighborhood-size", o.local_neighborhood_size,
                  "neighbours for the local density, as a fraction of the replicates")
      ->capture_default_str();
  sub->add_option("--results", results,
                  "native mode: read the replicates from this knmf results file (knmf factorize) "
                  "instead of the cNMF run folder's spectra files");
  sub->add_option("--counts", counts,
                  "native mode: X (.h5ad) the replicates were computed on (default: the input "
                  "recorded in the results file)");
  sub->add_flag("--read-only-results", read_only,
                "native mode: leave the results file unchanged (the outputs go only to "
                "--output-dir/--name)");
  return {dir_opt, name_opt};
}

/// Native mode: cNMF's files go to OUTPUT_DIR/NAME only when either option was given.
bool cnmf_folder_given(const std::pair<CLI::Option*, CLI::Option*>& opts) {
  return opts.first->count() > 0 || opts.second->count() > 0;
}

/// Native mode without an output folder: figures go beside the results file,
/// `<folder>/<stem>.<what>` (results.h5 -> results.k_selection.png).
std::string beside_results(const std::string& results, const std::string& what) {
  const std::filesystem::path p(results);
  return (p.parent_path() / (p.stem().string() + "." + what)).string();
}

}  // namespace knmf::cli
