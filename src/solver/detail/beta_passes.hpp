#pragma once
/// \file
/// The passes over X of the beta-divergence MU (BetaMuRule, rule_beta_mu.hpp), for every
/// storage format of X through one block type (BetaBlock): a block of rows of X, dense (X^T
/// columns) or sparse (CSR of the rows, or the CSC of those rows for the H pass). Each pass
/// runs block by block and, inside a block, slot by slot: a slot's numbers never depend on
/// the other slots of its batch (every product is per slot).
///
/// Per slot r and block of rows, W H is formed only a chunk of at most `block_rows` rows at
/// a time (a g x block_rows scratch, never n x g): WHt = H_r^T W_r[:, rows] (one GEMM), then
///   W pass: P_r[:, rows] = H_r (X o WH^(beta-2))^T, den = H_r (WH^(beta-1))^T (beta 1: the
///           row sums of H), and W_r[:, rows] updated in place (its columns are this chunk's);
///   H pass: Q_r += W_r[:, rows] (X o WH^(beta-2)), D_r += W_r[:, rows] WH^(beta-1)
///           (H_next holds D), summed over the blocks (the caller reduces over row blocks);
///   divergence: per-row sums of the terms of beta_kernels.hpp, summed on the host in row
///           order (so the sums do not depend on the thread count).
/// Sparse X: the ratio only at the stored entries (an SDDMM, then the gathers of
/// products.hpp with the ratio values); WH row by row only for the denominators (beta != 1)
/// and the WH^beta term of the divergence, as scikit-learn computes them.

#include <Kokkos_Core.hpp>
#include <KokkosBlas3_gemm.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "knmf/core/host_access.hpp"
#include "knmf/core/kernel_set.hpp"
#include "knmf/core/types.hpp"
#include "knmf/matrix/csr_matrix.hpp"
#include "knmf/matrix/dense_matrix.hpp"
#include "knmf/matrix/streamed_matrix.hpp"
#include "beta_kernels.hpp"
#include "kernels.hpp"
#include "products.hpp"

