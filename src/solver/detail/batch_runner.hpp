#pragma once
/// \file
/// The slot machinery of the batched solver (internal). See kernels.hpp for the layout.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>
#include <vector>
#include <Kokkos_Profiling_ScopedRegion.hpp>

#include "knmf/core/host_access.hpp"
#include "knmf/core/compat.hpp"
#include "knmf/core/error.hpp"
#include "knmf/solver/init.hpp"
#include "knmf/solver/nmf.hpp"
#include "kernels.hpp"
#include "partition.hpp"
#include "products.hpp"

namespace knmf::detail {

enum class RunMode {
  factorize,  ///< update W and H from a random init
  refit,      ///< fixed H (job.index selects the spectra); only W updates
};

template <class T, class XMat>
class BatchRunner {
  using Part = RowPartition<XMat>;

public:
  BatchRunner(const ExecSpace& space, const XMat& X, int k, int R, const SolverOptions& opts,
              RunMode mode, const std::vector<std::vector<double>>* spectra = nullptr)
      : space_(space), X_(X), k_(k), mode_(mode), opt_(opts), spectra_(spectra) {
    KNMF_ASSERT(k >= 1 && R >= 1, "bad batch shape");
    KNMF_ASSERT(mode != RunMode::refit || spectra != nullptr, "refit needs spectra");
    n_ = X.rows();
    g_ = X.cols();
    n_global_ = Part::global_rows(X);
    row0_ = Part::row_offset(X);
    reg_ = regularization(opts, n_global_, g_);
    norm_x_ = X.stats().norm2;
    mean_ = X.mean();
    allocate(R);
  }

  /// Run until `next` is exhausted and every slot has finished.
  void run(const JobSource& next, const ResultCallback& emit,
           const IterationCallback& on_iteration = {}) {
    Kokkos::Profiling::ScopedRegion region("knmf::solver::run");
    exhausted_ = false;
    fill(next);
    while (any_active()) {
      if (mode_ == RunMode::factorize)
        opt_.solver == SolverKind::mu ? iterate_mu() : iterate_cd();
      else
        opt_.solver == SolverKind::mu ? iterate_refit_mu() : iterate_refit_cd();
      if (on_iteration) on_iteration(active_count());
      finish_done(emit);
      fill(next);
      if (exhausted_ && active_count() > 0 && active_count() < R_) compact();
    }
  }

private:
  struct Slot {
    bool active = false;
    bool done = false;
    Job job;
    int iter = 0;
    double err_init = 0.0, prev_err = 0.0, viol_init = 0.0, final_err = 0.0;
    ReplicateStatus status = ReplicateStatus::max_iter;
    std::chrono::steady_clock::time_point start;
  };

  // ---------------------------------------------------------------- memory
  void allocate(int R) {
    R_ = R;
    const int rk = R * k_;
    auto alloc = [&](const char* label, size_type rows, size_type cols) {
      return Matrix<T>(Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, std::string(label)), rows, cols);
    };
    W_ = alloc("knmf::solver::W", rk, n_);
    P_ = alloc("knmf::solver::P", rk, n_);
    if (mode_ == RunMode::refit && opt_.solver == SolverKind::mu)
      Wn_ = alloc("knmf::solver::W_next", rk, n_);
    H_ = alloc("knmf::solver::H", rk, g_);
    Q_ = alloc("knmf::solver::Q", rk, g_);
    Hn_ = alloc("knmf::solver::H_next", rk, g_);
    allocate_small(R);
    slots_.assign(size_t(R), Slot{});
  }

