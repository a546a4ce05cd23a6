/// \file
/// The consensus outputs of a results file (format_version 2): update_results_file() and the
/// readers behind ResultsReader::consensus*, k_selection
/// (include/knmf/results/consensus_records.hpp, docs/results-file.md).
///
/// The durability argument: adding groups changes HDF5 metadata (symbol tables, heaps, object
/// headers), which HDF5 may write in any order, so the file is never modified in place.
/// The update builds a new file under a temporary name in the same folder (every object of
/// the original copied with H5Ocopy, the additions written), closes and syncs it, and renames
/// it over the original (AtomicFile::commit). The rename is atomic: a reader (or a process
/// killed at any moment) sees the old file or the new one. The original is only read (never
/// opened for writing by HDF5), under an exclusive flock() that keeps `knmf factorize` (whose
/// HDF5 write access takes the same lock) and a second update out meanwhile.

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>
#include <system_error>
#include <utility>

#include "knmf/core/error.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/results/consensus_records.hpp"
#include "knmf/io/atomic_file.hpp"
#include "results/internal.hpp"

namespace knmf::results {

namespace fs = std::filesystem;
using io::AtomicFile;
using io::density_threshold_string;
using io::remove_leftover_temps;

std::string consensus_group(int k, double local_density_threshold) {
  return "/consensus/k_" + std::to_string(k) + "/dt_" + density_threshold_string(local_density_threshold);
}

namespace detail {

namespace {

constexpr const char* kConsensus = "/consensus";
constexpr const char* kCells = "/consensus/cells";
constexpr const char* kKSelection = "/k_selection";

// ---- small HDF5 helpers ----------------------------------------------------------------------

herr_t collect_name(hid_t /*group*/, const char* name, const H5L_info_t* /*info*/, void* data) {
  static_cast<std::vector<std::string>*>(data)->emplace_back(name);
  return 0;
}

/// The names of the links in group `path`, in name order.
std::vector<std::string> link_names(const std::string& file, hid_t fid, const std::string& path) {
  h5::Group g(H5Gopen2(fid, path.c_str(), H5P_DEFAULT));
  if (!g) h5::fail(file, "cannot open group " + path);
  std::vector<std::string> names;
  hsize_t idx = 0;
  if (H5Literate(g.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, &collect_name, &names) < 0)
    h5::fail(file, "cannot list group " + path);
  return names;
}

herr_t collect_attr(hid_t /*obj*/, const char* name, const H5A_info_t* /*info*/, void* data) {
  static_cast<std::vector<std::string>*>(data)->emplace_back(name);
  return 0;
}

/// Copy every attribute of `from` (in `src`) to `to` (in the new file), values and types.
void copy_attributes(const std::string& file, hid_t from, hid_t to, const std::string& what) {
  std::vector<std::string> names;
  hsize_t idx = 0;
  if (H5Aiterate2(from, H5_INDEX_NAME, H5_ITER_INC, &idx, &collect_attr, &names) < 0)
    h5::fail(file, "cannot list the attributes of " + what);
  for (const auto& name : names) {
    const std::string where = "attribute " + name + " of " + what;
    h5::Attribute a(H5Aopen(from, name.c_str(), H5P_DEFAULT));
    if (!a) h5::fail(file, "cannot open " + where);
    h5::Datatype ftype(H5Aget_type(a.get()));
    h5::Dataspace space(H5Aget_space(a.get()));
    const auto layout = h5::string_layout(ftype.get());
    h5::Datatype mem = layout ? h5::string_mem_type(*layout)
                              : h5::Datatype(H5Tget_native_type(ftype.get(), H5T_DIR_ASCEND));
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    if (!mem || n < 0) h5::fail(file, "cannot read " + where);
    std::vector<unsigned char> buf(std::max<std::size_t>(1, static_cast<std::size_t>(n) * H5Tget_size(mem.get())));
    if (H5Aread(a.get(), mem.get(), buf.data()) < 0) h5::fail(file, "cannot read " + where);
    h5::Attribute b(H5Acreate2(to, name.c_str(), ftype.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
    const bool ok = b && H5Awrite(b.get(), mem.get(), buf.data()) >= 0;
    if (layout && layout->variable) H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, buf.data());
    if (!ok) h5::fail(file, "cannot copy " + where);
  }
}

/// H5Ocopy of `path` from `src` to the same path in `dst` (its data, attributes and storage
/// layout as they are: chunks and filters included).
void copy_object(const std::string& file, hid_t src, hid_t dst, const std::string& path) {
  if (H5Ocopy(src, path.c_str(), dst, path.c_str(), H5P_DEFAULT, H5P_DEFAULT) < 0)
    h5::fail(file, "cannot copy " + path);
}

h5::Group open_group(const std::string& file, hid_t fid, const std::string& path) {
  h5::Group g(H5Gopen2(fid, path.c_str(), H5P_DEFAULT));
  if (!g) h5::fail(file, "cannot open group " + path);
  return g;
}

bool is_group(hid_t fid, const std::string& path) {
  return h5::exists(fid, path) && h5::object_type(fid, path) == H5I_GROUP;
}

/// A contiguous dataset written whole (`mem` describes `data`).
void put(const std::string& file, hid_t fid, const std::string& path, hid_t ftype, hid_t mem,
         const std::vector<hsize_t>& dims, const void* data) {
  h5::Dataset d = create_dataset(file, fid, path, ftype, dims, {}, 0);
  hsize_t n = 1;
  for (hsize_t x : dims) n *= x;
  if (n > 0) write_all(file, d.get(), path, mem, data);
}

void put_strings(const std::string& file, hid_t fid, const std::string& path,
                 const std::vector<std::string>& values) {
  h5::Datatype str = vlen_utf8();
  std::vector<const char*> ptrs(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) ptrs[i] = values[i].c_str();
  put(file, fid, path, str.get(), str.get(), {static_cast<hsize_t>(values.size())}, ptrs.data());
}

// ---- attributes of a group, with the group named in messages ---------------------------------

std::string attr_string(const std::string& file, hid_t g, const std::string& gp, const char* name) {
  auto v = h5::string_attr(g, name);
  if (!v) input_error(file, ": attribute ", name, " of ", gp, " is missing or not a string");
  return *v;
}

double attr_double(const std::string& file, hid_t g, const std::string& gp, const char* name) {
  auto v = h5::double_attr(g, name);
  if (!v || v->size() != 1) input_error(file, ": attribute ", name, " of ", gp, " is missing or not one number");
  return (*v)[0];
}

std::int64_t attr_int(const std::string& file, hid_t g, const std::string& gp, const char* name) {
  auto v = h5::int_attr(g, name);
  if (!v || v->size() != 1) input_error(file, ": attribute ", name, " of ", gp, " is missing or not one number");
  return (*v)[0];
}

void write_settings(const std::string& file, hid_t g, const ConsensusSettings& s) {
  h5::write_double_scalar_attr(file, g, "local_density_threshold", s.local_density_threshold);
  h5::write_string_attr(file, g, "dt", density_threshold_string(s.local_density_threshold));
  h5::write_double_scalar_attr(file, g, "local_neighborhood_size", s.local_neighborhood_size);
  h5::write_int_scalar_attr(file, g, "kmeans_n_init", s.kmeans_n_init);
  h5::write_int_scalar_attr(file, g, "kmeans_seed", s.kmeans_seed);
  h5::write_int_scalar_attr(file, g, "kmeans_max_iter", s.kmeans_max_iter);
  h5::write_double_scalar_attr(file, g, "kmeans_tol", s.kmeans_tol);
  write_solver_attrs(file, g, s.refit, "refit_", SolverOptionField::refit);
  h5::write_string_attr(file, g, "counts", s.counts);
  h5::write_string_attr(file, g, "tpm", s.tpm);
  h5::write_string_attr(file, g, "created", s.created);
  h5::write_string_attr(file, g, "knmf_version", s.knmf_version);
  h5::write_string_attr(file, g, "kokkos_version", s.kokkos_version);
  h5::write_string_attr(file, g, "backend", s.backend);
  h5::write_string_attr(file, g, "device", s.device);
}

ConsensusSettings read_settings(const std::string& file, hid_t g, const std::string& gp) {
  ConsensusSettings s;
  s.local_density_threshold = attr_double(file, g, gp, "local_density_threshold");
  s.local_neighborhood_size = attr_double(file, g, gp, "local_neighborhood_size");
  s.kmeans_n_init = static_cast<int>(attr_int(file, g, gp, "kmeans_n_init"));
  s.kmeans_seed = attr_int(file, g, gp, "kmeans_seed");
  s.kmeans_max_iter = static_cast<int>(attr_int(file, g, gp, "kmeans_max_iter"));
  s.kmeans_tol = attr_double(file, g, gp, "kmeans_tol");
  // refit_beta_loss is absent in files written before the beta-divergence refits: those
  // were Frobenius (the default)
  read_solver_attrs(file, g, s.refit, "refit_", SolverOptionField::refit, "attribute ", " of " + gp,
                    {"beta_loss"});
  s.counts = attr_string(file, g, gp, "counts");
  s.tpm = attr_string(file, g, gp, "tpm");
  s.created = attr_string(file, g, gp, "created");
  s.knmf_version = attr_string(file, g, gp, "knmf_version");
  s.kokkos_version = attr_string(file, g, gp, "kokkos_version");
  s.backend = attr_string(file, g, gp, "backend");
  s.device = attr_string(file, g, gp, "device");
  return s;
}

ConsensusSettings with_provenance(ConsensusSettings s, const std::string& now) {
  if (s.created.empty()) s.created = now;
  if (s.knmf_version.empty()) s.knmf_version = knmf::version();
  if (s.kokkos_version.empty()) s.kokkos_version = knmf::kokkos_version();
  if (s.backend.empty()) s.backend = knmf::default_execution_space();
  if (s.device.empty() && knmf::concurrency() > 0) s.device = knmf::device_description();
  return s;
}

ReplicateState parse_state(const std::string& file, const std::string& gp, const std::string& s) {
  for (auto st : {ReplicateState::pending, ReplicateState::converged, ReplicateState::max_iter,
                  ReplicateState::non_finite})
    if (to_string(st) == s) return st;
  input_error(file, ": attribute refit_status of ", gp, " is '", s,
              "' (expected pending, converged, max_iter or non_finite)");
}

// ---- checks of the additions -----------------------------------------------------------------

void check_threshold(const std::string& file, const std::string& what, double t) {
  if (!(t > 0.0 && t <= 2.0))
    input_error(file, ": ", what, ": local density threshold ", t, " is outside (0, 2]");
}

void check_k(const std::string& file, const std::string& what, int k, const RunInfo& info) {
  if (!std::binary_search(info.ks.begin(), info.ks.end(), k))
    input_error(file, ": ", what, ": k = ", k, " is not a k of the run (ks: ", join_ints(info.ks), ")");
}

void check_size(const std::string& file, const std::string& what, const char* name,
                std::size_t have, std::int64_t want, const std::string& shape) {
  if (static_cast<std::int64_t>(have) != want)
    input_error(file, ": ", what, ": ", name, " holds ", have, " values; expected ", shape, " = ", want);
}

void check_record(const std::string& file, const ConsensusRecord& r, const RunInfo& info) {
  const std::string what = "consensus k = " + std::to_string(r.k) + " dt " +
                           density_threshold_string(r.settings.local_density_threshold);
  check_k(file, what, r.k, info);
  check_threshold(file, what, r.settings.local_density_threshold);
  const std::int64_t k = r.k, g = info.n_genes(), n = info.n_cells;
  const std::string kg = std::to_string(k) + " x " + std::to_string(g);
  check_size(file, what, "spectra", r.spectra.size(), k * g, "k x genes " + kg);
  check_size(file, what, "usages", r.usages.size(), n * k,
             "cells x k " + std::to_string(n) + " x " + std::to_string(k));
  const std::size_t m = r.replicate_rows.size();
  check_size(file, what, "local_density", r.local_density.size(), static_cast<std::int64_t>(m), "one per replicate row");
  check_size(file, what, "cluster", r.cluster.size(), static_cast<std::int64_t>(m), "one per replicate row");
  const std::int64_t rows = static_cast<std::int64_t>(info.n_iter) * k;
  for (std::size_t i = 0; i < m; ++i) {
    if (r.replicate_rows[i] < 0 || r.replicate_rows[i] >= rows)
      input_error(file, ": ", what, ": replicate row ", r.replicate_rows[i], " (entry ", i,
                  ") is outside [0, n_iter * k = ", rows, ")");
    if (r.cluster[i] < 0 || r.cluster[i] > k)
      input_error(file, ": ", what, ": cluster ", r.cluster[i], " (entry ", i, ") is outside [0, ", k, "]");
  }
  if (r.has_tpm) {
    const auto gt = static_cast<std::int64_t>(r.tpm_genes.size());
    if (gt == 0) input_error(file, ": ", what, ": TPM outputs without TPM genes");
    const std::string kgt = std::to_string(k) + " x " + std::to_string(gt);
    check_size(file, what, "spectra_tpm", r.spectra_tpm.size(), k * gt, "k x TPM genes " + kgt);
    check_size(file, what, "spectra_score", r.spectra_score.size(), k * gt, "k x TPM genes " + kgt);
    check_size(file, what, "starcat", r.starcat.size(), k * g, "k x genes " + kg);
  }
}

void check_additions(const std::string& file, hid_t src, const ResultsAdditions& add, const RunInfo& info) {
  std::set<std::string> groups;
  for (const auto& r : add.consensus) {
    check_record(file, r, info);
    const std::string gp = consensus_group(r.k, r.settings.local_density_threshold);
    if (!groups.insert(gp).second) input_error(file, ": ", gp, " is added twice in one update");
  }
  if (!add.cells.empty() && static_cast<std::int64_t>(add.cells.size()) != info.n_cells)
    input_error(file, ": ", add.cells.size(), " cell names for /consensus/cells; the run has ",
                info.n_cells, " cells");
  if (!add.consensus.empty() && add.cells.empty() && !h5::exists(src, kCells))
    input_error(file, ": the consensus needs the cell names (/consensus/cells): none given and none stored");
  if (add.k_selection) {
    const auto& t = *add.k_selection;
    const std::size_t m = t.k.size();
    if (m == 0) input_error(file, ": the k-selection table has no rows");
    if (t.local_density_threshold.size() != m || t.silhouette.size() != m || t.prediction_error.size() != m)
      input_error(file, ": the k-selection table's columns differ in length (k ", m, ", local_density_threshold ",
                  t.local_density_threshold.size(), ", silhouette ", t.silhouette.size(),
                  ", prediction_error ", t.prediction_error.size(), ")");
    for (int k : t.k) check_k(file, "k-selection", k, info);
    check_threshold(file, "k-selection", t.settings.local_density_threshold);
    const std::size_t cv = t.cross_validation ? m : 0;
    if (t.cv_prediction_error.size() != cv || t.cv_prediction_error_sd.size() != cv)
      input_error(file, ": the k-selection table's cross-validation columns have ",
                  t.cv_prediction_error.size(), " and ", t.cv_prediction_error_sd.size(),
                  " rows; expected ", cv);
  }
}

// ---- writing the additions into the new file -------------------------------------------------

void write_record(const std::string& file, hid_t fid, const ConsensusRecord& r, const RunInfo& info,
                  const std::string& now) {
  const std::string kp = "/consensus/k_" + std::to_string(r.k);
  if (!is_group(fid, kp)) {
    h5::Group kg = create_group(file, fid, kp);
    h5::write_int_scalar_attr(file, kg.get(), "k", r.k);
  }
  const std::string gp = consensus_group(r.k, r.settings.local_density_threshold);
  h5::Group g = create_group(file, fid, gp);
  write_settings(file, g.get(), with_provenance(r.settings, now));
  h5::write_int_scalar_attr(file, g.get(), "k", r.k);
  h5::write_int_scalar_attr(file, g.get(), "n_neighbors", r.n_neighbors);
  h5::write_double_scalar_attr(file, g.get(), "silhouette", r.silhouette);
  h5::write_double_scalar_attr(file, g.get(), "prediction_error", r.prediction_error);
  h5::write_int_scalar_attr(file, g.get(), "refit_n_iter", r.refit_n_iter);
  h5::write_string_attr(file, g.get(), "refit_status", to_string(r.refit_status));
  h5::write_int_scalar_attr(file, g.get(), "has_tpm", r.has_tpm ? 1 : 0);

  const auto k = static_cast<hsize_t>(r.k), g_ = static_cast<hsize_t>(info.n_genes()),
             n = static_cast<hsize_t>(info.n_cells), m = static_cast<hsize_t>(r.replicate_rows.size());
  const hid_t f32 = H5T_IEEE_F32LE, f64 = H5T_IEEE_F64LE, dbl = H5T_NATIVE_DOUBLE;
  const std::string p = gp + "/";
  put(file, fid, p + "spectra", f64, dbl, {k, g_}, r.spectra.data());
  put(file, fid, p + "usages", r.float32 ? f32 : f64, dbl, {n, k}, r.usages.data());
  put(file, fid, p + "replicate_rows", H5T_STD_I64LE, H5T_NATIVE_INT64, {m}, r.replicate_rows.data());
  put(file, fid, p + "local_density", f64, dbl, {m}, r.local_density.data());
  put(file, fid, p + "cluster", H5T_STD_I32LE, H5T_NATIVE_INT32, {m}, r.cluster.data());
  if (r.has_tpm) {
    const auto gt = static_cast<hsize_t>(r.tpm_genes.size());
    put_strings(file, fid, p + "tpm_genes", r.tpm_genes);
    put(file, fid, p + "spectra_tpm", r.float32 ? f32 : f64, dbl, {k, gt}, r.spectra_tpm.data());
    put(file, fid, p + "spectra_score", f64, dbl, {k, gt}, r.spectra_score.data());
    put(file, fid, p + "starcat", f64, dbl, {k, g_}, r.starcat.data());
  }
}

void write_k_selection(const std::string& file, hid_t fid, const KSelectionTable& t, const std::string& now) {
  h5::Group g = create_group(file, fid, kKSelection);
  write_settings(file, g.get(), with_provenance(t.settings, now));
  const auto m = static_cast<hsize_t>(t.k.size());
  const std::vector<std::int64_t> ks(t.k.begin(), t.k.end());
  const std::string p = std::string(kKSelection) + "/";
  put(file, fid, p + "k", H5T_STD_I64LE, H5T_NATIVE_INT64, {m}, ks.data());
  put(file, fid, p + "local_density_threshold", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {m},
      t.local_density_threshold.data());
  put(file, fid, p + "silhouette", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {m}, t.silhouette.data());
  put(file, fid, p + "prediction_error", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {m}, t.prediction_error.data());
  if (t.cross_validation) {
    const auto& cv = *t.cross_validation;
    h5::write_int_scalar_attr(file, g.get(), "cv_cell_folds", cv.cell_folds);
    h5::write_int_scalar_attr(file, g.get(), "cv_gene_folds", cv.gene_folds);
    h5::write_int_scalar_attr(file, g.get(), "cv_replicates", cv.replicates);
    h5::write_int_scalar_attr(file, g.get(), "cv_seed", cv.seed);
    put(file, fid, p + "cv_prediction_error", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {m},
        t.cv_prediction_error.data());
    put(file, fid, p + "cv_prediction_error_sd", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {m},
        t.cv_prediction_error_sd.data());
  }
}

/// Copy /consensus from `src` to `dst` without the groups in `replaced` (and without
/// /consensus/cells when `new_cells`).
void copy_consensus(const std::string& file, hid_t src, hid_t dst, const std::set<std::string>& replaced,
                    bool new_cells) {
  {
    h5::Group from = open_group(file, src, kConsensus);
    h5::Group to = create_group(file, dst, kConsensus);
    copy_attributes(file, from.get(), to.get(), kConsensus);
  }
  for (const auto& child : link_names(file, src, kConsensus)) {
    const std::string cp = std::string(kConsensus) + "/" + child;
    if (cp == kCells) {
      if (!new_cells) copy_object(file, src, dst, cp);
      continue;
    }
    if (!is_group(src, cp)) {
      copy_object(file, src, dst, cp);
      continue;
    }
    {
      h5::Group from = open_group(file, src, cp);
      h5::Group to = create_group(file, dst, cp);
      copy_attributes(file, from.get(), to.get(), cp);
    }
    for (const auto& leaf : link_names(file, src, cp)) {
      const std::string lp = cp + "/" + leaf;
      if (!replaced.count(lp)) copy_object(file, src, dst, lp);
    }
  }
}

}  // namespace

void copy_extra_objects(const std::string& file, hid_t src, hid_t dst, const RunInfo& info) {
  std::set<std::string> schema = {"genes", "jobs", "sessions"};
  for (int k : info.ks) schema.insert("k_" + std::to_string(k));
  for (const auto& name : link_names(file, src, "/"))
    if (!schema.count(name)) copy_object(file, src, dst, "/" + name);
}

// ---- reading ---------------------------------------------------------------------------------

std::vector<ConsensusKey> read_consensus_list(const std::string& file, hid_t fid) {
  std::vector<ConsensusKey> out;
  if (!is_group(fid, kConsensus)) return out;
  for (const auto& child : link_names(file, fid, kConsensus)) {
    const std::string cp = std::string(kConsensus) + "/" + child;
    if (child.rfind("k_", 0) != 0 || !is_group(fid, cp)) continue;
    for (const auto& leaf : link_names(file, fid, cp)) {
      const std::string gp = cp + "/" + leaf;
      if (leaf.rfind("dt_", 0) != 0 || !is_group(fid, gp)) continue;
      h5::Group g = open_group(file, fid, gp);
      ConsensusKey key;
      key.k = static_cast<int>(attr_int(file, g.get(), gp, "k"));
      key.local_density_threshold = attr_double(file, g.get(), gp, "local_density_threshold");
      key.group = gp;
      out.push_back(std::move(key));
    }
  }
  std::sort(out.begin(), out.end(), [](const ConsensusKey& a, const ConsensusKey& b) {
    return a.k != b.k ? a.k < b.k : a.local_density_threshold < b.local_density_threshold;
  });
  return out;
}

ConsensusRecord read_consensus(const std::string& file, hid_t fid, const RunInfo& info, int k,
                               double local_density_threshold) {
  const std::string gp = consensus_group(k, local_density_threshold);
  if (!is_group(fid, gp)) {
    std::string have;
    for (const auto& key : read_consensus_list(file, fid))
      have += (have.empty() ? "" : ", ") + key.group.substr(std::strlen(kConsensus) + 1);
    input_error(file, ": no consensus of k = ", k, " at local density threshold ",
                density_threshold_string(local_density_threshold), " (", gp, "; the file holds ",
                have.empty() ? std::string("none: run knmf consensus --results first") : have, ")");
  }
  h5::Group g = open_group(file, fid, gp);
  ConsensusRecord r;
  r.k = static_cast<int>(attr_int(file, g.get(), gp, "k"));
  r.settings = read_settings(file, g.get(), gp);
  r.n_neighbors = static_cast<int>(attr_int(file, g.get(), gp, "n_neighbors"));
  r.silhouette = attr_double(file, g.get(), gp, "silhouette");
  r.prediction_error = attr_double(file, g.get(), gp, "prediction_error");
  r.refit_n_iter = static_cast<int>(attr_int(file, g.get(), gp, "refit_n_iter"));
  r.refit_status = parse_state(file, gp, attr_string(file, g.get(), gp, "refit_status"));
  r.has_tpm = attr_int(file, g.get(), gp, "has_tpm") != 0;

  const auto hk = static_cast<hsize_t>(k), hg = static_cast<hsize_t>(info.n_genes()),
             hn = static_cast<hsize_t>(info.n_cells);
  const std::string p = gp + "/";
  auto read = [&](const std::string& name, const std::vector<hsize_t>& dims, hid_t mem, auto& out) {
    h5::Dataset d = open_dataset(file, fid, p + name, dims);
    hsize_t n = 1;
    for (hsize_t x : dims) n *= x;
    out.resize(static_cast<std::size_t>(n));
    if (n > 0) read_all(file, d.get(), p + name, mem, out.data());
    h5::Datatype t(H5Dget_type(d.get()));
    return H5Tget_class(t.get()) == H5T_FLOAT && H5Tget_size(t.get()) == 4;
  };
  read("spectra", {hk, hg}, H5T_NATIVE_DOUBLE, r.spectra);
  r.float32 = read("usages", {hn, hk}, H5T_NATIVE_DOUBLE, r.usages);
  hsize_t m = 0;
  {
    const std::string rows = p + "replicate_rows";
    if (!h5::exists(fid, rows)) input_error(file, ": dataset ", rows, " is missing");
    h5::Dataset d(H5Dopen2(fid, rows.c_str(), H5P_DEFAULT));
    const auto dims = h5::dims(d.get());
    if (dims.size() != 1) input_error(file, ": ", rows, " has shape ", shape_text(dims), "; expected (m,)");
    m = dims[0];
  }
  read("replicate_rows", {m}, H5T_NATIVE_INT64, r.replicate_rows);
  read("local_density", {m}, H5T_NATIVE_DOUBLE, r.local_density);
  read("cluster", {m}, H5T_NATIVE_INT32, r.cluster);
  if (r.has_tpm) {
    const std::string tg = p + "tpm_genes";
    if (!h5::exists(fid, tg)) input_error(file, ": dataset ", tg, " is missing");
    h5::Dataset d(H5Dopen2(fid, tg.c_str(), H5P_DEFAULT));
    r.tpm_genes = h5::read_string_dataset(file, d.get(), tg);
    const auto gt = static_cast<hsize_t>(r.tpm_genes.size());
    read("spectra_tpm", {hk, gt}, H5T_NATIVE_DOUBLE, r.spectra_tpm);
    read("spectra_score", {hk, gt}, H5T_NATIVE_DOUBLE, r.spectra_score);
    read("starcat", {hk, hg}, H5T_NATIVE_DOUBLE, r.starcat);
  }
  return r;
}

std::vector<std::string> read_consensus_cells(const std::string& file, hid_t fid, const RunInfo& info) {
  if (!h5::exists(fid, kCells)) return {};
  h5::Dataset d = open_dataset(file, fid, kCells, {static_cast<hsize_t>(info.n_cells)});
  return h5::read_string_dataset(file, d.get(), kCells);
}

std::optional<KSelectionTable> read_k_selection(const std::string& file, hid_t fid) {
  if (!is_group(fid, kKSelection)) return std::nullopt;
  h5::Group g = open_group(file, fid, kKSelection);
  KSelectionTable t;
  t.settings = read_settings(file, g.get(), kKSelection);
  const std::string p = std::string(kKSelection) + "/";
  const std::string kp = p + "k";
  if (!h5::exists(fid, kp)) input_error(file, ": dataset ", kp, " is missing");
  hsize_t m = 0;
  {
    h5::Dataset d(H5Dopen2(fid, kp.c_str(), H5P_DEFAULT));
    const auto dims = h5::dims(d.get());
    if (dims.size() != 1) input_error(file, ": ", kp, " has shape ", shape_text(dims), "; expected (m,)");
    m = dims[0];
  }
  std::vector<std::int64_t> ks(static_cast<std::size_t>(m));
  auto read = [&](const char* leaf, hid_t mem, void* out) {
    h5::Dataset d = open_dataset(file, fid, p + leaf, {m});
    if (m > 0) read_all(file, d.get(), p + leaf, mem, out);
  };
  t.local_density_threshold.resize(ks.size());
  t.silhouette.resize(ks.size());
  t.prediction_error.resize(ks.size());
  read("k", H5T_NATIVE_INT64, ks.data());
  read("local_density_threshold", H5T_NATIVE_DOUBLE, t.local_density_threshold.data());
  read("silhouette", H5T_NATIVE_DOUBLE, t.silhouette.data());
  read("prediction_error", H5T_NATIVE_DOUBLE, t.prediction_error.data());
  t.k.assign(ks.begin(), ks.end());
  // the bi-cross-validation's columns and grid, when the table was made with it
  if (h5::int_attr(g.get(), "cv_cell_folds")) {
    CrossValidationSettings cv;
    cv.cell_folds = static_cast<int>(attr_int(file, g.get(), kKSelection, "cv_cell_folds"));
    cv.gene_folds = static_cast<int>(attr_int(file, g.get(), kKSelection, "cv_gene_folds"));
    cv.replicates = static_cast<int>(attr_int(file, g.get(), kKSelection, "cv_replicates"));
    cv.seed = attr_int(file, g.get(), kKSelection, "cv_seed");
    t.cross_validation = cv;
    t.cv_prediction_error.resize(ks.size());
    t.cv_prediction_error_sd.resize(ks.size());
    read("cv_prediction_error", H5T_NATIVE_DOUBLE, t.cv_prediction_error.data());
    read("cv_prediction_error_sd", H5T_NATIVE_DOUBLE, t.cv_prediction_error_sd.data());
  }
  return t;
}

}  // namespace detail

using namespace detail;

// ---- update_results_file -----------------------------------------------------------------------

namespace {

/// The exclusive lock of an update: flock(LOCK_EX) on a descriptor of its own, the lock HDF5
/// takes when it opens a file for writing (and a shared one for reading, when its file
/// locking is on). So no `knmf factorize` writes replicates into the file while it is updated
/// (they would be lost with the old inode), no second update runs at once, and the update's
/// own HDF5 access can be read-only: the original file is never written to.
class UpdateLock {
public:
  explicit UpdateLock(const std::string& file) : file_(file) {
    fd_ = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
    if (fd_ < 0)
      input_error(file, ": cannot open for updating (", std::strerror(errno), ")");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      if (err == EWOULDBLOCK)
        input_error(file, ": cannot open for updating (is knmf factorize still writing it, is another "
                    "knmf consensus updating it, or is it open in a program that locks it, like h5py?)");
      input_error(file, ": cannot lock for updating (", std::strerror(err), ")");
    }
  }
  ~UpdateLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  UpdateLock(const UpdateLock&) = delete;
  UpdateLock& operator=(const UpdateLock&) = delete;

private:
  std::string file_;
  int fd_ = -1;
};

/// Check that `path` is a results file this knmf reads (never opening it for writing).
void check_results_file(const fs::path& path) {
  const std::string file = path.string();
  std::error_code ec;
  if (!fs::exists(path, ec)) input_error(file, ": no such file");
  if (fs::is_directory(path, ec)) input_error(file, " is a folder, not a results file");
  if (H5Fis_hdf5(file.c_str()) <= 0) input_error(file, " is not a knmf results file (not an HDF5 file)");
  h5::PropList fapl = file_access(false);
  h5::File f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!f) h5::fail(file, "cannot open");
  const std::string problem = format_problem(f.get());
  if (!problem.empty()) input_error(file, " is not a knmf results file (", problem, ")");
  read_info(file, f.get());  // a version this knmf reads, with the replicate schema
}

}  // namespace

