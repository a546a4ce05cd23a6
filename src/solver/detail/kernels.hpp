#pragma once
/// \file
/// Device kernels of the batched solver (internal).
///
/// Layout: a batch of R replicates ("slots") with k components each stores both factors
/// transposed and stacked, as LayoutLeft matrices with R*k rows:
///   W: (R*k) x n  -- column i holds every slot's k usages of cell i
///   H: (R*k) x g  -- column j holds every slot's k spectra values of gene j
/// Slot r owns rows [r*k, (r+1)*k). The two products with X are single GEMMs
/// (P = H X^T, Q = W X), and the W- and H-updates are the same kernels applied to
/// (W, P, H H^T) and (H, Q, W^T W): the solver is symmetric in the two factors.
///
/// Per-slot reductions (Grams, violations, inner products) are chunked over columns with a
/// fixed chunk length and summed in chunk order, so a slot's numbers never depend on the
/// other slots of its batch nor on the thread count.

#include <Kokkos_Core.hpp>

#include <type_traits>
#include <vector>

#include "knmf/core/host_access.hpp"
#include "knmf/core/kernel_set.hpp"
#include "knmf/core/compat.hpp"
#include "knmf/core/error.hpp"
#include "knmf/core/types.hpp"
#include "knmf/solver/options.hpp"
#include "cd_step.hpp"
#include "host_kernels.hpp"
#include "mu_value.hpp"

