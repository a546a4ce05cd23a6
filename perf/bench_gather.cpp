// The host gather (the sparse products' inner loop, host_kernels.hpp) against its ceilings, on
// a real X (issue 29): how much faster could the sparse products get while every sum keeps its
// operations and order?
//
//   knmf_bench_gather X.h5ad [RK_LIST] [REPEATS]      defaults: 100,120,140,160 and 21
//
// One core, fp64 (cNMF's pbmcA run: R = 20 replicates of k = 5..8, so R·k = 100..160 values
// per row of the gathered factor). For P = X Hᵀ (columns: cells, entries: genes, gathered: Hᵀ,
// g rows of R·k) and Q = Wᵀ X (columns: genes, entries: cells, gathered: W, n rows):
//   slabs    row slabs of gather_slab_rows, all columns per slab: the library's P
//   2-D G    X cut into blocks of G entries' indices as well (every column's entries of a
//            block, all columns, then the next block, partial sums stored and reloaded): the
//            same sums in the same order (rows sorted), a block of the gathered rows reused
//            from cache; Q's library pass is this with slabs of 64 values and G = 2,048 cells
//            (products.hpp, wt_times_x)
//   ceiling  the library's pass with every entry's column taken modulo 32, so that the rows it
//            gathers stay in L1: no data layout that keeps the kernel's operations gets faster
//            than this (the numbers differ; only the time counts)
// Variants alternate repeat by repeat; the table gives the median seconds per product and its
// ratio to the library's, and the rate in bytes of gathered rows per nanosecond.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "knmf/io/h5ad.hpp"
#include "solver/detail/host_kernels.hpp"
#include "knmf/matrix/gather_segments.hpp"
#include "matrix/block_csc.hpp"
#include "solver/detail/products.hpp"

