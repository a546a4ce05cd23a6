#pragma once
/// \file
/// `knmf factorize` over MPI ranks (one device each).
///
///  * `jobs` (default): every rank reads X once and takes jobs from rank 0, which hands them
///    out on request (guided: large grants first, single jobs at the end), or a fixed modulo
///    split with `static_split`. Native mode: rank 0 writes the one results file, the other
///    ranks send their finished replicates. cNMF mode: each rank writes its own jobs' files.
///  * `rows`: X is partitioned by rows (DistributedMatrix); all ranks run every job together.
///  * `auto`: rows when X does not fit one device next to a replicate and there are several
///    ranks, jobs otherwise.
/// The run is that of `knmf::run_factorize` (one plan, fit check, result store and summary):
/// rank 0 plans, checks that the run fits every rank's device (the smallest budget of the
/// ranks) before the results file exists, and broadcasts the plan. Only rank 0 prints the plan
/// and calls the progress hook (FactorizeConfig::on_progress, for every replicate of the run);
/// the hook cannot stop an MPI run: its false after an iteration is a LogicError.

#include <mpi.h>

#include <iosfwd>
#include <string>

#include "knmf/core/options.hpp"
#include "knmf/run/factorize.hpp"

namespace knmf::mpi {

struct DistributeOptions {
  Distribution mode = Distribution::jobs;  ///< --distribute jobs|rows|auto
  bool static_split = false;  ///< jobs mode: job i runs on rank i % size, no requests
};

/// Collective over `comm`. An error every rank meets before any work (an invalid
/// configuration; a failed plan: missing input, a run that does not fit, a changed resume) is
/// thrown on every rank: rank 0 throws the original, the others an InputError with its
/// message, so the caller reports it once (the driver: rank 0 prints it, every rank exits 1).
/// On any other error in any rank: prints it and MPI_Abort()s (never hangs).
FactorizeSummary run_factorize(const FactorizeConfig& config, const DistributeOptions& dist,
                               MPI_Comm comm, std::ostream& log);

/// The device a rank should use: its rank among the ranks of its node, modulo the devices.
int local_rank(MPI_Comm comm);

}  // namespace knmf::mpi
