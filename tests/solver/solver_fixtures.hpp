#pragma once
// Shared helpers of the solver tests: golden cases from tests/scripts/make_golden_nmf.py.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "knmf/matrix/dense_matrix.hpp"
#include "knmf/solver/nmf.hpp"
#include "test_support.hpp"

namespace knmf::test {

inline nlohmann::json nmf_golden() {
  static const nlohmann::json g = load_json("nmf/golden.json");
  return g;
}

inline std::vector<double> golden_array(const std::string& case_name, const std::string& name) {
  return read_f64(data_dir() / "nmf" / (case_name + "." + name + ".f64"));
}

/// The stored synthetic matrix "synth" or "synth2" as a dense device matrix.
template <class T>
DenseMatrix<T> synthetic_matrix(const std::string& which, size_type* n_out = nullptr,
                                size_type* g_out = nullptr) {
  const auto g = nmf_golden();
  const auto shape = g[which == "synth" ? "synthetic" : "synthetic2"]["X"];
  const size_type n = shape[0], m = shape[1];
  const auto x = read_f64(data_dir() / "nmf" / (which + ".X.f64"));
  std::vector<T> xt(x.begin(), x.end());
  if (n_out) *n_out = n;
  if (g_out) *g_out = m;
  return DenseMatrix<T>::from_host(ExecSpace(), n, m, xt.data(), which);
}

inline SolverOptions options_of(const nlohmann::json& c) {
  SolverOptions o;
  o.solver = parse_solver(c["solver"].get<std::string>());
  o.tol = c["tol"];
  o.max_iter = c["max_iter"];
  o.alpha_W = c.value("alpha_W", 0.0);
  o.alpha_H = c.value("alpha_H", 0.0);
  o.l1_ratio = c.value("l1_ratio", 0.0);
  return o;
}

}  // namespace knmf::test
