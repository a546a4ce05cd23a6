/// \file
/// ResultsWriter and ResultsReader: knmf's results file (include/knmf/io/results_file.hpp,
/// docs/results-file.md).
///
/// The durability argument in short: after creation (under a temporary name, renamed into
/// place once closed) the writer never changes HDF5 metadata -- all storage is allocated
/// early, no dataset is filtered, no attribute is added -- so every later write is a plain
/// overwrite of raw bytes at fixed addresses. Order then does the rest: a replicate's data is
/// flushed before its completion flag is written, and `complete` is written (in place, one
/// value) after every flag is flushed.

#include "knmf/io/results_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>
#include <system_error>
#include <utility>

#include "knmf/core/error.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/io/atomic_file.hpp"
#include "knmf/io/detail/hdf5.hpp"
#include "results_internal.hpp"

namespace knmf::io {

namespace h5 = detail::h5;
namespace fs = std::filesystem;

ReplicateState to_state(ReplicateStatus s) {
  switch (s) {
    case ReplicateStatus::converged: return ReplicateState::converged;
    case ReplicateStatus::max_iter: return ReplicateState::max_iter;
    case ReplicateStatus::non_finite: return ReplicateState::non_finite;
  }
  return ReplicateState::pending;
}

std::string to_string(ReplicateState s) {
  switch (s) {
    case ReplicateState::pending: return "pending";
    case ReplicateState::converged: return "converged";
    case ReplicateState::max_iter: return "max_iter";
    case ReplicateState::non_finite: return "non_finite";
  }
  return "?";
}

namespace detail::results {

constexpr hsize_t kSessionSlots = 256;
constexpr std::size_t kSessionBytes = 512;
/// Upper bound on one chunk (HDF5's limit is 4 GiB).
constexpr std::int64_t kMaxChunkBytes = std::int64_t{1} << 30;

std::string group_path(int k) { return "/k_" + std::to_string(k); }

/// The shortest decimal form that reads back as the same double (like Python's repr).
std::string format_double(double v) {
  char buf[40];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) return buf;
  }
  return buf;
}

std::string iso_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string json_string(const std::string& s, std::size_t max_bytes) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size() && i < max_bytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

/// One line of /sessions: who opened the file for writing, where and when.
std::string session_record(const RunInfo& info) {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::ostringstream os;
  os << "{\"started\": " << json_string(iso_now(), 32)
     << ", \"knmf_version\": " << json_string(info.knmf_version, 32)
     << ", \"kokkos_version\": " << json_string(info.kokkos_version, 32)
     << ", \"backend\": " << json_string(info.backend, 32)
     << ", \"device\": " << json_string(info.device, 160)
     << ", \"batch_size\": " << info.batch_size << ", \"host\": " << json_string(host, 64)
     << ", \"pid\": " << ::getpid() << "}";
  std::string s = os.str();
  KNMF_ASSERT(s.size() < kSessionBytes, "session record too long");
  return s;
}

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s;
}


// ---- HDF5 pieces ---------------------------------------------------------------------------

/// File access: the oldest file format that holds the schema (superblock version 0: no
/// SWMR status flags, so a killed writer never leaves a file that readers refuse).
h5::PropList file_access(bool locking) {
  h5::PropList fapl(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_EARLIEST, H5F_LIBVER_V18);
  H5Pset_file_locking(fapl.get(), locking, true);
  return fapl;
}

h5::Datatype status_type(hid_t base) {
  h5::Datatype t(H5Tenum_create(base));
  const std::pair<const char*, std::int8_t> values[] = {
      {"pending", 0}, {"converged", 1}, {"max_iter", 2}, {"non_finite", 3}};
  for (const auto& [name, v] : values) H5Tenum_insert(t.get(), name, &v);
  return t;
}

h5::Datatype vlen_utf8() {
  h5::Datatype t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

h5::Datatype session_type() {
  h5::Datatype t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), kSessionBytes);
  H5Tset_strpad(t.get(), H5T_STR_NULLPAD);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

std::string shape_text(const std::vector<hsize_t>& d) {
  std::string s = "(";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + (d.size() == 1 ? ",)" : ")");
}

std::string range_text(const std::vector<hsize_t>& start, const std::vector<hsize_t>& count) {
  std::string s = "[";
  for (std::size_t i = 0; i < start.size(); ++i)
    s += (i ? ", " : "") + std::to_string(start[i]) + ":" + std::to_string(start[i] + count[i]);
  return s + "]";
}

/// A dataset of the schema. Without gzip: storage allocated at creation and never filled by
/// HDF5 (the writer writes what must be zero), so later writes never touch metadata.
h5::Dataset create_dataset(const std::string& file, hid_t loc, const std::string& name, hid_t type,
                           const std::vector<hsize_t>& dims, const std::vector<hsize_t>& chunk,
                           int gzip) {
  h5::Dataspace space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  h5::PropList dcpl(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_obj_track_times(dcpl.get(), false);
  if (!chunk.empty()) {
    H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
    if (gzip > 0) {
      H5Pset_shuffle(dcpl.get());
      H5Pset_deflate(dcpl.get(), static_cast<unsigned>(gzip));
    }
  }
  // Variable-length strings (/genes) need HDF5's fill handling; they are written whole at
  // creation and never again, so their allocation time does not matter.
  if (gzip == 0 && H5Tis_variable_str(type) <= 0) {
    H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY);
    H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
  }
  h5::Dataset d(H5Dcreate2(loc, name.c_str(), type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  if (!d) h5::fail(file, "cannot create dataset " + name);
  return d;
}

h5::Group create_group(const std::string& file, hid_t loc, const std::string& name) {
  h5::PropList gcpl(H5Pcreate(H5P_GROUP_CREATE));
  H5Pset_obj_track_times(gcpl.get(), false);
  h5::Group g(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT));
  if (!g) h5::fail(file, "cannot create group " + name);
  return g;
}

void write_block(const std::string& file, hid_t d, const std::string& name, hid_t mem,
                 const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
                 const void* buf) {
  h5::Dataspace fspace(H5Dget_space(d));
  h5::Dataspace mspace(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr));
  if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
      H5Dwrite(d, mem, mspace.get(), fspace.get(), H5P_DEFAULT, buf) < 0)
    h5::fail(file, "cannot write " + name + range_text(start, count));
}

void read_block(const std::string& file, hid_t d, const std::string& name, hid_t mem,
                const std::vector<hsize_t>& start, const std::vector<hsize_t>& count, void* buf) {
  h5::Dataspace fspace(H5Dget_space(d));
  h5::Dataspace mspace(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr));
  if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
      H5Dread(d, mem, mspace.get(), fspace.get(), H5P_DEFAULT, buf) < 0)
    h5::fail(file, "cannot read " + name + range_text(start, count));
}

