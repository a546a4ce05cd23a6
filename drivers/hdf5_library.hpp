#pragma once
/// \file
/// HDF5's library shutdown, for a program that owns the process (the knmf driver).
///
/// HDF5 closes itself at exit (an atexit handler). After a corrupt input file, HDF5 1.10 may
/// hold objects of its own that it cannot close (a failed open of a corrupt object header
/// leaves metadata-cache entries behind: tests/fuzz/hdf5-bugs/leak-*.h5); its shutdown then
/// prints "HDF5: infinite loop closing library" and a line of package names after knmf's
/// one-line error. A driver calls defer_hdf5_shutdown() before anything uses HDF5 and
/// finish_hdf5(failed) at its end: a run that succeeded closes HDF5 (so anything left open
/// there is still reported), one that failed leaves HDF5 to the operating system. knmf closes
/// every file it opened on every path either way (its handles are RAII), so nothing is lost.

namespace knmf::cli {

/// HDF5 will not close itself at exit (H5dont_atexit); call before the first HDF5 call.
void defer_hdf5_shutdown();

/// Closes HDF5 (H5close) unless `failed`.
void finish_hdf5(bool failed);

}  // namespace knmf::cli
