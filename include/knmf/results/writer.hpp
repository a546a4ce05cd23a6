#pragma once
/// \file
/// ResultsWriter: writes knmf's results file (run_info.hpp: the schema) replicate by
/// replicate, so that a run killed at any moment can be resumed without losing committed
/// replicates.
///
/// Durability. Every object and every byte of raw storage is allocated when the file is
/// created (under a temporary name, renamed into place once closed). Afterwards a run only
/// overwrites raw data at fixed places: HDF5's metadata (object headers, chunk indices,
/// superblock) never changes until `finish()` rewrites the one value of `complete` in place.
/// A commit flushes the data, then writes and flushes the completion flags. So a process
/// killed at any moment leaves a file whose structure is the one created, whose flagged
/// replicates hold exactly their data, and whose `complete` is 0 unless finish() got to set
/// it. The format has no SWMR status flags (superblock version 0), so such a file opens in
/// any HDF5 reader, h5py included, without h5clear. Compression (gzip_level > 0) would make
/// chunk sizes change with each write, so it is applied once, by `finish()`, which rewrites
/// the completed file compressed under a temporary name and renames it into place.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "knmf/core/job.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/solver/result.hpp"

namespace knmf::results {

/// The steps of the writer's durable-write protocol, reported to ResultsWriteOptions::on_step
/// (tests kill the process at each of them).
enum class WriteStep {
  created,        ///< a new file is complete under its temporary name, not renamed yet
  data_flushed,   ///< commit: the replicates' data is flushed; flags not written yet
  flags_written,  ///< commit: flags handed to HDF5, not flushed yet
  committed,      ///< commit: flags flushed; the replicates count as done
  completing,     ///< finish: every replicate is committed; `complete` not set yet
  completed,      ///< finish: `complete` = 1 is flushed (the file is about to close)
};

/// Options of ResultsWriter.
struct ResultsWriteOptions {
  /// 0..9: gzip level of spectra and usages, applied by finish() when the run completes.
  int gzip_level = 0;
  /// fsync the file after each flush (so that commits also survive a power cut, not just a
  /// killed process).
  bool fsync = true;
  /// Called at each WriteStep (tests, diagnostics); may throw to abandon the operation.
  std::function<void(WriteStep)> on_step;
};

/// Writes a results file replicate by replicate, resuming an interrupted run.
///
///   auto w = ResultsWriter::create_or_resume("out.h5", info);
///   for (const Job& j : w.pending()) { ...; w.write(result); if (...) w.commit(); }
///   w.finish();
///
/// Results written but not committed when the writer dies (or is destroyed) do not count:
/// they are pending in the next session. Not thread-safe: one thread per writer. The file is
/// locked (HDF5 file locking) against a second writer while open.
class ResultsWriter {
public:
  /// Create `path` (all groups and datasets allocated, every replicate pending) or, when it
  /// exists, resume it. InputError when: the output folder is missing or not writable; `path`
  /// exists but is not a knmf results file (it is never overwritten); it was written with
  /// other run options (the message names each differing option with its old and new value);
  /// it was computed on another X (below); `info` is invalid (no ks, n_iter < 1, ...). Records
  /// this session in /sessions.
  ///
  /// The input of a resume. The input path need not be the same text (`./a/in.h5ad` for
  /// `a/in.h5ad`, another working directory, a moved file): X is compared by content. When
  /// both the file and `info` have an input_fingerprint, they must be equal (InputError naming
  /// both paths and both fingerprints otherwise); when `info` has none (X not read: check(),
  /// or a run with nothing left to do), the content is not compared. A file without a
  /// fingerprint (written before format_version 3) is resumed when `info.input` is the file
  /// it records (the same path text, or the same file by identity, io::same_file), with a
  /// warning (warnings()) that its content cannot be checked; another file is refused.
  static ResultsWriter create_or_resume(const std::filesystem::path& path, const RunInfo& info,
                                        const ResultsWriteOptions& opts = {});

  /// What create_or_resume(path, info) would find, read without writing anything: the jobs
  /// it would leave pending, in job-table order (every job when `path` does not exist yet).
  /// InputError in the cases create_or_resume refuses (see there), and when `path` exists but
  /// is not writable. A run checks its results file with this before it reads its input, and
  /// creates or resumes it once the input is read and valid: a run that stops on a bad input
  /// leaves no file behind.
  static std::vector<Job> check(const std::filesystem::path& path, const RunInfo& info);

  ResultsWriter(ResultsWriter&&) noexcept;
  ResultsWriter& operator=(ResultsWriter&&) noexcept;
  /// Closes the file; results written since the last commit stay uncommitted.
  ~ResultsWriter();

  const std::filesystem::path& path() const;
  /// The run as recorded (ks sorted, job table filled in).
  const RunInfo& info() const;
  /// True when the file existed (this session resumes it).
  bool resumed() const;
  /// What the resume could not check, one line each (e.g. the input of a file that records
  /// no fingerprint); empty for a new file.
  const std::vector<std::string>& warnings() const;

  /// Jobs neither committed nor written since the last commit, in job-table order.
  std::vector<Job> pending() const;
  /// True when the job's replicate is committed. InputError if `job` is not in the table.
  bool done(const Job& job) const;
  /// Number of committed replicates.
  std::int64_t n_done() const;
  /// Committed replicates that are not valid factorizations (status non_finite), in job-table
  /// order. They are not pending (a resume does not run them again: the same X, seed and
  /// options give the same result), and while there are any the file is never complete.
  std::vector<Job> failed() const;

  /// Write one replicate's data and table entries (not yet counted: see commit()).
  /// InputError when its job is not in the table, is already committed (committed data is
  /// never overwritten), or its shapes do not match the run (H: k x g; W: n x k when
  /// save_usages).
  void write(const ReplicateResult& result);
  /// Durably record every replicate written since the last commit: flush their data, then
  /// write and flush their completion flags (each flush followed by fsync when asked).
  void commit();
  /// Commit, then, when every replicate is committed and none is non_finite (failed()), set
  /// `complete` = 1 (compressing first when gzip_level > 0). Closes the file in either case;
  /// returns whether it is complete.
  bool finish();

private:
  struct Impl;
  explicit ResultsWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace knmf::results