namespace knmf::detail {

/// A block of rows [r0, r1) of X as a beta pass reads it.
template <class T>
struct BetaBlock {
  size_type r0 = 0, r1 = 0;
  bool sparse = false;
  /// dense: X^T columns r0..r1 (g x (r1 - r0))
  Kokkos::View<const T**, Kokkos::LayoutLeft, MemSpace> xt;
  /// sparse: `rows` compressed rows (CSR: the block's rows of X, `rows` = r1 - r0; CSC: the
  /// g columns of the block, entries = row indices of X), entries at offset - base
  size_type rows = 0;
  Kokkos::View<const size_type*, MemSpace> row_map;
  size_type base = 0;
  Kokkos::View<const ordinal_type*, MemSpace> entries;
  Kokkos::View<const T*, MemSpace> values;
  GatherSegments segments;  ///< sparse: the long rows of row_map (products.hpp, spmm_gather)
};

/// One entry of a device View of offsets, on the host.
inline size_type host_value(const Kokkos::View<const size_type*, MemSpace>& v, size_type i) {
  size_type out = 0;
  Kokkos::View<size_type, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(&out);
  Kokkos::deep_copy(h, Kokkos::subview(v, i));
  return out;
}

/// f(block) for X's blocks: CSR (or CSC when `transposed`) for sparse X, X^T columns for dense.
template <class T, class F>
void for_each_beta_block(const ExecSpace&, const DenseMatrix<T>& X, bool, F&& f) {
  BetaBlock<T> b;
  b.r0 = 0;
  b.r1 = X.rows();
  b.xt = X.xt();
  f(b);
}

template <class T, class F>
void for_each_beta_block(const ExecSpace&, const CsrMatrix<T>& X, bool transposed, F&& f) {
  const auto& A = transposed ? X.xt() : X.x();
  BetaBlock<T> b;
  b.r0 = 0;
  b.r1 = X.rows();
  b.sparse = true;
  b.rows = transposed ? X.cols() : X.rows();
  b.row_map = A.graph.row_map;
  b.entries = A.graph.entries;
  b.values = A.values;
  b.segments = transposed ? X.xt_segments() : X.x_segments();
  f(b);
}

template <class T, class F>
void for_each_beta_block(const ExecSpace& space, const StreamedMatrix<T>& X, bool transposed,
                         F&& f) {
  const bool csc = transposed && X.sparse();
  X.for_each_block(space, csc, [&](const StreamBlock<T>& s) {
    BetaBlock<T> b;
    b.r0 = s.r0;
    b.r1 = s.r1;
    if (!X.sparse()) {
      b.xt = s.xt;
    } else {
      b.sparse = true;
      b.rows = csc ? X.cols() : s.rows();
      b.row_map = s.row_map;
      b.base = s.base;
      b.entries = s.entries;
      b.values = s.values;
      b.segments = s.segments;
    }
    f(b);
  });
}

/// Rows of X per chunk of W H: the two g x rows scratch matrices take at most
/// `beta_scratch_budget` bytes (and at least one row).
inline constexpr std::int64_t beta_scratch_budget = std::int64_t(64) << 20;
inline std::int64_t beta_block_rows(std::int64_t n, std::int64_t g, int element_bytes) {
  const std::int64_t bytes = std::max(element_bytes, 1);
  if (g >= beta_scratch_budget / (2 * bytes)) return 1;  // (and 2 g bytes cannot wrap)
  const std::int64_t per_row = 2 * std::max<std::int64_t>(g, 1) * bytes;
  return std::max<std::int64_t>(1, std::min<std::int64_t>(n, beta_scratch_budget / per_row));
}

/// What the beta scratch is sized from: the chunk rows, the most rows a sparse block holds
/// (per-row sums) and the most stored entries a block holds (the ratio values; 0 dense).
struct BetaShape {
  std::int64_t block_rows = 0;
  std::int64_t sparse_rows = 0;
  std::int64_t sparse_values = 0;
};

template <class T>
BetaShape beta_shape(const DenseMatrix<T>& X) {
  return {beta_block_rows(X.rows(), X.cols(), int(sizeof(T))), 0, 0};
}
template <class T>
BetaShape beta_shape(const CsrMatrix<T>& X) {
  return {beta_block_rows(X.rows(), X.cols(), int(sizeof(T))), std::max(X.rows(), X.cols()),
          X.nnz()};
}
/// Streamed X: the scratch grows to the largest block met (bounded by X's rows and nnz).
template <class T>
BetaShape beta_shape(const StreamedMatrix<T>& X) {
  return {beta_block_rows(X.rows(), X.cols(), int(sizeof(T))), 0, 0};
}

/// Bytes of the beta scratch (BetaWork::allocate) for k components.
inline std::int64_t beta_scratch_bytes(const BetaShape& s, std::int64_t g, int k,
                                       int element_bytes) {
  const std::int64_t rows = std::max(s.block_rows, s.sparse_rows);
  return (2 * g * s.block_rows + std::int64_t(k) * s.block_rows + s.sparse_values) *
             element_bytes +
         rows * 8;
}

/// The scratch of the beta passes (per batch; the passes run one slot at a time).
template <class T>
struct BetaWork {
  Matrix<T> wh, v, den;                        ///< g x B, g x B, k x B
  Kokkos::View<T*, MemSpace> vals;             ///< ratio values of a sparse block
  Kokkos::View<double*, MemSpace> rowsum;      ///< per-row divergence sums
  Kokkos::View<double*, MemSpace>::HostMirror rowsum_h;
  GatherScratch<T> gather;                     ///< a sparse block's long-row partials (k rows)
  std::int64_t block_rows = 0;

