// scikit-learn 1.2.1's NNDSVD initializations (nndsvd, nndsvda, nndsvdar) and factorizations
// started from them, against tests/scripts/make_golden_nndsvd.py's golden data: synthetic tall,
// wide (randomized_svd's transposed branch) and small (k + 10 > min(n, g)) matrices and the real
// pbmcA norm_counts, each as a dense, CSR and streamed X.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "knmf/core/error.hpp"
#include "knmf/core/host_access.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/load.hpp"
#include "knmf/matrix/streamed_matrix.hpp"
#include "knmf/solver/init.hpp"
#include "solver_fixtures.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;

const nlohmann::json& golden() {
  static const nlohmann::json g = load_json("nmf/nndsvd.json");
  return g;
}
std::vector<double> golden_array(const std::string& name) {
  return read_f64(data_dir() / "nmf" / ("nndsvd_" + name + ".f64"));
}

/// A matrix as host data: row-major dense and CSR.
struct HostX {
  size_type n = 0, g = 0;
  std::vector<double> dense;
  std::vector<size_type> offsets{0};
  std::vector<ordinal_type> cols;
  std::vector<double> values;
};

HostX host_from_dense(size_type n, size_type g, std::vector<double> dense) {
  HostX h;
  h.n = n;
  h.g = g;
  h.dense = std::move(dense);
  auto c = dense_to_csr<double>(h.dense, g, 0, n);
  h.offsets = std::move(c.row_offsets);
  h.cols = std::move(c.cols);
  h.values = std::move(c.values);
  return h;
}

const HostX& host_matrix(const std::string& name) {
  static std::map<std::string, HostX> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  if (name == "real") {
    auto reader = io::H5adReader::open(pbmc_prepare_dir() / "cnmf_tmp" / "pbmcA.norm_counts.h5ad");
    const auto X = load_dense<double>(ExecSpace(), reader);
    std::vector<double> d(size_t(X.rows() * X.cols()));
    const auto xt = host_copy(X.xt());  // g x n (a separate host copy in the device-kernels build)
    for (size_type i = 0; i < X.rows(); ++i)
      for (size_type j = 0; j < X.cols(); ++j) d[size_t(i * X.cols() + j)] = xt(j, i);
    return cache[name] = host_from_dense(X.rows(), X.cols(), std::move(d));
  }
  const auto shape = golden()["matrices"][name]["X"];
  return cache[name] = host_from_dense(shape[0], shape[1], golden_array(name + ".X"));
}

enum class Storage { dense, csr, streamed };
const char* name_of(Storage s) {
  return s == Storage::dense ? "dense" : s == Storage::csr ? "csr" : "streamed";
}

/// H0, W0 of init_factors on the matrix in `storage` with value type T, as doubles.
template <class T>
void run_init(const HostX& h, Storage storage, int k, std::int64_t seed, InitKind kind,
              std::vector<double>& H, std::vector<double>& W) {
  std::vector<T> Ht(size_t(k * h.g)), Wt(size_t(h.n * k));
  std::vector<T> dense(h.dense.begin(), h.dense.end()), values(h.values.begin(), h.values.end());
  const ExecSpace space;
  if (storage == Storage::dense) {
    auto X = DenseMatrix<T>::from_host(space, h.n, h.g, dense.data());
    init_factors(space, X, k, seed, kind, Ht.data(), Wt.data());
  } else if (storage == Storage::csr) {
    auto X = CsrMatrix<T>::from_host(space, h.n, h.g, h.offsets.data(), h.cols.data(), values.data());
    init_factors(space, X, k, seed, kind, Ht.data(), Wt.data());
  } else {
    // several row blocks: a buffer of about a third of the entries (plus the column map)
    const size_type per = sizeof(T) + sizeof(ordinal_type);
    const size_type buffer = 8 * (h.g + 1) + per * (size_type(h.values.size()) / 3 + 16);
    auto X = StreamedMatrix<T>::from_host_csr(space, h.n, h.g, h.offsets.data(), h.cols.data(),
                                              values.data(), buffer);
    EXPECT_GE(X.num_blocks(), 3);
    init_factors(space, X, k, seed, kind, Ht.data(), Wt.data());
  }
  H.assign(Ht.begin(), Ht.end());
  W.assign(Wt.begin(), Wt.end());
}

/// Every golden init case of dtype `dtype` on `storage`; returns the worst relative difference.
template <class T>
double check_inits(Storage storage, const std::string& dtype, double bound) {
  double worst = 0;
  int compared = 0;
  for (const auto& [name, c] : golden()["inits"].items()) {
    if (c["dtype"] != dtype) continue;
    std::string matrix = name.substr(dtype == "float32" ? 4 : 0);
    matrix = matrix.substr(0, matrix.find('_'));
    const auto& h = host_matrix(matrix);
    for (const auto& run : c["runs"]) {
      const std::string v = run["init"];
      SCOPED_TRACE(name + " " + v + " " + name_of(storage));
      std::vector<double> H, W;
      run_init<T>(h, storage, c["k"], c["seed"], parse_init(v), H, W);
      const double dh = max_rel_diff(H, golden_array(name + "." + v + ".H"));
      const double dw = max_rel_diff(W, golden_array(name + "." + v + ".W"));
      EXPECT_LT(dh, bound);
      EXPECT_LT(dw, bound);
      worst = std::max({worst, dh, dw});
      ++compared;
    }
  }
  EXPECT_GE(compared, dtype == "float64" ? 18 : 4);
  std::printf("%s %s: worst max|a-b|/max|b| over W0, H0 = %.3g\n", dtype.c_str(),
              name_of(storage), worst);
  return worst;
}