void write_all(const std::string& file, hid_t d, const std::string& name, hid_t mem, const void* buf) {
  if (H5Dwrite(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) h5::fail(file, "cannot write " + name);
}

void read_all(const std::string& file, hid_t d, const std::string& name, hid_t mem, void* buf) {
  if (H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) h5::fail(file, "cannot read " + name);
}

/// The datasets of one /k_<k> group.
struct KGroup {
  int k = 0;
  std::string name;  // "/k_7"
  h5::Dataset spectra, usages, seeds, iterations, error_at_init, final_error, status, seconds,
      completed;
  std::string ds(const char* leaf) const { return name + "/" + leaf; }
};

bool usages_double(const RunInfo& info) { return info.dtype == Dtype::float64; }

std::vector<hsize_t> spectra_chunk(int k, std::int64_t g) {
  const std::int64_t cols = std::clamp<std::int64_t>(kMaxChunkBytes / (8 * std::int64_t{k}), 1, g);
  return {1, static_cast<hsize_t>(k), static_cast<hsize_t>(cols)};
}

std::vector<hsize_t> usages_chunk(int k, std::int64_t n, std::size_t elem) {
  const std::int64_t rows =
      std::clamp<std::int64_t>(kMaxChunkBytes / (static_cast<std::int64_t>(elem) * k), 1, n);
  return {1, static_cast<hsize_t>(rows), static_cast<hsize_t>(k)};
}

// ---- the run's description (root attributes, /genes, /jobs) -----------------------------

void write_info(const std::string& file, hid_t fid, const RunInfo& r, bool complete) {
  h5::Group root(H5Gopen2(fid, "/", H5P_DEFAULT));
  const hid_t g = root.get();
  h5::write_string_attr(file, g, "format", kFormat);
  h5::write_int_scalar_attr(file, g, "format_version", results_format_version);
  h5::write_string_attr(file, g, "knmf_version", r.knmf_version);
  h5::write_string_attr(file, g, "kokkos_version", r.kokkos_version);
  h5::write_string_attr(file, g, "backend", r.backend);
  h5::write_string_attr(file, g, "device", r.device);
  h5::write_int_scalar_attr(file, g, "batch_size", r.batch_size);
  h5::write_string_attr(file, g, "created", r.created);
  h5::write_string_attr(file, g, "input", r.input);
  h5::write_int_attr(file, g, "input_shape", {r.n_cells, r.n_genes()});
  h5::write_int_attr(file, g, "ks", std::vector<std::int64_t>(r.ks.begin(), r.ks.end()));
  h5::write_int_scalar_attr(file, g, "n_iter", r.n_iter);
  h5::write_int_scalar_attr(file, g, "seed", r.seed);
  h5::write_string_attr(file, g, "solver", to_string(r.solver.solver));
  h5::write_double_scalar_attr(file, g, "tol", r.solver.tol);
  h5::write_int_scalar_attr(file, g, "max_iter", r.solver.max_iter);
  h5::write_int_scalar_attr(file, g, "check_every", r.solver.check_every);
  h5::write_double_scalar_attr(file, g, "alpha_W", r.solver.alpha_W);
  h5::write_double_scalar_attr(file, g, "alpha_H", r.solver.alpha_H);
  h5::write_double_scalar_attr(file, g, "l1_ratio", r.solver.l1_ratio);
  h5::write_string_attr(file, g, "zero_guard", to_string(r.solver.zero_guard));
  h5::write_double_scalar_attr(file, g, "eps", r.solver.eps);
  h5::write_string_attr(file, g, "dtype", to_string(r.dtype));
  h5::write_string_attr(file, g, "beta_loss", r.beta_loss);
  h5::write_int_scalar_attr(file, g, "save_usages", r.save_usages ? 1 : 0);
  h5::write_int_scalar_attr(file, g, "complete", complete ? 1 : 0);

  // /genes: variable-length UTF-8, as AnnData writes its var index.
  const auto ng = static_cast<hsize_t>(r.genes.size());
  h5::Datatype str = vlen_utf8();
  h5::Dataset genes = create_dataset(file, fid, "/genes", str.get(), {ng}, {}, 0);
  std::vector<const char*> ptrs(r.genes.size());
  for (std::size_t i = 0; i < r.genes.size(); ++i) ptrs[i] = r.genes[i].c_str();
  write_all(file, genes.get(), "/genes", str.get(), ptrs.data());

  create_group(file, fid, "/jobs");
  const auto nj = static_cast<hsize_t>(r.jobs.size());
  std::vector<std::int64_t> k, iter, seed;
  for (const Job& j : r.jobs) {
    k.push_back(j.k);
    iter.push_back(j.iter);
    seed.push_back(j.seed);
  }
  for (auto [leaf, col] : {std::pair{"k", &k}, std::pair{"iter", &iter}, std::pair{"seed", &seed}}) {
    const std::string name = std::string("/jobs/") + leaf;
    h5::Dataset d = create_dataset(file, fid, name, H5T_STD_I64LE, {nj}, {}, 0);
    write_all(file, d.get(), name, H5T_NATIVE_INT64, col->data());
  }
}

std::string need_string(const std::string& file, hid_t root, const char* name) {
  auto v = h5::string_attr(root, name);
  if (!v) input_error(file, ": root attribute ", name, " is missing or not a string");
  return *v;
}

std::vector<std::int64_t> need_ints(const std::string& file, hid_t root, const char* name) {
  auto v = h5::int_attr(root, name);
  if (!v) input_error(file, ": root attribute ", name, " is missing or not numeric");
  return *v;
}

std::int64_t need_int(const std::string& file, hid_t root, const char* name) {
  auto v = need_ints(file, root, name);
  if (v.size() != 1) input_error(file, ": root attribute ", name, " holds ", v.size(), " values; expected 1");
  return v[0];
}

double need_double(const std::string& file, hid_t root, const char* name) {
  auto v = h5::double_attr(root, name);
  if (!v || v->size() != 1) input_error(file, ": root attribute ", name, " is missing or not one number");
  return (*v)[0];
}

/// The `format` check shared by the reader and the writer; empty when fine, else why not.
std::string format_problem(hid_t fid) {
  h5::Group root(H5Gopen2(fid, "/", H5P_DEFAULT));
  const auto fmt = h5::string_attr(root.get(), "format");
  if (!fmt) return "no root attribute format = \"knmf-results\"";
  if (*fmt != kFormat) return "its root attribute format is \"" + *fmt + "\", not \"knmf-results\"";
  return {};
}

h5::Dataset open_dataset(const std::string& file, hid_t fid, const std::string& name,
                         const std::vector<hsize_t>& expect) {
  if (!h5::exists(fid, name) || h5::object_type(fid, name) != H5I_DATASET)
    input_error(file, ": dataset ", name, " is missing");
  h5::Dataset d(H5Dopen2(fid, name.c_str(), H5P_DEFAULT));
  if (!d) h5::fail(file, "cannot open " + name);
  const auto got = h5::dims(d.get());
  if (got != expect)
    input_error(file, ": ", name, " has shape ", shape_text(got), "; expected ", shape_text(expect));
  return d;
}

/// Everything of the run that the file records (the creating session's provenance).
RunInfo read_info(const std::string& file, hid_t fid) {
  const std::string problem = format_problem(fid);
  if (!problem.empty()) input_error(file, " is not a knmf results file (", problem, ")");
  h5::Group rg(H5Gopen2(fid, "/", H5P_DEFAULT));
  const hid_t root = rg.get();
  const std::int64_t version = need_int(file, root, "format_version");
  if (version > results_format_version || version < 1)
    input_error(file, ": format_version ", version, " is not one this knmf reads (1..",
                results_format_version, "); use a newer knmf");
  RunInfo r;
  r.knmf_version = need_string(file, root, "knmf_version");
  r.kokkos_version = need_string(file, root, "kokkos_version");
  r.backend = need_string(file, root, "backend");
  r.device = need_string(file, root, "device");
  r.batch_size = static_cast<int>(need_int(file, root, "batch_size"));
  r.created = need_string(file, root, "created");
  r.input = need_string(file, root, "input");
  const auto shape = need_ints(file, root, "input_shape");
  if (shape.size() != 2) input_error(file, ": root attribute input_shape holds ", shape.size(), " values; expected 2");
  r.n_cells = shape[0];
  for (auto k : need_ints(file, root, "ks")) r.ks.push_back(static_cast<int>(k));
  r.n_iter = static_cast<int>(need_int(file, root, "n_iter"));
  r.seed = need_int(file, root, "seed");
  r.solver.solver = parse_solver(need_string(file, root, "solver"), file + ": root attribute solver");
  r.solver.tol = need_double(file, root, "tol");
  r.solver.max_iter = static_cast<int>(need_int(file, root, "max_iter"));
  r.solver.check_every = static_cast<int>(need_int(file, root, "check_every"));
  r.solver.alpha_W = need_double(file, root, "alpha_W");
  r.solver.alpha_H = need_double(file, root, "alpha_H");
  r.solver.l1_ratio = need_double(file, root, "l1_ratio");
  r.solver.zero_guard = parse_zero_guard(need_string(file, root, "zero_guard"), file + ": root attribute zero_guard");
  r.solver.eps = need_double(file, root, "eps");
  r.dtype = parse_dtype(need_string(file, root, "dtype"), file + ": root attribute dtype");
  r.beta_loss = need_string(file, root, "beta_loss");
  r.save_usages = need_int(file, root, "save_usages") != 0;
  r.solver.return_W = r.save_usages;
  if (r.ks.empty() || r.n_iter < 1 || r.n_cells < 1 || shape[1] < 1)
    input_error(file, ": its run attributes are inconsistent (ks ", join_ints(r.ks), ", n_iter ",
                r.n_iter, ", input_shape ", shape[0], " x ", shape[1], ")");

  h5::Dataset genes = open_dataset(file, fid, "/genes", {static_cast<hsize_t>(shape[1])});
  r.genes = h5::read_string_dataset(file, genes.get(), "/genes");

  const auto nj = static_cast<hsize_t>(r.ks.size()) * static_cast<hsize_t>(r.n_iter);
  std::vector<std::int64_t> k(nj), iter(nj), seed(nj);
  for (auto [leaf, col] : {std::pair{"k", &k}, std::pair{"iter", &iter}, std::pair{"seed", &seed}}) {
    const std::string name = std::string("/jobs/") + leaf;
    h5::Dataset d = open_dataset(file, fid, name, {nj});
    read_all(file, d.get(), name, H5T_NATIVE_INT64, col->data());
  }
  for (hsize_t i = 0; i < nj; ++i)
    r.jobs.push_back(Job{static_cast<int>(k[i]), static_cast<int>(iter[i]), seed[i], static_cast<std::int64_t>(i)});
  return r;
}

/// Open and check /k_<k> and its datasets.
KGroup open_kgroup(const std::string& file, hid_t fid, const RunInfo& r, int k) {
  KGroup kg;
  kg.k = k;
  kg.name = group_path(k);
  if (!h5::exists(fid, kg.name) || h5::object_type(fid, kg.name) != H5I_GROUP)
    input_error(file, ": group ", kg.name, " is missing (one group per k of the ks attribute)");
  const auto n = static_cast<hsize_t>(r.n_iter);
  const auto kk = static_cast<hsize_t>(k);
  kg.spectra = open_dataset(file, fid, kg.ds("spectra"), {n, kk, static_cast<hsize_t>(r.n_genes())});
  if (r.save_usages)
    kg.usages = open_dataset(file, fid, kg.ds("usages"), {n, static_cast<hsize_t>(r.n_cells), kk});
  kg.seeds = open_dataset(file, fid, kg.ds("seeds"), {n});
  kg.iterations = open_dataset(file, fid, kg.ds("iterations"), {n});
  kg.error_at_init = open_dataset(file, fid, kg.ds("error_at_init"), {n});
  kg.final_error = open_dataset(file, fid, kg.ds("final_error"), {n});
  kg.status = open_dataset(file, fid, kg.ds("status"), {n});
  kg.seconds = open_dataset(file, fid, kg.ds("seconds"), {n});
  kg.completed = open_dataset(file, fid, kg.ds("completed"), {n});
  return kg;
}

/// Create a file holding the whole schema for `r` at `where` (every replicate pending, or
/// as later copied in), returned open.
h5::File build(const std::string& file, const fs::path& where, const RunInfo& r, int gzip,
               bool complete) {
  h5::PropList fapl = file_access(true);
  h5::PropList fcpl(H5Pcreate(H5P_FILE_CREATE));
  H5Pset_obj_track_times(fcpl.get(), false);
  h5::File f(H5Fcreate(where.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()));
  if (!f) h5::fail(file, "cannot create " + where.string());
  write_info(file, f.get(), r, complete);

  h5::Datatype stype = session_type();
  h5::Dataset sessions = create_dataset(file, f.get(), "/sessions", stype.get(), {kSessionSlots}, {}, 0);
  const std::vector<char> empty(kSessionSlots * kSessionBytes, '\0');
  write_all(file, sessions.get(), "/sessions", stype.get(), empty.data());

  const auto n = static_cast<std::size_t>(r.n_iter);
  const hsize_t hn = n;
  h5::Datatype status_file = status_type(H5T_STD_I8LE), status_mem = status_type(H5T_NATIVE_INT8);
  const std::vector<double> zeros(n, 0.0);
  const std::vector<std::int32_t> izeros(n, 0);
  const std::vector<std::int8_t> pending(n, 0);
  const std::vector<std::uint8_t> none(n, 0);
  for (int k : r.ks) {
    const std::string gp = group_path(k);
    h5::Group g = create_group(file, f.get(), gp);
    h5::write_int_scalar_attr(file, g.get(), "k", k);
    h5::write_int_scalar_attr(file, g.get(), "n_iter", r.n_iter);
    const std::string p = gp + "/";
    create_dataset(file, f.get(), p + "spectra", H5T_IEEE_F64LE,
                   {hn, static_cast<hsize_t>(k), static_cast<hsize_t>(r.n_genes())},
                   spectra_chunk(k, r.n_genes()), gzip);
    if (r.save_usages) {
      const bool dbl = usages_double(r);
      create_dataset(file, f.get(), p + "usages", dbl ? H5T_IEEE_F64LE : H5T_IEEE_F32LE,
                     {hn, static_cast<hsize_t>(r.n_cells), static_cast<hsize_t>(k)},
                     usages_chunk(k, r.n_cells, dbl ? 8 : 4), gzip);
    }
    std::vector<std::int64_t> seeds(n, 0);
    for (const Job& j : r.jobs)
      if (j.k == k) seeds[static_cast<std::size_t>(j.iter)] = j.seed;
    auto table = [&](const char* leaf, hid_t ftype, hid_t mtype, const void* init) {
      h5::Dataset d = create_dataset(file, f.get(), p + leaf, ftype, {hn}, {}, 0);
      write_all(file, d.get(), p + leaf, mtype, init);
    };
    table("seeds", H5T_STD_I64LE, H5T_NATIVE_INT64, seeds.data());
    table("iterations", H5T_STD_I32LE, H5T_NATIVE_INT32, izeros.data());
    table("error_at_init", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, zeros.data());
    table("final_error", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, zeros.data());
    table("status", status_file.get(), status_mem.get(), pending.data());
    table("seconds", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, zeros.data());
    table("completed", H5T_STD_U8LE, H5T_NATIVE_UINT8, none.data());
  }
  return f;
}

void close_file(const std::string& file, h5::File& f, const fs::path& where) {
  if (f && H5Fclose(f.release()) < 0) h5::fail(file, "cannot close " + where.string());
}

/// RunInfo checked, ks sorted, job table and provenance filled in.
RunInfo prepare(const RunInfo& in, const std::string& file) {
  RunInfo r = in;
  std::sort(r.ks.begin(), r.ks.end());
  r.ks.erase(std::unique(r.ks.begin(), r.ks.end()), r.ks.end());
  if (r.ks.empty()) input_error(file, ": no k given (-k)");
  for (int k : r.ks)
    if (k < 1) input_error(file, ": -k ", k, " is invalid: k must be >= 1");
  if (r.n_iter < 1) input_error(file, ": --n-iter ", r.n_iter, " is invalid: it must be >= 1");
  if (r.n_cells < 1 || r.genes.empty())
    input_error(file, ": input ", r.input, " has shape ", r.n_cells, " x ", r.genes.size(),
                "; a run needs cells and genes");
  r.solver.validate();
  r.solver.return_W = r.save_usages;
  if (r.jobs.empty()) {
    r.jobs = cnmf_job_table(r.ks, r.n_iter, r.seed);
  } else {
    const std::size_t want = r.ks.size() * static_cast<std::size_t>(r.n_iter);
    if (r.jobs.size() != want)
      input_error(file, ": the job table has ", r.jobs.size(), " rows; -k ", join_ints(r.ks),
                  " with --n-iter ", r.n_iter, " make ", want);
    std::vector<char> seen(want, 0);
    for (std::size_t i = 0; i < r.jobs.size(); ++i) {
      Job& j = r.jobs[i];
      const auto pos = std::lower_bound(r.ks.begin(), r.ks.end(), j.k);
      if (pos == r.ks.end() || *pos != j.k || j.iter < 0 || j.iter >= r.n_iter)
        input_error(file, ": job table row ", i, " (k ", j.k, ", iter ", j.iter, ") is not a replicate of -k ",
                    join_ints(r.ks), " --n-iter ", r.n_iter);
      const std::size_t slot = static_cast<std::size_t>(pos - r.ks.begin()) * r.n_iter + j.iter;
      if (seen[slot]++) input_error(file, ": job table row ", i, " repeats k ", j.k, " iter ", j.iter);
      j.index = static_cast<std::int64_t>(i);
    }
  }
  if (r.knmf_version.empty()) r.knmf_version = knmf::version();
  if (r.kokkos_version.empty()) r.kokkos_version = knmf::kokkos_version();
  if (r.backend.empty()) r.backend = knmf::default_execution_space();
  if (r.device.empty() && knmf::concurrency() > 0) r.device = knmf::device_description();
  return r;
}

/// "--tol 0.0001 --max-iter 1000"-style descriptions of what differs between two runs;
/// empty when they match.
std::pair<std::string, std::string> differences(const RunInfo& a, const RunInfo& b) {
  auto fields = [](const RunInfo& r) {
    std::vector<std::pair<std::string, std::string>> f = {
        {"input", r.input},
        {"input shape", std::to_string(r.n_cells) + " x " + std::to_string(r.n_genes())},
        {"-k", join_ints(r.ks)},
        {"--n-iter", std::to_string(r.n_iter)},
        {"--seed", std::to_string(r.seed)},
        {"--solver", to_string(r.solver.solver)},
        {"--tol", format_double(r.solver.tol)},
        {"--max-iter", std::to_string(r.solver.max_iter)},
        {"--check-every", std::to_string(r.solver.check_every)},
        {"--alpha-usage", format_double(r.solver.alpha_W)},
        {"--alpha-spectra", format_double(r.solver.alpha_H)},
        {"--l1-ratio", format_double(r.solver.l1_ratio)},
        {"--zero-guard", to_string(r.solver.zero_guard)},
        {"--eps", format_double(r.solver.eps)},
        {"--dtype", to_string(r.dtype)},
        {"--beta-loss", r.beta_loss},
        {"--save-usages", r.save_usages ? "on" : "off"},
    };
    return f;
  };
  const auto fa = fields(a), fb = fields(b);
  std::string old_text, new_text;
  auto add = [&](const std::string& name, const std::string& va, const std::string& vb) {
    old_text += (old_text.empty() ? "" : " ") + name + " " + va;
    new_text += (new_text.empty() ? "" : " ") + name + " " + vb;
  };
  bool shape_or_plan_differs = false;
  for (std::size_t i = 0; i < fa.size(); ++i) {
    if (fa[i].second == fb[i].second) continue;
    add(fa[i].first, fa[i].second, fb[i].second);
    if (i == 1 || i == 2 || i == 3 || i == 4) shape_or_plan_differs = true;
  }
  if (a.genes.size() == b.genes.size() && a.genes != b.genes) {
    std::size_t i = 0;
    while (a.genes[i] == b.genes[i]) ++i;
    add("genes", "[" + std::to_string(i) + "] '" + a.genes[i] + "'", "[" + std::to_string(i) + "] '" + b.genes[i] + "'");
  }
  if (!shape_or_plan_differs) {
    for (std::size_t i = 0; i < a.jobs.size() && i < b.jobs.size(); ++i) {
      const Job &x = a.jobs[i], &y = b.jobs[i];
      if (x.k == y.k && x.iter == y.iter && x.seed == y.seed) continue;
      auto row = [i](const Job& j) {
        return "row " + std::to_string(i) + " (k " + std::to_string(j.k) + ", iter " +
               std::to_string(j.iter) + ", seed " + std::to_string(j.seed) + ")";
      };
      add("job table", row(x), row(y));
      break;
    }
  }
  return {old_text, new_text};
}

}  // namespace detail::results