namespace {

using knmf::io::CsrBlock;

struct Csr {
  std::vector<std::int64_t> off;
  std::vector<std::int32_t> idx;
  std::vector<double> val;
  std::int64_t cols = 0;  // columns of the gathered factor the entries reach
  std::int64_t rows() const { return std::int64_t(off.size()) - 1; }
};

/// Xᵀ as a CSR (X's CSC), with the library's transpose (src/matrix/block_csc.hpp).
Csr transpose(const Csr& a) {
  Csr t;
  t.cols = a.rows();
  t.off.resize(std::size_t(a.cols) + 1);
  t.idx.resize(a.idx.size());
  t.val.resize(a.val.size());
  knmf::detail::csr_block_to_csc(a.rows(), a.cols, a.off.data(), a.idx.data(), a.val.data(), 0,
                                 t.off.data(), t.idx.data(), t.val.data());
  return t;
}

/// The library's pass (products.hpp's spmm_gather on the host, one thread).
void library_pass(const Csr& a, const std::vector<double>& in, std::vector<double>& out,
                  std::int64_t rk) {
  const auto slab = knmf::detail::gather_slab_rows<double>(a.cols, rk);
  for (std::int64_t r0 = 0; r0 < rk; r0 += slab)
    knmf::detail::host_gather_ranges(a.off.data(), a.off.data() + 1, 0, a.idx.data(),
                                     a.val.data(), 0, a.rows(), in.data() + r0, rk,
                                     out.data() + r0, rk, std::min(slab, rk - r0), false);
}

/// Gene blocks of `G`: bounds[b * m + a] is where column a's entries reach block b.
std::vector<std::int64_t> block_bounds(const Csr& a, std::int64_t G, std::int64_t& nb) {
  const std::int64_t m = a.rows();
  nb = (a.cols + G - 1) / G;
  std::vector<std::int64_t> bounds(std::size_t((nb + 1) * m));
  for (std::int64_t c = 0; c < m; ++c) {
    std::int64_t p = a.off[std::size_t(c)];
    for (std::int64_t b = 0; b <= nb; ++b) {
      while (p < a.off[std::size_t(c) + 1] && a.idx[std::size_t(p)] < b * G) ++p;
      bounds[std::size_t(b * m + c)] = b == nb ? a.off[std::size_t(c) + 1] : p;
    }
  }
  return bounds;
}

void blocked_pass(const Csr& a, const std::vector<std::int64_t>& bounds, std::int64_t nb,
                  const std::vector<double>& in, std::vector<double>& out, std::int64_t rk) {
  const std::int64_t m = a.rows(), slab = 64 / std::int64_t(sizeof(double)) * 8;  // 64 values
  for (std::int64_t r0 = 0; r0 < rk; r0 += slab)
    for (std::int64_t b = 0; b < nb; ++b)
      knmf::detail::host_gather_ranges(bounds.data() + b * m, bounds.data() + (b + 1) * m, 0,
                                       a.idx.data(), a.val.data(), 0, m, in.data() + r0, rk,
                                       out.data() + r0, rk, std::min(slab, rk - r0), b > 0);
}

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: knmf_bench_gather X.h5ad [RK_LIST] [REPEATS]\n");
    return 2;
  }
  std::vector<std::int64_t> rks;
  {
    std::stringstream ss(argc > 2 ? argv[2] : "100,120,140,160");
    for (std::string s; std::getline(ss, s, ',');) rks.push_back(std::atoll(s.c_str()));
  }
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 21;
  auto reader = knmf::io::H5adReader::open(argv[1]);
  CsrBlock<double> x;
  reader.read_csr_rows(0, reader.info().n_obs, x);
  Csr X{x.row_offsets, x.cols, x.values, x.ncols};
  // 2-D blocking keeps the sums' order only over sorted rows: sort them (every variant runs on
  // the sorted X; cNMF's files store unsorted rows, whose order the library keeps)
  std::int64_t unsorted = 0;
  for (std::int64_t i = 0; i < X.rows(); ++i) {
    const auto p0 = std::size_t(X.off[std::size_t(i)]), p1 = std::size_t(X.off[std::size_t(i) + 1]);
    if (std::is_sorted(X.idx.begin() + std::ptrdiff_t(p0), X.idx.begin() + std::ptrdiff_t(p1))) continue;
    ++unsorted;
    std::vector<std::pair<std::int32_t, double>> e;
    for (auto p = p0; p < p1; ++p) e.emplace_back(X.idx[p], X.val[p]);
    std::sort(e.begin(), e.end());
    for (auto p = p0; p < p1; ++p) std::tie(X.idx[p], X.val[p]) = e[p - p0];
  }
  const Csr XT = transpose(X);
  std::printf("X: %lld x %lld, %zu stored entries (%lld rows stored unsorted, sorted here); one "
              "thread, fp64, median of %d\n",
              static_cast<long long>(X.rows()), static_cast<long long>(X.cols), X.val.size(),
              static_cast<long long>(unsorted), repeats);
  std::printf("| product | R·k | variant | ms | / library | B/ns |\n|---|---|---|---|---|---|\n");
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (const std::int64_t rk : rks) {
    for (const bool p_side : {true, false}) {
      const Csr& a = p_side ? X : XT;
      std::vector<double> in(std::size_t(a.cols * rk)), out(std::size_t(a.rows() * rk)), ref;
      for (auto& v : in) v = u(rng);
      Csr l1 = a;  // the ceiling: rows of `in` that stay in L1
      for (auto& j : l1.idx) j %= 32;
      struct Variant {
        std::string name;
        std::function<void()> run;
        std::vector<double> t;
      };
      std::vector<Variant> vs;
      // P: the library's pass is slabs only; Q: the library's wt_times_x is slabs of 64 values
      // and blocks of knmf::detail::gather_cell_block cells (2,048), blocked_pass at G = 2,048
      const std::vector<std::int64_t> Gs =
          p_side ? std::vector<std::int64_t>{128, 256, 512}
                 : std::vector<std::int64_t>{256, 512, 1024, knmf::detail::gather_cell_block};
      vs.push_back({p_side ? "library: slabs" : "slabs only", [&] { library_pass(a, in, out, rk); }, {}});
      std::vector<std::vector<std::int64_t>> bounds;
      std::vector<std::int64_t> nbs;
      for (const std::int64_t G : Gs) {
        std::int64_t nb = 0;
        bounds.push_back(block_bounds(a, G, nb));
        nbs.push_back(nb);
      }
      for (std::size_t i = 0; i < bounds.size(); ++i)
        vs.push_back({(Gs[i] == knmf::detail::gather_cell_block && !p_side ? "library: 2-D G = "
                                                                           : "2-D G = ") +
                          std::to_string(Gs[i]),
                      [&, i] { blocked_pass(a, bounds[i], nbs[i], in, out, rk); }, {}});
      vs.push_back({"ceiling (rows in L1)", [&] { library_pass(l1, in, out, rk); }, {}});
      library_pass(a, in, out, rk);
      ref = out;
      for (std::size_t i = 1; i + 1 < vs.size(); ++i) {  // the 2-D passes: the same numbers
        vs[i].run();
        if (out != ref) {
          std::fprintf(stderr, "%s: not the library's numbers\n", vs[i].name.c_str());
          return 1;
        }
      }
      for (int r = 0; r < repeats; ++r)
        for (auto& v : vs) v.t.push_back(seconds(v.run));
      const double base = median(vs[p_side ? 0 : vs.size() - 2].t);  // the library's
      const double bytes = double(a.val.size()) * double(rk) * sizeof(double);
      for (auto& v : vs) {
        const double t = median(v.t);
        std::printf("| %s | %lld | %s | %.3f | %.3f | %.1f |\n", p_side ? "P = X Hᵀ" : "Q = Wᵀ X",
                    static_cast<long long>(rk), v.name.c_str(), t * 1e3, t / base, bytes / t * 1e-9);
      }
    }
  }
  return 0;
}
