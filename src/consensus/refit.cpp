// Fixed-H refits from streamed products (see knmf/consensus/refit.hpp). The iterations are
// the batched solver's own update rules (updates and convergence decisions) with one slot.
#include "knmf/core/host_access.hpp"
#include "knmf/consensus/refit.hpp"

#include <cmath>
#include <Kokkos_Profiling_ScopedRegion.hpp>

#include "consensus/detail/refit.hpp"
#include "consensus/detail/stream.hpp"
#include "knmf/core/error.hpp"
#include "matrix/block_csc.hpp"
#include "knmf/solver/nmf.hpp"
#include "solver/engine.hpp"

namespace knmf::consensus {

namespace detail {

namespace {
struct OneSlot {
  knmf::detail::SlotGram G;
  knmf::detail::SlotMask mask;
  Kokkos::View<double*, MemSpace> gram_partial, red_partial;
  Kokkos::View<double*, MemSpace>::HostMirror red_partial_h;
  knmf::detail::SlotGram::HostMirror G_h;
  size_type nch = 0;
};

OneSlot one_slot(const ExecSpace& space, int k, size_type m) {
  OneSlot s;
  s.G = knmf::detail::SlotGram(Kokkos::view_alloc(space, "knmf::consensus::gram"), 1, k, k);
  s.mask = knmf::detail::SlotMask(Kokkos::view_alloc(space, "knmf::consensus::mask"), 1);
  Kokkos::deep_copy(space, s.mask, 1);
  s.nch = knmf::detail::num_chunks(m > 0 ? m : 1);
  s.gram_partial = Kokkos::View<double*, MemSpace>(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::consensus::gram_partial"),
      s.nch * k * k);
  s.red_partial = Kokkos::View<double*, MemSpace>(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "knmf::consensus::red_partial"),
      s.nch);
  s.red_partial_h = host_mirror(s.red_partial);
  s.G_h = host_mirror(s.G);
  return s;
}

std::vector<double> slot_gram_host(const ExecSpace& space, const DMatrix& F, OneSlot& s) {
  const int k = int(F.extent(0));
  knmf::detail::slot_gram(space, F, 1, k, s.mask, s.gram_partial, s.G);
  Kokkos::deep_copy(s.G_h, s.G);
  std::vector<double> out(size_t(k * k));
  for (int a = 0; a < k; ++a)
    for (int b = 0; b < k; ++b) out[size_t(a * k + b)] = s.G_h(0, a, b);
  return out;
}
double squared_error(const ExecSpace& space, const DMatrix& W, const DMatrix& P,
                     const std::vector<double>& G, double norm2_x, OneSlot& s) {
  const int k = int(W.extent(0));
  knmf::detail::slot_dot(space, W, P, 1, k, s.mask, s.red_partial);
  const double cross =
      knmf::detail::sum_slot_partials(space, s.red_partial, s.nch, 1, s.red_partial_h)[0];
  const auto gw = slot_gram_host(space, W, s);
  double wh = 0.0;
  for (size_t e = 0; e < gw.size(); ++e) wh += gw[e] * G[e];
  const double sq = norm2_x - 2.0 * cross + wh;
  return sq > 0.0 ? sq : 0.0;
}
}  // namespace

double squared_error(const ExecSpace& space, const DMatrix& W, const DMatrix& P,
                     const std::vector<double>& G, double norm2_x) {
  auto s = one_slot(space, int(W.extent(0)), size_type(W.extent(1)));
  return squared_error(space, W, P, G, norm2_x, s);
}

void HostCsr::append(const io::CsrBlock<double>& b, const std::vector<int>& map,
                     const std::vector<double>& scale, size_type mapped_cols) {
  KNMF_ASSERT(b.row_begin == rows, "HostCsr: blocks out of order");
  KNMF_ASSERT(map.empty() || size_type(map.size()) == b.ncols, "HostCsr: column map size");
  cols = map.empty() ? b.ncols : mapped_cols;
  for (std::int64_t i = 0; i < b.rows(); ++i) {
    for (std::int64_t p = b.row_offsets[size_t(i)]; p < b.row_offsets[size_t(i + 1)]; ++p) {
      const std::int32_t c = b.cols[size_t(p)];
      if (map.empty()) {
        index.push_back(c);
        values.push_back(b.values[size_t(p)]);
      } else if (map[size_t(c)] >= 0) {
        index.push_back(map[size_t(c)]);
        values.push_back(b.values[size_t(p)] * (scale.empty() ? 1.0 : scale[size_t(c)]));
      }
    }
    offsets.push_back(size_type(values.size()));
  }
  rows = b.row_end;
}

HostCsr HostCsr::transposed() const {
  HostCsr t;
  t.rows = cols;
  t.cols = rows;
  t.offsets.resize(size_t(cols + 1));
  t.index.resize(index.size());
  t.values.resize(values.size());
  knmf::detail::csr_block_to_csc(rows, cols, offsets.data(), index.data(), values.data(), 0, t.offsets.data(),
                   t.index.data(), t.values.data());
  return t;
}

CsrMatrix<double> HostCsr::to_device(const ExecSpace& space, const std::string& source) const {
  return CsrMatrix<double>::from_host(space, rows, cols, offsets.data(), index.data(),
                                      values.data(), source);
}

RefitOutcome refit_resident(const ExecSpace& space, const CsrMatrix<double>& X,
                            const HostRows& spectra, const DMatrix& P,
                            const std::vector<double>& G, double norm2_x,
                            const SolverOptions& opts, bool return_W) {
  Kokkos::Profiling::ScopedRegion region("knmf::consensus::refit_resident");
  const int k = int(spectra.rows);
  KNMF_ASSERT(spectra.cols == X.cols(), "refit_resident: spectra and X disagree on the columns");
  auto r = knmf::refit_usages(space, X, {spectra.values}, k, 1, opts);
  RefitOutcome out;
  out.n_iter = r[0].n_iter;
  out.status = r[0].status;
  out.error_at_init = r[0].error_at_init;
  HostRows W{X.rows(), k, std::move(r[0].W)};
  out.squared_error = squared_error(space, upload_transposed(space, W, "knmf::consensus::W"), P,
                                    G, norm2_x);
  if (return_W) out.W = std::move(W);
  return out;
}

std::vector<double> gram(const ExecSpace& space, const DMatrix& F) {
  auto s = one_slot(space, int(F.extent(0)), size_type(F.extent(1)));
  return slot_gram_host(space, F, s);
}

RefitOutcome refit_device(const ExecSpace& space, const DMatrix& P, const std::vector<double>& G,
                          double norm2_x, double mean_x, size_type n_cols,
                          const SolverOptions& opts, bool return_W) {
  Kokkos::Profiling::ScopedRegion region("knmf::consensus::refit");
  opts.validate();
  KNMF_ASSERT(!opts.beta_rule(), "a refit from X's products is Frobenius only (refit_resident)");
  const int k = int(P.extent(0));
  const size_type m = size_type(P.extent(1));
  KNMF_ASSERT(G.size() == size_t(k * k), "G is k x k");
  const Regularization reg = regularization(opts, m, n_cols);
  OneSlot s = one_slot(space, k, m);
  // H H^T of the fixed spectra (double, per slot)
  auto gh_host = host_mirror(s.G);
  for (int a = 0; a < k; ++a)
    for (int b = 0; b < k; ++b) gh_host(0, a, b) = G[size_t(a * k + b)];
  knmf::detail::SlotGram GH(Kokkos::view_alloc(space, "knmf::consensus::HHt"), 1, k, k);
  Kokkos::deep_copy(space, GH, gh_host);

  DMatrix W = alloc_matrix(space, "knmf::consensus::W", k, m);
  auto error2 = [&](const DMatrix& Wc) { return squared_error(space, Wc, P, G, norm2_x, s); };

  // The solver's rule, one slot: its start, its W update and its convergence decision; the
  // error comes from the products (error2) instead of from X.
  RefitOutcome out;
  knmf::detail::with_rule(opts.solver, [&](auto rule) {
    using Rule = decltype(rule);
    Kokkos::deep_copy(space, W, Rule::fixed_h_start(mean_x, k));
    out.error_at_init = std::sqrt(error2(W));
    if (m == 0) {
      out.status = ReplicateStatus::converged;
      out.squared_error = error2(W);
      return;
    }
    DMatrix Wn;
    if constexpr (Rule::fixed_h_uses_next)
      Wn = alloc_matrix(space, "knmf::consensus::W_next", k, m);
    knmf::detail::FixedH<double> f{W, Wn, P, GH, 1, k, s.red_partial, s.red_partial_h};
    knmf::detail::SlotProgress progress;
    progress.err_init = progress.prev_err = out.error_at_init;
    const auto end = knmf::detail::run_fixed_h<Rule>(space, f, s.mask, reg, opts, progress,
                                                     [&]() { return error2(W); });
    out.status = end.status;
    out.n_iter = progress.iter;
    out.squared_error = end.measured_last ? end.squared_error : error2(W);
  });
  if (return_W) out.W = download_transposed(space, W);
  return out;
}

}  // namespace detail