using namespace detail::results;

// ---- ResultsWriter ---------------------------------------------------------------------------

struct ResultsWriter::Impl {
  fs::path path;
  std::string file;
  RunInfo info;
  ResultsWriteOptions opts;
  bool resumed = false;
  bool closed = false;
  bool was_complete = false;  // `complete` was already 1 when opened
  h5::File fid;
  h5::Dataset sessions;
  std::vector<KGroup> groups;                     // in ks order
  std::vector<std::vector<std::uint8_t>> flags;   // committed flags per group, per iter
  std::vector<std::pair<int, int>> buffered;      // (group, iter) written since the last commit
  h5::Datatype status_mem = status_type(H5T_NATIVE_INT8);

  void step(WriteStep s) const {
    if (opts.on_step) opts.on_step(s);
  }

  int group_of(int k) const {
    const auto pos = std::lower_bound(info.ks.begin(), info.ks.end(), k);
    KNMF_ASSERT(pos != info.ks.end() && *pos == k, "k not in the run");
    return static_cast<int>(pos - info.ks.begin());
  }

  void check_open() const {
    if (closed || !fid) input_error(file, ": ResultsWriter used after finish()");
  }

  void flush() {
    if (H5Fflush(fid.get(), H5F_SCOPE_LOCAL) < 0) h5::fail(file, "cannot flush");
    if (!opts.fsync) return;
    void* handle = nullptr;
    if (H5Fget_vfd_handle(fid.get(), H5P_DEFAULT, &handle) < 0 || !handle)
      h5::fail(file, "cannot get the file descriptor to sync");
    if (::fsync(*static_cast<int*>(handle)) != 0)
      input_error(file, ": fsync failed: ", std::strerror(errno));
  }

