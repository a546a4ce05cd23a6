#pragma once
/// \file
/// Internal: an .h5ad file open for reading, the base of H5adReader::Impl. What reading X
/// (h5ad_reader.cpp) and reading the obs/var names (h5ad_file.cpp) share: the HDF5 file, its
/// name in messages, the read options, and opening a dataset (its chunk cache sized to the
/// reads); and the names themselves.

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "io/hdf5.hpp"
#include "knmf/io/h5ad.hpp"

namespace knmf::io::detail {

/// Raw bytes of on-disk typed elements; std::vector's allocation is aligned for any scalar.
using RawBuffer = std::vector<std::max_align_t>;

inline void* raw_resize(RawBuffer& buf, std::size_t bytes) {
  buf.resize((bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t));
  return buf.data();
}

struct H5adFile {
  std::filesystem::path path;
  std::string file;  // path as text, for messages
  H5adReadOptions opts;
  h5::File fid;

  /// The dataset `name`, with a chunk cache that holds what a bounded read touches.
  h5::Dataset open_dataset(const std::string& name) const;
  /// The kind of the object at an existing `path` (InputError when HDF5 cannot open it).
  H5I_type_t kind_of(const std::string& path) const;

  // ---- obs / var names ------------------------------------------------------------------

  /// Checks the length of the obs or var index (`elem`) against X's `expected` rows or
  /// columns (`dim`), from the dataset's extent: no name is read.
  void check_index_length(const char* elem, std::int64_t expected, const char* dim) const;
  /// The obs or var names (`elem`), checked: as many as X's `expected` `dim`s, valid UTF-8.
  std::vector<std::string> index_names(const char* elem, std::int64_t expected,
                                       const char* dim) const;

  /// Where the obs or var names are: the dataset to open, the name errors report, and
  /// whether it is AnnData < 0.7's structured array (names in its field "index").
  struct IndexLocation {
    std::string dataset, name;
    bool structured = false;
  };
  IndexLocation locate_index(const char* elem, const char* dim) const;
  std::vector<std::string> read_strings(const h5::Dataset& d, const std::string& name, hid_t mem,
                                        const h5::StringLayout& layout, std::int64_t expected,
                                        const char* dim) const;
  void check_name_lengths(const h5::Dataset& d, const std::string& name, std::int64_t total) const;
};

}  // namespace knmf::io::detail
