// cNMF DataFrames (.df.npz: data, index and columns members) and the checks on top of them
// that read a cNMF run's spectra: a replicate's k x genes frame and the merged spectra with
// their iter<r>_topic<t> row labels.
#include <algorithm>

#include "fuzz_common.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"

using namespace knmf::io;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = knmf::fuzz::MemFile::write(data, size);
  DataFrame df;
  bool ok = false;
  knmf::fuzz::input_errors_only([&] {
    df = read_df_npz(path);
    ok = true;
  });
  if (!ok) return 0;
  KNMF_FUZZ_CHECK(df.rows >= 0 && df.cols >= 0);
  KNMF_FUZZ_CHECK(df.index.size() == static_cast<std::size_t>(df.rows));
  KNMF_FUZZ_CHECK(df.columns.size() == static_cast<std::size_t>(df.cols));
  const std::size_t cells = static_cast<std::size_t>(df.rows) * static_cast<std::size_t>(df.cols);
  KNMF_FUZZ_CHECK((df.is_object() ? df.object_data.size() : df.data.size()) == cells);
  for (std::size_t j = 0; j < std::min<std::size_t>(df.columns.size(), 4); ++j)
    KNMF_FUZZ_CHECK(df.find_column(label_to_string(df.columns[j])) >= -1);

  const int rows = static_cast<int>(std::min<std::int64_t>(df.rows, 1 << 20));
  knmf::fuzz::input_errors_only([&] {
    const CnmfSpectra s = read_cnmf_replicate_spectra(path, rows, "fuzz: ");
    KNMF_FUZZ_CHECK(s.genes.size() == static_cast<std::size_t>(s.frame.cols));
  });
  for (const int k : {1, 2, 3, rows}) {
    if (k < 1) continue;
    knmf::fuzz::input_errors_only([&] {
      const CnmfMergedSpectra m = read_cnmf_merged_spectra(path, k, "fuzz: ");
      KNMF_FUZZ_CHECK(m.row_labels.size() == static_cast<std::size_t>(m.frame.rows));
      std::size_t placed = 0;
      for (const auto& [iter, r] : m.rows) {
        KNMF_FUZZ_CHECK(r.size() == static_cast<std::size_t>(k));
        placed += r.size();
      }
      KNMF_FUZZ_CHECK(placed == static_cast<std::size_t>(m.frame.rows));
    });
  }
  return 0;
}