RefitOutcome refit_from_products(const ExecSpace& space, const HostRows& xht, const HostRows& G,
                                 double norm2_x, double mean_x, size_type n_cols,
                                 const SolverOptions& opts) {
  const int k = int(xht.cols);
  if (opts.beta_rule())
    input_error("refit: beta_loss ", beta_loss_name(opts.beta_loss),
                " needs X itself, not only its products (refit_usages_streamed)");
  if (G.rows != k || G.cols != k) input_error("refit: H H^T must be ", k, " x ", k);
  auto P = detail::upload_transposed(space, xht, "knmf::consensus::P");
  return detail::refit_device(space, P, G.values, norm2_x, mean_x, n_cols, opts, true);
}

namespace {
/// Neumaier-compensated accumulation (the sums of X are exact to about one rounding).
struct Compensated {
  double sum = 0.0, c = 0.0;
  void add(double v) {
    const double t = sum + v;
    c += std::fabs(sum) >= std::fabs(v) ? (sum - t) + v : (v - t) + sum;
    sum = t;
  }
  double value() const { return sum + c; }
};
}  // namespace

std::vector<RefitOutcome> refit_usages_streamed(const ExecSpace& space, const RowSource& X,
                                                const std::vector<HostRows>& spectra,
                                                const SolverOptions& opts, size_type block_nnz,
                                                bool return_W) {
  Kokkos::Profiling::ScopedRegion region("knmf::consensus::refit_usages");
  opts.validate();
  const size_type n = X.rows(), g = X.cols();
  std::vector<detail::DMatrix> H, P;
  std::vector<std::vector<double>> G;
  for (size_t s = 0; s < spectra.size(); ++s) {
    const HostRows& h = spectra[s];
    if (h.cols != g)
      input_error("refit: spectra ", s, " have ", h.cols, " genes but ", X.name(), " has ", g);
    if (h.rows < 1) input_error("refit: spectra ", s, " have no rows");
    knmf::detail::check_spectra_values(h.values.data(), size_t(h.rows * h.cols), g, s,
                                       "refit: ");
    H.push_back(detail::upload_rows(space, h, "knmf::consensus::H"));
    G.push_back(detail::gram(space, H.back()));
    P.push_back(detail::alloc_matrix(space, "knmf::consensus::P", h.rows, n));
  }
  Compensated sum, norm2;
  // a beta-rule loss: the beta-divergence MU needs X itself, gathered in the same pass
  const bool resident = opts.beta_rule();
  detail::HostCsr host_x;
  detail::DeviceBlock block(space);
  const Kokkos::View<int*, MemSpace> no_map;
  const detail::DVector no_scale;
  {
    Kokkos::Profiling::ScopedRegion r2("knmf::consensus::stream_x");
    X.for_each_block(block_nnz, [&](const io::CsrBlock<double>& b) {
      for (double v : b.values) {
        sum.add(v);
        norm2.add(v * v);
      }
      block.upload(b, true, false);
      for (size_t s = 0; s < spectra.size(); ++s)
        detail::block_times_ht(space, block, H[s], no_map, no_scale, P[s]);
      if (resident) host_x.append(b);
    });
  }
  std::vector<RefitOutcome> out;
  if (resident) {
    const auto Xd = host_x.to_device(space, X.name());
    host_x = detail::HostCsr();
    for (size_t s = 0; s < spectra.size(); ++s)
      out.push_back(detail::refit_resident(space, Xd, spectra[s], P[s], G[s], norm2.value(), opts,
                                           return_W));
    return out;
  }
  const double mean = sum.value() / (double(n) * double(g));
  for (size_t s = 0; s < spectra.size(); ++s)
    out.push_back(detail::refit_device(space, P[s], G[s], norm2.value(), mean, g, opts, return_W));
  return out;
}

}  // namespace knmf::consensus
