#pragma once
// The solver's view of a row-partitioned X: its RowPartition (the products on this rank's rows
// and the sums over the ranks; see src/solver/engine.hpp). The products are those of the local
// block's XOperandOf (compiled in src/solver/nmf.cpp), not compiled again here.
#include "knmf/core/host_access.hpp"
#include "knmf/mpi/distributed.hpp"
#include "solver/engine.hpp"

namespace knmf::detail {

/// Device data summed over the ranks through a host copy (no CUDA-aware MPI assumed).
template <class V>
void allreduce_view(MPI_Comm comm, const ExecSpace& space, const V& v) {
  if (v.span() == 0) return;
  space.fence();
  auto h = host_mirror(v);
  Kokkos::deep_copy(h, v);
  mpi::allreduce_sum(comm, h.data(), h.span());
  Kokkos::deep_copy(v, h);
}

template <class Inner>
struct RowPartition<mpi::DistributedMatrix<Inner>> {
  using X = mpi::DistributedMatrix<Inner>;
  static constexpr bool whole_matrix = false;  // this rank's rows only
  static size_type global_rows(const X& x) { return x.global_rows(); }
  static size_type row_offset(const X& x) { return x.row_offset(); }
  template <class T>
  static void x_times_ht(const ExecSpace& space, const X& x, const Matrix<T>& H,
                         const Matrix<T>& P, GatherScratch<T>& scratch) {
    XOperandOf<Inner>(x.local()).x_times_ht(space, H, P, scratch);
  }
  template <class T>
  static void wt_times_x(const ExecSpace& space, const X& x, const Matrix<T>& W,
                         const Matrix<T>& Q, GatherScratch<T>& scratch) {
    XOperandOf<Inner>(x.local()).wt_times_x(space, W, Q, scratch);  // this rank's rows; see reduce
  }
  template <class F>
  static void for_each_beta_block(const ExecSpace& space, const X& x, bool transposed, F&& f) {
    XOperandOf<Inner>(x.local()).for_each_beta_block(space, transposed, f);  // see reduce
  }
  static BetaShape beta_shape(const X& x) { return XOperandOf<Inner>(x.local()).beta_shape(); }
  template <class T>
  static void reduce(const X& x, const ExecSpace& space, const Matrix<T>& m) {
    allreduce_view(x.comm(), space, m);
  }
  static void reduce(const X& x, const ExecSpace& space, const SlotGram& g) {
    allreduce_view(x.comm(), space, g);
  }
  static void reduce(const X& x, std::vector<double>& v) {
    mpi::allreduce_sum(x.comm(), v.data(), v.size());
  }
};

}  // namespace knmf::detail
