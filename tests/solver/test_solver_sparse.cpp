// Sparse X (CSR + CSC on the device) against dense X: same iterations, same factors to
// rounding. The sums run in different orders (gathers vs BLAS), so results agree to a few
// ulps per product; the contract asks 1e-10 relative (fp64).
#include <gtest/gtest.h>

#include <random>

#include "knmf/core/error.hpp"
#include "knmf/core/host_access.hpp"
#include "knmf/core/kernel_set.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/load.hpp"
#include "solver/engine.hpp"
#include "solver_fixtures.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;

constexpr double kTol = 1e-10;

void compare(const std::vector<double>& x, size_type n, size_type g, int k, SolverOptions o,
             int n_jobs, const std::string& what) {
  SCOPED_TRACE(what + " " + to_string(o.solver));
  o.return_W = true;
  auto D = DenseMatrix<double>::from_host(ExecSpace(), n, g, x.data(), what);
  const auto c = dense_to_csr<double>(x, g, 0, n);
  auto S = CsrMatrix<double>::from_host(ExecSpace(), n, g, c.row_offsets.data(), c.cols.data(),
                                        c.values.data(), what);
  EXPECT_EQ(S.nnz(), size_type(c.values.size()));
  EXPECT_LT(rel_diff(S.stats().norm2, D.stats().norm2), 1e-14);
  EXPECT_LT(rel_diff(S.mean(), D.mean()), 1e-14);
  std::vector<Job> jobs;
  for (int r = 0; r < n_jobs; ++r) jobs.push_back(Job{k, r, 31 + 17 * r, r});
  const auto rd = factorize(ExecSpace(), D, jobs, 3, o);
  const auto rs = factorize(ExecSpace(), S, jobs, 3, o);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(rs[i].n_iter, rd[i].n_iter) << "job " << i;
    EXPECT_LT(max_rel_diff(rs[i].H, rd[i].H), kTol) << "job " << i;
    EXPECT_LT(max_rel_diff(rs[i].W, rd[i].W), kTol) << "job " << i;
    EXPECT_LT(rel_diff(rs[i].final_error, rd[i].final_error), kTol) << "job " << i;
    EXPECT_LT(rel_diff(rs[i].error_at_init, rd[i].error_at_init), 1e-12) << "job " << i;
  }
  // fixed-H refit on the spectra of the first job
  const auto fd = refit_usages(ExecSpace(), D, {rd[0].H}, k, 1, o);
  const auto fs = refit_usages(ExecSpace(), S, {rd[0].H}, k, 1, o);
  EXPECT_EQ(fs[0].n_iter, fd[0].n_iter);
  EXPECT_LT(max_rel_diff(fs[0].W, fd[0].W), kTol);
}

SolverOptions solver(SolverKind s, double tol = 1e-4, int max_iter = 1000) {
  SolverOptions o;
  o.solver = s;
  o.tol = tol;
  o.max_iter = max_iter;
  return o;
}

TEST(Sparse, SyntheticWithEmptyRowsAndColumnsMatchesDense) {
  size_type n, g;
  synthetic_matrix<double>("synth", &n, &g);
  const auto x = read_f64(data_dir() / "nmf" / "synth.X.f64");  // row 5, columns 11-12 empty
  for (auto s : {SolverKind::mu, SolverKind::cd}) {
    compare(x, n, g, 4, solver(s), 5, "synth");
    compare(x, n, g, 3, solver(s, 0.0, 40), 2, "synth fixed");
  }
}

TEST(Sparse, SingleNonzeroMatchesDense) {
  std::vector<double> x(6 * 5, 0.0);
  x[2 * 5 + 3] = 2.5;
  for (auto s : {SolverKind::mu, SolverKind::cd}) compare(x, 6, 5, 1, solver(s), 2, "single nonzero");
}