TEST(Nndsvd, Float64InitsMatchScikitLearnDense) {
  check_inits<double>(Storage::dense, "float64", 1e-10);
}
TEST(Nndsvd, Float64InitsMatchScikitLearnCsr) { check_inits<double>(Storage::csr, "float64", 1e-10); }
TEST(Nndsvd, Float64InitsMatchScikitLearnStreamed) {
  check_inits<double>(Storage::streamed, "float64", 1e-10);
}
// scikit-learn computes the whole SVD in float32 for float32 X; knmf only the products (the
// host part is double). Measured on the OpenMP build: 3.7e-6 (dense), 3.9e-6 (CSR), the worst
// on the real matrix; scikit-learn's own dense and CSR float32 results differ by 5.2e-6 there.
TEST(Nndsvd, Float32InitsMatchScikitLearnToFloatAccuracy) {
  check_inits<float>(Storage::dense, "float32", 5e-5);
  check_inits<float>(Storage::csr, "float32", 5e-5);
}

TEST(Nndsvd, ZeroFillsFollowTheVariant) {
  // nndsvda fills nndsvd's zeros with mean(X), nndsvdar with small positive draws; the other
  // entries are nndsvd's
  const auto& h = host_matrix("tall");
  std::vector<double> H0, W0, Ha, Wa, Hr, Wr;
  run_init<double>(h, Storage::dense, 4, 1, InitKind::nndsvd, H0, W0);
  run_init<double>(h, Storage::dense, 4, 1, InitKind::nndsvda, Ha, Wa);
  run_init<double>(h, Storage::dense, 4, 1, InitKind::nndsvdar, Hr, Wr);
  double mean = 0;
  for (double x : h.dense) mean += x;
  mean /= double(h.dense.size());
  int zeros = 0;
  for (size_t e = 0; e < W0.size(); ++e) {
    if (W0[e] == 0) {
      ++zeros;
      EXPECT_NEAR(Wa[e], mean, 1e-12 * mean);
      EXPECT_GT(Wr[e], 0.0);
      EXPECT_LT(Wr[e], mean / 10);
    } else {
      EXPECT_EQ(Wa[e], W0[e]);
      EXPECT_EQ(Wr[e], W0[e]);
    }
  }
  EXPECT_GT(zeros, 0);
}

TEST(Nndsvd, KAboveMinShapeIsRefused) {
  const auto& h = host_matrix("small");  // 37 x 23
  SolverOptions o;
  o.init = InitKind::nndsvd;
  auto X = DenseMatrix<double>::from_host(ExecSpace(), h.n, h.g, h.dense.data());
  std::vector<Job> jobs{{24, 0, 1, 0}};
  try {
    factorize(ExecSpace(), X, jobs, 1, o);
    FAIL() << "k = 24 > min(37, 23) accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--init nndsvd: k = 24"), std::string::npos) << e.what();
  }
  o.init = InitKind::random;  // no such limit for random
  EXPECT_EQ(factorize(ExecSpace(), X, jobs, 1, o).size(), 1u);
}

TEST(Nndsvd, ParseInit) {
  EXPECT_EQ(parse_init("nndsvdar"), InitKind::nndsvdar);
  EXPECT_EQ(to_string(InitKind::nndsvda), "nndsvda");
  try {
    parse_init("bogus");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--init 'bogus' is invalid: expected random, nndsvd, nndsvda or nndsvdar");
  }
}

/// The full factorizations from init='nndsvd' (scikit-learn's non_negative_factorization).
void check_run(const std::string& name, Storage storage) {
  const auto c = golden()["runs"][name];
  SCOPED_TRACE(name + " " + name_of(storage));
  const std::string matrix = name.substr(name.rfind('_') + 1);
  const auto& h = host_matrix(matrix);
  SolverOptions o;
  o.solver = parse_solver(c["solver"].get<std::string>());
  o.tol = c["tol"];
  o.max_iter = c["max_iter"];
  o.init = InitKind::nndsvd;
  o.return_W = true;
  std::vector<Job> jobs{{c["k"], 0, c["seed"], 0}};
  std::vector<ReplicateResult> res;
  const ExecSpace space;
  if (storage == Storage::dense) {
    res = factorize(space, DenseMatrix<double>::from_host(space, h.n, h.g, h.dense.data()), jobs, 1, o);
  } else {
    res = factorize(space, CsrMatrix<double>::from_host(space, h.n, h.g, h.offsets.data(),
                                                        h.cols.data(), h.values.data()),
                    jobs, 1, o);
  }
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0].n_iter, c["n_iter"].get<int>());
  const double dh = max_rel_diff(res[0].H, golden_array(name + ".H"));
  EXPECT_LT(dh, 1e-9);
  double dw = 0;
  if (c.contains("W")) {
    dw = max_rel_diff(res[0].W, golden_array(name + ".W"));
    EXPECT_LT(dw, 1e-9);
  }
  EXPECT_LT(rel_diff(res[0].error_at_init, c["error_at_init"]), 1e-10);
  EXPECT_LT(rel_diff(res[0].final_error, c["final_error"]), 1e-9);
  char wtxt[32] = "";
  if (c.contains("W")) std::snprintf(wtxt, sizeof wtxt, ", W %.3g", dw);
  std::printf("%s %s: n_iter %d (scikit-learn %d), H %.3g%s\n", name.c_str(), name_of(storage),
              res[0].n_iter, c["n_iter"].get<int>(), dh, wtxt);
}

TEST(Nndsvd, CdAndMuFromNndsvdMatchScikitLearn) {
  for (const auto& [name, c] : golden()["runs"].items()) {
    (void)c;
    check_run(name, Storage::dense);
    check_run(name, Storage::csr);
  }
}

}  // namespace