  void create() {
    {
      AtomicFile tmp(path, file);  // removed again unless committed
      info.created = iso_now();
      h5::File f = build(file, tmp.temp(), info, 0, false);
      write_session(f.get(), 0);
      close_file(file, f, tmp.temp());
      step(WriteStep::created);
      tmp.commit(AtomicFile::Replace::no);
    }
    open_for_writing();
  }

  void resume() {
    resumed = true;
    // Inspect read-only first: a file that is not ours is never opened for writing.
    RunInfo old;
    {
      if (H5Fis_hdf5(file.c_str()) <= 0)
        input_error(file, " exists and is not a knmf results file (not an HDF5 file); refusing to "
                    "overwrite it: use a new -o file");
      h5::PropList fapl = file_access(false);
      h5::File f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get()));
      if (!f) h5::fail(file, "cannot open");
      const std::string problem = format_problem(f.get());
      if (!problem.empty())
        input_error(file, " exists and is not a knmf results file (", problem,
                    "); refusing to overwrite it: use a new -o file");
      old = read_info(file, f.get());
    }
    const auto [was, now] = differences(old, info);
    if (!was.empty())
      input_error(file, " was written with ", was, "; this run asks ", now,
                  ": use a new -o file or the same options");
    info.created = old.created;
    open_for_writing();
    // This session's provenance goes to the first free slot (raw data: no metadata change).
    auto slots = h5::read_string_dataset(file, sessions.get(), "/sessions");
    std::size_t slot = 0;
    while (slot + 1 < slots.size() && !slots[slot].empty()) ++slot;
    write_session(fid.get(), slot);
    flush();
  }

  void write_session(hid_t f, std::size_t slot) {
    h5::Dataset d(H5Dopen2(f, "/sessions", H5P_DEFAULT));
    if (!d) h5::fail(file, "cannot open /sessions");
    std::vector<char> buf(kSessionBytes, '\0');
    const std::string rec = session_record(info);
    std::memcpy(buf.data(), rec.data(), rec.size());
    h5::Datatype t = session_type();
    write_block(file, d.get(), "/sessions", t.get(), {slot}, {1}, buf.data());
  }

  void open_for_writing() {
    h5::PropList fapl = file_access(true);
    fid = h5::File(H5Fopen(file.c_str(), H5F_ACC_RDWR, fapl.get()));
    if (!fid) h5::fail(file, "cannot open for writing (is another knmf run writing it, or is it open in this process?)");
    sessions = open_dataset(file, fid.get(), "/sessions", {kSessionSlots});
    {
      h5::Group root(H5Gopen2(fid.get(), "/", H5P_DEFAULT));
      was_complete = need_int(file, root.get(), "complete") != 0;
    }
    for (int k : info.ks) {
      groups.push_back(open_kgroup(file, fid.get(), info, k));
      std::vector<std::uint8_t> f(static_cast<std::size_t>(info.n_iter));
      read_all(file, groups.back().completed.get(), groups.back().ds("completed"), H5T_NATIVE_UINT8, f.data());
      flags.push_back(std::move(f));
    }
  }

  void close() {
    sessions.reset();
    groups.clear();
    if (fid && H5Fclose(fid.release()) < 0) {
      closed = true;
      h5::fail(file, "cannot close");
    }
    closed = true;
  }

  /// Rewrite the completed file with compressed spectra and usages, then replace it.
  void repack() {
    AtomicFile tmp(path, file);  // removed again unless committed
    {
      RunInfo stored = read_info(file, fid.get());
      h5::File out = build(file, tmp.temp(), stored, opts.gzip_level, true);
      {
        h5::Datatype st = session_type();
        std::vector<char> buf(kSessionSlots * kSessionBytes);
        read_all(file, sessions.get(), "/sessions", st.get(), buf.data());
        h5::Dataset d(H5Dopen2(out.get(), "/sessions", H5P_DEFAULT));
        write_all(file, d.get(), "/sessions", st.get(), buf.data());
      }
      const auto n = static_cast<std::size_t>(info.n_iter);
      for (const KGroup& src : groups) {
        KGroup dst = open_kgroup(file, out.get(), stored, src.k);
        auto copy = [&](const h5::Dataset& from, const h5::Dataset& to, const std::string& name,
                        hid_t mem, std::size_t elem) {
          std::vector<unsigned char> buf(n * elem);
          read_all(file, from.get(), name, mem, buf.data());
          write_all(file, to.get(), name, mem, buf.data());
        };
        copy(src.iterations, dst.iterations, src.ds("iterations"), H5T_NATIVE_INT32, 4);
        copy(src.error_at_init, dst.error_at_init, src.ds("error_at_init"), H5T_NATIVE_DOUBLE, 8);
        copy(src.final_error, dst.final_error, src.ds("final_error"), H5T_NATIVE_DOUBLE, 8);
        copy(src.status, dst.status, src.ds("status"), status_mem.get(), 1);
        copy(src.seconds, dst.seconds, src.ds("seconds"), H5T_NATIVE_DOUBLE, 8);
        copy(src.completed, dst.completed, src.ds("completed"), H5T_NATIVE_UINT8, 1);
        const auto k = static_cast<hsize_t>(src.k), g = static_cast<hsize_t>(info.n_genes()),
                   cells = static_cast<hsize_t>(info.n_cells);
        std::vector<double> buf;
        for (hsize_t it = 0; it < n; ++it) {
          buf.resize(k * g);
          read_block(file, src.spectra.get(), src.ds("spectra"), H5T_NATIVE_DOUBLE, {it, 0, 0}, {1, k, g}, buf.data());
          write_block(file, dst.spectra.get(), dst.ds("spectra"), H5T_NATIVE_DOUBLE, {it, 0, 0}, {1, k, g}, buf.data());
          if (info.save_usages) {
            buf.resize(cells * k);
            read_block(file, src.usages.get(), src.ds("usages"), H5T_NATIVE_DOUBLE, {it, 0, 0}, {1, cells, k}, buf.data());
            write_block(file, dst.usages.get(), dst.ds("usages"), H5T_NATIVE_DOUBLE, {it, 0, 0}, {1, cells, k}, buf.data());
          }
        }
      }
      copy_extra_objects(file, fid.get(), out.get(), stored);
      close_file(file, out, tmp.temp());
    }
    close();
    tmp.commit(AtomicFile::Replace::yes);
  }
};

