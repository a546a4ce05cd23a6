#pragma once
/// \file
/// The two products with X that dominate an iteration, for each storage format of X:
///   P = H X^T   ((R k) x n)      and      Q = W X   ((R k) x g)
/// with H: (R k) x g and W: (R k) x n, all LayoutLeft (see kernels.hpp for the layout).
/// Dense X: two GEMMs through KokkosBlas. Sparse X: gathers over the rows of X (for P) and of
/// X^T (for Q), each output column summing its row's entries in stored order (no atomics,
/// so every product is reproducible and a slot's rows never depend on the other slots).

#include "knmf/core/compat.hpp"
#include "knmf/core/kernel_set.hpp"
#include "knmf/matrix/csr_matrix.hpp"
#include "knmf/matrix/dense_matrix.hpp"
#include "knmf/matrix/streamed_matrix.hpp"
#include "host_kernels.hpp"
#include "kernels.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>
#include <KokkosBlas3_gemm.hpp>

namespace knmf::detail {

/// Host BLAS in double: OpenBLAS' dgemm runs the two products 1.2-2x faster when the long
/// dimension (n, or g) is the output's leading one, i.e. computing P^T and Q^T (measured on
/// this project's machine, perf/RESULTS.md section 1); in single precision, and with cuBLAS,
/// the direct forms are as fast. So for double on the host both products are formed
/// transposed in a scratch buffer (P^T in row blocks of n, so the extra memory stays small)
/// and transposed into place.
template <class T>
inline constexpr bool transposed_host_gemm = host_tuned_kernels && std::is_same_v<T, double>;

/// Rows of X per block of P^T (the scratch holds block x Rk values).
inline constexpr size_type pt_block_rows = 8192;

/// Values of host scratch the dense products take per stacked factor row (R k rows in a
/// batch): max(min(n, pt_block_rows), g) where both products are formed transposed (double on
/// the host), 0 otherwise. For the memory model (slot_batch_bytes).
inline std::int64_t product_scratch_values(std::int64_t n, std::int64_t g, int bytes_per_value) {
  if (!transposed_host_gemm<double> || bytes_per_value != int(sizeof(double))) return 0;
  return std::max(std::min(n, std::int64_t(pt_block_rows)), g);
}

/// A per-thread host scratch buffer of at least `count` values (reused across calls).
template <class T>
T* host_scratch(size_type count) {
  static thread_local std::vector<T> buffer;
  if (buffer.size() < size_t(count)) buffer.resize(size_t(count));
  return buffer.data();
}

/// The partial sums of the portable gather's long-row segments (gather_long_rows), owned by
/// whoever repeats the products (a SlotBatch, the beta passes' BetaWork, an NNDSVD): grown on
/// the first product that needs more, then reused, so that an iteration allocates nothing
/// (an allocation is a cudaMalloc/cudaFree on a GPU, and the free synchronizes the device).
/// At most (R k) x max_gather_segments(nnz) values: what the memory plan counts per slot
/// (knmf/solver/nmf.hpp, solver_bytes). Stream-ordered reuse: every product runs on one
/// execution space instance.
template <class T>
struct GatherScratch {
  Matrix<T> partials;
  /// A rows x segments block of the buffer (growing it first when it is smaller).
  Matrix<T> reserve(const ExecSpace& space, size_type rows, size_type segments) {
    const size_type r0 = size_type(partials.extent(0)), s0 = size_type(partials.extent(1));
    if (r0 < rows || s0 < segments)
      partials = Matrix<T>(Kokkos::view_alloc(space, Kokkos::WithoutInitializing,
                                              "knmf::spmm_gather::partials"),
                           std::max(r0, rows), std::max(s0, segments));
    return Kokkos::subview(partials, std::make_pair(size_type(0), rows),
                           std::make_pair(size_type(0), segments));
  }
};

/// P = H X^T: one GEMM (no long rows: `scratch` unused), H (Rk x g) times X^T (g x n).
template <class T>
void x_times_ht(const ExecSpace& space, const DenseMatrix<T>& X, const Matrix<T>& H,
                const Matrix<T>& P, GatherScratch<T>&) {
  if (X.rows() == 0) return;
  if constexpr (transposed_host_gemm<T>) {
    const size_type n = X.rows(), rk = size_type(H.extent(0));
    const size_type B = n < pt_block_rows ? n : pt_block_rows;
    using Unmanaged = Kokkos::View<T**, Kokkos::LayoutLeft, MemSpace,
                                   Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
    Unmanaged S(host_scratch<T>(B * rk), B, rk);
    for (size_type r0 = 0; r0 < n; r0 += B) {
      const size_type r1 = r0 + B < n ? r0 + B : n;
      const auto xb = Kokkos::subview(X.xt(), Kokkos::ALL, std::make_pair(r0, r1));
      const auto Sb = Kokkos::subview(S, std::make_pair(size_type(0), r1 - r0), Kokkos::ALL);
      KokkosBlas::gemm(space, "T", "T", T(1), xb, H, T(0), Sb);
      Kokkos::parallel_for(
          "knmf::products::transpose_P", Policy64(space, r0, r1), [=](const size_type i) {
            for (size_type c = 0; c < rk; ++c) P(c, i) = S(i - r0, c);
          });
    }
    space.fence();  // S is reused by the next call
  } else {
    KokkosBlas::gemm(space, "N", "N", T(1), H, X.xt(), T(0), P);
  }
}

/// Q = W X: one GEMM, W (Rk x n) times X (n x g) = (X^T)^T.
template <class T>
void wt_times_x(const ExecSpace& space, const DenseMatrix<T>& X, const Matrix<T>& W,
                const Matrix<T>& Q, GatherScratch<T>&) {
  if (X.rows() == 0) {  // an empty row block (MPI): BLAS may leave C untouched when K = 0
    Kokkos::deep_copy(space, Q, T(0));
    return;
  }
  if constexpr (transposed_host_gemm<T>) {
    const size_type g = size_type(Q.extent(1)), rk = size_type(Q.extent(0));
    Kokkos::View<T**, Kokkos::LayoutLeft, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> Qt(
        host_scratch<T>(g * rk), g, rk);
    KokkosBlas::gemm(space, "N", "T", T(1), X.xt(), W, T(0), Qt);
    Kokkos::parallel_for(
        "knmf::products::transpose_Q", Policy64(space, 0, g), [=](const size_type j) {
          for (size_type c = 0; c < rk; ++c) Q(c, j) = Qt(j, c);
        });
    space.fence();
  } else {
    KokkosBlas::gemm(space, "N", "T", T(1), W, X.xt(), T(0), Q);
  }
}

/// The long rows of spmm_gather's portable path (see there): the segments' partial sums
/// ((rows of out) x segments, in `scratch`), then each long row's sum of them in segment order.
template <class T, class RowMap, class Entries, class Values>
void gather_long_rows(const ExecSpace& space, const RowMap& row_map, size_type base,
                      const Entries& entries, const Values& values, const Matrix<T>& in,
                      const Matrix<T>& out, bool accumulate, const GatherSegments& segments,
                      GatherScratch<T>& scratch) {
  constexpr size_type S = gather_segment_entries;
  const size_type rows = out.extent(0);
  const Matrix<T> part = scratch.reserve(space, rows, segments.count());
  const auto long_row = segments.rows, first = segments.first, owner = segments.owner;
  Kokkos::parallel_for(
      "knmf::spmm_gather::segments",
      TeamPolicy(space, int(segments.count()), team_size_for(int(rows))),
      KOKKOS_LAMBDA(const Member& team) {
        const size_type s = team.league_rank();
        const size_type i = owner(s), a = long_row(i);
        const size_type p0 = row_map(a) - base + (s - first(i)) * S;
        const size_type end = row_map(a + 1) - base, p1 = p0 + S < end ? p0 + S : end;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](const size_type r) {
          T acc = T(0);
          for (size_type p = p0; p < p1; ++p) acc += values(p) * in(r, entries(p));
          part(r, s) = acc;
        });
      });
  Kokkos::parallel_for(
      "knmf::spmm_gather::sum_segments",
      TeamPolicy(space, int(segments.long_rows()), team_size_for(int(rows))),
      KOKKOS_LAMBDA(const Member& team) {
        const size_type i = team.league_rank(), a = long_row(i);
        const size_type s0 = first(i), s1 = first(i + 1);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](const size_type r) {
          T acc = accumulate ? out(r, a) : T(0);
          for (size_type s = s0; s < s1; ++s) acc += part(r, s);
          out(r, a) = acc;
        });
      });
}