TEST(Sparse, FullyDenseCsrMatchesDense) {
  std::mt19937_64 rng(5);
  std::vector<double> x(23 * 17);
  for (auto& v : x) v = 0.1 + double(rng() % 1000) / 100.0;
  for (auto s : {SolverKind::mu, SolverKind::cd}) compare(x, 23, 17, 3, solver(s), 4, "fully dense");
}

TEST(Sparse, RealMatrixMatchesDense) {
  auto reader = io::H5adReader::open(real_dir() / "cnmf-pbmc-donor-a" / "prepare" /
                                     "pbmcA" / "cnmf_tmp" / "pbmcA.norm_counts.h5ad");
  auto D = load_dense<double>(ExecSpace(), reader);
  auto S = load_csr<double>(ExecSpace(), reader, 1 << 20);  // several load blocks
  EXPECT_EQ(S.nnz(), reader.info().nnz);
  EXPECT_LT(rel_diff(S.stats().norm2, D.stats().norm2), 1e-14);
  for (auto s : {SolverKind::mu, SolverKind::cd}) {
    SCOPED_TRACE(to_string(s));
    auto o = solver(s);
    o.return_W = true;
    std::vector<Job> jobs{{6, 0, 59886188, 0}, {6, 1, 1812018521, 1}, {6, 2, 1173234957, 2}};
    const auto rd = factorize(ExecSpace(), D, jobs, 3, o);
    const auto rs = factorize(ExecSpace(), S, jobs, 2, o);
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_EQ(rs[i].n_iter, rd[i].n_iter);
      EXPECT_LT(max_rel_diff(rs[i].H, rd[i].H), kTol);
      EXPECT_LT(max_rel_diff(rs[i].W, rd[i].W), kTol);
    }
  }
}

TEST(Sparse, ReplicateIsIdenticalAloneOrInABatch) {
  size_type n, g;
  synthetic_matrix<double>("synth", &n, &g);
  const auto c = dense_to_csr<double>(read_f64(data_dir() / "nmf" / "synth.X.f64"), g, 0, n);
  auto S = CsrMatrix<double>::from_host(ExecSpace(), n, g, c.row_offsets.data(), c.cols.data(),
                                        c.values.data());
  for (auto s : {SolverKind::mu, SolverKind::cd}) {
    std::vector<Job> jobs;
    for (int r = 0; r < 7; ++r) jobs.push_back(Job{4, r, 500 + r, r});
    const auto batched = factorize(ExecSpace(), S, jobs, 5, solver(s));
    for (size_t i = 0; i < jobs.size(); ++i) {
      const auto alone = factorize(ExecSpace(), S, {jobs[i]}, 1, solver(s));
      EXPECT_EQ(batched[i].H, alone[0].H) << to_string(s) << " job " << i;  // bitwise
    }
  }
}

