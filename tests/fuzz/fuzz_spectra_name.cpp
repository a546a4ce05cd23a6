// The names of cNMF's spectra files (parse_cnmf_spectra_name: RUN.spectra.k_K.iter_R.df.npz,
// RUN.spectra.k_K.merged.df.npz) and the merged frame's row labels (parse_merged_spectra_label:
// iter<r>_topic<t>). What either accepts, written back the way cNMF writes it, parses to the
// same values.
#include <string>

#include "fuzz_common.hpp"
#include "knmf/io/cnmf_files.hpp"

using namespace knmf::io;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(knmf::fuzz::as_bytes(data, size));
  if (const auto n = parse_cnmf_spectra_name(text)) {
    KNMF_FUZZ_CHECK(!n->run.empty() && n->k >= 1 && n->iter >= -1);
    const std::string canonical =
        n->run + ".spectra.k_" + std::to_string(n->k) +
        (n->iter < 0 ? std::string(".merged") : ".iter_" + std::to_string(n->iter)) + ".df.npz";
    const auto again = parse_cnmf_spectra_name(canonical);
    KNMF_FUZZ_CHECK(again && again->run == n->run && again->k == n->k && again->iter == n->iter);
  }
  knmf::fuzz::input_errors_only([&] {
    const MergedSpectraLabel l = parse_merged_spectra_label(text, "fuzz");
    KNMF_FUZZ_CHECK(l.iter >= 0 && l.topic >= 1);
    const MergedSpectraLabel again = parse_merged_spectra_label(
        "iter" + std::to_string(l.iter) + "_topic" + std::to_string(l.topic), "fuzz");
    KNMF_FUZZ_CHECK(again.iter == l.iter && again.topic == l.topic);
  });
  return 0;
}
