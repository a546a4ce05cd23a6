// cNMF's NAME.nmf_idvrun_params.yaml (read_nmf_run_params, through yaml-cpp, applied to solver
// options by the option table's apply_cnmf_params): the eight keys, their types and ranges,
// `alpha_H: same`, unknown keys and their warnings.
#include <cmath>

#include "fuzz_common.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/solver/options.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = knmf::fuzz::MemFile::write(data, size);
  knmf::fuzz::input_errors_only([&] {
    const knmf::io::NmfRunParams p = knmf::io::read_nmf_run_params(path);
    knmf::SolverOptions o;
    const auto warnings = knmf::apply_cnmf_params(o, p.values, path, false, p.non_scalar);
    KNMF_FUZZ_CHECK(o.alpha_W >= 0 && std::isfinite(o.alpha_W));
    KNMF_FUZZ_CHECK(o.alpha_H >= 0 && std::isfinite(o.alpha_H));
    KNMF_FUZZ_CHECK(o.l1_ratio >= 0 && o.l1_ratio <= 1);
    KNMF_FUZZ_CHECK(o.tol >= 0 && std::isfinite(o.tol));
    KNMF_FUZZ_CHECK(o.max_iter >= 1);
    KNMF_FUZZ_CHECK(warnings.size() <= p.values.size() + p.non_scalar.size());
  });
  return 0;
}