ResultsWriter::ResultsWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResultsWriter::ResultsWriter(ResultsWriter&&) noexcept = default;
ResultsWriter& ResultsWriter::operator=(ResultsWriter&&) noexcept = default;

ResultsWriter::~ResultsWriter() {
  if (!impl_ || impl_->closed) return;
  h5::ErrorSilencer quiet;
  impl_->sessions.reset();
  impl_->groups.clear();
  impl_->fid.reset();
}

ResultsWriter ResultsWriter::create_or_resume(const fs::path& path, const RunInfo& info,
                                              const ResultsWriteOptions& opts) {
  h5::ErrorSilencer quiet;
  auto m = std::make_unique<Impl>();
  m->path = path;
  m->file = path.string();
  m->opts = opts;
  if (opts.gzip_level < 0 || opts.gzip_level > 9)
    input_error(m->file, ": gzip level ", opts.gzip_level, " is not in 0..9");
  if (opts.gzip_level > 0 && H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0)
    input_error(m->file, ": this HDF5 library has no gzip (deflate) filter; use gzip level 0");
  m->info = prepare(info, m->file);
  remove_leftover_temps(path);  // of killed runs (a live writer's temporary is left alone)
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (fs::exists(st)) {
    if (fs::is_directory(st)) input_error(m->file, " is a folder, not a results file");
    m->resume();
  } else {
    m->create();
  }
  return ResultsWriter(std::move(m));
}

