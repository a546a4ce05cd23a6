#pragma once
// Inputs the driver tests share: small count matrices, a cNMF run folder as `cnmf prepare`
// leaves it for factorize, and the listing that shows what a refused run left behind.
#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <type_traits>
#include <vector>

#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/io/h5ad.hpp"
#include "test_support.hpp"

namespace knmf::test {

/// Every file under `dir` (relative paths, sorted; folders not listed).
inline std::vector<std::string> files_under(const std::filesystem::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (!e.is_directory()) v.push_back(std::filesystem::relative(e.path(), dir).string());
  std::sort(v.begin(), v.end());
  return v;
}

/// n cells x g genes of small counts (1..5, about two thirds of the entries), each times
/// `scale`, stored as T (float32 or float64); with `huge` > 0 the entry (3, 2) is `huge`
/// instead; gene names given or knmf's default.
template <class T = float>
void write_small_counts(const std::filesystem::path& path, int n, int g,
                        std::vector<std::string> genes = {}, double scale = 1.0, double huge = 0.0) {
  std::vector<T> x(std::size_t(n) * std::size_t(g), T(0));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < g; ++j)
      if ((i + 2 * j) % 3 != 0)
        x[std::size_t(i * g + j)] = T((i == 3 && j == 2 && huge > 0) ? huge : scale * (1 + (i * 7 + j * 3) % 5));
  const auto X = dense_to_csr_block<io::CsrBlock<T>>(x, g);
  io::H5adWriteOptions o;
  o.value_type = std::is_same_v<T, double> ? io::ValueType::Float64 : io::ValueType::Float32;
  o.check_names_utf8 = false;  // the refusal tests give names that are not UTF-8 on purpose
  io::write_h5ad(path, X, {}, std::move(genes), o);
}

/// One row of cNMF's job table: (n_components, iter, nmf_seed).
using CnmfJob = std::array<std::int64_t, 3>;

/// A cNMF run folder DIR/NAME as `cnmf prepare` leaves it for factorize: X (copied from `x`),
/// the yaml (CD, 50 iterations, plus the lines `extra_yaml`) and the job table `jobs`.
inline io::CnmfPaths make_cnmf_run(const std::filesystem::path& dir, const std::string& name,
                                   const std::filesystem::path& x,
                                   const std::vector<CnmfJob>& jobs = {{2, 0, 101}, {2, 1, 102}, {2, 2, 103}},
                                   const std::string& extra_yaml = "") {
  io::CnmfPaths p(dir.string(), name);
  std::filesystem::create_directories(p.tmp_dir());
  std::filesystem::copy_file(x, p.normalized_counts());
  std::ofstream(p.nmf_run_parameters())
      << "alpha_H: 0.0\nalpha_W: 0.0\nbeta_loss: frobenius\ninit: random\nl1_ratio: 0.0\n"
         "max_iter: 50\nsolver: cd\ntol: 0.0001\n"
      << extra_yaml;
  io::DataFrame df;
  df.rows = std::int64_t(jobs.size());
  df.cols = 3;
  df.data_descr = "<i8";
  for (const auto& j : jobs) df.data.insert(df.data.end(), j.begin(), j.end());
  // (assigned in place, no initializer lists or push_back of temporaries: GCC 12
  // -Wmaybe-uninitialized misfires on moving these variants, an error in the
  // warnings-as-errors builds)
  df.index = std::vector<io::Label>(jobs.size());
  for (std::size_t r = 0; r < jobs.size(); ++r) df.index[r] = std::int64_t(r);
  df.columns = std::vector<io::Label>(3);
  df.columns[0] = std::string("n_components");
  df.columns[1] = std::string("iter");
  df.columns[2] = std::string("nmf_seed");
  io::write_df_npz(p.nmf_replicate_parameters(), df);
  return p;
}

}  // namespace knmf::test
