/// \file
/// HDF5's library shutdown for the driver (hdf5_library.hpp).

#include "hdf5_library.hpp"

#include <hdf5.h>

namespace knmf::cli {

void defer_hdf5_shutdown() { H5dont_atexit(); }

void finish_hdf5(bool failed) {
  if (!failed) H5close();
}

}  // namespace knmf::cli