const fs::path& ResultsWriter::path() const { return impl_->path; }
const RunInfo& ResultsWriter::info() const { return impl_->info; }
bool ResultsWriter::resumed() const { return impl_->resumed; }

std::vector<Job> ResultsWriter::pending() const {
  const Impl& m = *impl_;
  std::vector<Job> out;
  for (const Job& j : m.info.jobs) {
    const int g = m.group_of(j.k);
    if (m.flags[static_cast<std::size_t>(g)][static_cast<std::size_t>(j.iter)]) continue;
    if (std::find(m.buffered.begin(), m.buffered.end(), std::pair{g, j.iter}) != m.buffered.end()) continue;
    out.push_back(j);
  }
  return out;
}

namespace {
const Job& table_job(const std::string& file, const RunInfo& info, const Job& j) {
  if (j.index < 0 || j.index >= static_cast<std::int64_t>(info.jobs.size()) ||
      info.jobs[static_cast<std::size_t>(j.index)].k != j.k ||
      info.jobs[static_cast<std::size_t>(j.index)].iter != j.iter ||
      info.jobs[static_cast<std::size_t>(j.index)].seed != j.seed)
    input_error(file, ": replicate k ", j.k, " iter ", j.iter, " seed ", j.seed, " (job ", j.index,
                ") is not in the job table of the run");
  return info.jobs[static_cast<std::size_t>(j.index)];
}
}  // namespace

bool ResultsWriter::done(const Job& job) const {
  const Impl& m = *impl_;
  const Job& j = table_job(m.file, m.info, job);
  return m.flags[static_cast<std::size_t>(m.group_of(j.k))][static_cast<std::size_t>(j.iter)] != 0;
}