namespace knmf::detail {

using TeamPolicy = Kokkos::TeamPolicy<ExecSpace>;
using Member = TeamPolicy::member_type;
using ScratchDoubles =
    Kokkos::View<double*, ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using Policy64 = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<size_type>>;

/// Per-slot k x k matrices in double: G(r, s, t).
using SlotGram = Kokkos::View<double***, Kokkos::LayoutRight, MemSpace>;
/// Per-slot flags (1 = active).
using SlotMask = Kokkos::View<int*, MemSpace>;


/// Columns per chunk of the per-slot reductions.
inline constexpr size_type slot_chunk = 1024;

/// Threads per team of the portable team kernels: a multiple of 32 (a warp) covering
/// `work_per_team` items in as few passes as 256 threads would, with the fewest threads that
/// do (R·k = 160 rows: 160 threads in one pass, not 256 with 96 idle; 800 rows: 4 passes of
/// 224, not of 256 with the last one 3/4 idle). A host backend caps it at its thread pool
/// (Kokkos' team size limit there); the host-tuned kernels use one thread per team.
/// `most`: the largest team (a multiple of 32) the kernel's registers allow.
inline int team_size_for(int work_per_team, int most = 256) {
  if constexpr (host_tuned_kernels) {
    (void)work_per_team;
    (void)most;
    return 1;
  } else {
    const int work = work_per_team < 1 ? 1 : work_per_team;
    const int passes = (work + most - 1) / most;
    const int per_pass = (work + passes - 1) / passes;
    int t = 32 * ((per_pass + 31) / 32);
    if constexpr (host_backend) {
      const int pool = ExecSpace().concurrency();
      if (t > pool) t = pool;
    }
    return t;
  }
}

inline size_type num_chunks(size_type m) { return (m + slot_chunk - 1) / slot_chunk; }

/// Host: body(r, c, j0, j1) for every (column chunk c, slot r) of a factor with m columns, one
/// task each; the slot-level host loops (host_kernels.cpp) run inside.
template <class Schedule, class Body>
void host_slot_chunks(const ExecSpace& space, const char* label, size_type m, int R,
                      const Body& body) {
  Kokkos::parallel_for(
      label,
      Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Schedule>, Kokkos::IndexType<std::int64_t>>(
          space, 0, std::int64_t(num_chunks(m)) * R),  // chunks x slots: 64-bit (issue 15, item 8)
      [=](const std::int64_t e) {
        const int r = int(e % R);
        const size_type c = size_type(e / R);
        const size_type j0 = c * slot_chunk, j1 = (j0 + slot_chunk < m) ? j0 + slot_chunk : m;
        body(r, c, j0, j1);
      });
}

/// Team scratch (bytes) a portable kernel asks for per team: under the 48 KiB a CUDA block
/// gets without opting in to more, with room to spare for Kokkos' own use.
inline constexpr size_t team_scratch_budget = 40 * 1024;

template <class T>
using ScratchValues =
    Kokkos::View<T*, ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

/// Pair index p of the upper triangle of a k x k matrix (row-major, s <= t) -> (s, t).
KOKKOS_INLINE_FUNCTION void gram_pair(int p, int k, int& s, int& t) {
  s = 0;
  while (p >= k - s) {
    p -= k - s;
    ++s;
  }
  t = s + p;
}

/// A portable per-slot chunked team's share (slot_chunk_teams): league rank c R + r is slot
/// r's column chunk c, columns [j0, j1) of its rows [row0, row0 + k); its partial sums go to
/// index c R + r of the kernel's partials.
struct SlotChunk {
  int r, row0;
  size_type c, j0, j1;
  KOKKOS_INLINE_FUNCTION SlotChunk(int league_rank, int R, int k, size_type m)
      : r(league_rank % R), row0((league_rank % R) * k), c(size_type(league_rank / R)) {
    j0 = c * slot_chunk;
    j1 = (j0 + slot_chunk < m) ? j0 + slot_chunk : m;
  }
  KOKKOS_INLINE_FUNCTION size_type index(int R) const { return c * R + r; }
};

/// The team policy of a per-slot chunked kernel over m columns: one team per (column chunk,
/// slot), num_chunks(m) * R of them, of `team_size` threads with `lanes` vector lanes each.
inline TeamPolicy slot_chunk_policy(const ExecSpace& space, size_type m, int R, int team_size,
                                    int lanes = 1) {
  return TeamPolicy(space, int(num_chunks(m) * R), team_size, lanes);
}

/// The portable per-slot chunked kernels: body(team, chunk) for every team of `policy`
/// (slot_chunk_policy: league rank c R + r is slot r's column chunk c, SlotChunk).
template <class Body>
void slot_chunk_teams(const char* label, const TeamPolicy& policy, int R, int k, size_type m,
                      const Body& body) {
  Kokkos::parallel_for(
      label, policy, KOKKOS_LAMBDA(const Member& team) {
        body(team, SlotChunk(team.league_rank(), R, k, m));
      });
}

/// A per-slot chunked team reduction: partial(c R + r) = reduce(team, chunk), the team's sum
/// over slot r's chunk c (every thread of the team returns it), for the slots in `mask`; 0 for
/// the others (reduce is not called there).
template <class Reduce>
void slot_chunk_reduce(const char* label, const TeamPolicy& policy, int R, int k, size_type m,
                       const SlotMask& mask, const Kokkos::View<double*, MemSpace>& partial,
                       const Reduce& reduce) {
  slot_chunk_teams(
      label, policy, R, k, m, KOKKOS_LAMBDA(const Member& team, const SlotChunk& sc) {
        const double sum = mask(sc.r) ? reduce(team, sc) : 0.0;
        Kokkos::single(Kokkos::PerTeam(team), [&]() { partial(sc.index(R)) = sum; });
      });
}

/// partial(c R + r) = sum over slot r's values of chunk c of term(row, j), rows
/// [r k, (r + 1) k) and columns [j0, j1), in (column, row) order: one (row, column) pair per
/// thread, so consecutive threads read consecutive rows of a LayoutLeft column (coalesced),
/// not one column each at a stride of R k values. 0 for the slots not in `mask`.
template <class Term>
void slot_chunk_sum(const ExecSpace& space, const char* label, int R, int k, size_type m,
                    const SlotMask& mask, const Kokkos::View<double*, MemSpace>& partial,
                    const Term& term) {
  slot_chunk_reduce(
      label, slot_chunk_policy(space, m, R, team_size_for(int(slot_chunk))), R, k, m, mask,
      partial, KOKKOS_LAMBDA(const Member& team, const SlotChunk& sc) {
        double sum = 0.0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, size_type(k) * (sc.j1 - sc.j0)),
            [&](const size_type e, double& acc) {
              acc += term(sc.row0 + int(e % k), sc.j0 + e / k);
            },
            sum);
        return sum;
      });
}

