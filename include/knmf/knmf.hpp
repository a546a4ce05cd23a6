#pragma once
/// \file
/// Umbrella header: the whole public API of knmf, every installed header of every area, for
/// programs that use knmf (knmf's own sources include what they use, never this header).
///
/// Two groups are conditional or left out: the MPI parts (mpi/) are included when knmf was
/// built with MPI (KNMF_HAVE_MPI, config.hpp), as they are installed only then; and
/// consensus/plot.hpp, whose figures are the separate `knmf_plot` library of the driver (for
/// cairo), not part of libknmf and not installed.

#include "knmf/config.hpp"
#include "knmf/version.hpp"

// core: errors, types, options, runtime, formatting
#include "knmf/core/assignment.hpp"
#include "knmf/core/checked.hpp"
#include "knmf/core/compat.hpp"
#include "knmf/core/error.hpp"
#include "knmf/core/format.hpp"
#include "knmf/core/host_access.hpp"
#include "knmf/core/job.hpp"
#include "knmf/core/kernel_set.hpp"
#include "knmf/core/kokkos_settings.hpp"
#include "knmf/core/options.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/core/types.hpp"

// random: numpy's RandomState, cNMF's job table
#include "knmf/random/random_state.hpp"

// io: file formats
#include "knmf/io/atomic_file.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/io/fingerprint.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/io/npy.hpp"
#include "knmf/io/pickle.hpp"
#include "knmf/io/utf8.hpp"
#include "knmf/io/zip.hpp"

// matrix: X on the device, streamed, read by row blocks
#include "knmf/matrix/csr_matrix.hpp"
#include "knmf/matrix/dense_matrix.hpp"
#include "knmf/matrix/gather_segments.hpp"
#include "knmf/matrix/host_x.hpp"
#include "knmf/matrix/load.hpp"
#include "knmf/matrix/row_source.hpp"
#include "knmf/matrix/stats.hpp"
#include "knmf/matrix/streamed_matrix.hpp"

// prepare: cNMF's preparation, simulated counts
#include "knmf/prepare/cnmf_prepare.hpp"
#include "knmf/prepare/count_inputs.hpp"
#include "knmf/prepare/evaluate.hpp"
#include "knmf/prepare/prepare.hpp"
#include "knmf/prepare/simulate.hpp"

// solver: the batched NMF
#include "knmf/solver/init.hpp"
#include "knmf/solver/nmf.hpp"
#include "knmf/solver/options.hpp"
#include "knmf/solver/result.hpp"

// run: a factorize run and its memory plan
#include "knmf/run/factorize.hpp"
#include "knmf/run/in_memory.hpp"
#include "knmf/run/memory.hpp"

// results: knmf's results file, `knmf compare`
#include "knmf/results/compare.hpp"
#include "knmf/results/consensus_records.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/results/writer.hpp"

// consensus: clustering, refit, k selection, cNMF and native modes
#include "knmf/consensus/clustering.hpp"
#include "knmf/consensus/cnmf_mode.hpp"
#include "knmf/consensus/consensus.hpp"
#include "knmf/consensus/cross_validation.hpp"
#include "knmf/consensus/native_mode.hpp"
#include "knmf/consensus/options.hpp"
#include "knmf/consensus/refit.hpp"

#if KNMF_HAVE_MPI
// mpi: a factorize run over MPI ranks
#include "knmf/mpi/distributed.hpp"
#include "knmf/mpi/run.hpp"
#endif