std::int64_t ResultsWriter::n_done() const {
  std::int64_t n = 0;
  for (const auto& f : impl_->flags) n += std::count(f.begin(), f.end(), std::uint8_t{1});
  return n;
}

void ResultsWriter::write(const ReplicateResult& r) {
  h5::ErrorSilencer quiet;
  Impl& m = *impl_;
  m.check_open();
  const Job& j = table_job(m.file, m.info, r.job);
  const int gi = m.group_of(j.k);
  const KGroup& kg = m.groups[static_cast<std::size_t>(gi)];
  if (m.flags[static_cast<std::size_t>(gi)][static_cast<std::size_t>(j.iter)])
    input_error(m.file, ": replicate k ", j.k, " iter ", j.iter,
                " is already committed (committed data is never overwritten)");
  const std::int64_t n = m.info.n_cells, g = m.info.n_genes(), k = j.k;
  if (r.n != n || r.g != g || static_cast<std::int64_t>(r.H.size()) != k * g)
    input_error(m.file, ": replicate k ", k, " iter ", j.iter, " has X shape ", r.n, " x ", r.g,
                " and ", r.H.size(), " spectra values; the run has ", n, " x ", g, " (", k * g, " values)");
  if (m.info.save_usages && static_cast<std::int64_t>(r.W.size()) != n * k)
    input_error(m.file, ": replicate k ", k, " iter ", j.iter, " has ", r.W.size(),
                " usage values; the run saves usages (", n * k, " values)");

  // Until the data is rewritten completely the replicate is not eligible for a commit.
  const std::pair<int, int> key{gi, j.iter};
  m.buffered.erase(std::remove(m.buffered.begin(), m.buffered.end(), key), m.buffered.end());
  const auto it = static_cast<hsize_t>(j.iter);
  const auto hk = static_cast<hsize_t>(k), hg = static_cast<hsize_t>(g), hn = static_cast<hsize_t>(n);
  write_block(m.file, kg.spectra.get(), kg.ds("spectra"), H5T_NATIVE_DOUBLE, {it, 0, 0}, {1, hk, hg}, r.H.data());
  if (m.info.save_usages)
    write_block(m.file, kg.usages.get(), kg.ds("usages"), H5T_NATIVE_DOUBLE, {it, 0, 0}, {1, hn, hk}, r.W.data());
  const std::int32_t iters = r.n_iter;
  const auto state = static_cast<std::int8_t>(to_state(r.status));
  write_block(m.file, kg.iterations.get(), kg.ds("iterations"), H5T_NATIVE_INT32, {it}, {1}, &iters);
  write_block(m.file, kg.error_at_init.get(), kg.ds("error_at_init"), H5T_NATIVE_DOUBLE, {it}, {1}, &r.error_at_init);
  write_block(m.file, kg.final_error.get(), kg.ds("final_error"), H5T_NATIVE_DOUBLE, {it}, {1}, &r.final_error);
  write_block(m.file, kg.status.get(), kg.ds("status"), m.status_mem.get(), {it}, {1}, &state);
  write_block(m.file, kg.seconds.get(), kg.ds("seconds"), H5T_NATIVE_DOUBLE, {it}, {1}, &r.seconds);
  m.buffered.push_back(key);
}

void ResultsWriter::commit() {
  h5::ErrorSilencer quiet;
  Impl& m = *impl_;
  m.check_open();
  if (m.buffered.empty()) return;
  m.flush();
  m.step(WriteStep::data_flushed);
  auto next = m.flags;
  for (const auto& [gi, iter] : m.buffered) next[static_cast<std::size_t>(gi)][static_cast<std::size_t>(iter)] = 1;
  for (std::size_t gi = 0; gi < m.groups.size(); ++gi) {
    if (next[gi] == m.flags[gi]) continue;
    const KGroup& kg = m.groups[gi];
    write_all(m.file, kg.completed.get(), kg.ds("completed"), H5T_NATIVE_UINT8, next[gi].data());
  }
  m.step(WriteStep::flags_written);
  m.flush();
  m.flags = std::move(next);
  m.buffered.clear();
  m.step(WriteStep::committed);
}

bool ResultsWriter::finish() {
  h5::ErrorSilencer quiet;
  Impl& m = *impl_;
  m.check_open();
  commit();
  const bool all = n_done() == static_cast<std::int64_t>(m.info.jobs.size());
  if (all && !m.was_complete) {
    m.step(WriteStep::completing);
    if (m.opts.gzip_level > 0) {
      m.repack();
    } else {
      h5::Group root(H5Gopen2(m.fid.get(), "/", H5P_DEFAULT));
      h5::overwrite_int_attr(m.file, root.get(), "complete", 1);
      m.flush();
    }
    m.step(WriteStep::completed);
  }
  m.close();
  return all;
}

// ---- ResultsReader ---------------------------------------------------------------------------

struct ResultsReader::Impl {
  fs::path path;
  std::string file;
  h5::File fid;
  RunInfo info;
  bool complete = false;
  int format_version = 0;
  std::vector<KGroup> groups;
  h5::Datatype status_mem = status_type(H5T_NATIVE_INT8);

  const KGroup& group(int k) const {
    const auto pos = std::lower_bound(info.ks.begin(), info.ks.end(), k);
    if (pos == info.ks.end() || *pos != k)
      input_error(file, " has no k = ", k, " (ks: ", join_ints(info.ks), ")");
    return groups[static_cast<std::size_t>(pos - info.ks.begin())];
  }

  void check_iter(int k, int iter) const {
    if (iter < 0 || iter >= info.n_iter)
      input_error(file, ": replicate ", iter, " of k = ", k, " is outside [0, ", info.n_iter, ")");
  }
};

ResultsReader::ResultsReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResultsReader::ResultsReader(ResultsReader&&) noexcept = default;
ResultsReader& ResultsReader::operator=(ResultsReader&&) noexcept = default;
ResultsReader::~ResultsReader() {
  if (!impl_) return;
  h5::ErrorSilencer quiet;
  impl_->groups.clear();
  impl_->fid.reset();
}