// Q = W X over the CSC copy: on the host in row slabs of W and cell blocks
// (CsrMatrix::xt_cell_blocks, grouped by W's bytes per block), elsewhere in one pass per gene.
// Either way each Q(r, j) is gene j's terms added in cell order in T, so it equals that loop
// bit for bit: at several row counts (the register blocks and their remainders; 1 row groups
// all blocks into one pass; 83 rows of double are two slabs, 64 and 19 rows), with a gene in
// every cell, an empty gene, and a last block shorter than the others.
template <class T>
void check_cell_blocked_product() {
  const size_type n = 3 * detail::gather_cell_block + 517, g = 29;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<size_type> offsets{0};
  std::vector<ordinal_type> cols;
  std::vector<T> vals;
  for (size_type i = 0; i < n; ++i) {
    for (size_type j = 0; j < g; ++j)
      if (j == 0 || (j != 1 && u(rng) < 0.1)) {
        cols.push_back(ordinal_type(j));
        vals.push_back(T(u(rng) * 9 + 0.1));
      }
    offsets.push_back(size_type(vals.size()));
  }
  const auto X = CsrMatrix<T>::from_host(ExecSpace(), n, g, offsets.data(), cols.data(), vals.data());
  if constexpr (host_tuned_kernels)
    ASSERT_EQ(size_type(X.xt_cell_blocks().extent(0)),
              ((n + detail::gather_cell_block - 1) / detail::gather_cell_block + 1) * g);
  else
    ASSERT_EQ(X.xt_cell_blocks().extent(0), 0u);
  for (const size_type rows : {size_type(1), size_type(20), size_type(80), size_type(83)}) {
    Matrix<T> W(Kokkos::view_alloc(std::string("knmf::test::W")), rows, n);
    Matrix<T> Q(Kokkos::view_alloc(std::string("knmf::test::Q")), rows, g);
    auto hw = knmf::host_mirror(W);
    for (size_type i = 0; i < n; ++i)
      for (size_type r = 0; r < rows; ++r) hw(r, i) = T(u(rng));
    Kokkos::deep_copy(W, hw);
    Kokkos::deep_copy(Q, T(-1));
    detail::GatherScratch<T> scratch;
    detail::wt_times_x(ExecSpace(), X, W, Q, scratch);
    const auto hq = host_copy(Q);
    for (size_type j = 0; j < g; ++j)
      for (size_type r = 0; r < rows; ++r) {
        T acc = T(0);
        for (size_type i = 0; i < n; ++i)
          for (size_type p = offsets[size_t(i)]; p < offsets[size_t(i) + 1]; ++p)
            if (cols[size_t(p)] == ordinal_type(j)) {
              const T term = vals[size_t(p)] * hw(r, i);
              acc = acc + term;
            }
        ASSERT_EQ(hq(r, j), acc) << "rows " << rows << " gene " << j << " row " << r;
      }
    // P = H X^T over the CSR, the host path's row slabs forced thin (in_cols: as if H had a
    // million columns, so one 64-byte vector of rows per slab): each P(r, i) is cell i's terms
    // in stored order, whatever the slabs.
    Matrix<T> H(Kokkos::view_alloc(std::string("knmf::test::H")), rows, g);
    Matrix<T> P(Kokkos::view_alloc(std::string("knmf::test::P")), rows, n);
    auto hh = knmf::host_mirror(H);
    for (size_type j = 0; j < g; ++j)
      for (size_type r = 0; r < rows; ++r) hh(r, j) = T(u(rng));
    Kokkos::deep_copy(H, hh);
    detail::spmm_gather(ExecSpace(), X.x().graph.row_map, 0, X.x().graph.entries, X.x().values, H,
                        P, false, X.x_segments(), scratch, size_type(1) << 20);
    const auto hp = host_copy(P);
    for (size_type i = 0; i < n; ++i)
      for (size_type r = 0; r < rows; ++r) {
        T acc = T(0);
        for (size_type p = offsets[size_t(i)]; p < offsets[size_t(i) + 1]; ++p) {
          const T term = vals[size_t(p)] * hh(r, cols[size_t(p)]);
          acc = acc + term;
        }
        ASSERT_EQ(hp(r, i), acc) << "rows " << rows << " cell " << i << " row " << r;
      }
  }
}

TEST(Sparse, CellBlockedProductSumsEachGeneInCellOrder) {
  check_cell_blocked_product<double>();
  check_cell_blocked_product<float>();
}

TEST(Sparse, BadInputIsReported) {
  std::vector<size_type> off{0, 1, 2};
  std::vector<ordinal_type> cols{0, 7};
  std::vector<double> vals{1.0, 2.0};
  try {
    CsrMatrix<double>::from_host(ExecSpace(), 2, 3, off.data(), cols.data(), vals.data(), "bad.h5ad");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("column index 7 at row 1"), std::string::npos) << e.what();
  }
  cols[1] = 2;
  vals[0] = -3;
  try {
    CsrMatrix<double>::from_host(ExecSpace(), 2, 3, off.data(), cols.data(), vals.data(), "neg.h5ad");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("min -3 at row 0, column 0"), std::string::npos) << e.what();
  }
}

}  // namespace
