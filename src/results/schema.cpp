/// \file
/// The schema of knmf's results file (include/knmf/results/run_info.hpp,
/// docs/results-file.md): replicate states, the session record, the HDF5 pieces every
/// dataset of the schema is made with, the run's description (root attributes, /genes,
/// /jobs) written and read back, and building a whole file for a run. The writer
/// (writer.cpp), the reader (reader.cpp), the resume check (resume.cpp) and the consensus
/// records (consensus_records.cpp) are built on these.

#include "knmf/results/run_info.hpp"

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
#include "knmf/random/random_state.hpp"
#include "io/hdf5.hpp"
#include "results/internal.hpp"

namespace knmf::results {

namespace h5 = io::detail::h5;
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

namespace detail {


std::string group_path(int k) { return "/k_" + std::to_string(k); }

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

// ---- HDF5 pieces ---------------------------------------------------------------------------

/// File access: the oldest file format that holds the schema (superblock version 0: no
/// SWMR status flags, so a killed writer never leaves a file that readers refuse).
h5::PropList file_access(bool locking) {
  h5::PropList fapl(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_EARLIEST, H5F_LIBVER_V18);
  H5Pset_file_locking(fapl.get(), locking, true);
  h5::use_write_latch(fapl.get());  // a full disk ends in one InputError, never half-closed
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

void write_solver_attrs(const std::string& file, hid_t g, const SolverOptions& o,
                        const std::string& prefix, unsigned need) {
  using K = SolverOptionField::Kind;
  for (const SolverOptionField& f : solver_option_fields()) {
    if ((f.use & need) != need) continue;
    const std::string name = prefix + f.name, text = f.get(o);
    if (f.kind == K::integer) h5::write_int_scalar_attr(file, g, name.c_str(), std::stoll(text));
    else if (f.kind == K::real) h5::write_double_scalar_attr(file, g, name.c_str(), std::stod(text));
    else h5::write_string_attr(file, g, name.c_str(), text);
  }
}

void read_solver_attrs(const std::string& file, hid_t g, SolverOptions& o,
                       const std::string& prefix, unsigned need, const std::string& what,
                       const std::string& of, const std::vector<std::string>& also_optional) {
  using K = SolverOptionField::Kind;
  for (const SolverOptionField& f : solver_option_fields()) {
    if ((f.use & need) != need) continue;
    const std::string name = prefix + f.name, where = file + ": " + what + name + of;
    std::optional<std::string> text;
    if (f.kind == K::integer) {
      if (auto v = h5::int_attr(g, name.c_str()); v && v->size() == 1) text = std::to_string((*v)[0]);
    } else if (f.kind == K::real) {
      if (auto v = h5::double_attr(g, name.c_str()); v && v->size() == 1) text = format_double((*v)[0]);
    } else {
      text = h5::string_attr(g, name.c_str());
    }
    if (text) {
      f.set(o, *text, where);
      continue;
    }
    const bool optional = (f.use & SolverOptionField::optional_in_files) ||
                          std::find(also_optional.begin(), also_optional.end(), f.name) != also_optional.end();
    if (optional && H5Aexists(g, name.c_str()) <= 0) continue;  // written before it existed
    input_error(where, " is missing or not ",
                f.kind == K::text ? "a string" : f.kind == K::integer ? "one integer" : "one number");
  }
}

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
  h5::write_string_attr(file, g, "input_absolute", r.input_absolute);
  h5::write_string_attr(file, g, "input_fingerprint", r.input_fingerprint);
  h5::write_int_attr(file, g, "input_shape", {r.n_cells, r.n_genes()});
  h5::write_int_attr(file, g, "ks", std::vector<std::int64_t>(r.ks.begin(), r.ks.end()));
  h5::write_int_scalar_attr(file, g, "n_iter", r.n_iter);
  h5::write_int_scalar_attr(file, g, "seed", r.seed);
  write_solver_attrs(file, g, r.solver, "", 0);
  h5::write_string_attr(file, g, "dtype", to_string(r.dtype));
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
  if (version >= 3) {
    r.input_absolute = need_string(file, root, "input_absolute");
    r.input_fingerprint = need_string(file, root, "input_fingerprint");
  }
  const auto shape = need_ints(file, root, "input_shape");
  if (shape.size() != 2) input_error(file, ": root attribute input_shape holds ", shape.size(), " values; expected 2");
  r.n_cells = shape[0];
  for (auto k : need_ints(file, root, "ks")) r.ks.push_back(static_cast<int>(k));
  r.n_iter = static_cast<int>(need_int(file, root, "n_iter"));
  r.seed = need_int(file, root, "seed");
  // files written before --init or --inner-sweeps existed lack those (optional_in_files): their
  // replicates started from init='random' and ran scikit-learn's CD (1 sweep)
  read_solver_attrs(file, root, r.solver, "", 0, "root attribute ", "");
  r.dtype = parse_dtype(need_string(file, root, "dtype"), file + ": root attribute dtype");
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

}  // namespace detail

}  // namespace knmf::results