  void allocate(const ExecSpace& space, const BetaShape& s, size_type g, int k) {
    block_rows = s.block_rows;
    auto lab = [&](const char* l) {
      return Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string(l));
    };
    wh = Matrix<T>(lab("knmf::beta::WH"), g, s.block_rows);
    v = Matrix<T>(lab("knmf::beta::ratio"), g, s.block_rows);
    den = Matrix<T>(lab("knmf::beta::den"), k, s.block_rows);
    vals = Kokkos::View<T*, MemSpace>(lab("knmf::beta::values"), s.sparse_values);
    rowsum = Kokkos::View<double*, MemSpace>(lab("knmf::beta::rowsum"),
                                             std::max(s.block_rows, s.sparse_rows));
    rowsum_h = host_mirror(rowsum);
  }
  /// Grow the sparse scratch to a block of `rows` compressed rows and `nnz` values.
  void reserve_sparse(const ExecSpace& space, size_type rows, size_type nnz) {
    if (size_type(vals.extent(0)) < nnz)
      vals = Kokkos::View<T*, MemSpace>(
          Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::beta::values"), nnz);
    if (size_type(rowsum.extent(0)) < rows) {
      rowsum = Kokkos::View<double*, MemSpace>(
          Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::beta::rowsum"), rows);
      rowsum_h = host_mirror(rowsum);
    }
  }
  std::int64_t allocated_bytes() const {
    return std::int64_t(wh.span() + v.span() + den.span() + vals.span() + gather.partials.span()) *
               std::int64_t(sizeof(T)) +
           std::int64_t(rowsum.span()) * 8;
  }
};

/// The rows [row0, row0 + k) of F: slot r's factor.
template <class T>
Matrix<T> slot_rows(const Matrix<T>& F, int r, int k) {
  return Kokkos::subview(F, std::make_pair(r * k, (r + 1) * k), Kokkos::ALL);
}
template <class T>
Matrix<T> slot_cols(const Matrix<T>& F, int r, int k, size_type c0, size_type c1) {
  return Kokkos::subview(F, std::make_pair(r * k, (r + 1) * k), std::make_pair(c0, c1));
}

/// sums(r * k + t) = sum over the m columns of F(r * k + t, :) for the slots in `mask`, in
/// double (chunked as the Grams, summed in chunk order), stored as T. `partial` holds at
/// least num_chunks(m) * R * k doubles. Other slots are left as they are.
template <class T>
void slot_row_sums(const ExecSpace& space, const Matrix<T>& F, int R, int k, const SlotMask& mask,
                   const Kokkos::View<double*, MemSpace>& partial, const Matrix<T>& sums) {
  const size_type m = F.extent(1);
  const size_type nch = num_chunks(m);
  const int rk = R * k;
  Kokkos::parallel_for(
      "knmf::beta::row_sums_chunks", Policy64(space, 0, nch * rk), KOKKOS_LAMBDA(const size_type e) {
        const int row = int(e % rk);
        const size_type c = e / rk;
        if (!mask(row / k)) return;
        const size_type j0 = c * slot_chunk, j1 = j0 + slot_chunk < m ? j0 + slot_chunk : m;
        double a = 0.0;
        for (size_type j = j0; j < j1; ++j) a += double(F(row, j));
        partial(e) = a;
      });
  Kokkos::parallel_for(
      "knmf::beta::row_sums", Kokkos::RangePolicy<ExecSpace>(space, 0, rk), KOKKOS_LAMBDA(const int row) {
        if (!mask(row / k)) return;
        double a = 0.0;
        for (size_type c = 0; c < nch; ++c) a += partial(c * rk + row);
        sums(row, 0) = T(a);
      });
}

/// What a pass needs besides X: the batch's factors and the rule's constants.
template <class T>
struct BetaOperands {
  const Matrix<T>& W;     ///< (R k) x n (this block of rows' columns, for a row partition)
  const Matrix<T>& H;     ///< (R k) x g
  int R = 1, k = 1;
  double beta = 1.0;
  const SlotMask* mask = nullptr;  ///< host copy decides which slots run
  std::vector<int> slots;          ///< the slots to run, in order
};

/// WHt(:, 0:c1-c0) = H_r^T W_r[:, c0:c1] (g x rows).
template <class T>
Matrix<T> wh_chunk(const ExecSpace& space, const BetaOperands<T>& o, BetaWork<T>& w, int r,
                   size_type c0, size_type c1) {
  auto WHt = Matrix<T>(Kokkos::subview(w.wh, Kokkos::ALL, std::make_pair(size_type(0), c1 - c0)));
  KokkosBlas::gemm(space, "T", "N", T(1), slot_rows(o.H, r, o.k), slot_cols(o.W, r, o.k, c0, c1),
                   T(0), WHt);
  return WHt;
}

/// The (j, i) entries of a g x rows chunk (LayoutLeft: j fastest), without 64-bit divisions.
using ChunkPolicy = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2, Kokkos::Iterate::Left, Kokkos::Iterate::Left>,
                                          Kokkos::IndexType<size_type>>;

/// V = X o WH^(beta-2) over a dense chunk (xt: g x rows, the chunk's columns of X^T) and,
/// with `den`, WHt <- WH^(beta-1) in place.
template <class T, class XT>
void dense_ratio(const ExecSpace& space, const XT& xt, const Matrix<T>& WHt, const Matrix<T>& V,
                 double beta, bool den) {
  const size_type g = WHt.extent(0), rows = WHt.extent(1);
  Kokkos::parallel_for(
      "knmf::beta::dense_ratio", ChunkPolicy(space, {0, 0}, {g, rows}),
      KOKKOS_LAMBDA(const size_type j, const size_type i) {
        const T wh = WHt(j, i);
        V(j, i) = beta_ratio(T(xt(j, i)), wh, beta);
        if (den) WHt(j, i) = beta_den_power(wh, beta);
      });
}

/// WHt <- WH^(beta-1) in place (a sparse X's denominators).
template <class T>
void den_power(const ExecSpace& space, const Matrix<T>& WHt, double beta) {
  const size_type g = WHt.extent(0), rows = WHt.extent(1);
  Kokkos::parallel_for(
      "knmf::beta::den_power", ChunkPolicy(space, {0, 0}, {g, rows}),
      KOKKOS_LAMBDA(const size_type j, const size_type i) {
        WHt(j, i) = beta_den_power(WHt(j, i), beta);
      });
}

/// The ratio values at the stored entries of a sparse block: for compressed row a (column
/// a0 + a of A) and entry p (column entries(p) of B),
///   vals(p - base) = beta_ratio(values(p - base), sum_t A(row0 + t, a0 + a) B(row0 + t, e)).
/// CSR pass: A = W (a0 = the block's first row), B = H; CSC pass: A = H (a0 = 0), B = W.
template <class T>
void sparse_ratio(const ExecSpace& space, const BetaBlock<T>& b, const Matrix<T>& A, size_type a0,
                  const Matrix<T>& B, int row0, int k, double beta,
                  const Kokkos::View<T*, MemSpace>& vals) {
  const auto row_map = b.row_map;
  const auto entries = b.entries;
  const auto values = b.values;
  const size_type base = b.base;
  if constexpr (host_tuned_kernels) {  // a row per task, rows of X vary in length
    Kokkos::parallel_for(
        "knmf::beta::sddmm",
        Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>,
                            Kokkos::IndexType<size_type>>(space, 0, b.rows),
        [=](const size_type a) {
          for (size_type p = row_map(a) - base; p < row_map(a + 1) - base; ++p) {
            const size_type c = size_type(entries(p));
            T wh = T(0);
            for (int t = 0; t < k; ++t) wh += A(row0 + t, a0 + a) * B(row0 + t, c);
            vals(p) = beta_ratio(values(p), wh, beta);
          }
        });
    return;
  }
  Kokkos::parallel_for(
      "knmf::beta::sddmm", TeamPolicy(space, int(b.rows), team_size_for(32)),
      KOKKOS_LAMBDA(const Member& team) {
        const size_type a = team.league_rank();
        const size_type p0 = row_map(a) - base, p1 = row_map(a + 1) - base;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, p0, p1), [&](const size_type p) {
          const size_type c = size_type(entries(p));
          T wh = T(0);
          for (int t = 0; t < k; ++t) wh += A(row0 + t, a0 + a) * B(row0 + t, c);
          vals(p) = beta_ratio(values(p), wh, beta);
        });
      });
}