/// Columns of a slot's k rows that the portable Gram kernel stages in team scratch per step
/// (0: the pair sums alone do not fit; the kernel then reads F from global memory).
template <class T>
int gram_tile_columns(int k) {
  const size_t pairs = ScratchValues<double>::shmem_size(size_t(k) * (k + 1) / 2);
  const size_t per_column = size_t(k) * sizeof(T);
  if (pairs + ScratchValues<T>::shmem_size(size_t(k)) > team_scratch_budget) return 0;
  const size_t cols = (team_scratch_budget - pairs - 64) / per_column;  // 64: alignment slack
  return int(cols < 256 ? cols : 256);
}

/// Portable kernel of slot_gram: one team per (column chunk, slot), one thread per pair (s, t).
/// The slot's k rows are staged through team scratch a tile of columns at a time (consecutive
/// threads load consecutive rows of a column: coalesced over the LayoutLeft factor), and each
/// pair's sum runs over the columns in order, in double, as the host kernel's does.
template <class T>
void slot_gram_chunks(const ExecSpace& space, const Matrix<T>& F, int R, int k,
                      const SlotMask& active, const Kokkos::View<double*, MemSpace>& partial) {
  const size_type m = F.extent(1);
  const int npairs = k * (k + 1) / 2;
  const int tile = gram_tile_columns<T>(k);
  TeamPolicy policy = slot_chunk_policy(space, m, R, team_size_for(npairs));
  if (tile > 0)
    policy.set_scratch_size(0, Kokkos::PerTeam(ScratchValues<double>::shmem_size(size_t(npairs)) +
                                               ScratchValues<T>::shmem_size(size_t(k) * tile)));
  slot_chunk_teams(
      "knmf::gram::chunks", policy, R, k, m, KOKKOS_LAMBDA(const Member& team, const SlotChunk& sc) {
        if (!active(sc.r)) return;
        double* const out = &partial(sc.index(R) * size_type(k) * size_type(k));
        const size_type j0 = sc.j0, j1 = sc.j1;
        const int row0 = sc.row0;
        if (tile == 0) {  // large k: straight from global memory
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, npairs), [&](const int p) {
            int s, t;
            gram_pair(p, k, s, t);
            double a = 0.0;
            for (size_type j = j0; j < j1; ++j) a += double(F(row0 + s, j)) * double(F(row0 + t, j));
            out[s * k + t] = a;
            out[t * k + s] = a;
          });
          return;
        }
        ScratchValues<double> acc(team.team_scratch(0), size_t(npairs));
        ScratchValues<T> rows(team.team_scratch(0), size_t(k) * tile);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, npairs), [&](const int p) { acc(p) = 0.0; });
        for (size_type jt = j0; jt < j1; jt += tile) {
          const int nt = int(jt + tile < j1 ? tile : j1 - jt);
          team.team_barrier();  // the previous tile is consumed
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, k * nt), [&](const int e) {
            rows(e) = F(row0 + e % k, jt + e / k);
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, npairs), [&](const int p) {
            int s, t;
            gram_pair(p, k, s, t);
            double a = acc(p);
            for (int q = 0; q < nt; ++q) a += double(rows(s + k * q)) * double(rows(t + k * q));
            acc(p) = a;
          });
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, npairs), [&](const int p) {
          int s, t;
          gram_pair(p, k, s, t);
          out[s * k + t] = acc(p);
          out[t * k + s] = acc(p);
        });
      });
}

