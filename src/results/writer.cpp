/// \file
/// ResultsWriter: creates or resumes a results file and commits replicates durably
/// (include/knmf/results/writer.hpp, docs/results-file.md).
///
/// The durability argument in short: after creation (under a temporary name, renamed into
/// place once closed) the writer never changes HDF5 metadata -- all storage is allocated
/// early, no dataset is filtered, no attribute is added -- so every later write is a plain
/// overwrite of raw bytes at fixed addresses. Order then does the rest: a replicate's data is
/// flushed before its completion flag is written, and `complete` is written (in place, one
/// value) after every flag is flushed.

#include "knmf/results/writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>
#include <system_error>
#include <utility>

#include "knmf/core/error.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/io/atomic_file.hpp"
#include "io/hdf5.hpp"
#include "results/internal.hpp"


namespace knmf::results {

namespace h5 = io::detail::h5;
namespace fs = std::filesystem;
using io::AtomicFile;
using io::remove_leftover_temps;

using namespace detail;

// ---- ResultsWriter ---------------------------------------------------------------------------

struct ResultsWriter::Impl {
  fs::path path;
  std::string file;
  RunInfo info;
  ResultsWriteOptions opts;
  bool resumed = false;
  bool closed = false;
  bool was_complete = false;  // `complete` was already 1 when opened
  h5::File fid;
  h5::Dataset sessions;
  std::vector<KGroup> groups;                     // in ks order
  std::vector<std::vector<std::uint8_t>> flags;   // committed flags per group, per iter
  std::vector<std::vector<std::int8_t>> states;   // status per group, per iter (as written)
  std::vector<std::pair<int, int>> buffered;      // (group, iter) written since the last commit
  mutable std::vector<std::string> warnings;      // of inspect(): what a resume could not check
  h5::Datatype status_mem = status_type(H5T_NATIVE_INT8);

  void step(WriteStep s) const {
    if (opts.on_step) opts.on_step(s);
  }

  int group_of(int k) const {
    const auto pos = std::lower_bound(info.ks.begin(), info.ks.end(), k);
    KNMF_ASSERT(pos != info.ks.end() && *pos == k, "k not in the run");
    return static_cast<int>(pos - info.ks.begin());
  }

  void check_open() const {
    if (closed || !fid) input_error(file, ": ResultsWriter used after finish()");
  }

  void flush() {
    if (H5Fflush(fid.get(), H5F_SCOPE_LOCAL) < 0) h5::fail(file, "cannot flush");
    h5::check_writes(file, fid.get());
    if (!opts.fsync) return;
    void* handle = nullptr;
    if (H5Fget_vfd_handle(fid.get(), H5P_DEFAULT, &handle) < 0 || !handle)
      h5::fail(file, "cannot get the file descriptor to sync");
    if (::fsync(*static_cast<int*>(handle)) != 0) {
      const int err = errno;
      system_input_error(err, "cannot write ", file);
    }
  }

  void create() {
    {
      AtomicFile tmp(path, file);  // removed again unless committed
      info.created = iso_now();
      h5::File f = build(file, tmp.temp(), info, 0, false);
      write_session(f.get(), 0);
      h5::close(file, f);
      step(WriteStep::created);
      tmp.commit(AtomicFile::Replace::no);
    }
    open_for_writing();
  }

  void resume() {
    resumed = true;
    const RunInfo old = inspect();
    info.created = old.created;
    // the file's record of its input stays as created (a resume by another path keeps it)
    info.input = old.input;
    info.input_absolute = old.input_absolute;
    info.input_fingerprint = old.input_fingerprint;
    open_for_writing();
    // This session's provenance goes to the first free slot (raw data: no metadata change).
    auto slots = h5::read_string_dataset(file, sessions.get(), "/sessions");
    std::size_t slot = 0;
    while (slot + 1 < slots.size() && !slots[slot].empty()) ++slot;
    write_session(fid.get(), slot);
    flush();
  }

