#include "consensus_fixtures.hpp"

#include <limits>

namespace knmf::test {

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