/// The W update of slot r's columns [c0, c1): W = W * (P / den)^gamma (beta_mu_value), den from
/// `den` (k x rows) or, for beta 1, the slot's H row sums `hsum` ((R k) x 1).
template <class T>
void update_chunk(const ExecSpace& space, const Matrix<T>& F, const Matrix<T>& Num,
                  const Matrix<T>& den, const Matrix<T>& hsum, bool use_hsum, int r, int k,
                  size_type c0, size_type c1, double l1, double l2, double gamma, bool zero_small) {
  const int row0 = r * k;
  Kokkos::parallel_for(
      "knmf::beta::update", Policy64(space, 0, size_type(k) * (c1 - c0)),
      KOKKOS_LAMBDA(const size_type e) {
        const int t = int(e % k);
        const size_type i = c0 + e / k;
        const T d = use_hsum ? hsum(row0 + t, 0) : den(t, i - c0);
        F(row0 + t, i) = beta_mu_value(d, F(row0 + t, i), Num(row0 + t, i), l1, l2, gamma, zero_small);
      });
}

/// hsum += l1 and, when l2 == 0, hsum == 0 -> EPSILON, in place for the slots in `mask`:
/// scikit-learn's beta-1 W denominator is a view of H_sum, so both land in H_sum (and, in a
/// fixed-H refit where H_sum is kept, accumulate over the iterations).
template <class T>
void hsum_in_place(const ExecSpace& space, const Matrix<T>& hsum, int k, const SlotMask& mask,
                   double l1, double l2) {
  if (!(l1 > 0) && l2 > 0) return;
  Kokkos::parallel_for(
      "knmf::beta::hsum_guard", Policy64(space, 0, size_type(hsum.extent(0))),
      KOKKOS_LAMBDA(const size_type row) {
        if (!mask(int(row) / k)) return;
        T h = hsum(row, 0);
        if (l1 > 0) h += T(l1);
        if (!(l2 > 0) && h == T(0)) h = T(sklearn_epsilon);
        hsum(row, 0) = h;
      });
}