/// Bytes of the gathered factor that a host gather keeps in cache while every output column
/// passes over them: a slab of its rows (gather_slab_rows) or, for Q = W X in cell blocks, a
/// group of cell blocks (wt_times_x). A fixed figure, about half a core's L2 here, not the
/// detected cache: each output value is the same sum in the same order whatever the slabs.
inline constexpr size_type gather_block_bytes = size_type(1) << 20;

/// Rows per slab of a host gather from `in` (rows x cols values of T): all of them when they
/// fit gather_block_bytes, else whole 64-byte vectors of rows that fit (at least one vector).
template <class T>
size_type gather_slab_rows(size_type cols, size_type rows) {
  const size_type row_bytes = std::max<size_type>(cols, 1) * size_type(sizeof(T));
  if (rows * row_bytes <= gather_block_bytes) return std::max<size_type>(rows, 1);
  constexpr size_type vec = 64 / size_type(sizeof(T));
  return std::max<size_type>(vec, gather_block_bytes / row_bytes / vec * vec);
}

/// One pass of a host gather: output columns [0, m) in dynamically scheduled chunks of
/// `chunk` (rows of X vary in length), rows [r0, r0 + nr) of `in` and `out`; column a sums the
/// entries [begin[a] - base, end[a] - base) (host_kernels.hpp, host_gather_ranges).
template <class T>
void host_gather_pass(const ExecSpace& space, const char* label, size_type m, size_type chunk,
                      const size_type* begin, const size_type* end, size_type base,
                      const ordinal_type* entries, const T* values, const T* in, size_type ld_in,
                      T* out, size_type ld_out, size_type r0, size_type nr, bool accumulate) {
  Kokkos::parallel_for(
      label,
      Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>,
                          Kokkos::IndexType<size_type>>(space, 0, (m + chunk - 1) / chunk),
      [=](const size_type c) {
        const size_type a0 = c * chunk, a1 = a0 + chunk < m ? a0 + chunk : m;
        host_gather_ranges(begin, end, base, entries, values, a0, a1, in + r0, ld_in, out + r0,
                           ld_out, nr, accumulate);
      });
}