/// k from which the portable Gram holds its pair sums in registers, a 4 x 4 block of pairs
/// per thread (slot_gram_blocks), instead of one pair per thread with the sums in team
/// scratch: at k = 64 the k (k + 1) / 2 = 2,080 pair sums take 16 KiB of the 40 KiB budget and
/// leave tiles of 47 columns (fp64), 1 column near k = 100 and none from k = 101, where the
/// kernel then read F from global memory for each pair.
inline constexpr int gram_blocks_from_k = 64;
/// Rows (and columns) of a block of pairs in slot_gram_blocks.
inline constexpr int gram_block = 4;

/// Columns of a slot's k rows that slot_gram_blocks stages in team scratch per step: on a GPU
/// at most 64 in the 40 KiB budget; on a host backend (a team of as many threads as the pool,
/// so many passes over the blocks) the whole 1,024-column chunk where it takes at most 4 MiB,
/// so that it is loaded once and every pass reads it from cache.
template <class T>
int gram_block_tile_columns(int k) {
  const size_t per_column = size_t(k) * sizeof(T);
  if constexpr (host_backend)
    if (per_column * slot_chunk <= (size_t(4) << 20)) return int(slot_chunk);
  const size_t cols = (team_scratch_budget - 64) / per_column;  // 64: alignment slack
  return int(cols < 64 ? cols : 64);
}

/// Portable kernel of slot_gram from k = gram_blocks_from_k: one team per (column chunk, slot),
/// one thread per 4 x 4 block (s-block <= t-block) of the k x k pairs, its 16 sums in
/// registers (double). The slot's k rows are staged through team scratch a tile of columns at
/// a time as in slot_gram_chunks (coalesced loads, each value read from global memory once per
/// pass); per column a thread reads 4 + 4 values of scratch for 16 multiply-adds, where a
/// thread per pair reads 2 for 1. A team with fewer threads than blocks (a host backend, or k
/// past 124: 528 blocks) takes them in passes, each streaming the chunk again unless it fits
/// one tile (a host backend's 1,024-column tile: loaded once); k past 5,112
/// in fp64, past 10,224 in fp32: no column of k values fits the budget) is left to
/// slot_gram_chunks. Each pair's sum
/// runs over the columns in order, in double, from zero: bitwise the sums of
/// slot_gram_chunks (a product of two values is the same either way round).
template <class T>
void slot_gram_blocks(const ExecSpace& space, const Matrix<T>& F, int R, int k,
                      const SlotMask& active, const Kokkos::View<double*, MemSpace>& partial) {
  constexpr int B = gram_block;
  const size_type m = F.extent(1);
  const int nb = (k + B - 1) / B;
  const int nblocks = nb * (nb + 1) / 2;
  const int tile = gram_block_tile_columns<T>(k);
  // up to 512 threads: a thread holds 16 sums and 8 operands (about 64 registers)
  TeamPolicy policy = slot_chunk_policy(space, m, R, team_size_for(nblocks, 512));
  policy.set_scratch_size(0, Kokkos::PerTeam(ScratchValues<T>::shmem_size(size_t(k) * tile)));
  slot_chunk_teams(
      "knmf::gram::blocks", policy, R, k, m, KOKKOS_LAMBDA(const Member& team, const SlotChunk& sc) {
        if (!active(sc.r)) return;
        double* const out = &partial(sc.index(R) * size_type(k) * size_type(k));
        const size_type j0 = sc.j0, j1 = sc.j1;
        const int row0 = sc.row0;
        ScratchValues<T> rows(team.team_scratch(0), size_t(k) * tile);
        const bool one_tile = j1 - j0 <= size_type(tile);  // loaded once for every pass
        for (int pass = 0; pass < nblocks; pass += team.team_size()) {
          const int id = pass + team.team_rank();
          int sb = 0, tb = 0;
          if (id < nblocks) gram_pair(id, nb, sb, tb);
          const int s0 = sb * B, t0 = tb * B;
          double acc[B][B];
          for (int u = 0; u < B; ++u)
            for (int v = 0; v < B; ++v) acc[u][v] = 0.0;
          for (size_type jt = j0; jt < j1; jt += tile) {
            const int nt = int(jt + tile < j1 ? tile : j1 - jt);
            if (pass == 0 || !one_tile) {
              team.team_barrier();  // the previous tile is consumed
              Kokkos::parallel_for(Kokkos::TeamThreadRange(team, k * nt), [&](const int e) {
                rows(e) = F(row0 + e % k, jt + e / k);
              });
              team.team_barrier();
            }
            if (id >= nblocks) continue;
            for (int q = 0; q < nt; ++q) {
              double a[B], b[B];
              for (int u = 0; u < B; ++u) {
                a[u] = s0 + u < k ? double(rows(s0 + u + k * q)) : 0.0;
                b[u] = t0 + u < k ? double(rows(t0 + u + k * q)) : 0.0;
              }
              for (int u = 0; u < B; ++u)
                for (int v = 0; v < B; ++v) acc[u][v] += a[u] * b[v];
            }
          }
          if (id >= nblocks) continue;
          for (int u = 0; u < B; ++u)
            for (int v = 0; v < B; ++v) {
              const int s = s0 + u, t = t0 + v;
              if (s < k && t < k && s <= t) {
                out[s * k + t] = acc[u][v];
                out[t * k + s] = acc[u][v];
              }
            }
        }
      });
}

