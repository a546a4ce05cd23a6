// cNMF's job table NAME.nmf_params.df.npz (read_cnmf_job_table): the n_components, iter and
// nmf_seed columns found by name in a numeric or object frame. Accepted jobs are in range and
// each (k, iter) appears once.
#include <set>

#include "fuzz_common.hpp"
#include "knmf/io/cnmf_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = knmf::fuzz::MemFile::write(data, size);
  knmf::fuzz::input_errors_only([&] {
    const std::vector<knmf::Job> jobs = knmf::io::read_cnmf_job_table(path);
    std::set<std::pair<int, int>> seen;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const knmf::Job& j = jobs[i];
      KNMF_FUZZ_CHECK(j.k >= 1 && j.iter >= 0);
      KNMF_FUZZ_CHECK(j.seed >= 0 && j.seed <= 0xFFFFFFFFll);
      KNMF_FUZZ_CHECK(j.index == static_cast<std::int64_t>(i));
      KNMF_FUZZ_CHECK(seen.emplace(j.k, j.iter).second);
    }
  });
  return 0;
}