/// out(:, a) = [out(:, a) +] sum over row a of A of A(a, b) * in(:, b), for the first
/// out.extent(1) rows of a CSR matrix given by raw views: row_map holds 64-bit offsets that
/// index entries/values after subtracting `base` (a streamed block keeps the global offsets of
/// X, which may pass 2^32, while its arrays hold only the block). With `accumulate` the sum
/// continues from out's value, term by term, so a product split into row blocks of X yields
/// exactly the in-core sums (on the portable path: while no row of a block is long, below).
///
/// Portable path: one team per row of A, its threads over the rows of `in`/`out`. A row with
/// more than gather_segment_entries entries (`segments`, built with the row offsets) is left
/// to gather_long_rows: one team per segment of gather_segment_entries entries, each summing
/// from zero into a partial, then out(:, a) = [out(:, a) +] partial_0 + partial_1 + ... in
/// segment order. Every sum keeps a fixed order (no atomics): reproducible run to run.
/// `in_cols`: how many columns of `in` the entries reach (0: all of them), for the host path's
/// row slabs (gather_slab_rows).
template <class T, class RowMap, class Entries, class Values>
void spmm_gather(const ExecSpace& space, const RowMap& row_map, size_type base,
                 const Entries& entries, const Values& values, const Matrix<T>& in,
                 const Matrix<T>& out, bool accumulate, const GatherSegments& segments,
                 GatherScratch<T>& scratch, size_type in_cols = 0) {
  const size_type rows = out.extent(0);
  const size_type m = out.extent(1);
  if constexpr (host_tuned_kernels) {
    // chunks of output columns, dynamically scheduled (rows of X vary in length); the inner
    // loops are vectorized for the CPU at hand and walk the rows of `in` in blocks, all the
    // chunk's columns per block (host_kernels.cpp); 64 columns measured 2-3% faster
    // than 16 on cNMF's pbmcA run.
    (void)segments;
    (void)scratch;
    // In row slabs of `in` of at most gather_block_bytes (gather_slab_rows), each slab a pass
    // over all the output columns, so that the slab stays in cache across them.
    const size_type slab = gather_slab_rows<T>(in_cols > 0 ? in_cols : size_type(in.extent(1)), rows);
    for (size_type r0 = 0; r0 < rows; r0 += slab)
      host_gather_pass<T>(space, "knmf::spmm_gather", m, 64, row_map.data(), row_map.data() + 1,
                          base, entries.data(), values.data(), in.data(), size_type(in.stride(1)),
                          out.data(), size_type(out.stride(1)), r0, std::min(slab, rows - r0),
                          accumulate);
  } else {
    constexpr size_type S = gather_segment_entries;
    Kokkos::parallel_for(
        "knmf::spmm_gather", TeamPolicy(space, int(m), team_size_for(int(rows))),
        KOKKOS_LAMBDA(const Member& team) {
          const size_type a = team.league_rank();
          const size_type p0 = row_map(a) - base, p1 = row_map(a + 1) - base;
          if (p1 - p0 > S) return;  // a long row: by segments (gather_long_rows)
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](const size_type r) {
            T acc = accumulate ? out(r, a) : T(0);
            for (size_type p = p0; p < p1; ++p) acc += values(p) * in(r, entries(p));
            out(r, a) = acc;
          });
        });
    if (segments.count() > 0)
      gather_long_rows(space, row_map, base, entries, values, in, out, accumulate, segments,
                       scratch);
  }
}