  /// The existing file, read-only: InputError unless it is a knmf results file of this very
  /// run (a file that is not ours is never opened for writing). Returns the run it records.
  RunInfo inspect() const {
    RunInfo old;
    {
      if (H5Fis_hdf5(file.c_str()) <= 0)
        input_error(file, " exists and is not a knmf results file (not an HDF5 file); refusing to "
                    "overwrite it: use a new -o file");
      h5::PropList fapl = file_access(false);
      h5::File f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get()));
      if (!f) h5::fail(file, "cannot open");
      const std::string problem = format_problem(f.get());
      if (!problem.empty())
        input_error(file, " exists and is not a knmf results file (", problem,
                    "); refusing to overwrite it: use a new -o file");
      old = read_info(file, f.get());
    }
    const auto [was, now] = differences(old, info);
    if (!was.empty())
      input_error(file, " was written with ", was, "; this run asks ", now,
                  ": use a new -o file or the same options");
    if (auto w = check_input(file, old, info); !w.empty()) warnings.push_back(std::move(w));
    return old;
  }

  void write_session(hid_t f, std::size_t slot) {
    h5::Dataset d(H5Dopen2(f, "/sessions", H5P_DEFAULT));
    if (!d) h5::fail(file, "cannot open /sessions");
    std::vector<char> buf(kSessionBytes, '\0');
    const std::string rec = session_record(info);
    std::memcpy(buf.data(), rec.data(), rec.size());
    h5::Datatype t = session_type();
    write_block(file, d.get(), "/sessions", t.get(), {slot}, {1}, buf.data());
  }

  void open_for_writing() {
    h5::PropList fapl = file_access(true);
    fid = h5::File(H5Fopen(file.c_str(), H5F_ACC_RDWR, fapl.get()));
    if (!fid) h5::fail(file, "cannot open for writing (is another knmf run writing it, or is it open in this process?)");
    sessions = open_dataset(file, fid.get(), "/sessions", {kSessionSlots});
    {
      h5::Group root(H5Gopen2(fid.get(), "/", H5P_DEFAULT));
      was_complete = need_int(file, root.get(), "complete") != 0;
    }
    for (int k : info.ks) {
      groups.push_back(open_kgroup(file, fid.get(), info, k));
      std::vector<std::uint8_t> f(static_cast<std::size_t>(info.n_iter));
      read_all(file, groups.back().completed.get(), groups.back().ds("completed"), H5T_NATIVE_UINT8, f.data());
      flags.push_back(std::move(f));
      std::vector<std::int8_t> st(static_cast<std::size_t>(info.n_iter));
      read_all(file, groups.back().status.get(), groups.back().ds("status"), status_mem.get(), st.data());
      states.push_back(std::move(st));
    }
  }

  void close() {
    sessions.reset();
    groups.clear();
    closed = true;
    h5::close(file, fid);
  }

  /// Rewrite the completed file with compressed spectra and usages, then replace it.
  void repack() {
    AtomicFile tmp(path, file);  // removed again unless committed
    {
      RunInfo stored = read_info(file, fid.get());
      h5::File out = build(file, tmp.temp(), stored, opts.gzip_level, true);
      {
        h5::Datatype st = session_type();
        std::vector<char> buf(kSessionSlots * kSessionBytes);
        read_all(file, sessions.get(), "/sessions", st.get(), buf.data());
        h5::Dataset d(H5Dopen2(out.get(), "/sessions", H5P_DEFAULT));
        write_all(file, d.get(), "/sessions", st.get(), buf.data());
      }
      const auto n = static_cast<std::size_t>(info.n_iter);
      for (const KGroup& src : groups) {
        KGroup dst = open_kgroup(file, out.get(), stored, src.k);
        auto copy = [&](const h5::Dataset& from, const h5::Dataset& to, const std::string& name,
                        hid_t mem, std::size_t elem) {
          std::vector<unsigned char> buf(n * elem);
          read_all(file, from.get(), name, mem, buf.data());
          write_all(file, to.get(), name, mem, buf.data());
        };
        copy(src.iterations, dst.iterations, src.ds("iterations"), H5T_NATIVE_INT32, 4);
        copy(src.error_at_init, dst.error_at_init, src.ds("error_at_init"), H5T_NATIVE_DOUBLE, 8);
        copy(src.final_error, dst.final_error, src.ds("final_error"), H5T_NATIVE_DOUBLE, 8);
        copy(src.status, dst.status, src.ds("status"), status_mem.get(), 1);
        copy(src.seconds, dst.seconds, src.ds("seconds"), H5T_NATIVE_DOUBLE, 8);
        copy(src.completed, dst.completed, src.ds("completed"), H5T_NATIVE_UINT8, 1);
        const auto k = static_cast<hsize_t>(src.k), g = static_cast<hsize_t>(info.n_genes()),
                   cells = static_cast<hsize_t>(info.n_cells);
        std::vector<double> buf;
        for (hsize_t it = 0; it < n; ++it) {
          buf.resize(k * g);
          read_block(file, src.spectra.get(), src.ds("spectra"), H5T_NATIVE_DOUBLE, {it, 0, 0}, {1, k, g}, buf.data());
          write_block(file, dst.spectra.get(), dst.ds("spectra"), H5T_NATIVE_DOUBLE, {it, 0, 0}, {1, k, g}, buf.data());
          if (info.save_usages) {
            buf.resize(cells * k);
            read_block(file, src.usages.get(), src.ds("usages"), H5T_NATIVE_DOUBLE, {it, 0, 0}, {1, cells, k}, buf.data());
            write_block(file, dst.usages.get(), dst.ds("usages"), H5T_NATIVE_DOUBLE, {it, 0, 0}, {1, cells, k}, buf.data());
          }
        }
      }
      copy_extra_objects(file, fid.get(), out.get(), stored);
      h5::close(file, out);
    }
    close();
    tmp.commit(AtomicFile::Replace::yes);
  }
};