/// G(r) = F_r F_r^T for every active slot r (F: (R*k) x m), accumulated in double; the
/// other slots' G is set to zero.
/// `partial` must hold num_chunks(m) * R * k * k doubles.
template <class T>
void slot_gram(const ExecSpace& space, const Matrix<T>& F, int R, int k, const SlotMask& active,
               const Kokkos::View<double*, MemSpace>& partial, const SlotGram& G) {
  const size_type m = F.extent(1);
  const size_type nch = num_chunks(m);
  const int kk = k * k;
  if (m == 0) {
    Kokkos::deep_copy(space, G, 0.0);
    return;
  }
  if constexpr (host_tuned_kernels) {
    const size_type ld = size_type(F.stride(1));
    const T* f = F.data();
    double* part = partial.data();
    host_slot_chunks<Kokkos::Static>(
        space, "knmf::gram::chunks", m, R, [=](int r, size_type c, size_type j0, size_type j1) {
          if (active(r)) host_slot_gram(k, f, ld, r * k, j0, j1, part + size_type(c * R + r) * kk);
        });
  } else if (k >= gram_blocks_from_k && gram_block_tile_columns<T>(k) >= 1) {
    slot_gram_blocks(space, F, R, k, active, partial);
  } else {
    slot_gram_chunks(space, F, R, k, active, partial);
  }
  Kokkos::parallel_for(
      "knmf::gram::sum", Kokkos::RangePolicy<ExecSpace>(space, 0, R * kk),
      KOKKOS_LAMBDA(const int e) {
        const int r = e / kk, p = e % kk;
        if (!active(r)) {  // zero, so that sums over row blocks stay clean
          G(r, p / k, p % k) = 0.0;
          return;
        }
        double a = 0.0;
        for (size_type c = 0; c < nch; ++c) a += partial(size_type(c * R + r) * kk + p);
        G(r, p / k, p % k) = a;
      });
}

