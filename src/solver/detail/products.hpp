#pragma once
/// \file
/// The two products with X that dominate an iteration, for each storage format of X:
///   P = H X^T   ((R k) x n)      and      Q = W X   ((R k) x g)
/// with H: (R k) x g and W: (R k) x n, all LayoutLeft (see kernels.hpp for the layout).
/// Dense X: two GEMMs through KokkosBlas. Sparse X: gathers over the rows of X (for P) and of
/// X^T (for Q), each output column summing its row's entries in stored order (no atomics,
/// so every product is reproducible and a slot's rows never depend on the other slots).

#include "knmf/core/compat.hpp"
#include "knmf/matrix/csr_matrix.hpp"
#include "knmf/matrix/dense_matrix.hpp"
#include "kernels.hpp"

namespace knmf::detail {

/// P = H X^T: one GEMM, H (Rk x g) times X^T (g x n).
template <class T>
void x_times_ht(const ExecSpace& space, const DenseMatrix<T>& X, const Matrix<T>& H,
                const Matrix<T>& P) {
  compat::gemm(space, "N", "N", T(1), H, X.xt(), T(0), P);
}

/// Q = W X: one GEMM, W (Rk x n) times X (n x g) = (X^T)^T.
template <class T>
void wt_times_x(const ExecSpace& space, const DenseMatrix<T>& X, const Matrix<T>& W,
                const Matrix<T>& Q) {
  compat::gemm(space, "N", "T", T(1), W, X.xt(), T(0), Q);
}

/// out(:, a) = sum over row a of A of A(a, b) * in(:, b)   (in, out: LayoutLeft, Rk rows).
template <class T, class Crs>
void spmm_gather(const ExecSpace& space, const Crs& A, const Matrix<T>& in, const Matrix<T>& out) {
  const auto row_map = A.graph.row_map;
  const auto entries = A.graph.entries;
  const auto values = A.values;
  const size_type rows = out.extent(0);
  const size_type m = out.extent(1);
  if constexpr (exec_on_host) {
    // Rows in register blocks of B: each block of an output column is accumulated in
    // registers over the whole row of A, then stored once.
    constexpr size_type B = 16;
    Kokkos::parallel_for(
        "knmf::spmm_gather",
        Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>,
                            Kokkos::IndexType<size_type>>(space, 0, m, Kokkos::ChunkSize(8)),
        KOKKOS_LAMBDA(const size_type a) {
          const size_type p0 = row_map(a), p1 = row_map(a + 1);
          T* __restrict__ dst = &out(0, a);
          size_type rb = 0;
          for (; rb + B <= rows; rb += B) {
            T acc[B] = {};
            for (size_type p = p0; p < p1; ++p) {
              const T x = values(p);
              const T* __restrict__ src = &in(rb, entries(p));
              for (size_type r = 0; r < B; ++r) acc[r] += x * src[r];
            }
            for (size_type r = 0; r < B; ++r) dst[rb + r] = acc[r];
          }
          if (rb < rows) {
            T acc[B] = {};
            const size_type len = rows - rb;
            for (size_type p = p0; p < p1; ++p) {
              const T x = values(p);
              const T* __restrict__ src = &in(rb, entries(p));
              for (size_type r = 0; r < len; ++r) acc[r] += x * src[r];
            }
            for (size_type r = 0; r < len; ++r) dst[rb + r] = acc[r];
          }
        });
  } else {
    Kokkos::parallel_for(
        "knmf::spmm_gather", TeamPolicy(space, int(m), team_size_for(int(rows))),
        KOKKOS_LAMBDA(const Member& team) {
          const size_type a = team.league_rank();
          const size_type p0 = row_map(a), p1 = row_map(a + 1);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](const size_type r) {
            T acc = T(0);
            for (size_type p = p0; p < p1; ++p) acc += values(p) * in(r, entries(p));
            out(r, a) = acc;
          });
        });
  }
}

/// P = H X^T for sparse X: gather over the rows of X.
template <class T>
void x_times_ht(const ExecSpace& space, const CsrMatrix<T>& X, const Matrix<T>& H,
                const Matrix<T>& P) {
  spmm_gather(space, X.x(), H, P);
}

/// Q = W X for sparse X: gather over the rows of X^T (the CSC copy).
template <class T>
void wt_times_x(const ExecSpace& space, const CsrMatrix<T>& X, const Matrix<T>& W,
                const Matrix<T>& Q) {
  spmm_gather(space, X.xt(), W, Q);
}

}  // namespace knmf::detail