template <class T, class Crs>
void spmm_gather(const ExecSpace& space, const Crs& A, const GatherSegments& segments,
                 const Matrix<T>& in, const Matrix<T>& out, GatherScratch<T>& scratch) {
  spmm_gather(space, A.graph.row_map, 0, A.graph.entries, A.values, in, out, false, segments,
              scratch);
}

/// P = H X^T for sparse X: gather over the rows of X.
template <class T>
void x_times_ht(const ExecSpace& space, const CsrMatrix<T>& X, const Matrix<T>& H,
                const Matrix<T>& P, GatherScratch<T>& scratch) {
  spmm_gather(space, X.x(), X.x_segments(), H, P, scratch);
}

/// Q = W X for sparse X: gather over the rows of X^T (the CSC copy). On the host, with more
/// than one block of cells, in cell blocks (CsrMatrix::xt_cell_blocks): for each block, every
/// gene's entries of that block, continuing its sum; the same sums in the same order as one
/// pass, but W is read from memory once instead of once per gene that touches a cell (a
/// gather over a W of 1M cells x 80 values: 1.68 s per product, perf/studies/roofline.md).
template <class T>
void wt_times_x(const ExecSpace& space, const CsrMatrix<T>& X, const Matrix<T>& W,
                const Matrix<T>& Q, GatherScratch<T>& scratch) {
  if constexpr (host_tuned_kernels) {
    const auto& table = X.xt_cell_blocks();
    if (table.extent(0) > 0) {
      const size_type g = X.cols(), rows = Q.extent(0);
      const size_type blocks = size_type(table.extent(0)) / g - 1;
      // row slabs of W whose cell block fits gather_block_bytes, then groups of blocks
      const size_type slab = gather_slab_rows<T>(gather_cell_block, rows);
      const auto& xt = X.xt();
      const size_type* offsets = table.data();
      for (size_type r0 = 0; r0 < rows; r0 += slab) {
        const size_type nr = std::min(slab, rows - r0);
        const size_type per_block = gather_cell_block * nr * size_type(sizeof(T));
        const size_type group = std::max<size_type>(1, gather_block_bytes / per_block);
        for (size_type b0 = 0; b0 < blocks; b0 += group)  // 16 genes per task: enough tasks
          host_gather_pass<T>(space, "knmf::spmm_gather_blocked", g, 16, offsets + b0 * g,
                              offsets + std::min(blocks, b0 + group) * g, 0,
                              xt.graph.entries.data(), xt.values.data(), W.data(),
                              size_type(W.stride(1)), Q.data(), size_type(Q.stride(1)), r0, nr,
                              b0 > 0);
      }
      return;
    }
  }
  spmm_gather(space, X.xt(), X.xt_segments(), W, Q, scratch);
}

/// P = H X^T for a streamed X: one pass over the row blocks, each filling its columns of P.
template <class T>
void x_times_ht(const ExecSpace& space, const StreamedMatrix<T>& X, const Matrix<T>& H,
                const Matrix<T>& P, GatherScratch<T>& scratch) {
  X.for_each_block(space, false, [&](const StreamBlock<T>& b) {
    // a subview, not &P(0, r0): a View's operator() is host code, P lives on the device
    const Matrix<T> Pb(Kokkos::subview(P, Kokkos::ALL, std::make_pair(b.r0, b.r1)));
    if (!X.sparse())
      KokkosBlas::gemm(space, "N", "N", T(1), H, b.xt, T(0), Pb);
    else
      spmm_gather(space, b.row_map, b.base, b.entries, b.values, H, Pb, false, b.segments, scratch);
  });
}

/// Q = W X for a streamed X: one pass over the row blocks, accumulating into Q.
template <class T>
void wt_times_x(const ExecSpace& space, const StreamedMatrix<T>& X, const Matrix<T>& W,
                const Matrix<T>& Q, GatherScratch<T>& scratch) {
  bool first = true;
  X.for_each_block(space, X.sparse(), [&](const StreamBlock<T>& b) {
    if (!X.sparse()) {
      const Matrix<T> Wb(Kokkos::subview(W, Kokkos::ALL, std::make_pair(b.r0, b.r1)));
      KokkosBlas::gemm(space, "N", "T", T(1), Wb, b.xt, first ? T(0) : T(1), Q);
    } else {
      // CSC of the block: rows of X^T are genes, entries are global cell indices into W.
      spmm_gather(space, b.row_map, b.base, b.entries, b.values, W, Q, !first, b.segments,
                  scratch, b.r1 - b.r0);  // the block's cells: its slab of W
    }
    first = false;
  });
}

}  // namespace knmf::detail