/// Multiplicative update of one factor (scikit-learn's Frobenius MU), written to `out`:
///   out = F * Num / (F G + l1 + l2 F), with the zero guard applied to the denominator.
/// F, Num, out: (R*k) x m; G: the other factor's per-slot Gram. Inactive slots are skipped.
template <class T>
void mu_update(const ExecSpace& space, const Matrix<T>& F, const Matrix<T>& Num,
               const SlotGram& G, int k, const SlotMask& active, double l1, double l2,
               bool add_eps, double eps, const Matrix<T>& out) {
  const size_type rows = F.extent(0);
  const size_type total = rows * size_type(F.extent(1));
  if constexpr (host_tuned_kernels) {
    // per (chunk, slot): the host loop (host_kernels.cpp), the same values in vector lanes
    KNMF_ASSERT(Num.stride(1) == F.stride(1) && out.stride(1) == F.stride(1));
    const size_type ld = size_type(F.stride(1));
    host_slot_chunks<Kokkos::Static>(
        space, "knmf::mu::update", F.extent(1), int(rows / k),
        [=](int r, size_type, size_type j0, size_type j1) {
          if (active(r))
            host_mu_update(&G(r, 0, 0), k, F.data(), Num.data(), out.data(), ld,
                           size_type(r) * k, j0, j1, l1, l2, add_eps, eps);
        });
    return;
  }
  Kokkos::parallel_for(
      "knmf::mu::update", Policy64(space, 0, total), KOKKOS_LAMBDA(const size_type e) {
        const size_type i = e / rows;
        const int row = int(e % rows);
        const int r = row / k, t = row % k;
        if (!active(r)) return;
        const int row0 = r * k;
        double den = 0.0;
        for (int s = 0; s < k; ++s) den += double(F(row0 + s, i)) * G(r, s, t);
        out(row, i) = mu_value(den, F(row, i), Num(row, i), l1, l2, add_eps, eps);
      });
}

/// The k from which the portable CD sweep gives each column a vector of lanes (cd_update).
inline constexpr int cd_lanes_from_k = 32;
/// Lanes per column there: a warp on a GPU; one on a host backend, where the sweep then sums
/// in the order of the thread-per-column sweep (the same numbers).
inline constexpr int cd_lanes = host_backend ? 1 : 32;