ResultsWriter::ResultsWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResultsWriter::ResultsWriter(ResultsWriter&&) noexcept = default;
ResultsWriter& ResultsWriter::operator=(ResultsWriter&&) noexcept = default;

ResultsWriter::~ResultsWriter() {
  if (!impl_ || impl_->closed) return;
  h5::ErrorSilencer quiet;
  impl_->sessions.reset();
  impl_->groups.clear();
  impl_->fid.reset();
}

ResultsWriter ResultsWriter::create_or_resume(const fs::path& path, const RunInfo& info,
                                              const ResultsWriteOptions& opts) {
  h5::ErrorSilencer quiet;
  auto m = std::make_unique<Impl>();
  m->path = path;
  m->file = path.string();
  m->opts = opts;
  if (opts.gzip_level < 0 || opts.gzip_level > 9)
    input_error(m->file, ": gzip level ", opts.gzip_level, " is not in 0..9");
  if (opts.gzip_level > 0 && H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0)
    input_error(m->file, ": this HDF5 library has no gzip (deflate) filter; use gzip level 0");
  m->info = prepare(info, m->file);
  remove_leftover_temps(path);  // of killed runs (a live writer's temporary is left alone)
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (fs::exists(st)) {
    if (fs::is_directory(st)) input_error(m->file, " is a folder, not a results file");
    m->resume();
  } else {
    m->create();
  }
  return ResultsWriter(std::move(m));
}

std::vector<Job> ResultsWriter::check(const fs::path& path, const RunInfo& info) {
  h5::ErrorSilencer quiet;
  Impl m;
  m.path = path;
  m.file = path.string();
  m.info = prepare(info, m.file);
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!fs::exists(st)) {
    AtomicFile probe(path, m.file);  // the folder takes a new file; removed again on return
    return m.info.jobs;
  }
  if (fs::is_directory(st)) input_error(m.file, " is a folder, not a results file");
  m.inspect();
  if (::access(m.file.c_str(), W_OK) != 0)
    input_error(m.file, ": cannot open for writing (", std::strerror(errno), ")");
  h5::PropList fapl = file_access(false);
  h5::File f(H5Fopen(m.file.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!f) h5::fail(m.file, "cannot open");
  for (int k : m.info.ks) {
    const KGroup g = open_kgroup(m.file, f.get(), m.info, k);
    std::vector<std::uint8_t> done(static_cast<std::size_t>(m.info.n_iter));
    read_all(m.file, g.completed.get(), g.ds("completed"), H5T_NATIVE_UINT8, done.data());
    m.flags.push_back(std::move(done));
  }
  std::vector<Job> out;
  for (const Job& j : m.info.jobs)
    if (!m.flags[static_cast<std::size_t>(m.group_of(j.k))][static_cast<std::size_t>(j.iter)]) out.push_back(j);
  return out;
}

