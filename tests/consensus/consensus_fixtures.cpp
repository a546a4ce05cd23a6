#include "consensus_fixtures.hpp"

#include <algorithm>
#include <limits>

namespace knmf::test {

namespace fs = std::filesystem;

void make_pbmc_run(const fs::path& out, bool with_tpm) {
  const fs::path run = out / "pbmcA";
  fs::create_directories(run / "cnmf_tmp");
  for (const auto& e : fs::directory_iterator(pbmc_prepare() / "cnmf_tmp")) {
    const auto name = e.path().filename().string();
    if (!with_tpm && name.find(".tpm") != std::string::npos) continue;
    fs::copy_file(e.path(), run / "cnmf_tmp" / name);
  }
  fs::copy_file(pbmc_prepare() / "pbmcA.overdispersed_genes.txt", run / "pbmcA.overdispersed_genes.txt");
  for (int k : {5, 6, 7, 8}) {
    const std::string f = "pbmcA.spectra.k_" + std::to_string(k) + ".merged.df.npz";
    fs::copy_file(pbmc_ref_tmp() / f, run / "cnmf_tmp" / f);
  }
  for (const auto& e : fs::recursive_directory_iterator(run))
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
}

std::vector<std::string> list_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> hungarian_max(const std::vector<std::vector<double>>& score) {
  // O(n^3) Hungarian algorithm (potentials) on cost = -score, 1-based internally.
  const int n = int(score.size());
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> u(size_t(n + 1)), v(size_t(n + 1));
  std::vector<int> p(size_t(n + 1)), way(size_t(n + 1));
  for (int i = 1; i <= n; ++i) {
    p[0] = i;
    int j0 = 0;
    std::vector<double> minv(size_t(n + 1), inf);
    std::vector<char> used(size_t(n + 1), 0);
    do {
      used[size_t(j0)] = 1;
      const int i0 = p[size_t(j0)];
      double delta = inf;
      int j1 = 0;
      for (int j = 1; j <= n; ++j) {
        if (used[size_t(j)]) continue;
        const double cur = -score[size_t(i0 - 1)][size_t(j - 1)] - u[size_t(i0)] - v[size_t(j)];
        if (cur < minv[size_t(j)]) {
          minv[size_t(j)] = cur;
          way[size_t(j)] = j0;
        }
        if (minv[size_t(j)] < delta) {
          delta = minv[size_t(j)];
          j1 = j;
        }
      }
      for (int j = 0; j <= n; ++j) {
        if (used[size_t(j)]) {
          u[size_t(p[size_t(j)])] += delta;
          v[size_t(j)] -= delta;
        } else {
          minv[size_t(j)] -= delta;
        }
      }
      j0 = j1;
    } while (p[size_t(j0)] != 0);
    do {
      const int j1 = way[size_t(j0)];
      p[size_t(j0)] = p[size_t(j1)];
      j0 = j1;
    } while (j0 != 0);
  }
  std::vector<int> col(static_cast<size_t>(n));
  for (int j = 1; j <= n; ++j) col[size_t(p[size_t(j)] - 1)] = j - 1;
  return col;
}

}  // namespace knmf::test