/// Coordinate-descent sweep over one factor, in place (scikit-learn's _update_cdnmf_fast
/// with permutation 0..k-1): for t in order, every column i updates F(t, i) from
/// grad = (G + l2 I)(t,:) F(:, i) - (Num(t, i) - l1). Adds the projected-gradient violation
/// of each slot into viol_partial(chunk * R + r).
template <class T>
void cd_update(const ExecSpace& space, const Matrix<T>& F, const Matrix<T>& Num,
               const SlotGram& G, int R, int k, const SlotMask& active, double l1, double l2,
               const Kokkos::View<double*, MemSpace>& viol_partial) {
  const size_type m = F.extent(1);
  if (m == 0) return;
  if constexpr (host_tuned_kernels) {
    // per (chunk, slot): the host sweep (host_kernels.cpp), G + l2 I formed once per slot
    std::vector<double> Gl(size_t(R) * k * k);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < k; ++t)
        for (int s2 = 0; s2 < k; ++s2)
          Gl[size_t((r * k + t) * k + s2)] = G(r, t, s2) + (s2 == t ? l2 : 0.0);
    const size_type ld = size_type(F.stride(1));
    T* f = F.data();
    const T* num = Num.data();
    const double* gl = Gl.data();
    host_slot_chunks<Kokkos::Dynamic>(
        space, "knmf::cd::update", m, R, [=](int r, size_type c, size_type j0, size_type j1) {
          viol_partial(c * R + r) =
              active(r) ? host_cd_sweep(gl + size_t(r) * k * k, l1, k, f, num, ld,
                                        size_type(r) * k, j0, j1)
                        : 0.0;
        });
    space.fence();  // Gl lives on this stack frame
    return;
  }
  // The slot's G + l2 I sits in team scratch (read k^2 times per column) when it fits.
  // One thread per column below cd_lanes_from_k; from there a vector of cd_lanes lanes per
  // column (a warp on CUDA), 16 columns of the chunk at a time per team: the lanes split each
  // coordinate's gradient, -(Num - l1) + sum_s G(t, s) F(s, i), summed by Kokkos' vector
  // reduction (a fixed shuffle tree), and one lane writes the new value, which the warp's
  // next reduction reads (Kokkos' single(PerThread) ends with a __syncwarp). A warp then reads
  // its column's k values contiguously and keeps one column in L1 instead of 32 (k = 100
  // fp64: 800 B instead of 25.6 KB a warp, which fell to L2 on an H200: an iteration at
  // k = 100 cost 13-16 GEMMs), and a coordinate takes about k / 32 + 5 steps instead of k.
  // With one lane the sum runs from -(Num - l1) over s in order: the thread sweep's numbers.
  const int kk = k * k;
  const bool gram_in_scratch = ScratchValues<double>::shmem_size(size_t(kk)) <= team_scratch_budget;
  const int lanes = k >= cd_lanes_from_k ? cd_lanes : 1;
  const int columns = lanes == 1 || host_backend ? team_size_for(int(slot_chunk)) : 16;
  TeamPolicy policy = slot_chunk_policy(space, m, R, columns, lanes);
  if (gram_in_scratch)
    policy.set_scratch_size(0, Kokkos::PerTeam(ScratchValues<double>::shmem_size(size_t(kk))));
  slot_chunk_reduce(
      "knmf::cd::update", policy, R, k, m, active, viol_partial,
      KOKKOS_LAMBDA(const Member& team, const SlotChunk& sc) {
        const int r = sc.r, row0 = sc.row0;
        ScratchValues<double> gl;
        if (gram_in_scratch) {
          gl = ScratchValues<double>(team.team_scratch(0), size_t(kk));
          Kokkos::parallel_for(Kokkos::TeamVectorRange(team, kk), [&](const int p) {
            gl(p) = G(r, p / k, p % k) + (p / k == p % k ? l2 : 0.0);
          });
          team.team_barrier();
        }
        double viol = 0.0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, sc.j0, sc.j1),
            [&](const size_type i, double& v) {
              for (int t = 0; t < k; ++t) {
                double grad = 0.0;
                Kokkos::parallel_reduce(
                    Kokkos::ThreadVectorRange(team, k + 1),
                    [&](const int q, double& a) {
                      if (q == 0) {
                        a += -cd_num_l1(Num(row0 + t, i), l1);
                      } else {
                        const int s = q - 1;
                        const double gts =
                            gram_in_scratch ? gl(t * k + s) : G(r, t, s) + (s == t ? l2 : 0.0);
                        a += gts * double(F(row0 + s, i));
                      }
                    },
                    grad);
                const double hess = gram_in_scratch ? gl(t * k + t) : G(r, t, t) + l2;
                const CdStep<double> step = cd_step(double(F(row0 + t, i)), grad, hess);
                v += step.violation;
                if (step.update)
                  Kokkos::single(Kokkos::PerThread(team),
                                 [&]() { F(row0 + t, i) = T(step.value); });
              }
            },
            viol);
        return viol;
      });
}

/// Per-slot inner products <A_r, B_r> over (R*k) x m operands, into partial(chunk * R + r).
template <class T>
void slot_dot(const ExecSpace& space, const Matrix<T>& A, const Matrix<T>& B, int R, int k,
              const SlotMask& active, const Kokkos::View<double*, MemSpace>& partial) {
  const size_type m = A.extent(1);
  if (m == 0) return;
  slot_chunk_sum(
      space, "knmf::slot_dot", R, k, m, active, partial,
      KOKKOS_LAMBDA(const int row, const size_type j) {
        return double(A(row, j)) * double(B(row, j));
      });
}

/// The accelerated MU's update step (rule_mu.hpp): for the slots in `mask`, dst <- src, and
/// partial(chunk * R + r) = sum |src - dst| over the slot's rows of the chunk (the change the
/// update made, before the copy); 0 for the other slots, whose dst is left as it is.
template <class T>
void slot_copy_change(const ExecSpace& space, const Matrix<T>& src, const Matrix<T>& dst, int R,
                      int k, const SlotMask& mask, const Kokkos::View<double*, MemSpace>& partial) {
  const size_type m = src.extent(1);
  if (m == 0) return;
  slot_chunk_sum(
      space, "knmf::mu::copy_change", R, k, m, mask, partial,
      KOKKOS_LAMBDA(const int row, const size_type j) {
        const T v = src(row, j);
        const double change = Kokkos::fabs(double(v) - double(dst(row, j)));
        dst(row, j) = v;
        return change;
      });
}

