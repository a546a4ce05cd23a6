// cNMF's NAME.nmf_idvrun_params.yaml (read_nmf_run_params, through yaml-cpp): the eight keys,
// their types and ranges, `alpha_H: same`, unknown keys and their warnings.
#include <cmath>

#include "fuzz_common.hpp"
#include "knmf/io/cnmf_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = knmf::fuzz::MemFile::write(data, size);
  knmf::fuzz::input_errors_only([&] {
    const knmf::io::NmfRunParams p = knmf::io::read_nmf_run_params(path);
    KNMF_FUZZ_CHECK(p.alpha_W >= 0 && std::isfinite(p.alpha_W));
    KNMF_FUZZ_CHECK(p.alpha_H >= 0 && std::isfinite(p.alpha_H));
    KNMF_FUZZ_CHECK(p.l1_ratio >= 0 && p.l1_ratio <= 1);
    KNMF_FUZZ_CHECK(p.tol >= 0 && std::isfinite(p.tol));
    KNMF_FUZZ_CHECK(p.max_iter >= 1);
    KNMF_FUZZ_CHECK(p.solver == "cd" || p.solver == "mu");
    KNMF_FUZZ_CHECK(knmf::io::unknown_key_warnings(p, path).size() == p.unknown_keys.size());
  });
  return 0;
}