/// The W pass: every chunk of rows of every block, for the slots in o.slots: P_r (numerator),
/// then W_r updated in place.
template <class T, class VisitBlocks>
void beta_w_pass(const ExecSpace& space, const VisitBlocks& visit, const BetaOperands<T>& o,
                 BetaWork<T>& w, const Matrix<T>& P, const Matrix<T>& hsum, double l1, double l2) {
  const double beta = o.beta, gamma = beta_gamma(beta);
  const bool zero_small = beta < 1.0;
  const int k = o.k;
  visit(false, [&](const BetaBlock<T>& b) {
    for (int r : o.slots) {
      if (b.sparse && b.rows > 0) {
        const size_type nnz = host_value(b.row_map, b.rows) - b.base;
        w.reserve_sparse(space, b.rows, nnz);
        sparse_ratio(space, b, o.W, b.r0, o.H, r * k, k, beta, w.vals);
        spmm_gather(space, b.row_map, b.base, b.entries, w.vals, slot_rows(o.H, r, k),
                    slot_cols(P, r, k, b.r0, b.r1), false, b.segments, w.gather);
      }
      for (size_type c0 = b.r0; c0 < b.r1; c0 += w.block_rows) {
        const size_type c1 = std::min<size_type>(c0 + w.block_rows, b.r1);
        Matrix<T> den;
        if (!b.sparse || beta != 1.0) {
          auto WHt = wh_chunk(space, o, w, r, c0, c1);
          if (!b.sparse) {
            auto V = Matrix<T>(Kokkos::subview(w.v, Kokkos::ALL, std::make_pair(size_type(0), c1 - c0)));
            dense_ratio(space, Kokkos::subview(b.xt, Kokkos::ALL, std::make_pair(c0 - b.r0, c1 - b.r0)),
                        WHt, V, beta, beta != 1.0);
            KokkosBlas::gemm(space, "N", "N", T(1), slot_rows(o.H, r, k), V, T(0),
                             slot_cols(P, r, k, c0, c1));
          } else {
            den_power(space, WHt, beta);
          }
          if (beta != 1.0) {
            den = Matrix<T>(Kokkos::subview(w.den, Kokkos::ALL, std::make_pair(size_type(0), c1 - c0)));
            KokkosBlas::gemm(space, "N", "N", T(1), slot_rows(o.H, r, k), WHt, T(0), den);
          }
        }
        // beta 1: l1 is already in hsum (hsum_in_place)
        update_chunk(space, o.W, P, den, hsum, beta == 1.0, r, k, c0, c1, beta == 1.0 ? 0.0 : l1,
                     l2, gamma, zero_small);
      }
    }
  });
}

