// HDF5 alone (no knmf code) on one file image: open it through the core driver, visit every
// object, read every attribute and every (small) dataset in its native type, variable-length
// strings included. A triage tool, not a fuzzer of knmf: an input on which fuzz_h5ad fails
// (crash, leak, timeout) and this fails too is HDF5's bug; one on which only fuzz_h5ad fails is
// the h5ad reader's (tests/fuzz/run.sh sorts every h5ad artifact this way; README.md).
//   build-fuzz/tests/fuzz/h5image_check -timeout=10 INPUT
#include <hdf5.h>

#include <cstdint>
#include <vector>

namespace {

constexpr hssize_t kMaxElements = 1 << 16;

/// Reads `n` elements of file type `ft` with `read` (H5Aread or H5Dread into a buffer of the
/// native type), reclaiming variable-length memory as an HDF5 user must.
template <class Read>
void read_elements(hid_t ft, hid_t space, hssize_t n, Read read) {
  if (ft < 0 || n < 0 || n > kMaxElements) return;
  const hid_t mt = H5Tget_native_type(ft, H5T_DIR_ASCEND);
  if (mt < 0) return;
  std::vector<unsigned char> buf(std::size_t(n + 1) * (H5Tget_size(mt) + 16));
  if (read(mt, buf.data()) >= 0 && H5Tdetect_class(mt, H5T_VLEN) + (H5Tis_variable_str(mt) > 0) > 0)
    H5Dvlen_reclaim(mt, space, H5P_DEFAULT, buf.data());
  H5Tclose(mt);
}

void read_attrs(hid_t obj) {
  H5O_info_t info;
  if (H5Oget_info2(obj, &info, H5O_INFO_NUM_ATTRS) < 0) return;
  for (hsize_t i = 0; i < info.num_attrs && i < 64; ++i) {
    const hid_t a = H5Aopen_by_idx(obj, ".", H5_INDEX_CRT_ORDER, H5_ITER_INC, i, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) continue;
    const hid_t ft = H5Aget_type(a), sp = H5Aget_space(a);
    if (sp >= 0)
      read_elements(ft, sp, H5Sget_simple_extent_npoints(sp), [&](hid_t mt, void* buf) { return H5Aread(a, mt, buf); });
    if (ft >= 0) H5Tclose(ft);
    if (sp >= 0) H5Sclose(sp);
    H5Aclose(a);
  }
}

herr_t visit(hid_t root, const char* name, const H5O_info_t* info, void*) {
  const hid_t obj = H5Oopen(root, name, H5P_DEFAULT);
  if (obj < 0) return 0;
  read_attrs(obj);
  if (info->type == H5O_TYPE_DATASET) {
    const hid_t ft = H5Dget_type(obj), sp = H5Dget_space(obj);
    if (sp >= 0)
      read_elements(ft, sp, H5Sget_simple_extent_npoints(sp), [&](hid_t mt, void* buf) {
        return H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
      });
    if (ft >= 0) H5Tclose(ft);
    if (sp >= 0) H5Sclose(sp);
  }
  H5Oclose(obj);
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_core(fapl, std::size_t{1} << 16, false);
  H5Pset_file_image(fapl, const_cast<std::uint8_t*>(data), size);
  const hid_t f = H5Fopen("image.h5", H5F_ACC_RDONLY, fapl);
  H5Pclose(fapl);
  if (f < 0) return 0;
  read_attrs(f);
  // The objects the h5ad reader opens by name, then every object the file links to.
  for (const char* path : {"/X", "/X/data", "/X/indices", "/X/indptr", "/obs", "/var", "/obs/_index",
                           "/var/_index", "/obs/index", "/var/index"}) {
    H5O_info_t info;
    if (H5Lexists(f, "/X", H5P_DEFAULT) < 0) break;
    if (H5Oget_info_by_name2(f, path, &info, H5O_INFO_BASIC, H5P_DEFAULT) >= 0) visit(f, path, &info, nullptr);
    else H5Oclose(H5Oopen(f, path, H5P_DEFAULT));
  }
  H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_INC, visit, nullptr, H5O_INFO_BASIC);
  H5Fclose(f);
  return 0;
}
