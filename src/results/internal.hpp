#pragma once
/// \file
/// Internal pieces of the results file shared by its parts: schema.cpp (the schema and the
/// run's description), writer.cpp, reader.cpp, resume.cpp, consensus_records.cpp
/// (update_results_file and the consensus readers). Not installed; only src/results
/// includes it.

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/hdf5.hpp"
#include "knmf/core/format.hpp"
#include "knmf/results/consensus_records.hpp"
#include "knmf/results/run_info.hpp"

namespace knmf::results::detail {

namespace h5 = io::detail::h5;

inline constexpr const char* kFormat = "knmf-results";
inline constexpr hsize_t kSessionSlots = 256;
inline constexpr std::size_t kSessionBytes = 512;
/// Upper bound on one chunk (HDF5's limit is 4 GiB).
inline constexpr std::int64_t kMaxChunkBytes = std::int64_t{1} << 30;

/// The datasets of one /k_<k> group.
struct KGroup {
  int k = 0;
  std::string name;  // "/k_7"
  h5::Dataset spectra, usages, seeds, iterations, error_at_init, final_error, status, seconds,
      completed;
  std::string ds(const char* leaf) const { return name + "/" + leaf; }
};

/// "/k_7".
std::string group_path(int k);
/// One line of /sessions: who opened the file for writing, where and when.
std::string session_record(const RunInfo& info);
/// The fixed-length string type of /sessions.
h5::Datatype session_type();
/// "[2:4, 0:3]": a hyperslab, for messages.
std::string range_text(const std::vector<hsize_t>& start, const std::vector<hsize_t>& count);
/// Write / read a hyperslab of `d` (InputError naming the dataset and range on failure).
void write_block(const std::string& file, hid_t d, const std::string& name, hid_t mem,
                 const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
                 const void* buf);
void read_block(const std::string& file, hid_t d, const std::string& name, hid_t mem,
                const std::vector<hsize_t>& start, const std::vector<hsize_t>& count, void* buf);
/// Whether the run stores usages as float64 (dtype double) or float32.
bool usages_double(const RunInfo& info);
/// Chunk shapes of one replicate's spectra and usages.
std::vector<hsize_t> spectra_chunk(int k, std::int64_t g);
std::vector<hsize_t> usages_chunk(int k, std::int64_t n, std::size_t elem);
/// The solver options of `o` as attributes of `g`, one per row of solver_option_fields()
/// whose use has every bit of `need`, each named `prefix` + the row's name and typed by its kind.
void write_solver_attrs(const std::string& file, hid_t g, const SolverOptions& o,
                        const std::string& prefix, unsigned need);
/// Read them back into `o` (each through its row's parser and range check). A message names
/// an attribute as FILE: `what` NAME `of` ("root attribute tol", "attribute refit_tol of
/// /consensus/k_7"). A row marked optional_in_files, or named in `also_optional`, may be
/// absent: `o` keeps its value.
void read_solver_attrs(const std::string& file, hid_t g, SolverOptions& o,
                       const std::string& prefix, unsigned need, const std::string& what,
                       const std::string& of, const std::vector<std::string>& also_optional = {});
/// Root attributes, /genes, /jobs of `r`.
void write_info(const std::string& file, hid_t fid, const RunInfo& r, bool complete);
std::vector<std::int64_t> need_ints(const std::string& file, hid_t obj, const char* name);
/// The datasets of /k_<k> (shapes checked against `r`).
KGroup open_kgroup(const std::string& file, hid_t fid, const RunInfo& r, int k);
/// Create a file holding the whole schema for `r` at `where` (every replicate pending),
/// returned open.
h5::File build(const std::string& file, const std::filesystem::path& where, const RunInfo& r,
               int gzip, bool complete);
/// `in` checked and completed (ks sorted and unique, job table, provenance); InputError
/// naming `file` and the value otherwise.
RunInfo prepare(const RunInfo& in, const std::string& file);
/// What differs between two runs, as (old, new) command-line text; both empty when they
/// match (resume.cpp).
std::pair<std::string, std::string> differences(const RunInfo& a, const RunInfo& b);
/// Whether a resume's input `now` is the X of the file's run `was` (resume.cpp): InputError
/// (naming both paths, and both fingerprints where known) when it is not; a warning when the
/// file records no fingerprint and `now` has one (the content cannot be checked), else "".
std::string check_input(const std::string& file, const RunInfo& was, const RunInfo& now);

/// "(3, 4)" / "(3,)".
std::string shape_text(const std::vector<hsize_t>& d);

/// File access of every results file: superblock version 0 (no SWMR status flags), HDF5
/// file locking on or off.
h5::PropList file_access(bool locking);
/// Variable-length UTF-8 strings (what h5py writes for str).
h5::Datatype vlen_utf8();
/// The replicate-state enum on `base` (H5T_STD_I8LE in the file, H5T_NATIVE_INT8 in memory).
h5::Datatype status_type(hid_t base);

/// A dataset of the schema (chunked when `chunk` is given; storage allocated at creation and
/// never filled by HDF5 unless gzip > 0).
h5::Dataset create_dataset(const std::string& file, hid_t loc, const std::string& name, hid_t type,
                           const std::vector<hsize_t>& dims, const std::vector<hsize_t>& chunk,
                           int gzip);
h5::Group create_group(const std::string& file, hid_t loc, const std::string& name);
void write_all(const std::string& file, hid_t d, const std::string& name, hid_t mem, const void* buf);
void read_all(const std::string& file, hid_t d, const std::string& name, hid_t mem, void* buf);
/// Open dataset `name` and check its shape (InputError naming it otherwise).
h5::Dataset open_dataset(const std::string& file, hid_t fid, const std::string& name,
                         const std::vector<hsize_t>& expect);

/// Attributes of `obj` that must be there (InputError naming the attribute otherwise).
std::string need_string(const std::string& file, hid_t obj, const char* name);
std::int64_t need_int(const std::string& file, hid_t obj, const char* name);
double need_double(const std::string& file, hid_t obj, const char* name);

/// Empty when `fid` has the results file's `format` attribute, else why not.
std::string format_problem(hid_t fid);
/// The run a file records (checks format and format_version, genes, job table).
RunInfo read_info(const std::string& file, hid_t fid);

/// Copy every object at the root of `src` that is not part of the replicate schema of
/// `info` (/genes, /jobs, /sessions, /k_<k>), i.e. /consensus and /k_selection, to `dst`
/// (used when finish() rewrites a file compressed).
void copy_extra_objects(const std::string& file, hid_t src, hid_t dst, const RunInfo& info);

/// The readers of the consensus outputs (ResultsReader's methods).
std::vector<ConsensusKey> read_consensus_list(const std::string& file, hid_t fid);
ConsensusRecord read_consensus(const std::string& file, hid_t fid, const RunInfo& info, int k,
                               double local_density_threshold);
std::vector<std::string> read_consensus_cells(const std::string& file, hid_t fid, const RunInfo& info);
std::optional<KSelectionTable> read_k_selection(const std::string& file, hid_t fid);

}  // namespace knmf::results::detail
