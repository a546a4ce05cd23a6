// The h5ad reader's own validation over HDF5 file images (H5adReader::open_image: HDF5's core
// driver, no disk): X as a dense dataset, a CSR/CSC group (encoding-type or h5sparse_format)
// with its shape, data, indices and indptr checks, every value checked as it is converted, and
// the obs/var names (AnnData >= 0.7 groups and the older compound datasets; UTF-8 checks).
// Rows are read only for small matrices: a few bytes of HDF5 can declare a huge dataset with
// no storage, which a reader must then honestly read as zeros (slow, not wrong).
//
// A crash inside libhdf5 is HDF5's, not knmf's: rerun the input with h5image_check (HDF5
// alone, no knmf code) to tell them apart (README.md, "HDF5's own bugs").
#include <algorithm>
#include <vector>

#include "fuzz_common.hpp"
#include "knmf/io/h5ad.hpp"

using namespace knmf::io;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  H5adReadOptions opts;
  opts.chunk_bytes = 4096;  // several hyperslabs even for the small seeds
  knmf::fuzz::input_errors_only([&] {
    const H5adReader r = H5adReader::open_image(data, size, "fuzz.h5ad", opts);
    const H5adInfo& info = r.info();
    KNMF_FUZZ_CHECK(info.n_obs >= 0 && info.n_vars >= 0 && info.nnz >= 0);
    KNMF_FUZZ_CHECK((info.format == StorageFormat::Dense) != info.index_type.has_value());
    knmf::fuzz::input_errors_only([&] { KNMF_FUZZ_CHECK(r.var_names().size() == std::size_t(info.n_vars)); });
    knmf::fuzz::input_errors_only([&] { KNMF_FUZZ_CHECK(r.obs_names().size() == std::size_t(info.n_obs)); });
    const bool small = info.n_obs <= (1 << 12) && info.n_vars <= (1 << 12) && info.nnz <= (1 << 16) &&
                       info.n_obs * info.n_vars <= (1 << 16);
    if (!small) return;
    const std::int64_t n = info.n_obs;
    knmf::fuzz::input_errors_only([&] {
      const std::vector<std::int64_t> counts = r.row_nnz(0, n);
      KNMF_FUZZ_CHECK(counts.size() == std::size_t(n));
      for (const std::int64_t c : counts) KNMF_FUZZ_CHECK(c >= 0);
    });
    knmf::fuzz::input_errors_only([&] {
      CsrBlock<float> block;
      r.read_csr_rows(0, n, block);
      KNMF_FUZZ_CHECK(block.rows() == n && block.ncols == info.n_vars);
      KNMF_FUZZ_CHECK(block.row_offsets.size() == std::size_t(n + 1) && block.row_offsets[0] == 0);
      KNMF_FUZZ_CHECK(block.row_offsets.back() == block.nnz() && block.cols.size() == block.values.size());
      for (std::size_t i = 0; i + 1 < block.row_offsets.size(); ++i)
        KNMF_FUZZ_CHECK(block.row_offsets[i] <= block.row_offsets[i + 1]);
      for (std::size_t e = 0; e < block.cols.size(); ++e) {
        KNMF_FUZZ_CHECK(block.cols[e] >= 0 && block.cols[e] < info.n_vars);
        KNMF_FUZZ_CHECK(block.values[e] >= 0);  // NaN fails too: X is finite and non-negative
      }
    });
    knmf::fuzz::input_errors_only([&] {
      CsrBlock<double> block;
      r.read_csr_rows(n / 2, n, block);
      KNMF_FUZZ_CHECK(block.rows() == n - n / 2);
    });
    knmf::fuzz::input_errors_only([&] {
      std::vector<double> dense(std::size_t(std::max<std::int64_t>(n * info.n_vars, 1)));
      r.read_dense_rows(0, n, dense.data());
      for (const double v : dense) KNMF_FUZZ_CHECK(v >= 0);
    });
  });
  return 0;
}