ResultsReader ResultsReader::open(const fs::path& path) {
  h5::ErrorSilencer quiet;
  auto m = std::make_unique<Impl>();
  m->path = path;
  m->file = path.string();
  std::error_code ec;
  if (!fs::exists(path, ec)) input_error(m->file, ": no such file");
  if (fs::is_directory(path, ec)) input_error(m->file, " is a folder, not a results file");
  if (H5Fis_hdf5(m->file.c_str()) <= 0)
    input_error(m->file, " is not a knmf results file (not an HDF5 file)");
  h5::PropList fapl = file_access(false);
  m->fid = h5::File(H5Fopen(m->file.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!m->fid) h5::fail(m->file, "cannot open");
  m->info = read_info(m->file, m->fid.get());
  h5::Group root(H5Gopen2(m->fid.get(), "/", H5P_DEFAULT));
  m->complete = need_int(m->file, root.get(), "complete") != 0;
  m->format_version = static_cast<int>(need_int(m->file, root.get(), "format_version"));
  for (int k : m->info.ks) m->groups.push_back(open_kgroup(m->file, m->fid.get(), m->info, k));
  return ResultsReader(std::move(m));
}

const fs::path& ResultsReader::path() const { return impl_->path; }
const RunInfo& ResultsReader::info() const { return impl_->info; }
bool ResultsReader::complete() const { return impl_->complete; }
const std::vector<int>& ResultsReader::ks() const { return impl_->info.ks; }
int ResultsReader::n_iter() const { return impl_->info.n_iter; }
std::int64_t ResultsReader::n_cells() const { return impl_->info.n_cells; }
std::int64_t ResultsReader::n_genes() const { return impl_->info.n_genes(); }
bool ResultsReader::has_usages() const { return impl_->info.save_usages; }

std::vector<std::string> ResultsReader::sessions() const {
  h5::ErrorSilencer quiet;
  const Impl& m = *impl_;
  h5::Dataset d = open_dataset(m.file, m.fid.get(), "/sessions", {kSessionSlots});
  auto all = h5::read_string_dataset(m.file, d.get(), "/sessions");
  all.erase(std::remove(all.begin(), all.end(), std::string()), all.end());
  return all;
}

std::vector<std::uint8_t> ResultsReader::completed(int k) const {
  h5::ErrorSilencer quiet;
  const KGroup& kg = impl_->group(k);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(impl_->info.n_iter));
  read_all(impl_->file, kg.completed.get(), kg.ds("completed"), H5T_NATIVE_UINT8, out.data());
  return out;
}

ReplicateTable ResultsReader::table(int k) const {
  h5::ErrorSilencer quiet;
  const Impl& m = *impl_;
  const KGroup& kg = m.group(k);
  const auto n = static_cast<std::size_t>(m.info.n_iter);
  ReplicateTable t;
  t.completed = completed(k);
  t.seeds.resize(n);
  t.iterations.resize(n);
  t.error_at_init.resize(n);
  t.final_error.resize(n);
  t.seconds.resize(n);
  std::vector<std::int8_t> status(n);
  read_all(m.file, kg.seeds.get(), kg.ds("seeds"), H5T_NATIVE_INT64, t.seeds.data());
  read_all(m.file, kg.iterations.get(), kg.ds("iterations"), H5T_NATIVE_INT32, t.iterations.data());
  read_all(m.file, kg.error_at_init.get(), kg.ds("error_at_init"), H5T_NATIVE_DOUBLE, t.error_at_init.data());
  read_all(m.file, kg.final_error.get(), kg.ds("final_error"), H5T_NATIVE_DOUBLE, t.final_error.data());
  read_all(m.file, kg.seconds.get(), kg.ds("seconds"), H5T_NATIVE_DOUBLE, t.seconds.data());
  read_all(m.file, kg.status.get(), kg.ds("status"), m.status_mem.get(), status.data());
  t.status.reserve(n);
  for (auto s : status) {
    if (s < 0 || s > 3) input_error(m.file, ": ", kg.ds("status"), " holds ", int(s), ", not a state 0..3");
    t.status.push_back(static_cast<ReplicateState>(s));
  }
  return t;
}

std::vector<double> ResultsReader::spectra(int k) const {
  h5::ErrorSilencer quiet;
  const Impl& m = *impl_;
  const KGroup& kg = m.group(k);
  std::vector<double> out(static_cast<std::size_t>(m.info.n_iter) * static_cast<std::size_t>(k) *
                          static_cast<std::size_t>(m.info.n_genes()));
  read_all(m.file, kg.spectra.get(), kg.ds("spectra"), H5T_NATIVE_DOUBLE, out.data());
  return out;
}

std::vector<double> ResultsReader::spectra(int k, int iter) const {
  h5::ErrorSilencer quiet;
  const Impl& m = *impl_;
  const KGroup& kg = m.group(k);
  m.check_iter(k, iter);
  const auto hk = static_cast<hsize_t>(k), hg = static_cast<hsize_t>(m.info.n_genes());
  std::vector<double> out(hk * hg);
  read_block(m.file, kg.spectra.get(), kg.ds("spectra"), H5T_NATIVE_DOUBLE,
             {static_cast<hsize_t>(iter), 0, 0}, {1, hk, hg}, out.data());
  return out;
}

std::vector<double> ResultsReader::usages(int k, int iter) const {
  h5::ErrorSilencer quiet;
  const Impl& m = *impl_;
  const KGroup& kg = m.group(k);
  m.check_iter(k, iter);
  if (!m.info.save_usages)
    input_error(m.file, ": the run did not save usages (save_usages = 0; rerun with --save-usages)");
  const auto hk = static_cast<hsize_t>(k), hn = static_cast<hsize_t>(m.info.n_cells);
  std::vector<double> out(hn * hk);
  read_block(m.file, kg.usages.get(), kg.ds("usages"), H5T_NATIVE_DOUBLE,
             {static_cast<hsize_t>(iter), 0, 0}, {1, hn, hk}, out.data());
  return out;
}

// ---- consensus outputs (results_consensus.cpp reads them) ---------------------------------

int ResultsReader::format_version() const { return impl_->format_version; }

std::vector<ConsensusKey> ResultsReader::consensus_list() const {
  h5::ErrorSilencer quiet;
  return read_consensus_list(impl_->file, impl_->fid.get());
}

bool ResultsReader::has_consensus(int k, double local_density_threshold) const {
  h5::ErrorSilencer quiet;
  return h5::exists(impl_->fid.get(), consensus_group(k, local_density_threshold));
}

ConsensusRecord ResultsReader::consensus(int k, double local_density_threshold) const {
  h5::ErrorSilencer quiet;
  return read_consensus(impl_->file, impl_->fid.get(), impl_->info, k, local_density_threshold);
}

std::vector<std::string> ResultsReader::consensus_cells() const {
  h5::ErrorSilencer quiet;
  return read_consensus_cells(impl_->file, impl_->fid.get(), impl_->info);
}

std::optional<KSelectionTable> ResultsReader::k_selection() const {
  h5::ErrorSilencer quiet;
  return read_k_selection(impl_->file, impl_->fid.get());
}

}  // namespace knmf::io