void check_results_updatable(const fs::path& path) {
  h5::ErrorSilencer quiet;
  const std::string file = path.string();
  check_results_file(path);
  UpdateLock lock(file);
  AtomicFile probe(path, file);  // the folder takes a new file; removed again on return
}

void update_results_file(const fs::path& path, const ResultsAdditions& add, const ResultsUpdateOptions& opts) {
  h5::ErrorSilencer quiet;
  const std::string file = path.string();
  check_results_file(path);
  UpdateLock lock(file);
  remove_leftover_temps(path);  // of killed updates (a live writer's temporary is left alone)
  h5::PropList fapl_src = file_access(false);
  h5::File src(H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl_src.get()));
  if (!src) h5::fail(file, "cannot open");
  const RunInfo info = read_info(file, src.get());
  check_additions(file, src.get(), add, info);

  std::set<std::string> replaced;
  for (const auto& r : add.consensus) replaced.insert(consensus_group(r.k, r.settings.local_density_threshold));
  AtomicFile tmp(path, file);  // removed again unless committed
  {
    h5::PropList fcpl(H5Pcreate(H5P_FILE_CREATE));
    H5Pset_obj_track_times(fcpl.get(), false);
    h5::PropList fapl = file_access(false);
    h5::File dst(H5Fcreate(tmp.temp().c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()));
    if (!dst) h5::fail(file, "cannot create " + tmp.temp().string());
    {
      h5::Group from = open_group(file, src.get(), "/");
      h5::Group to = open_group(file, dst.get(), "/");
      copy_attributes(file, from.get(), to.get(), "/");
      // consensus outputs need version 2; a version-3 file stays 3 (its input attributes)
      const std::int64_t version = need_int(file, from.get(), "format_version");
      h5::write_int_scalar_attr(file, to.get(), "format_version", std::max<std::int64_t>(version, 2));
    }
    for (const auto& name : link_names(file, src.get(), "/")) {
      const std::string p = "/" + name;
      if (p == kConsensus && is_group(src.get(), p)) {
        copy_consensus(file, src.get(), dst.get(), replaced, !add.cells.empty());
      } else if (!(p == kKSelection && add.k_selection)) {
        copy_object(file, src.get(), dst.get(), p);
      }
    }
    const std::string now = iso_now();
    if (!add.consensus.empty() || !add.cells.empty()) {
      if (!is_group(dst.get(), kConsensus)) create_group(file, dst.get(), kConsensus);
      if (!add.cells.empty()) put_strings(file, dst.get(), kCells, add.cells);
    }
    for (const auto& r : add.consensus) write_record(file, dst.get(), r, info, now);
    if (add.k_selection) write_k_selection(file, dst.get(), *add.k_selection, now);
    h5::close(file, dst);
    if (opts.on_step) opts.on_step(UpdateStep::copied);
  }
  tmp.commit(AtomicFile::Replace::yes);
  if (opts.on_step) opts.on_step(UpdateStep::renamed);
  h5::close(file, src);
}

}  // namespace knmf::results