/// Copy the first `count` chunk partials of `partial` to its host mirror `h` (kept by the
/// caller: no allocation per call) on `space`, and wait for that instance only: a GPU's other
/// streams (a streamed X's block copies) go on. On a host backend `h` aliases `partial`.
inline void copy_partials(const ExecSpace& space, const Kokkos::View<double*, MemSpace>& partial,
                          const Kokkos::View<double*, MemSpace>::HostMirror& h,
                          size_type count) {
  const auto range = std::make_pair(size_type(0), count);
  Kokkos::deep_copy(space, Kokkos::subview(h, range), Kokkos::subview(partial, range));
  space.fence("knmf::solver::copy_partials");
}

/// Per-slot sums, in chunk order, of the nch chunk partials (chunk-major, R per chunk) that
/// start at `offset` of a host copy (copy_partials).
inline std::vector<double> sum_copied_partials(const Kokkos::View<double*, MemSpace>::HostMirror& h,
                                               size_type offset, size_type nch, int R) {
  std::vector<double> out(size_t(R), 0.0);
  for (size_type c = 0; c < nch; ++c)
    for (int r = 0; r < R; ++r) out[size_t(r)] += h(offset + c * R + r);
  return out;
}

/// Sum chunk partials (chunk-major, R per chunk) per slot, in chunk order, on the host, through
/// the host mirror `h` of `partial`.
inline std::vector<double> sum_slot_partials(const ExecSpace& space,
                                             const Kokkos::View<double*, MemSpace>& partial,
                                             size_type nch, int R,
                                             const Kokkos::View<double*, MemSpace>::HostMirror& h) {
  copy_partials(space, partial, h, nch * R);
  return sum_copied_partials(h, 0, nch, R);
}

/// The same, on the default instance, through a mirror made for this call.
inline std::vector<double> sum_slot_partials(const Kokkos::View<double*, MemSpace>& partial,
                                             size_type nch, int R) {
  return sum_slot_partials(ExecSpace(), partial, nch, R, host_mirror(partial));
}

}  // namespace knmf::detail

namespace knmf::detail {

/// dst(p*k + t, j) = src(slots(p)*k + t, j) for p < slots.extent(0): gathers whole slots.
template <class T>
void pack_slots(const ExecSpace& space, const Matrix<T>& src, const Kokkos::View<int*, MemSpace>& slots,
                int k, const Matrix<T>& dst) {
  const size_type rows = dst.extent(0);
  const size_type total = rows * size_type(dst.extent(1));
  Kokkos::parallel_for(
      "knmf::pack_slots", Policy64(space, 0, total), KOKKOS_LAMBDA(const size_type e) {
        const size_type j = e / rows;
        const int row = int(e % rows);
        dst(row, j) = src(slots(row / k) * k + row % k, j);
      });
}

/// dst(r*k + t, j) = scale * |src(t, j)| for one slot r (src: any rank-2 View, k x m).
template <class T, class SrcView>
void scatter_slot(const ExecSpace& space, const SrcView& src, int r, int k, const Matrix<T>& dst) {
  const size_type m = dst.extent(1);
  const size_type total = size_type(k) * m;
  Kokkos::parallel_for(
      "knmf::scatter_slot", Policy64(space, 0, total), KOKKOS_LAMBDA(const size_type e) {
        const size_type j = e / k;
        const int t = int(e % k);
        dst(r * k + t, j) = src(t, j);
      });
}

/// Fill slot r's rows of dst with a constant.
template <class T>
void fill_slot(const ExecSpace& space, const Matrix<T>& dst, int r, int k, T value) {
  auto sub = Kokkos::subview(dst, std::make_pair(r * k, (r + 1) * k), Kokkos::ALL);
  Kokkos::deep_copy(space, sub, value);
}

}  // namespace knmf::detail
