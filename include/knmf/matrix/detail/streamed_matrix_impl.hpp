#pragma once
// for_each_block of StreamedMatrix (a template over the callback).
#include <Kokkos_Profiling_ScopedRegion.hpp>

#include "knmf/core/compat.hpp"

namespace knmf {

namespace detail {
/// A second instance of the execution space for copies: its own stream on CUDA; the same
/// (synchronous) instance elsewhere. One per streamed matrix (StreamedMatrix::copy_).
class CopyInstance {
public:
  CopyInstance();
  ~CopyInstance();
  CopyInstance(const CopyInstance&) = delete;
  CopyInstance& operator=(const CopyInstance&) = delete;
  const ExecSpace& space() const { return space_; }

private:
  ExecSpace space_;
  void* stream_ = nullptr;
};
}  // namespace detail

template <class T>
template <class F>
void StreamedMatrix<T>::for_each_block(const ExecSpace& space, bool transposed, F&& f) const {
  Kokkos::Profiling::ScopedRegion region(transposed ? "knmf::stream::csc" : "knmf::stream::rows");
  if (!copy_) copy_ = std::make_shared<detail::CopyInstance>();
  const detail::CopyInstance& copy = *copy_;
  const int nb = num_blocks();
  upload(copy.space(), 0, 0, transposed);
  for (int b = 0; b < nb; ++b) {
    copy.space().fence("knmf::stream::block_ready");
    // block b - 1's compute must be done before its buffer takes block b + 1
    space.fence("knmf::stream::buffer_free");
    if (b + 1 < nb) upload(copy.space(), b + 1, (b + 1) % 2, transposed);
    f(block_view(b, b % 2, transposed));
  }
  space.fence("knmf::stream::done");
}

}  // namespace knmf