const fs::path& ResultsWriter::path() const { return impl_->path; }
const RunInfo& ResultsWriter::info() const { return impl_->info; }
bool ResultsWriter::resumed() const { return impl_->resumed; }
const std::vector<std::string>& ResultsWriter::warnings() const { return impl_->warnings; }

std::vector<Job> ResultsWriter::pending() const {
  const Impl& m = *impl_;
  std::vector<Job> out;
  for (const Job& j : m.info.jobs) {
    const int g = m.group_of(j.k);
    if (m.flags[static_cast<std::size_t>(g)][static_cast<std::size_t>(j.iter)]) continue;
    if (std::find(m.buffered.begin(), m.buffered.end(), std::pair{g, j.iter}) != m.buffered.end()) continue;
    out.push_back(j);
  }
  return out;
}

namespace {
const Job& table_job(const std::string& file, const RunInfo& info, const Job& j) {
  if (j.index < 0 || j.index >= static_cast<std::int64_t>(info.jobs.size()) ||
      info.jobs[static_cast<std::size_t>(j.index)].k != j.k ||
      info.jobs[static_cast<std::size_t>(j.index)].iter != j.iter ||
      info.jobs[static_cast<std::size_t>(j.index)].seed != j.seed)
    input_error(file, ": replicate k ", j.k, " iter ", j.iter, " seed ", j.seed, " (job ", j.index,
                ") is not in the job table of the run");
  return info.jobs[static_cast<std::size_t>(j.index)];
}
}  // namespace

bool ResultsWriter::done(const Job& job) const {
  const Impl& m = *impl_;
  const Job& j = table_job(m.file, m.info, job);
  return m.flags[static_cast<std::size_t>(m.group_of(j.k))][static_cast<std::size_t>(j.iter)] != 0;
}

std::int64_t ResultsWriter::n_done() const {
  std::int64_t n = 0;
  for (const auto& f : impl_->flags) n += std::count(f.begin(), f.end(), std::uint8_t{1});
  return n;
}

void ResultsWriter::write(const ReplicateResult& r) {
  h5::ErrorSilencer quiet;
  Impl& m = *impl_;
  m.check_open();
  const Job& j = table_job(m.file, m.info, r.job);
  const int gi = m.group_of(j.k);
  const KGroup& kg = m.groups[static_cast<std::size_t>(gi)];
  if (m.flags[static_cast<std::size_t>(gi)][static_cast<std::size_t>(j.iter)])
    input_error(m.file, ": replicate k ", j.k, " iter ", j.iter,
                " is already committed (committed data is never overwritten)");
  const std::int64_t n = m.info.n_cells, g = m.info.n_genes(), k = j.k;
  if (r.n != n || r.g != g || static_cast<std::int64_t>(r.H.size()) != k * g)
    input_error(m.file, ": replicate k ", k, " iter ", j.iter, " has X shape ", r.n, " x ", r.g,
                " and ", r.H.size(), " spectra values; the run has ", n, " x ", g, " (", k * g, " values)");
  if (m.info.save_usages && static_cast<std::int64_t>(r.W.size()) != n * k)
    input_error(m.file, ": replicate k ", k, " iter ", j.iter, " has ", r.W.size(),
                " usage values; the run saves usages (", n * k, " values)");

  // Until the data is rewritten completely the replicate is not eligible for a commit.
  const std::pair<int, int> key{gi, j.iter};
  m.buffered.erase(std::remove(m.buffered.begin(), m.buffered.end(), key), m.buffered.end());
  const auto it = static_cast<hsize_t>(j.iter);
  const auto hk = static_cast<hsize_t>(k), hg = static_cast<hsize_t>(g), hn = static_cast<hsize_t>(n);
  write_block(m.file, kg.spectra.get(), kg.ds("spectra"), H5T_NATIVE_DOUBLE, {it, 0, 0}, {1, hk, hg}, r.H.data());
  if (m.info.save_usages)
    write_block(m.file, kg.usages.get(), kg.ds("usages"), H5T_NATIVE_DOUBLE, {it, 0, 0}, {1, hn, hk}, r.W.data());
  const std::int32_t iters = r.n_iter;
  const auto state = static_cast<std::int8_t>(to_state(r.status));
  write_block(m.file, kg.iterations.get(), kg.ds("iterations"), H5T_NATIVE_INT32, {it}, {1}, &iters);
  write_block(m.file, kg.error_at_init.get(), kg.ds("error_at_init"), H5T_NATIVE_DOUBLE, {it}, {1}, &r.error_at_init);
  write_block(m.file, kg.final_error.get(), kg.ds("final_error"), H5T_NATIVE_DOUBLE, {it}, {1}, &r.final_error);
  write_block(m.file, kg.status.get(), kg.ds("status"), m.status_mem.get(), {it}, {1}, &state);
  m.states[static_cast<std::size_t>(gi)][static_cast<std::size_t>(j.iter)] = state;
  write_block(m.file, kg.seconds.get(), kg.ds("seconds"), H5T_NATIVE_DOUBLE, {it}, {1}, &r.seconds);
  h5::check_writes(m.file, m.fid.get());
  m.buffered.push_back(key);
}