/// The H pass: Q_r = numerator, D_r = denominator (beta != 1) summed over every block, for the
/// slots in o.slots (both zeroed first; the caller reduces them over row blocks).
template <class T, class VisitBlocks>
void beta_h_pass(const ExecSpace& space, const VisitBlocks& visit, const BetaOperands<T>& o,
                 BetaWork<T>& w, const Matrix<T>& Q, const Matrix<T>& D) {
  const double beta = o.beta;
  const int k = o.k;
  for (int r : o.slots) {
    Kokkos::deep_copy(space, slot_rows(Q, r, k), T(0));
    if (beta != 1.0) Kokkos::deep_copy(space, slot_rows(D, r, k), T(0));
  }
  visit(true, [&](const BetaBlock<T>& b) {
    for (int r : o.slots) {
      if (b.sparse && b.rows > 0) {
        const size_type nnz = host_value(b.row_map, b.rows) - b.base;
        w.reserve_sparse(space, b.rows, nnz);
        sparse_ratio(space, b, o.H, 0, o.W, r * k, k, beta, w.vals);
        spmm_gather(space, b.row_map, b.base, b.entries, w.vals, slot_rows(o.W, r, k),
                    slot_rows(Q, r, k), true, b.segments, w.gather);
      }
      if (b.sparse && beta == 1.0) continue;
      for (size_type c0 = b.r0; c0 < b.r1; c0 += w.block_rows) {
        const size_type c1 = std::min<size_type>(c0 + w.block_rows, b.r1);
        auto WHt = wh_chunk(space, o, w, r, c0, c1);
        const auto Wc = slot_cols(o.W, r, k, c0, c1);
        if (!b.sparse) {
          auto V = Matrix<T>(Kokkos::subview(w.v, Kokkos::ALL, std::make_pair(size_type(0), c1 - c0)));
          dense_ratio(space, Kokkos::subview(b.xt, Kokkos::ALL, std::make_pair(c0 - b.r0, c1 - b.r0)),
                      WHt, V, beta, beta != 1.0);
          KokkosBlas::gemm(space, "N", "T", T(1), Wc, V, T(1), slot_rows(Q, r, k));
        } else {
          den_power(space, WHt, beta);
        }
        if (beta != 1.0) KokkosBlas::gemm(space, "N", "T", T(1), Wc, WHt, T(1), slot_rows(D, r, k));
      }
    }
  });
}

/// The H update of the slots in o.slots, in place: H = H * (Q / den)^gamma, den = D or, for
/// beta 1, the W column sums `wsum` with zeros replaced by 1 (scikit-learn's W_sum).
template <class T>
void beta_h_update(const ExecSpace& space, const Matrix<T>& H, const Matrix<T>& Q, const Matrix<T>& D,
                   const Matrix<T>& wsum, const SlotMask& mask, int k, double beta, double l1,
                   double l2) {
  const double gamma = beta_gamma(beta);
  const bool zero_small = beta <= 1.0;
  const size_type rk = H.extent(0), g = H.extent(1);
  const bool kl = beta == 1.0;
  Kokkos::parallel_for(
      "knmf::beta::update_H", Policy64(space, 0, rk * g), KOKKOS_LAMBDA(const size_type e) {
        const int row = int(e % rk);
        const size_type j = e / rk;
        if (!mask(row / k)) return;
        T d;
        if (kl) {
          d = wsum(row, 0);
          if (d == T(0)) d = T(1);
        } else {
          d = D(row, j);
        }
        H(row, j) = beta_mu_value(d, H(row, j), Q(row, j), l1, l2, gamma, zero_small);
      });
}

/// rowsum(a) = the divergence terms of compressed row a of a sparse block for slot rows
/// [row0, row0 + k) (beta 1: plus W_r(:, i) . hsum_r). A free function of T alone: nvcc
/// refuses extended lambdas in functions templated on a local (lambda) type.
template <class T>
void divergence_sparse_rows(const ExecSpace& space, const BetaBlock<T>& b, const Matrix<T>& W,
                            const Matrix<T>& H, const Matrix<T>& hsum, int row0, int k,
                            double beta, bool kl, const Kokkos::View<double*, MemSpace>& rowsum) {
  const auto row_map = b.row_map;
  const auto entries = b.entries;
  const auto values = b.values;
  const size_type base = b.base, r0 = b.r0;
  Kokkos::parallel_for(
      "knmf::beta::divergence_sparse", Policy64(space, 0, b.rows), KOKKOS_LAMBDA(const size_type a) {
        const size_type i = r0 + a;
        double s = 0.0;
        for (size_type p = row_map(a) - base; p < row_map(a + 1) - base; ++p) {
          const size_type j = size_type(entries(p));
          T wh = T(0);
          for (int t = 0; t < k; ++t) wh += W(row0 + t, i) * H(row0 + t, j);
          s += beta_div_entry(values(p), wh, beta);
        }
        if (kl)
          for (int t = 0; t < k; ++t) s += double(W(row0 + t, i)) * double(hsum(row0 + t, 0));
        rowsum(a) = s;
      });
}

