#include "knmf/core/assignment.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "knmf/core/error.hpp"

namespace knmf {

std::vector<int> hungarian_max(const std::vector<double>& weight, int rows, int cols) {
  KNMF_ASSERT(rows >= 0 && cols >= 0 && weight.size() == size_t(rows) * size_t(cols),
              "weight matrix size");
  // Minimize cost = -weight on a square matrix padded with zeros (NaN counts as -inf weight,
  // i.e. a large cost). Classic O(n^3) potentials algorithm, 1-based as usually written.
  const int n = std::max(rows, cols);
  if (n == 0) return {};
  double big = 1.0;
  for (double w : weight)
    if (std::isfinite(w)) big = std::max(big, std::abs(w));
  big *= 4.0 * double(n) + 4.0;
  auto cost = [&](int i, int j) {  // 1-based
    if (i > rows || j > cols) return 0.0;
    const double w = weight[size_t(i - 1) * size_t(cols) + size_t(j - 1)];
    return std::isfinite(w) ? -w : big;
  };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> u(size_t(n) + 1, 0.0), v(size_t(n) + 1, 0.0);
  std::vector<int> p(size_t(n) + 1, 0), way(size_t(n) + 1, 0);
  for (int i = 1; i <= n; ++i) {
    p[0] = i;
    int j0 = 0;
    std::vector<double> minv(size_t(n) + 1, inf);
    std::vector<char> used(size_t(n) + 1, 0);
    do {
      used[size_t(j0)] = 1;
      const int i0 = p[size_t(j0)];
      double delta = inf;
      int j1 = 0;
      for (int j = 1; j <= n; ++j) {
        if (used[size_t(j)]) continue;
        const double cur = cost(i0, j) - u[size_t(i0)] - v[size_t(j)];
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
    } while (j0);
  }
  std::vector<int> result(size_t(rows), -1);
  for (int j = 1; j <= n; ++j) {
    const int i = p[size_t(j)];
    if (i >= 1 && i <= rows && j <= cols) result[size_t(i - 1)] = j - 1;
  }
  return result;
}

}  // namespace knmf