  void allocate_small(int R) {
    R_ = R;
    GW_ = SlotGram(Kokkos::view_alloc(space_, "knmf::solver::WtW"), R, k_, k_);
    GH_ = SlotGram(Kokkos::view_alloc(space_, "knmf::solver::HHt"), R, k_, k_);
    const size_type nch = std::max(num_chunks(n_), num_chunks(g_));
    gram_partial_ = Kokkos::View<double*, MemSpace>(
        Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, "knmf::solver::gram_partial"),
        nch * R * k_ * k_);
    red_partial_ = Kokkos::View<double*, MemSpace>(
        Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, "knmf::solver::red_partial"),
        nch * R);
    red_partial_h_ = host_mirror(red_partial_);
    gw_h_ = host_mirror(GW_);
    gh_h_ = host_mirror(GH_);
    mask_ = SlotMask(Kokkos::view_alloc(space_, "knmf::solver::mask"), R);
    mask_h_ = host_mirror(mask_);
    ones_ = SlotMask(Kokkos::view_alloc(space_, "knmf::solver::ones"), R);
    Kokkos::deep_copy(space_, ones_, 1);
    list_ = Kokkos::View<int*, MemSpace>(Kokkos::view_alloc(space_, "knmf::solver::list"), R);
    list_h_ = host_mirror(list_);
  }

  // ------------------------------------------------------------ slot state
  bool any_active() const { return active_count() > 0; }
  int active_count() const {
    int c = 0;
    for (const auto& s : slots_) c += s.active ? 1 : 0;
    return c;
  }

  template <class Pred>
  const SlotMask& upload_mask(Pred pred) {
    for (int r = 0; r < R_; ++r) mask_h_(r) = pred(r) ? 1 : 0;
    Kokkos::deep_copy(space_, mask_, mask_h_);
    return mask_;
  }
  const SlotMask& active_mask() {
    return upload_mask([&](int r) { return slots_[size_t(r)].active; });
  }

  Kokkos::View<int*, MemSpace> upload_list(const std::vector<int>& slots) {
    for (size_t p = 0; p < slots.size(); ++p) list_h_(p) = slots[p];
    Kokkos::deep_copy(space_, list_, list_h_);
    return Kokkos::subview(list_, std::make_pair(0, int(slots.size())));
  }

  /// A (rows x cols) LayoutLeft matrix over the memory of `buffer` (which must be larger).
  static Matrix<T> over(const Matrix<T>& buffer, size_type rows, size_type cols) {
    KNMF_ASSERT(rows * cols <= size_type(buffer.span()), "scratch view too large");
    return Matrix<T>(buffer.data(), rows, cols);
  }

  std::vector<double> sum_partials(size_type m, int R) {
    return sum_slot_partials(red_partial_, num_chunks(m), R, red_partial_h_);
  }

  // ---------------------------------------------------------- fill / init
  void fill(const JobSource& next) {
    std::vector<int> fresh;
    for (int r = 0; r < R_ && !exhausted_; ++r) {
      if (slots_[size_t(r)].active) continue;
      auto job = next();
      if (!job) {
        exhausted_ = true;
        break;
      }
      init_slot(r, *job);
      fresh.push_back(r);
    }
    if (fresh.empty()) return;
    Kokkos::Profiling::ScopedRegion region("knmf::solver::init");
    if (mode_ == RunMode::refit) {
      // H is fixed: X H^T and H H^T are computed once per fill.
      const auto& all = active_mask();
      detail::x_times_ht(space_, X_, H_, P_);
      slot_gram(space_, H_, R_, k_, all, gram_partial_, GH_);
    }
    init_errors(fresh);
  }

  void init_slot(int r, const Job& job) {
    Slot& s = slots_[size_t(r)];
    s = Slot{};
    s.active = true;
    s.job = job;
    s.start = std::chrono::steady_clock::now();
    if (mode_ == RunMode::factorize) {
      // every row block draws the whole W0 (the RNG stream is sequential) and keeps its rows
      std::vector<T> h(size_t(k_ * g_)), w(size_t(n_global_ * k_));
      random_init<T>(job.seed, mean_, k_, n_global_, g_, h.data(), w.data());
      upload_slot_rows_right(h.data(), r, H_, Hn_, g_);
      upload_slot_rows_left(w.data() + row0_ * k_, r, W_, P_, n_);
    } else {
      const auto& src = (*spectra_)[size_t(job.index)];
      std::vector<T> h(src.begin(), src.end());
      upload_slot_rows_right(h.data(), r, H_, Hn_, g_);
      // scikit-learn (update_H=False): W = sqrt(mean/k) for MU, zeros for CD.
      const T w0 = opt_.solver == SolverKind::mu ? T(std::sqrt(mean_ / double(k_))) : T(0);
      fill_slot(space_, W_, r, k_, w0);
    }
  }

  /// Copy k x m row-major host data (C order, e.g. H) into slot r's rows of dst, staging
  /// through the free buffer `stage`.
  void upload_slot_rows_right(const T* host, int r, const Matrix<T>& dst, const Matrix<T>& stage,
                              size_type m) {
    Kokkos::View<const T**, Kokkos::LayoutRight, Kokkos::HostSpace,
                 Kokkos::MemoryTraits<Kokkos::Unmanaged>>
        src(host, k_, m);
    Kokkos::View<T**, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> st(
        stage.data(), k_, m);
    Kokkos::deep_copy(space_, st, src);
    scatter_slot<T>(space_, st, r, k_, dst);
    space_.fence();  // the host buffer dies after this call
  }

  /// Copy m x k row-major host data (C order, e.g. W) into slot r's rows (transposed).
  void upload_slot_rows_left(const T* host, int r, const Matrix<T>& dst, const Matrix<T>& stage,
                             size_type m) {
    Kokkos::View<const T**, Kokkos::LayoutLeft, Kokkos::HostSpace,
                 Kokkos::MemoryTraits<Kokkos::Unmanaged>>
        src(host, k_, m);
    auto st = over(stage, k_, m);
    Kokkos::deep_copy(space_, st, src);
    scatter_slot<T>(space_, st, r, k_, dst);
    space_.fence();
  }

  /// error_at_init of the fresh slots: their W rows are packed so that W0^T X is one GEMM
  /// over the fresh slots only.
  void init_errors(const std::vector<int>& fresh) {
    const int F = int(fresh.size());
    auto list = upload_list(fresh);
    auto Wp = over(P_, size_type(F) * k_, n_);
    auto Qp = over(Hn_, size_type(F) * k_, g_);
    auto Hp = over(Q_, size_type(F) * k_, g_);
    if (mode_ == RunMode::refit) {
      // P holds X H^T and must survive: pack into W_next (MU) or a temporary.
      if (Wn_.span() == 0)
        Wp = Matrix<T>(Kokkos::view_alloc(space_, Kokkos::WithoutInitializing,
                                          "knmf::solver::W_pack"),
                       size_type(F) * k_, n_);
      else
        Wp = over(Wn_, size_type(F) * k_, n_);
    }
    pack_slots(space_, W_, list, k_, Wp);
    pack_slots(space_, H_, list, k_, Hp);
    detail::wt_times_x(space_, X_, Wp, Qp);
    Part::reduce(X_, space_, Qp);
    slot_dot(space_, Qp, Hp, F, k_, ones_, red_partial_);
    auto cross = sum_partials(g_, F);
    const auto& fm = upload_mask([&](int r) {
      return std::find(fresh.begin(), fresh.end(), r) != fresh.end();
    });
    slot_gram(space_, W_, R_, k_, fm, gram_partial_, GW_);
    Part::reduce(X_, space_, GW_);
    slot_gram(space_, H_, R_, k_, fm, gram_partial_, GH_);
    Kokkos::deep_copy(gw_h_, GW_);
    Kokkos::deep_copy(gh_h_, GH_);
    for (int p = 0; p < F; ++p) {
      const int r = fresh[size_t(p)];
      const double e = error_from(cross[size_t(p)], gw_h_, gh_h_, r);
      slots_[size_t(r)].err_init = e;
      slots_[size_t(r)].prev_err = e;
    }
    if (mode_ == RunMode::refit) {
      // GH was overwritten for the fresh slots only with the same values; nothing to restore.
    }
  }

  template <class HostGram>
  double error_from(double cross, const HostGram& gw, const HostGram& gh, int r) const {
    double wh = 0.0;
    for (int s = 0; s < k_; ++s)
      for (int t = 0; t < k_; ++t) wh += gw(r, s, t) * gh(r, s, t);
    const double sq = norm_x_ - 2.0 * cross + wh;
    return std::sqrt(sq > 0.0 ? sq : 0.0);
  }

  /// ||X - W H|| for the slots in `which`, from Q = W^T X and G_W = W^T W of the current W
  /// (both already computed by the iteration) and the current H (H H^T is computed here).
  std::vector<double> errors(const std::vector<int>& which) {
    std::vector<double> err(size_t(R_), 0.0);
    if (which.empty()) return err;
    const auto& m = upload_mask(
        [&](int r) { return std::find(which.begin(), which.end(), r) != which.end(); });
    slot_gram(space_, H_, R_, k_, m, gram_partial_, GH_);
    slot_dot(space_, Q_, H_, R_, k_, m, red_partial_);
    auto cross = sum_partials(g_, R_);
    Kokkos::deep_copy(gw_h_, GW_);
    Kokkos::deep_copy(gh_h_, GH_);
    for (int r : which) err[size_t(r)] = error_from(cross[size_t(r)], gw_h_, gh_h_, r);
    return err;
  }

  // ------------------------------------------------------------- iterations
  void iterate_mu() {
    Kokkos::Profiling::ScopedRegion region("knmf::mu::iteration");
    const bool add_eps = opt_.zero_guard == ZeroGuard::add_eps;
    const auto& act = active_mask();
    {
      Kokkos::Profiling::ScopedRegion r1("knmf::mu::update_W");
      slot_gram(space_, H_, R_, k_, act, gram_partial_, GH_);
      detail::x_times_ht(space_, X_, H_, P_);
      mu_update(space_, W_, P_, GH_, k_, act, reg_.l1_W, reg_.l2_W, add_eps, opt_.eps, P_);
      std::swap(W_, P_);
    }
    {
      Kokkos::Profiling::ScopedRegion r2("knmf::mu::update_H");
      detail::wt_times_x(space_, X_, W_, Q_);
      Part::reduce(X_, space_, Q_);
      slot_gram(space_, W_, R_, k_, act, gram_partial_, GW_);
      Part::reduce(X_, space_, GW_);
      mu_update(space_, H_, Q_, GW_, k_, act, reg_.l1_H, reg_.l2_H, add_eps, opt_.eps, Hn_);
      std::swap(H_, Hn_);
    }
    decide_mu();
  }

  void iterate_refit_mu() {
    Kokkos::Profiling::ScopedRegion region("knmf::mu::refit_iteration");
    const bool add_eps = opt_.zero_guard == ZeroGuard::add_eps;
    const auto& act = active_mask();
    mu_update(space_, W_, P_, GH_, k_, act, reg_.l1_W, reg_.l2_W, add_eps, opt_.eps, Wn_);
    std::swap(W_, Wn_);
    bool need = false;
    for (auto& s : slots_)
      if (s.active) need |= needs_error(s.iter + 1);
    if (need) {  // the error check needs W^T X of the new W
      detail::wt_times_x(space_, X_, W_, Q_);
      Part::reduce(X_, space_, Q_);
      slot_gram(space_, W_, R_, k_, act, gram_partial_, GW_);
      Part::reduce(X_, space_, GW_);
    }
    decide_mu();
  }

  bool needs_error(int iter) const {
    return (opt_.tol > 0 && iter % opt_.check_every == 0) || iter >= opt_.max_iter;
  }

  void decide_mu() {
    std::vector<int> which;
    for (int r = 0; r < R_; ++r) {
      Slot& s = slots_[size_t(r)];
      if (!s.active) continue;
      ++s.iter;
      if (needs_error(s.iter)) which.push_back(r);
    }
    if (which.empty()) return;
    auto err = errors(which);
    for (int r : which) {
      Slot& s = slots_[size_t(r)];
      const double e = err[size_t(r)];
      if (opt_.tol > 0 && s.iter % opt_.check_every == 0) {
        if (!std::isfinite(e)) {
          mark_done(s, ReplicateStatus::non_finite, e);
          continue;
        }
        if ((s.prev_err - e) / s.err_init < opt_.tol) {
          mark_done(s, ReplicateStatus::converged, e);
          continue;
        }
        s.prev_err = e;
      }
      if (s.iter >= opt_.max_iter)
        mark_done(s, std::isfinite(e) ? ReplicateStatus::max_iter : ReplicateStatus::non_finite, e);
    }
  }

  void iterate_cd() {
    Kokkos::Profiling::ScopedRegion region("knmf::cd::iteration");
    const auto& act = active_mask();
    std::vector<double> vw, vh;
    {
      Kokkos::Profiling::ScopedRegion r1("knmf::cd::update_W");
      slot_gram(space_, H_, R_, k_, act, gram_partial_, GH_);
      detail::x_times_ht(space_, X_, H_, P_);
      cd_update(space_, W_, P_, GH_, R_, k_, act, reg_.l1_W, reg_.l2_W, red_partial_);
      vw = sum_partials(n_, R_);
      Part::reduce(X_, vw);
    }
    {
      Kokkos::Profiling::ScopedRegion r2("knmf::cd::update_H");
      detail::wt_times_x(space_, X_, W_, Q_);
      Part::reduce(X_, space_, Q_);
      slot_gram(space_, W_, R_, k_, act, gram_partial_, GW_);
      Part::reduce(X_, space_, GW_);
      cd_update(space_, H_, Q_, GW_, R_, k_, act, reg_.l1_H, reg_.l2_H, red_partial_);
      vh = sum_partials(g_, R_);
    }
    decide_cd(vw, vh, /*final error from current Q, GW*/ true);
  }

  void iterate_refit_cd() {
    Kokkos::Profiling::ScopedRegion region("knmf::cd::refit_iteration");
    const auto& act = active_mask();
    cd_update(space_, W_, P_, GH_, R_, k_, act, reg_.l1_W, reg_.l2_W, red_partial_);
    auto vw = sum_partials(n_, R_);
    Part::reduce(X_, vw);
    decide_cd(vw, std::vector<double>(size_t(R_), 0.0), false);
  }

  void decide_cd(const std::vector<double>& vw, const std::vector<double>& vh, bool have_q) {
    std::vector<int> which;
    for (int r = 0; r < R_; ++r) {
      Slot& s = slots_[size_t(r)];
      if (!s.active) continue;
      ++s.iter;
      const double v = vw[size_t(r)] + vh[size_t(r)];
      if (s.iter == 1) s.viol_init = v;
      ReplicateStatus st;
      bool stop = true;
      if (!std::isfinite(v))
        st = ReplicateStatus::non_finite;
      else if (s.viol_init == 0.0 || v / s.viol_init <= opt_.tol)
        st = ReplicateStatus::converged;
      else if (s.iter >= opt_.max_iter)
        st = ReplicateStatus::max_iter;
      else
        stop = false;
      if (stop) {
        s.status = st;
        which.push_back(r);
      }
    }
    if (which.empty()) return;
    if (!have_q) {  // fixed-H refit: W^T X of the final W is not at hand yet
      const auto& m = upload_mask(
          [&](int r) { return std::find(which.begin(), which.end(), r) != which.end(); });
      detail::wt_times_x(space_, X_, W_, Q_);
      Part::reduce(X_, space_, Q_);
      slot_gram(space_, W_, R_, k_, m, gram_partial_, GW_);
      Part::reduce(X_, space_, GW_);
    }
    auto err = errors(which);
    for (int r : which) {
      Slot& s = slots_[size_t(r)];
      mark_done(s, s.status, err[size_t(r)]);
    }
  }

  void mark_done(Slot& s, ReplicateStatus st, double err) {
    s.active = false;
    s.done = true;
    s.status = st;
    s.final_err = err;
  }

  // ------------------------------------------------------------- results
  void finish_done(const ResultCallback& emit) {
    for (int r = 0; r < R_; ++r) {
      Slot& s = slots_[size_t(r)];
      if (!s.done) continue;
      ReplicateResult res;
      res.job = s.job;
      res.n = n_;
      res.g = g_;
      res.n_iter = s.iter;
      res.error_at_init = s.err_init;
      res.final_error = s.final_err;
      res.status = s.status;
      if (mode_ == RunMode::factorize) res.H = download_slot(H_, r, g_, true);
      if (mode_ == RunMode::refit || opt_.return_W) res.W = download_slot(W_, r, n_, false);
      res.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - s.start).count();
      s.done = false;
      emit(std::move(res));
    }
  }

  /// Slot r's k rows of F (k x m) as host doubles: row-major k x m (`k_major`, for H) or
  /// m x k row-major (for W, as scikit-learn returns it).
  std::vector<double> download_slot(const Matrix<T>& F, int r, size_type m, bool k_major) {
    if (stage_.extent(0) != size_t(k_) || stage_.extent(1) < size_t(m))
      stage_ = Matrix<T>(Kokkos::view_alloc(space_, Kokkos::WithoutInitializing,
                                            "knmf::solver::result_stage"),
                         k_, std::max(n_, g_));
    auto st = Matrix<T>(stage_.data(), k_, m);
    pack_slots(space_, F, upload_list({r}), k_, st);
    auto h = host_mirror(st);
    Kokkos::deep_copy(space_, h, st);
    space_.fence();
    std::vector<double> out(size_t(k_ * m));
    for (size_type j = 0; j < m; ++j)
      for (int t = 0; t < k_; ++t) {
        const size_t idx = k_major ? size_t(t * m + j) : size_t(j * k_ + t);
        out[idx] = double(h(t, j));
      }
    return out;
  }

  // ---------------------------------------------------------- compaction
  /// When the queue is empty and slots sit idle, repack the running slots into a smaller
  /// batch so the GEMMs stop carrying idle rows.
  void compact() {
    Kokkos::Profiling::ScopedRegion region("knmf::solver::compact");
    std::vector<int> keep;
    for (int r = 0; r < R_; ++r)
      if (slots_[size_t(r)].active) keep.push_back(r);
    const int R2 = int(keep.size());
    auto list = upload_list(keep);
    const size_type rk2 = size_type(R2) * k_;
    auto alloc = [&](const char* label, size_type rows, size_type cols) {
      return Matrix<T>(Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, std::string(label)), rows, cols);
    };
    const bool keep_p = mode_ == RunMode::refit;
    if (!keep_p) P_ = Matrix<T>();
    Q_ = Matrix<T>();
    Hn_ = Matrix<T>();
    Wn_ = Matrix<T>();
    auto W2 = alloc("knmf::solver::W", rk2, n_);
    pack_slots(space_, W_, list, k_, W2);
    auto H2 = alloc("knmf::solver::H", rk2, g_);
    pack_slots(space_, H_, list, k_, H2);
    Matrix<T> P2;
    if (keep_p) {
      P2 = alloc("knmf::solver::P", rk2, n_);
      pack_slots(space_, P_, list, k_, P2);
    }
    space_.fence();
    W_ = W2;
    H_ = H2;
    P_ = keep_p ? P2 : alloc("knmf::solver::P", rk2, n_);
    if (mode_ == RunMode::refit && opt_.solver == SolverKind::mu)
      Wn_ = alloc("knmf::solver::W_next", rk2, n_);
    Q_ = alloc("knmf::solver::Q", rk2, g_);
    Hn_ = alloc("knmf::solver::H_next", rk2, g_);
    std::vector<Slot> slots2;
    for (int r : keep) slots2.push_back(slots_[size_t(r)]);
    allocate_small(R2);
    slots_ = std::move(slots2);
    if (mode_ == RunMode::refit) slot_gram(space_, H_, R_, k_, active_mask(), gram_partial_, GH_);
  }

  ExecSpace space_;
  const XMat& X_;
  int k_;
  RunMode mode_;
  SolverOptions opt_;
  const std::vector<std::vector<double>>* spectra_;
  size_type n_ = 0, g_ = 0;
  size_type n_global_ = 0, row0_ = 0;  ///< full-matrix rows and this block's offset
  Regularization reg_;
  double norm_x_ = 0.0, mean_ = 0.0;
  int R_ = 0;
  bool exhausted_ = false;
  std::vector<Slot> slots_;
  Matrix<T> W_, P_, Wn_, H_, Q_, Hn_, stage_;
  SlotGram GW_, GH_;
  Kokkos::View<double*, MemSpace> gram_partial_, red_partial_;
  // host mirrors, made once: the convergence checks copy into them every few iterations
  Kokkos::View<double*, MemSpace>::HostMirror red_partial_h_;
  SlotGram::HostMirror gw_h_, gh_h_;
  SlotMask mask_, ones_;
  typename SlotMask::HostMirror mask_h_;
  Kokkos::View<int*, MemSpace> list_;
  typename Kokkos::View<int*, MemSpace>::HostMirror list_h_;
};

}  // namespace knmf::detail
