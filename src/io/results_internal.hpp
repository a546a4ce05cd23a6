#pragma once
/// \file
/// Internal pieces of the results file shared by results_file.cpp (replicates: writer,
/// reader) and results_consensus.cpp (consensus outputs: update_results_file and their
/// reading). Not installed; only src/io includes it.

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "knmf/io/detail/hdf5.hpp"
#include "knmf/io/results_file.hpp"

namespace knmf::io::detail::results {

namespace h5 = detail::h5;

inline constexpr const char* kFormat = "knmf-results";

/// Now, as ISO 8601 UTC ("2024-05-01T12:34:56Z").
std::string iso_now();
/// "5 6 7".
std::string join_ints(const std::vector<int>& v);
/// "(3, 4)" / "(3,)".
std::string shape_text(const std::vector<hsize_t>& d);

/// Close `f` (reporting a failure of the close itself).
void close_file(const std::string& file, h5::File& f, const std::filesystem::path& where);

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

}  // namespace knmf::io::detail::results
