// Row partition over MPI ranks (run under mpirun -np 1, 2, 3): each rank holds a block of the
// rows of X and of W; W^T X, W^T W and the W violation are allreduced. H per replicate must
// match a single-process run up to the reordering of those sums.
#include <gtest/gtest.h>
#include <cmath>
#include <mpi.h>

#include "knmf/core/error.hpp"
#include "knmf/matrix/load.hpp"
#include "knmf/mpi/distributed.hpp"
#include "solver_fixtures.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;

int rank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int size() {
  int s;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// Reordered sums of W^T X and W^T W change the last bits; after hundreds of iterations the
// factors agree to this relative bound (measured worst below 1e-12; margin 100x).
constexpr double kBound = 1e-10;

/// Row splits: balanced (uneven when size does not divide n), or with rank 0 holding nothing.
std::pair<size_type, size_type> split(size_type n, bool empty_first) {
  const int s = size(), r = rank();
  if (empty_first && s > 1) {
    if (r == 0) return {0, 0};
    const size_type per = n / (s - 1);
    const size_type a = per * (r - 1), b = r == s - 1 ? n : per * r;
    return {a, b};
  }
  return {n * r / s, n * (r + 1) / s};
}

struct Dataset {
  size_type n, g;
  std::vector<double> x;  // row-major
};

Dataset synth() {
  Dataset d;
  synthetic_matrix<double>("synth", &d.n, &d.g);
  d.x = read_f64(data_dir() / "nmf" / "synth.X.f64");
  return d;
}

template <class Inner>
mpi::DistributedMatrix<Inner> block_of(const Dataset& d, size_type r0, size_type r1);

template <>
mpi::DistributedMatrix<DenseMatrix<double>> block_of(const Dataset& d, size_type r0, size_type r1) {
  DenseMatrix<double> m(ExecSpace(), r1 - r0, d.g);
  m.set_rows(0, r1 - r0, d.x.data() + r0 * d.g);
  m.finalize("block", default_reduction_chunk, true);
  return mpi::DistributedMatrix<DenseMatrix<double>>(MPI_COMM_WORLD, std::move(m), r0, d.n);
}

template <>
mpi::DistributedMatrix<CsrMatrix<double>> block_of(const Dataset& d, size_type r0, size_type r1) {
  const auto c = knmf::test::dense_to_csr<double>(d.x, d.g, r0, r1);
  CsrMatrix<double> m(ExecSpace(), r1 - r0, d.g, c.nnz());
  m.set_rows(0, r1 - r0, c.row_offsets.data(), c.cols.data(), c.values.data());
  m.finalize("block", default_reduction_chunk, true);
  return mpi::DistributedMatrix<CsrMatrix<double>>(MPI_COMM_WORLD, std::move(m), r0, d.n);
}

template <class Inner>
void check(SolverKind s, bool empty_first, double beta_loss = 2.0,
           int inner_sweeps = 1) {
  SCOPED_TRACE(to_string(s) + " beta_loss " + beta_loss_name(beta_loss) +
               (empty_first ? " with an empty rank" : " balanced") + " on " +
               std::to_string(size()) + " rank(s)");
  const auto d = synth();
  auto full = DenseMatrix<double>::from_host(ExecSpace(), d.n, d.g, d.x.data());
  const auto [r0, r1] = split(d.n, empty_first);
  auto X = block_of<Inner>(d, r0, r1);
  EXPECT_EQ(X.global_rows(), d.n);
  EXPECT_LT(rel_diff(X.stats().norm2, full.stats().norm2), 1e-14);
  SolverOptions o;
  o.solver = s;
  o.tol = 1e-5;
  o.return_W = true;
  o.beta_loss = beta_loss;
  o.inner_sweeps = inner_sweeps;
  std::vector<Job> jobs{{4, 0, 5, 0}, {4, 1, 6, 1}, {4, 2, 7, 2}};
  const auto ref = factorize(ExecSpace(), full, jobs, 2, o);
  const auto res = factorize(ExecSpace(), X, jobs, 2, o);
  double worst = 0;
  for (size_t i = 0; i < jobs.size(); ++i) worst = std::max(worst, max_rel_diff(res[i].H, ref[i].H));
  if (rank() == 0)
    std::printf("row partition, %s, %d rank(s)%s: worst H rel diff vs one process %.3g\n",
                to_string(s).c_str(), size(), empty_first ? " (rank 0 empty)" : "", worst);
  if (inner_sweeps != 1) {
    // Accelerated CD decides after every repeated sweep whether to sweep again, from the
    // violation summed over the ranks, whose rounding depends on the partition: one flipped
    // decision gives another trajectory (synth's minimum is not unique: H can differ by 10%
    // at the same objective). So: the run completes on every rank (the decisions agree across
    // ranks, or a reduction would hang), and reaches the one-process objective.
    // The accelerated MU's repeat decisions (its steps' norms) flip the same way, and its
    // stopping rule (the error's fall over 10 iterations) then stops another trajectory at
    // another point of synth's slow MU descent (final errors 1e-4 to 6% apart on one process,
    // CSR against dense): for it, the ranks hold the same H bit for bit (the same H
    // update and the same decisions on every rank) and the repeats ran.
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_GT(res[i].n_sweeps, 2 * res[i].n_iter) << "job " << i;
      if (s == SolverKind::cd) {
        EXPECT_LT(rel_diff(res[i].final_error, ref[i].final_error), 1e-6) << "job " << i;
        continue;
      }
      EXPECT_TRUE(std::isfinite(res[i].final_error) && res[i].final_error > 0) << "job " << i;
      double sum = 0.0;
      for (double v : res[i].H) sum += v;
      double lo = 0.0, hi = 0.0;
      MPI_Allreduce(&sum, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
      MPI_Allreduce(&sum, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      EXPECT_EQ(lo, hi) << "job " << i << ": the ranks' H differ";
    }
    return;
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(res[i].n_iter, ref[i].n_iter) << "job " << i;
    EXPECT_LT(max_rel_diff(res[i].H, ref[i].H), kBound) << "job " << i;
    EXPECT_LT(rel_diff(res[i].final_error, ref[i].final_error), kBound) << "job " << i;
    // this rank's rows of W
    std::vector<double> w(ref[i].W.begin() + r0 * 4, ref[i].W.begin() + r1 * 4);
    if (!w.empty()) {
      EXPECT_LT(max_rel_diff(res[i].W, w), kBound) << "job " << i;
    }
    EXPECT_EQ(res[i].W.size(), size_t((r1 - r0) * 4));
  }
  // fixed-H refit
  const auto fr = refit_usages(ExecSpace(), full, {ref[0].H}, 4, 1, o);
  const auto fd = refit_usages(ExecSpace(), X, {ref[0].H}, 4, 1, o);
  EXPECT_EQ(fd[0].n_iter, fr[0].n_iter);
  EXPECT_LT(rel_diff(fd[0].final_error, fr[0].final_error), kBound);
}

TEST(MpiRows, DenseMu) { check<DenseMatrix<double>>(SolverKind::mu, false); }
TEST(MpiRows, DenseCd) { check<DenseMatrix<double>>(SolverKind::cd, false); }
TEST(MpiRows, SparseMu) { check<CsrMatrix<double>>(SolverKind::mu, false); }
TEST(MpiRows, SparseCd) { check<CsrMatrix<double>>(SolverKind::cd, false); }
TEST(MpiRows, DenseMuWithAnEmptyRank) { check<DenseMatrix<double>>(SolverKind::mu, true); }
TEST(MpiRows, SparseCdWithAnEmptyRank) { check<CsrMatrix<double>>(SolverKind::cd, true); }
// the beta rule (beta_loss != 2): its H numerator, denominator, W sums and divergence summed
// over the ranks
// accelerated CD: the repeat decisions come from the violations summed over the ranks, so
// every rank runs the same sweeps (a rank that disagreed would deadlock in the next reduction)
TEST(MpiRows, SparseAcceleratedCdWithAnEmptyRank) {
  check<CsrMatrix<double>>(SolverKind::cd, true, 2.0, SolverOptions::inner_sweeps_auto);
}
TEST(MpiRows, DenseAcceleratedCd) { check<DenseMatrix<double>>(SolverKind::cd, false, 2.0, 6); }
// accelerated MU: W's step norms summed over the ranks, H's computed alike on every rank
TEST(MpiRows, SparseAcceleratedMuWithAnEmptyRank) {
  check<CsrMatrix<double>>(SolverKind::mu, true, 2.0, SolverOptions::inner_sweeps_auto);
}
TEST(MpiRows, DenseAcceleratedMu) { check<DenseMatrix<double>>(SolverKind::mu, false, 2.0, 5); }

TEST(MpiRows, DenseKullbackLeibler) { check<DenseMatrix<double>>(SolverKind::mu, false, 1.0); }
TEST(MpiRows, SparseKullbackLeiblerWithAnEmptyRank) {
  check<CsrMatrix<double>>(SolverKind::mu, true, 1.0);
}
TEST(MpiRows, DenseBetaOneAndAHalf) { check<DenseMatrix<double>>(SolverKind::mu, true, 1.5); }
TEST(MpiRows, SparseBetaOneAndAHalf) { check<CsrMatrix<double>>(SolverKind::mu, false, 1.5); }

// NNDSVD's host LU/QR need every row: a row-partitioned X refuses it (every rank alike), and
// the fixed-H refit, which uses no init, still runs.
TEST(MpiRows, NndsvdInitIsRefusedOnARowPartition) {
  const auto d = synth();
  const auto [r0, r1] = split(d.n, false);
  auto X = block_of<DenseMatrix<double>>(d, r0, r1);
  SolverOptions o;
  o.init = InitKind::nndsvda;
  std::vector<Job> jobs{{4, 0, 5, 0}};
  try {
    factorize(ExecSpace(), X, jobs, 1, o);
    FAIL() << "nndsvda accepted on a row partition";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--init nndsvda is not available with X partitioned by rows", 0), 0u)
        << e.what();
  }
  o.max_iter = 5;
  auto full = DenseMatrix<double>::from_host(ExecSpace(), d.n, d.g, d.x.data());
  o.init = InitKind::random;
  const auto ref = factorize(ExecSpace(), full, jobs, 1, o);
  o.init = InitKind::nndsvda;
  EXPECT_EQ(refit_usages(ExecSpace(), X, {ref[0].H}, 4, 1, o).size(), 1u);
}

TEST(MpiRows, BalancedSplitCoversAllRowsOnce) {
  std::vector<size_type> prefix{0};
  for (int i = 0; i < 101; ++i) prefix.push_back(prefix.back() + (i % 7));
  for (int s = 1; s <= 5; ++s) {
    size_type next = 0;
    for (int r = 0; r < s; ++r) {
      const auto [a, b] = mpi::balanced_rows(prefix, r, s);
      EXPECT_EQ(a, next);
      EXPECT_GE(b, a);
      next = b;
    }
    EXPECT_EQ(next, 101);
  }
}

// X's content fingerprint (issue 15, defect 2) of a row-partitioned X: each rank hashes its
// rows as it reads them, the ranks' parts are merged, and the result is the fingerprint a
// single process computes (the one a results file records), at any number of ranks.
TEST(MpiRows, FingerprintOfAPartitionedXIsTheWholeXs) {
  for (const char* name : {"csr_f32.h5ad", "dense_f64.h5ad", "csc_f32.h5ad"}) {
    const auto reader = io::H5adReader::open(data_dir() / "h5ad" / name);
    const auto n = reader.info().n_obs, g = reader.info().n_vars;
    const std::string whole = load_csr<double>(ExecSpace(), reader).fingerprint().text(n, g);
    ASSERT_EQ(whole.size(), 16u) << name;
    const auto sparse = mpi::load_distributed_csr<float>(MPI_COMM_WORLD, ExecSpace(), reader);
    EXPECT_EQ(sparse.fingerprint().text(n, g), whole) << name << ", " << size() << " rank(s)";
    const auto dense = mpi::load_distributed_dense<double>(MPI_COMM_WORLD, ExecSpace(), reader);
    EXPECT_EQ(dense.fingerprint().text(n, g), whole) << name << ", " << size() << " rank(s)";
    if (size() > 1) {
      EXPECT_LT(sparse.local().fingerprint().rows(), n) << "each rank reads a part";
    }
  }
}

}  // namespace
