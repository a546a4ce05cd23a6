// knmf's Python extension module (`knmf._knmf`): the library's in-memory run
// (knmf/run/in_memory.hpp) on arrays handed over from numpy and scipy.sparse, with Kokkos
// brought up on first use and shut down at exit by whoever started it. The arrays arrive as
// numpy has them (py::array, never converted by pybind11): int32 or int64 indices, float32 or
// float64 values, read where they are; the run converts them block by block while it copies X
// into the library's arrays. The pure-Python package (python/knmf/_api.py) makes the few
// whole-matrix conversions there are (CSC to CSR, unsorted indices, non-contiguous arrays) and
// counts them. docs/python.md is the user's side of this.

#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <Kokkos_Core.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "knmf/core/error.hpp"
#include "knmf/core/options.hpp"
#include "knmf/consensus/consensus.hpp"
#include "knmf/consensus/cross_validation.hpp"
#include "knmf/core/kokkos_settings.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/matrix/host_x.hpp"
#include "knmf/prepare/cnmf_prepare.hpp"
#include "knmf/prepare/prepare.hpp"
#include "knmf/random/random_state.hpp"
#include "knmf/run/in_memory.hpp"
#include "knmf/solver/options.hpp"

namespace py = pybind11;

namespace {

struct ModuleState {
  bool we_initialized = false;     ///< this module called Kokkos::initialize
  bool forked = false;             ///< a fork happened after Kokkos started its threads
  int threads = 0;                 ///< set_num_threads before the first use (0: none given)
  std::atomic<bool> exiting{false};  ///< the atexit hook ran: the interpreter is going away
  std::atomic<int> live_calls{0};    ///< calls inside the library (LiveCall)
};
ModuleState state;

void require_usable() {
  if (state.forked)
    throw std::runtime_error(
        "knmf cannot run in a process forked after knmf started its threads (OpenMP's thread "
        "pool does not survive fork); use multiprocessing's 'spawn' or 'forkserver' start "
        "method, or call knmf in the parent");
  if (Kokkos::is_finalized())
    throw std::runtime_error("knmf: Kokkos was finalized in this process; knmf cannot run again");
  if (state.exiting)
    throw std::runtime_error("knmf: the interpreter is exiting; knmf cannot start a call");
}

/// Kokkos up (once), OpenBLAS' kernels chosen as the driver chooses them. The thread count
/// and the environment Kokkos reads are checked first (the library's limits, as the driver's):
/// Kokkos would abort, crash or hang on them, taking the interpreter with it.
void ensure_initialized() {
  require_usable();
  if (Kokkos::is_initialized()) return;
  const int threads = knmf::prepare_host_threads(
      state.threads, "knmf.set_num_threads(n) before knmf's first computation");
  knmf::ensure_blas_kernels(0, nullptr);
  Kokkos::InitializationSettings settings;
  if (threads > 0) settings.set_num_threads(threads);
  // Kokkos' start-up advice on OMP_PROC_BIND is for programs; binding here is what the
  // environment of the Python process says (OpenMP read it when it was loaded)
  settings.set_disable_warnings(true);
  Kokkos::initialize(settings);
  state.we_initialized = true;
}

/// A call that uses the library, counted from its start (GIL held) to its return, so that the
/// atexit hook knows whether Kokkos can be finalized.
struct LiveCall {
  LiveCall() { ++state.live_calls; }
  ~LiveCall() { --state.live_calls; }
  LiveCall(const LiveCall&) = delete;
  LiveCall& operator=(const LiveCall&) = delete;
};

/// The GIL released while the library computes, and taken back at the end: unless the
/// interpreter is exiting (a daemon thread still inside knmf when atexit ran). Such a thread
/// never touches Python again: taking the GIL during finalization ends the thread with a forced
/// unwind, which, through this destructor, would abort the process. It stops counting as a
/// live call (it holds no Kokkos View here) and sleeps until the process ends.
class ComputeWithoutGil {
public:
  ComputeWithoutGil() : saved_(PyEval_SaveThread()) {}
  ~ComputeWithoutGil() {
    if (state.exiting) {
      --state.live_calls;
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }
    PyEval_RestoreThread(saved_);
  }
  ComputeWithoutGil(const ComputeWithoutGil&) = delete;
  ComputeWithoutGil& operator=(const ComputeWithoutGil&) = delete;

private:
  PyThreadState* saved_;
};

/// The process's last exit handler before the C++ static objects are destroyed: it waits for
/// calls still inside the library (a daemon thread's) to leave it. Kokkos' own static objects
/// are destroyed after it (they were constructed before it was registered): a call still
/// running then would crash the process in them.
void wait_for_live_calls() {
  while (state.live_calls > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

/// The atexit hook: no call may start after it, and Kokkos is finalized if this module started
/// it. A factorize still running in another (daemon) thread is asked to stop (its progress hook
/// returns false) and given `wait_seconds` to leave the library. A call still live then keeps
/// Kokkos from being finalized (finalizing under a live View aborts the process), and the
/// process's exit waits for it to leave the library (a factorize at its next iteration, the
/// other calls at their end) before the static objects it uses are destroyed. Returns the calls
/// still live and those stopped, for the package's one line on stderr.
std::pair<int, int> finalize_at_exit(double wait_seconds) {
  if (state.forked) return {0, 0};  // the parent's threads do not exist here
  state.exiting = true;
  const int live = state.live_calls;
  if (live > 0) {
    py::gil_scoped_release release;  // a stopping call may need the GIL once more
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_seconds);
    while (state.live_calls > 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int still = state.live_calls;
  if (still > 0)
    std::atexit(wait_for_live_calls);
  else if (state.we_initialized && Kokkos::is_initialized())
    Kokkos::finalize();
  return {still, live - still};
}

knmf::SolverOptions solver_options(const std::vector<std::pair<std::string, std::string>>& given,
                                   const std::string& where) {
  knmf::SolverOptions o;
  const auto& fields = knmf::solver_option_fields();
  for (const auto& [name, text] : given) {
    bool known = false;
    for (const auto& f : fields) known = known || name == f.name;
    if (!known) {
      std::string names;
      for (const auto& f : fields) names += std::string(names.empty() ? "" : ", ") + f.name;
      knmf::input_error(where, ": unknown option '", name, "' (options: ", names, ")");
    }
  }
  // in the table's order (alpha_H 'same' reads alpha_W)
  for (const auto& f : fields)
    for (const auto& [name, text] : given)
      if (name == f.name) f.set(o, text, where + "(" + name + "=" + text + ")");
  o.validate();
  return o;
}

template <class T>
py::dict run(const knmf::HostX& X, const std::vector<std::tuple<int, int, std::int64_t>>& jobs_in,
             const std::vector<std::pair<std::string, std::string>>& options, int batch,
             const std::string& format, bool save_usages, const py::object& progress,
             double progress_seconds) {
  const LiveCall live;
  ensure_initialized();
  knmf::InMemoryOptions o;
  o.solver = solver_options(options, "knmf.factorize");
  o.batch = batch;
  o.format = knmf::parse_x_format(format, "knmf.factorize(format=...)");
  o.save_usages = save_usages;
  std::vector<knmf::Job> jobs;
  for (const auto& [k, iter, seed] : jobs_in)
    jobs.push_back(knmf::Job{k, iter, seed, std::int64_t(jobs.size())});
  bool interrupted = false;
  auto last = std::chrono::steady_clock::now() - std::chrono::hours(1);
  // Between iterations: Ctrl-C (Python's signal handlers run here, with the GIL) stops the
  // run; the progress callback at most every progress_seconds and when the last replicate
  // finishes.
  o.on_progress = [&](const knmf::RunProgress& p) {
    if (state.exiting) return false;  // the interpreter is exiting: stop, without Python
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
      PyErr_Clear();
      interrupted = true;
      return false;
    }
    const auto now = std::chrono::steady_clock::now();
    const bool last_one = p.event == knmf::RunProgress::Event::finished && p.done == p.total;
    if (!progress.is_none() &&
        (last_one || std::chrono::duration<double>(now - last).count() >= progress_seconds)) {
      last = now;
      py::dict d;
      d["k"] = p.k;
      d["done"] = p.done;
      d["total"] = p.total;
      d["running"] = p.running;
      d["seconds"] = p.seconds;
      d["iterations"] = p.iterations;
      progress(d);
    }
    return true;
  };
  knmf::InMemoryResult r;
  {
    ComputeWithoutGil release;
    r = knmf::factorize_in_memory<T>(X, jobs, o, "X");
  }
  if (interrupted) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
  const auto R = py::ssize_t(r.replicates.size());
  const int k = jobs.empty() ? 0 : jobs.front().k;
  py::array_t<double> spectra({R, py::ssize_t(k), py::ssize_t(X.g)});
  py::array_t<T> usages(save_usages ? std::vector<py::ssize_t>{R, py::ssize_t(X.n), py::ssize_t(k)}
                                    : std::vector<py::ssize_t>{0, py::ssize_t(X.n), py::ssize_t(k)});
  py::array_t<std::int64_t> n_iter(R), seeds(R), iters(R);
  py::array_t<double> errors(R), errors_init(R);
  py::list status;
  auto* sp = spectra.mutable_data();
  auto* up = usages.mutable_data();
  for (py::ssize_t i = 0; i < R; ++i) {
    const auto& rep = r.replicates[size_t(i)];
    if (rep.job.k != k) throw knmf::LogicError("knmf.factorize: jobs of more than one k");
    std::memcpy(sp + i * k * X.g, rep.H.data(), sizeof(double) * size_t(k * X.g));
    if (save_usages)
      for (std::int64_t e = 0; e < X.n * k; ++e) up[i * X.n * k + e] = T(rep.W[size_t(e)]);
    n_iter.mutable_at(i) = rep.n_iter;
    seeds.mutable_at(i) = rep.job.seed;
    iters.mutable_at(i) = rep.job.iter;
    errors.mutable_at(i) = rep.final_error;
    errors_init.mutable_at(i) = rep.error_at_init;
    status.append(knmf::to_string(rep.status));
  }
  py::dict out;
  out["spectra"] = spectra;
  out["usages"] = usages;
  out["n_iter"] = n_iter;
  out["errors"] = errors;
  out["errors_at_init"] = errors_init;
  out["seeds"] = seeds;
  out["iters"] = iters;
  out["status"] = status;
  out["x_format"] = std::string(r.x_format.sparse ? "sparse" : "dense");
  out["x_format_reason"] = r.x_format.reason;
  return out;
}

/// An int32 / int64 index array (true: int64), 1-D and C-contiguous, as the package passes them.
bool index_width(const py::array& a, const std::string& name, const char* what) {
  if (a.ndim() != 1 || !(a.flags() & py::array::c_style))
    throw std::invalid_argument(name + ": " + what + " must be a contiguous 1-D array");
  if (a.dtype().is(py::dtype::of<std::int64_t>())) return true;
  if (a.dtype().is(py::dtype::of<std::int32_t>())) return false;
  knmf::input_error(name, ": ", what, " has type ", std::string(py::str(a.dtype())),
                    ", expected int32 or int64");
}

/// The values' type: float32, float64, int32 or int64.
knmf::HostX::Values value_type(const py::array& a, const std::string& name) {
  using V = knmf::HostX::Values;
  if (a.dtype().is(py::dtype::of<double>())) return V::float64;
  if (a.dtype().is(py::dtype::of<float>())) return V::float32;
  if (a.dtype().is(py::dtype::of<std::int64_t>())) return V::int64;
  if (a.dtype().is(py::dtype::of<std::int32_t>())) return V::int32;
  knmf::input_error(name, " has values of type ", std::string(py::str(a.dtype())),
                    ", expected float32, float64, int32 or int64");
}

/// The caller's CSR arrays as a HostX (read where they are, knmf/matrix/host_x.hpp), checked:
/// 1-D contiguous arrays, n + 1 offsets from 0, as many indices and values as they end at.
knmf::HostX csr_x(std::int64_t n, std::int64_t g, const py::array& indptr,
                  const py::array& indices, const py::array& data, const std::string& name) {
  knmf::HostX X;
  X.layout = knmf::HostX::Layout::csr;
  X.n = n;
  X.g = g;
  X.offsets_64 = index_width(indptr, name, "indptr");
  X.indices_64 = index_width(indices, name, "indices");
  X.values_type = value_type(data, name);
  if (data.ndim() != 1 || !(data.flags() & py::array::c_style))
    throw std::invalid_argument(name + ": data must be a contiguous 1-D array");
  if (indptr.shape(0) != n + 1)
    knmf::input_error(name, ": indptr has ", indptr.shape(0), " entries, expected ", n + 1);
  X.offsets = indptr.data();
  X.indices = indices.data();
  X.values = data.data();
  const std::int64_t first = X.offset(0), nnz = X.offset(n);
  if (first != 0 || nnz < 0 || indices.shape(0) < nnz || data.shape(0) < nnz)
    knmf::input_error(name, ": indptr runs from ", first, " to ", nnz, " but indices has ",
                      indices.shape(0), " and data ", data.shape(0), " entries");
  return X;
}

/// n x g values in `a` (any shape holding n g of them), row- or column-major, as a HostX.
knmf::HostX dense_host_x(const py::array& a, bool by_rows, std::int64_t n, std::int64_t g,
                         const std::string& name) {
  if (a.size() != n * g) knmf::input_error(name, ": ", a.size(), " values for ", n, " x ", g);
  knmf::HostX X;
  X.layout = by_rows ? knmf::HostX::Layout::dense_rows : knmf::HostX::Layout::dense_columns;
  X.n = n;
  X.g = g;
  X.values_type = value_type(a, name);
  X.values = a.data();
  return X;
}

/// A C- or Fortran-ordered 2-D array as a HostX, read where it is.
knmf::HostX dense_x(const py::array& a, const std::string& name) {
  if (a.ndim() != 2) knmf::input_error(name, " has ", a.ndim(), " dimension(s), expected 2");
  if (!(a.flags() & (py::array::c_style | py::array::f_style)))
    throw std::invalid_argument(name + " must be C- or Fortran-contiguous");
  return dense_host_x(a, bool(a.flags() & py::array::c_style), a.shape(0), a.shape(1), name);
}

py::dict factorize_x(const knmf::HostX& X, const std::string& dtype,
                     const std::vector<std::tuple<int, int, std::int64_t>>& jobs,
                     const std::vector<std::pair<std::string, std::string>>& options, int batch,
                     const std::string& format, bool save_usages, const py::object& progress,
                     double progress_seconds) {
  if (dtype == "float32")
    return run<float>(X, jobs, options, batch, format, save_usages, progress, progress_seconds);
  if (dtype == "float64")
    return run<double>(X, jobs, options, batch, format, save_usages, progress, progress_seconds);
  knmf::input_error("knmf.factorize: dtype '", dtype, "' is invalid: expected float32 or float64");
}

/// X as CSR arrays, each read where it is (any mix of int32 / int64 indices and float32 /
/// float64 values: the run converts them block by block while copying X).
py::dict factorize_csr(std::int64_t n, std::int64_t g, const py::array& indptr,
                       const py::array& indices, const py::array& data,
                       const std::string& dtype,
                       const std::vector<std::tuple<int, int, std::int64_t>>& jobs,
                       const std::vector<std::pair<std::string, std::string>>& options,
                       int batch, const std::string& format, bool save_usages,
                       const py::object& progress, double progress_seconds) {
  return factorize_x(csr_x(n, g, indptr, indices, data, "X"), dtype, jobs, options, batch,
                     format, save_usages, progress, progress_seconds);
}

/// A dense X, C- or Fortran-ordered, read where it is.
py::dict factorize_dense(const py::array& a, const std::string& dtype,
                         const std::vector<std::tuple<int, int, std::int64_t>>& jobs,
                         const std::vector<std::pair<std::string, std::string>>& options,
                         int batch, const std::string& format, bool save_usages,
                         const py::object& progress, double progress_seconds) {
  return factorize_x(dense_x(a, "X"), dtype, jobs, options, batch, format, save_usages,
                     progress, progress_seconds);
}

// ------------------------------------------------------------------------------ prepare

/// A numpy array handed back without a copy: it owns the vector the library filled.
template <class T>
py::array_t<T> owned(std::vector<T>&& v) {
  auto* heap = new std::vector<T>(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(py::ssize_t(heap->size()), heap->data(), owner);
}

/// A CountSource reading the caller's arrays block by block (CSR with int32 / int64 indices,
/// or dense C- / Fortran-ordered), as the driver's readers read a file.
knmf::prepare::CountSource count_source(const std::string& layout, std::int64_t n, std::int64_t g,
                                        const py::array& indptr, const py::array& indices,
                                        const py::array& values,
                                        std::vector<std::string> obs_names,
                                        std::vector<std::string> var_names,
                                        const std::string& name) {
  knmf::prepare::CountSource src;
  src.n_obs = n;
  src.n_vars = g;
  src.obs_names = std::move(obs_names);
  src.var_names = std::move(var_names);
  src.name = name;
  src.block_rows = 16384;
  // dense: values is the n x g array, flat
  const knmf::HostX x = layout == "csr" ? csr_x(n, g, indptr, indices, values, name)
                                        : dense_host_x(values, layout == "dense_rows", n, g, name);
  src.read_rows = [x, name](std::int64_t r0, std::int64_t r1, knmf::io::CsrBlock<float>& out) {
    knmf::host_x_rows(x, r0, r1, out, name);
  };
  return src;
}

template <class T>
py::dict csr_dict(knmf::io::CsrBlock<T>&& m) {
  py::dict d;
  d["shape"] = py::make_tuple(m.rows(), m.ncols);
  d["indptr"] = owned(std::move(m.row_offsets));
  d["indices"] = owned(std::move(m.cols));
  d["data"] = owned(std::move(m.values));
  return d;
}

/// `tpm`: empty, or (layout, n, g, indptr, indices, values, var_names) of a given TPM (--tpm),
/// checked against the counts' shape and genes by cnmf_prepare_counts.
py::dict prepare(const std::string& layout, std::int64_t n, std::int64_t g,
                 const py::array& indptr, const py::array& indices, const py::array& values,
                 std::vector<std::string> obs_names, std::vector<std::string> var_names,
                 int numgenes, const std::vector<std::string>& genes, const std::string& name,
                 const py::tuple& tpm) {
  const LiveCall live;
  require_usable();
  if (n <= 0 || g <= 0) knmf::input_error(name, " is empty (", n, " cells x ", g, " genes)");
  if (numgenes < 1) knmf::input_error("knmf.prepare: numgenes = ", numgenes, " must be at least 1");
  auto src = count_source(layout, n, g, indptr, indices, values, std::move(obs_names),
                          std::move(var_names), name);
  std::optional<knmf::prepare::CountSource> tpm_src;
  if (!tpm.empty()) {
    if (tpm.size() != 7)
      throw knmf::LogicError("knmf._prepare: tpm is (layout, n, g, indptr, indices, values, var_names)");
    tpm_src = count_source(tpm[0].cast<std::string>(), tpm[1].cast<std::int64_t>(),
                           tpm[2].cast<std::int64_t>(), tpm[3].cast<py::array>(),
                           tpm[4].cast<py::array>(), tpm[5].cast<py::array>(), {},
                           tpm[6].cast<std::vector<std::string>>(), "tpm");
  }
  knmf::prepare::PrepareResult r;
  {
    ComputeWithoutGil release;
    r = knmf::prepare::cnmf_prepare_counts(src, numgenes, genes, tpm_src ? &*tpm_src : nullptr,
                                           "knmf.prepare(numgenes=...)");
  }
  py::dict out;
  out["norm_counts"] = csr_dict(std::move(r.norm_counts));
  out["tpm"] = csr_dict(std::move(r.tpm));
  out["genes"] = owned(std::move(r.genes));
  out["gene_names"] = r.gene_names;
  out["cells"] = owned(std::move(r.cells));
  out["gene_std"] = owned(std::move(r.gene_std));
  py::dict st;
  st["mean"] = owned(std::move(r.stats.mean));
  st["var"] = owned(std::move(r.stats.var));
  st["fano"] = owned(std::move(r.stats.fano));
  st["expected_fano"] = owned(std::move(r.stats.expected_fano));
  st["fano_ratio"] = owned(std::move(r.stats.fano_ratio));
  st["high_var"] = owned(std::move(r.stats.high_var));
  st["A"] = r.stats.A;
  st["B"] = r.stats.B;
  out["stats"] = st;
  out["zero_cells"] = r.zero_cells;
  out["zero_genes"] = r.zero_genes;
  return out;
}

// ---------------------------------------------------------------------------- consensus

py::array_t<double> rows_array(knmf::consensus::HostRows&& h) {
  auto a = owned(std::move(h.values));
  return a.reshape({py::ssize_t(h.rows), py::ssize_t(h.cols)});
}

/// A copy of h as float32 (f32) or float64.
py::array rows_array(const knmf::consensus::HostRows& h, bool f32) {
  if (!f32) return rows_array(knmf::consensus::HostRows(h));
  return owned(std::vector<float>(h.values.begin(), h.values.end()))
      .reshape({py::ssize_t(h.rows), py::ssize_t(h.cols)});
}

py::dict consensus(std::int64_t n, std::int64_t g, const py::array& indptr,
                   const py::array& indices, const py::array& data,
                   const py::array_t<double, py::array::c_style>& spectra, int k,
                   const py::object& tpm, const std::vector<int>& hvg_columns,
                   const std::vector<double>& gene_std,
                   const std::vector<std::pair<std::string, std::string>>& run_options,
                   double density_threshold, double local_neighborhood_size) {
  const LiveCall live;
  ensure_initialized();
  if (k < 1) knmf::input_error("knmf.consensus: k = ", k, " is invalid: it must be at least 1");
  const knmf::HostXRowSource X(csr_x(n, g, indptr, indices, data, "X"), "X");
  if (spectra.ndim() != 2 || spectra.shape(1) != g || spectra.shape(0) % k != 0)
    knmf::input_error("knmf.consensus: spectra has shape (", spectra.shape(0), ", ",
                      spectra.ndim() > 1 ? spectra.shape(1) : 0, "), expected (R * ", k, ", ", g, ")");
  knmf::consensus::HostRows merged{spectra.shape(0), g,
                                   std::vector<double>(spectra.data(), spectra.data() + spectra.size())};
  knmf::consensus::ConsensusOptions o;
  o.local_density_threshold = density_threshold;
  o.local_neighborhood_size = local_neighborhood_size;
  o.validate();
  const knmf::SolverOptions run = solver_options(run_options, "knmf.consensus");
  std::unique_ptr<knmf::HostXRowSource> tsrc;
  knmf::consensus::TpmInput tin;
  if (!tpm.is_none()) {
    const auto t = tpm.cast<py::tuple>();  // (n, genes, indptr, indices, data)
    const knmf::HostX tx = csr_x(t[0].cast<std::int64_t>(), t[1].cast<std::int64_t>(),
                                 t[2].cast<py::array>(), t[3].cast<py::array>(),
                                 t[4].cast<py::array>(), "tpm");
    tin.float32 = tx.values_type == knmf::HostX::Values::float32;
    tsrc = std::make_unique<knmf::HostXRowSource>(tx, "tpm");
    if (tsrc->rows() != n)
      knmf::input_error("knmf.consensus: tpm has ", tsrc->rows(), " cells, X has ", n);
    if (std::int64_t(hvg_columns.size()) != g)
      knmf::input_error("knmf.consensus: ", hvg_columns.size(), " hvg_columns for ", g, " genes of X");
    for (int c : hvg_columns)
      if (c < 0 || c >= tsrc->cols())
        knmf::input_error("knmf.consensus: hvg column ", c, " is outside tpm's ", tsrc->cols(), " genes");
    if (!gene_std.empty() && std::int64_t(gene_std.size()) != tsrc->cols())
      knmf::input_error("knmf.consensus: ", gene_std.size(), " gene_std values for ", tsrc->cols(), " tpm genes");
    tin.tpm = tsrc.get();
    tin.hvg_columns = hvg_columns;
    tin.gene_std = gene_std;
  }
  knmf::consensus::ConsensusResult r;
  {
    ComputeWithoutGil release;
    r = knmf::consensus::run_consensus(knmf::ExecSpace(), merged, k, X, tsrc ? &tin : nullptr, run, o);
  }
  py::dict out;
  const bool f32 = r.have_tpm && tin.float32;  // cNMF's usages: float32 from a float32 TPM
  out["usages"] = rows_array(r.usages(), f32);
  out["spectra"] = rows_array(std::move(r.spectra));
  out["prediction_error"] = r.prediction_error;
  out["silhouette"] = r.clustering.silhouette;
  out["local_density"] = owned(std::move(r.clustering.local_density));
  out["nonzero_rows"] = owned(std::move(r.clustering.nonzero_rows));
  out["used_rows"] = owned(std::move(r.clustering.used_rows));
  if (r.have_tpm) {
    out["spectra_tpm"] = rows_array(r.spectra_tpm, f32);
    out["spectra_score"] = rows_array(std::move(r.spectra_score));
    out["starcat"] = rows_array(std::move(r.starcat));
  }
  out["warnings"] = r.warnings;
  return out;
}

py::dict k_selection(std::int64_t n, std::int64_t g, const py::array& indptr,
                     const py::array& indices, const py::array& data,
                     const std::vector<py::array_t<double, py::array::c_style>>& stacks,
                     const std::vector<int>& ks,
                     const std::vector<std::pair<std::string, std::string>>& run_options,
                     double density_threshold, double local_neighborhood_size,
                     bool cross_validate, int cell_folds, int gene_folds, int cv_replicates,
                     std::int64_t cv_seed, const std::string& cv_rule) {
  const LiveCall live;
  ensure_initialized();
  const knmf::HostXRowSource X(csr_x(n, g, indptr, indices, data, "X"), "X");
  if (stacks.size() != ks.size()) throw knmf::LogicError("knmf.k_selection: stacks and ks differ");
  std::vector<knmf::consensus::HostRows> merged;
  for (size_t i = 0; i < ks.size(); ++i) {
    const auto& a = stacks[i];
    if (ks[i] < 1 || a.ndim() != 2 || a.shape(1) != g || a.shape(0) % ks[i] != 0)
      knmf::input_error("knmf.k_selection: the spectra of k = ", ks[i], " do not have shape (R * k, ", g, ")");
    merged.push_back({a.shape(0), g, std::vector<double>(a.data(), a.data() + a.size())});
  }
  knmf::consensus::ConsensusOptions o;
  o.local_density_threshold = density_threshold;
  o.local_neighborhood_size = local_neighborhood_size;
  o.validate();
  const knmf::SolverOptions run = solver_options(run_options, "knmf.k_selection");
  knmf::consensus::CrossValidationOptions cv;
  cv.cell_folds = cell_folds;
  cv.gene_folds = gene_folds;
  cv.replicates = cv_replicates;
  if (cv_seed < 0) knmf::input_error("knmf.k_selection: cv_seed ", cv_seed, " is invalid: it must be >= 0");
  cv.seed = std::uint64_t(cv_seed);
  if (cross_validate) cv.validate();
  const auto rule = knmf::consensus::parse_k_choice_rule(cv_rule, "knmf.k_selection: cv_rule");
  std::vector<knmf::consensus::KSelectionRow> rows;
  std::vector<knmf::consensus::CrossValidationK> table;
  {
    ComputeWithoutGil release;
    const knmf::ExecSpace space;
    rows = knmf::consensus::k_selection(space, merged, ks, X, run, o);
    if (cross_validate) table = knmf::consensus::cross_validate(space, X, ks, run, cv);
  }
  std::vector<std::int64_t> kk;
  std::vector<double> sil, pe, cvm, cvsd;
  py::list errors;
  for (size_t i = 0; i < rows.size(); ++i) {
    kk.push_back(rows[i].k);
    sil.push_back(rows[i].silhouette);
    pe.push_back(rows[i].prediction_error);
    cvm.push_back(cross_validate ? table[i].mean : std::nan(""));
    cvsd.push_back(cross_validate ? table[i].sd : std::nan(""));
    if (cross_validate) errors.append(owned(std::vector<double>(table[i].errors)));
  }
  py::dict out;
  out["k"] = owned(std::move(kk));
  out["silhouette"] = owned(std::move(sil));
  out["prediction_error"] = owned(std::move(pe));
  out["cv_prediction_error"] = owned(std::move(cvm));
  out["cv_prediction_error_sd"] = owned(std::move(cvsd));
  out["cv_errors"] = errors;
  out["cv_choice"] = cross_validate ? knmf::consensus::choose_k(table, rule) : 0;
  return out;
}

}  // namespace

PYBIND11_MODULE(_knmf, m) {
  m.doc() = "knmf's compiled core; use the knmf package";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const knmf::InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const knmf::LogicError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const std::invalid_argument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  m.attr("__version__") = knmf::version();
  m.def("build_report", &knmf::build_report);
  m.def("blas_core", &knmf::blas_core);
  m.def("is_initialized", [] { return Kokkos::is_initialized(); });
  m.def("concurrency", [] {
    ensure_initialized();
    return knmf::concurrency();
  });
  m.def("max_host_threads", &knmf::max_host_threads);
  // n as Python's int (any size): checked as text by the library, as the driver checks
  // --kokkos-num-threads, before it is narrowed
  m.def("set_num_threads", [](const py::int_& n) {
    const std::string text = py::str(static_cast<const py::object&>(n));
    if (const auto r = knmf::check_kokkos_setting(knmf::KokkosSetting::threads, text))
      knmf::input_error("knmf.set_num_threads(", text, ") is invalid: ", r->reason);
    const int threads = n.cast<int>();
    require_usable();
    if (Kokkos::is_initialized()) {
      if (knmf::concurrency() == threads) return;
      throw std::runtime_error("knmf.set_num_threads(" + text +
                               ") comes too late: knmf already runs with " +
                               std::to_string(knmf::concurrency()) +
                               " threads (call it before knmf's first computation)");
    }
    state.threads = threads;
  });
  m.def("_finalize", &finalize_at_exit, py::arg("wait_seconds") = 0.0);
  m.def("_after_fork_in_child", [] {
    if (Kokkos::is_initialized()) state.forked = true;
  });
  m.def("cnmf_seeds", [](std::int64_t seed, int n_iter, const std::vector<int>& ks) {
    if (n_iter < 1) knmf::input_error("knmf.cnmf_seeds: n_iter = ", n_iter, " must be at least 1");
    for (int k : ks)
      if (k < 1) knmf::input_error("knmf.cnmf_seeds: k = ", k, " must be at least 1");
    py::dict out;
    for (const auto& j : knmf::cnmf_job_table(ks, n_iter, seed)) {
      py::int_ key(j.k);
      if (!out.contains(key)) out[key] = py::list();
      out[key].cast<py::list>().append(j.seed);
    }
    return out;
  }, py::arg("seed"), py::arg("n_iter"), py::arg("ks"));
  m.def("_prepare", &prepare, py::arg("layout"), py::arg("n"), py::arg("g"),
        py::arg("indptr").noconvert(), py::arg("indices").noconvert(),
        py::arg("values").noconvert(), py::arg("obs_names"), py::arg("var_names"),
        py::arg("numgenes"), py::arg("genes"), py::arg("name"), py::arg("tpm"));
  m.def("_consensus", &consensus, py::arg("n"), py::arg("g"), py::arg("indptr").noconvert(),
        py::arg("indices").noconvert(), py::arg("data").noconvert(),
        py::arg("spectra").noconvert(), py::arg("k"), py::arg("tpm"), py::arg("hvg_columns"),
        py::arg("gene_std"), py::arg("run_options"), py::arg("density_threshold"),
        py::arg("local_neighborhood_size"));
  m.def("_k_selection", &k_selection, py::arg("n"), py::arg("g"),
        py::arg("indptr").noconvert(), py::arg("indices").noconvert(),
        py::arg("data").noconvert(), py::arg("stacks"), py::arg("ks"), py::arg("run_options"),
        py::arg("density_threshold"), py::arg("local_neighborhood_size"),
        py::arg("cross_validate"), py::arg("cell_folds"), py::arg("gene_folds"),
        py::arg("cv_replicates"), py::arg("cv_seed"), py::arg("cv_rule"));
  // (name, kind) of every solver option: kind "integer", "real" or "text" (a choice, or a
  // choice or a number), as the library's option table says
  m.def("solver_option_kinds", [] {
    std::vector<std::pair<std::string, std::string>> kinds;
    using K = knmf::SolverOptionField::Kind;
    for (const auto& f : knmf::solver_option_fields())
      kinds.emplace_back(f.name, f.kind == K::integer ? "integer" : f.kind == K::real ? "real" : "text");
    return kinds;
  });
  // py::array: numpy's array as it is (never converted); the dtypes are checked inside
  m.def("_factorize_csr", &factorize_csr, py::arg("n"), py::arg("g"),
        py::arg("indptr").noconvert(), py::arg("indices").noconvert(),
        py::arg("data").noconvert(), py::arg("dtype"), py::arg("jobs"),
        py::arg("options"), py::arg("batch"), py::arg("format"), py::arg("save_usages"),
        py::arg("progress"), py::arg("progress_seconds"));
  m.def("_factorize_dense", &factorize_dense, py::arg("X").noconvert(), py::arg("dtype"),
        py::arg("jobs"), py::arg("options"), py::arg("batch"), py::arg("format"),
        py::arg("save_usages"), py::arg("progress"), py::arg("progress_seconds"));
}