/// rowsum(a) = the divergence terms of row c0 + a from the chunk WHt (g x (c1 - c0)) of W H:
/// X's entries for a dense block, the WH^beta terms when `all_wh`, beta 1's W . hsum.
template <class T>
void divergence_dense_rows(const ExecSpace& space, const BetaBlock<T>& b, const Matrix<T>& WHt,
                           const Matrix<T>& W, const Matrix<T>& H, const Matrix<T>& hsum,
                           int row0, int k, size_type c0, size_type c1, double beta, bool kl,
                           bool all_wh, const Kokkos::View<double*, MemSpace>& rowsum) {
  (void)H;
  const size_type g = WHt.extent(0);
  const bool dense = !b.sparse;
  Kokkos::View<const T**, Kokkos::LayoutLeft, MemSpace> xt;
  if (dense) xt = Kokkos::subview(b.xt, Kokkos::ALL, std::make_pair(c0 - b.r0, c1 - b.r0));
  Kokkos::parallel_for(
      "knmf::beta::divergence_dense", Policy64(space, 0, c1 - c0), KOKKOS_LAMBDA(const size_type a) {
        double s = 0.0;
        for (size_type j = 0; j < g; ++j) {
          const T wh = WHt(j, a);
          if (dense) s += beta_div_entry(xt(j, a), wh, beta);
          if (all_wh) s += beta_div_all(wh, beta);
        }
        if (dense && kl)
          for (int t = 0; t < k; ++t) s += double(W(row0 + t, c0 + a)) * double(hsum(row0 + t, 0));
        rowsum(a) = s;
      });
}

/// Per-slot sums over this X's rows of the divergence terms (beta_kernels.hpp), for the slots
/// in o.slots (out[r]); beta 1 adds sum WH = sum_i W_r(:, i) . hsum_r (hsum: H row sums).
template <class T, class VisitBlocks>
void beta_divergence_pass(const ExecSpace& space, const VisitBlocks& visit, const BetaOperands<T>& o,
                          BetaWork<T>& w, const Matrix<T>& hsum, std::vector<double>& out) {
  const double beta = o.beta;
  const int k = o.k;
  const bool kl = beta == 1.0, all_wh = beta != 0.0 && beta != 1.0;
  auto host_sum = [&](size_type rows) {
    double s = 0.0;
    if (rows == 0) return s;
    auto sub = Kokkos::subview(w.rowsum_h, std::make_pair(size_type(0), rows));
    Kokkos::deep_copy(space, sub, Kokkos::subview(w.rowsum, std::make_pair(size_type(0), rows)));
    space.fence();
    for (size_type i = 0; i < rows; ++i) s += sub(i);
    return s;
  };
  visit(false, [&](const BetaBlock<T>& b) {
    for (int r : o.slots) {
      const int row0 = r * k;
      const auto W = o.W, H = o.H;
      if (b.sparse) {
        w.reserve_sparse(space, b.rows, 0);
        divergence_sparse_rows(space, b, W, H, hsum, row0, k, beta, kl, w.rowsum);
        out[size_t(r)] += host_sum(b.rows);
        if (!all_wh) continue;
      }
      for (size_type c0 = b.r0; c0 < b.r1; c0 += w.block_rows) {
        const size_type c1 = std::min<size_type>(c0 + w.block_rows, b.r1);
        auto WHt = wh_chunk(space, o, w, r, c0, c1);
        divergence_dense_rows(space, b, WHt, W, H, hsum, row0, k, c0, c1, beta, kl, all_wh,
                              w.rowsum);
        out[size_t(r)] += host_sum(c1 - c0);
      }
    }
  });
}

/// sqrt(2 max(div, 0)) from the summed terms: beta 0 subtracts n g, other betas (not 1)
/// divide by beta (beta - 1) (scikit-learn's _beta_divergence with square_root=True).
inline double beta_error_from_sum(double sum, double beta, double n_global, double g) {
  double res = sum;
  if (beta == 0.0) res -= n_global * g;
  else if (beta != 1.0) res /= beta * (beta - 1.0);
  if (!std::isfinite(res)) return std::numeric_limits<double>::quiet_NaN();
  return std::sqrt(2.0 * (res > 0.0 ? res : 0.0));
}

}  // namespace knmf::detail
