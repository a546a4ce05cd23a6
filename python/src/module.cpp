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

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "knmf/core/error.hpp"
#include "knmf/core/options.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/random/random_state.hpp"
#include "knmf/run/in_memory.hpp"
#include "knmf/solver/options.hpp"

namespace py = pybind11;

namespace {

struct ModuleState {
  bool we_initialized = false;  ///< this module called Kokkos::initialize
  bool forked = false;          ///< a fork happened after Kokkos started its threads
  int threads = 0;              ///< set_num_threads before the first use (0: OMP_NUM_THREADS)
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
}

/// Kokkos up (once), OpenBLAS' kernels chosen as the driver chooses them.
void ensure_initialized() {
  require_usable();
  if (Kokkos::is_initialized()) return;
  knmf::ensure_blas_kernels(0, nullptr);
  Kokkos::InitializationSettings settings;
  if (state.threads > 0) settings.set_num_threads(state.threads);
  // Kokkos' start-up advice on OMP_PROC_BIND is for programs; binding here is what the
  // environment of the Python process says (OpenMP read it when it was loaded)
  settings.set_disable_warnings(true);
  Kokkos::initialize(settings);
  state.we_initialized = true;
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
    py::gil_scoped_release release;
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
bool index_width(const py::array& a, const char* what) {
  if (a.ndim() != 1 || !(a.flags() & py::array::c_style))
    throw std::invalid_argument(std::string("X: ") + what + " must be a contiguous 1-D array");
  if (a.dtype().is(py::dtype::of<std::int64_t>())) return true;
  if (a.dtype().is(py::dtype::of<std::int32_t>())) return false;
  knmf::input_error("X: ", what, " has type ", std::string(py::str(a.dtype())), ", expected int32 or int64");
}

/// float32 / float64 values (true: float64).
bool value_width(const py::array& a) {
  if (a.dtype().is(py::dtype::of<double>())) return true;
  if (a.dtype().is(py::dtype::of<float>())) return false;
  knmf::input_error("X has values of type ", std::string(py::str(a.dtype())), ", expected float32 or float64");
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
  knmf::HostX X;
  X.layout = knmf::HostX::Layout::csr;
  X.n = n;
  X.g = g;
  X.offsets_64 = index_width(indptr, "indptr");
  X.indices_64 = index_width(indices, "indices");
  X.values_64 = value_width(data);
  if (data.ndim() != 1 || !(data.flags() & py::array::c_style))
    throw std::invalid_argument("X: data must be a contiguous 1-D array");
  if (indptr.shape(0) != n + 1)
    knmf::input_error("X: indptr has ", indptr.shape(0), " entries, expected ", n + 1);
  X.offsets = indptr.data();
  X.indices = indices.data();
  X.values = data.data();
  const std::int64_t first = X.offsets_64 ? static_cast<const std::int64_t*>(X.offsets)[0]
                                          : static_cast<const std::int32_t*>(X.offsets)[0];
  const std::int64_t nnz = X.offsets_64 ? static_cast<const std::int64_t*>(X.offsets)[n]
                                        : static_cast<const std::int32_t*>(X.offsets)[n];
  if (first != 0 || nnz < 0 || indices.shape(0) < nnz || data.shape(0) < nnz)
    knmf::input_error("X: indptr runs from ", first, " to ", nnz, " but indices has ",
                      indices.shape(0), " and data ", data.shape(0), " entries");
  return factorize_x(X, dtype, jobs, options, batch, format, save_usages, progress,
                     progress_seconds);
}

/// A dense X, C- or Fortran-ordered, read where it is.
py::dict factorize_dense(const py::array& a, const std::string& dtype,
                         const std::vector<std::tuple<int, int, std::int64_t>>& jobs,
                         const std::vector<std::pair<std::string, std::string>>& options,
                         int batch, const std::string& format, bool save_usages,
                         const py::object& progress, double progress_seconds) {
  if (a.ndim() != 2) knmf::input_error("X has ", a.ndim(), " dimension(s), expected 2");
  knmf::HostX X;
  if (a.flags() & py::array::c_style)
    X.layout = knmf::HostX::Layout::dense_rows;
  else if (a.flags() & py::array::f_style)
    X.layout = knmf::HostX::Layout::dense_columns;
  else
    throw std::invalid_argument("X must be C- or Fortran-contiguous");
  X.n = a.shape(0);
  X.g = a.shape(1);
  X.values_64 = value_width(a);
  X.values = a.data();
  return factorize_x(X, dtype, jobs, options, batch, format, save_usages, progress,
                     progress_seconds);
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
  m.def("set_num_threads", [](int n) {
    if (n < 1) knmf::input_error("knmf.set_num_threads(", n, ") is invalid: it must be at least 1");
    require_usable();
    if (Kokkos::is_initialized()) {
      if (knmf::concurrency() == n) return;
      throw std::runtime_error("knmf.set_num_threads(" + std::to_string(n) +
                               ") comes too late: knmf already runs with " +
                               std::to_string(knmf::concurrency()) +
                               " threads (call it before knmf's first computation)");
    }
    state.threads = n;
  });
  m.def("_finalize", [] {
    // from atexit: only if this module started Kokkos, and not in a forked child
    if (state.we_initialized && !state.forked && Kokkos::is_initialized()) Kokkos::finalize();
  });
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
  m.def("solver_option_names", [] {
    std::vector<std::string> names;
    for (const auto& f : knmf::solver_option_fields()) names.emplace_back(f.name);
    return names;
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