void ResultsWriter::commit() {
  h5::ErrorSilencer quiet;
  Impl& m = *impl_;
  m.check_open();
  if (m.buffered.empty()) return;
  m.flush();
  m.step(WriteStep::data_flushed);
  auto next = m.flags;
  for (const auto& [gi, iter] : m.buffered) next[static_cast<std::size_t>(gi)][static_cast<std::size_t>(iter)] = 1;
  for (std::size_t gi = 0; gi < m.groups.size(); ++gi) {
    if (next[gi] == m.flags[gi]) continue;
    const KGroup& kg = m.groups[gi];
    write_all(m.file, kg.completed.get(), kg.ds("completed"), H5T_NATIVE_UINT8, next[gi].data());
  }
  m.step(WriteStep::flags_written);
  m.flush();
  m.flags = std::move(next);
  m.buffered.clear();
  m.step(WriteStep::committed);
}

std::vector<Job> ResultsWriter::failed() const {
  const Impl& m = *impl_;
  std::vector<Job> out;
  for (const Job& j : m.info.jobs) {
    const auto g = static_cast<std::size_t>(m.group_of(j.k));
    const auto it = static_cast<std::size_t>(j.iter);
    if (m.flags[g][it] &&
        m.states[g][it] == static_cast<std::int8_t>(ReplicateState::non_finite))
      out.push_back(j);
  }
  return out;
}

bool ResultsWriter::finish() {
  h5::ErrorSilencer quiet;
  Impl& m = *impl_;
  m.check_open();
  commit();
  // A run with a replicate that is not a valid factorization is never marked complete.
  const bool all = n_done() == static_cast<std::int64_t>(m.info.jobs.size()) && failed().empty();
  if (all && !m.was_complete) {
    m.step(WriteStep::completing);
    if (m.opts.gzip_level > 0) {
      m.repack();
    } else {
      {
        h5::Group root(H5Gopen2(m.fid.get(), "/", H5P_DEFAULT));
        h5::overwrite_int_attr(m.file, root.get(), "complete", 1);
      }
      m.flush();
      m.step(WriteStep::completed);
      // The file is complete on disk (flushed, synced). Closing it rewrites only the
      // superblock, with the end of file it has (nothing was allocated since it was opened),
      // so a failed write there (a disk that filled meanwhile) changes no byte: not an error.
      m.sessions.reset();
      m.groups.clear();
      m.fid.reset();
      m.closed = true;
      return all;
    }
    m.step(WriteStep::completed);
  }
  m.close();
  return all;
}

}  // namespace knmf::results
