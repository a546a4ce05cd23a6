#include "knmf/matrix/host_x.hpp"

#include "knmf/core/error.hpp"

#include <algorithm>

namespace knmf {

template <class T>
void host_x_rows(const HostX& X, std::int64_t r0, std::int64_t r1, io::CsrBlock<T>& out,
                 const std::string& source) {
  KNMF_ASSERT(r0 >= 0 && r0 <= r1 && r1 <= X.n, "rows of a HostX");
  out.row_begin = r0;
  out.row_end = r1;
  out.ncols = X.g;
  out.row_offsets.assign(size_t(r1 - r0 + 1), 0);
  out.cols.clear();
  out.values.clear();
  if (!X.sparse()) {  // the non-zero values (NaN included: the library refuses it), as a
                      // dense file's reader gives them
    for (std::int64_t r = r0; r < r1; ++r) {
      for (std::int64_t c = 0; c < X.g; ++c) {
        const T v = X.at<T>(r, c);
        if (!(v == T(0))) {
          out.cols.push_back(std::int32_t(c));
          out.values.push_back(v);
        }
      }
      out.row_offsets[size_t(r - r0 + 1)] = std::int64_t(out.cols.size());
    }
    return;
  }
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t p0 = X.offset(r), p1 = X.offset(r + 1);
    if (p1 < p0)
      input_error(source, ": the row offsets decrease at row ", r, " (", p0, " then ", p1, ")");
    for (std::int64_t p = p0; p < p1; ++p) {
      const std::int64_t c = X.index(p);
      if (c < 0 || c >= X.g)
        input_error(source, ": column index ", c, " of row ", r, " is outside [0, ", X.g, ")");
      out.cols.push_back(std::int32_t(c));
      out.values.push_back(X.value<T>(p));
    }
    out.row_offsets[size_t(r - r0 + 1)] = std::int64_t(out.cols.size());
  }
}

template void host_x_rows(const HostX&, std::int64_t, std::int64_t, io::CsrBlock<float>&,
                          const std::string&);
template void host_x_rows(const HostX&, std::int64_t, std::int64_t, io::CsrBlock<double>&,
                          const std::string&);

std::int64_t host_x_block_end(const HostX& X, std::int64_t r0, std::int64_t max_nnz) {
  if (!X.sparse())
    return std::min(X.n, r0 + std::max<std::int64_t>(1, max_nnz / std::max<std::int64_t>(1, X.g)));
  std::int64_t r1 = r0 + 1;
  while (r1 < X.n && X.offset(r1 + 1) - X.offset(r0) <= max_nnz) ++r1;
  return r1;
}

void HostXRowSource::for_each_block(size_type max_nnz, const BlockVisitor& visit) const {
  io::CsrBlock<double> b;
  for (std::int64_t r0 = 0; r0 < X_.n;) {
    const std::int64_t r1 = host_x_block_end(X_, r0, max_nnz);
    host_x_rows(X_, r0, r1, b, name_);
    visit(b);
    r0 = r1;
  }
}

}  // namespace knmf
