// The writer side of the results-file kill test (tests/io/test_results_file_kill.cpp):
// writes the synthetic run of test_results_file_support.hpp into a results file, committing
// every few replicates, until done. The test SIGKILLs it at random moments, or it kills
// itself at a chosen step of the write protocol (--die-at STEP:COUNT).
//
// Progress goes to a small file mapped in memory (--progress FILE) that outlives a kill:
//   int32 phase      what the process was doing last (Phase below)
//   int32 committed  replicates known committed (a lower bound on what the file must hold)
//
// With --update V it instead adds the consensus outputs of test_results_file_support.hpp's
// synthetic_update(V) to the existing OUT.h5 (update_results_file), for the kill tests of
// that update; --hold-us U sleeps U microseconds once the new file is whole, before the
// rename (so a test can try to write meanwhile).
//
// usage: results_file_kill_helper OUT.h5 [--n-iter N] [--genes G] [--cells N] [--no-usages]
//          [--dtype float|double] [--commit-every C] [--sleep-us U] [--gzip L] [--no-fsync]
//          [--die-at STEP:COUNT] [--progress FILE] [--update V [--hold-us U]]
// STEP: created data_flushed flags_written committed completing completed (a run),
//       copied renamed (an update)
// exit: 0 complete (or updated), 3 finish() left replicates pending, 2 error (message on stderr).

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>

#include "knmf/results/consensus_records.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/results/writer.hpp"
#include "test_results_file_support.hpp"

namespace {

enum Phase : std::int32_t {
  opening = 1,        // create_or_resume running
  created_temp = 2,   // new file complete under its temporary name
  computing = 3,      // between replicates
  writing = 4,        // write()
  commit_data = 5,    // commit(): flushing data
  commit_flags = 6,   // commit(): data flushed, writing flags
  commit_flush = 7,   // commit(): flags written, flushing them
  committed = 8,      // commit() done
  finishing = 9,      // finish(): final commit
  completing = 10,    // finish(): setting complete (or compressing)
  completed = 11,     // finish(): complete flushed
  done = 12,          // finish() returned
  updating = 13,      // update_results_file running (copying)
  update_copied = 14, // the new file is whole under its temporary name, not renamed
  update_renamed = 15,// the new file replaced the old one
  update_done = 16,   // update_results_file returned
};

struct Progress {
  volatile std::int32_t phase;
  volatile std::int32_t committed;
};

Progress* map_progress(const char* path) {
  static Progress local{};
  if (!path) return &local;
  const int fd = ::open(path, O_RDWR | O_CREAT, 0644);
  if (fd < 0 || ::ftruncate(fd, sizeof(Progress)) != 0) {
    std::perror(path);
    std::exit(2);
  }
  void* p = ::mmap(nullptr, sizeof(Progress), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(2);
  }
  return static_cast<Progress*>(p);
}

/// "copied" and "renamed" are steps of an update; -1 otherwise.
int parse_update_step(const std::string& s) {
  if (s == "copied") return static_cast<int>(knmf::results::UpdateStep::copied);
  if (s == "renamed") return static_cast<int>(knmf::results::UpdateStep::renamed);
  return -1;
}

knmf::results::WriteStep parse_step(const std::string& s) {
  using knmf::results::WriteStep;
  if (s == "created") return WriteStep::created;
  if (s == "data_flushed") return WriteStep::data_flushed;
  if (s == "flags_written") return WriteStep::flags_written;
  if (s == "committed") return WriteStep::committed;
  if (s == "completing") return WriteStep::completing;
  if (s == "completed") return WriteStep::completed;
  std::fprintf(stderr, "unknown step %s\n", s.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.h5 [options]\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  knmf::test::SyntheticRun run;
  knmf::results::ResultsWriteOptions opts;
  int commit_every = 3, sleep_us = 0, die_count = 0, update = -1, hold_us = 0, die_update = -1;
  knmf::results::WriteStep die_step{};
  const char* progress_path = nullptr;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--n-iter") run.n_iter = std::stoi(next());
    else if (a == "--genes") run.n_genes = std::stoll(next());
    else if (a == "--cells") run.n_cells = std::stoll(next());
    else if (a == "--no-usages") run.save_usages = false;
    else if (a == "--dtype") run.dtype = knmf::parse_dtype(next());
    else if (a == "--commit-every") commit_every = std::stoi(next());
    else if (a == "--sleep-us") sleep_us = std::stoi(next());
    else if (a == "--gzip") opts.gzip_level = std::stoi(next());
    else if (a == "--no-fsync") opts.fsync = false;
    else if (a == "--progress") progress_path = argv[++i];
    else if (a == "--update") update = std::stoi(next());
    else if (a == "--hold-us") hold_us = std::stoi(next());
    else if (a == "--die-at") {
      const std::string v = next();
      const auto colon = v.find(':');
      die_update = parse_update_step(v.substr(0, colon));
      if (die_update < 0) die_step = parse_step(v.substr(0, colon));
      die_count = colon == std::string::npos ? 1 : std::stoi(v.substr(colon + 1));
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  Progress* prog = map_progress(progress_path);
  if (update >= 0) {
    prog->phase = updating;
    knmf::results::ResultsUpdateOptions uo;
    uo.on_step = [&](knmf::results::UpdateStep s) {
      if (s == knmf::results::UpdateStep::copied) {
        prog->phase = update_copied;
        if (hold_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(hold_us));
      } else {
        prog->phase = update_renamed;
      }
      if (die_count > 0 && static_cast<int>(s) == die_update) ::raise(SIGKILL);
    };
    try {
      const knmf::results::RunInfo info = knmf::results::ResultsReader::open(out).info();
      knmf::results::update_results_file(out, knmf::test::synthetic_update(info, update), uo);
      prog->phase = update_done;
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "results_file_kill_helper: %s\n", e.what());
      return 2;
    }
  }
  prog->phase = opening;

  std::int64_t done_before = 0;  // committed when the last commit started
  int since_commit = 0;          // written since then
  int seen = 0;                  // occurrences of die_step
  opts.on_step = [&](knmf::results::WriteStep s) {
    using knmf::results::WriteStep;
    switch (s) {
      case WriteStep::created: prog->phase = created_temp; break;
      case WriteStep::data_flushed: prog->phase = commit_flags; break;
      case WriteStep::flags_written: prog->phase = commit_flush; break;
      case WriteStep::committed:
        prog->committed = static_cast<std::int32_t>(done_before + since_commit);
        prog->phase = committed;
        break;
      case WriteStep::completing: prog->phase = completing; break;
      case WriteStep::completed: prog->phase = completed; break;
    }
    if (die_count > 0 && s == die_step && ++seen == die_count) ::raise(SIGKILL);
  };

  try {
    const knmf::results::RunInfo info = knmf::test::synthetic_info(run);
    auto w = knmf::results::ResultsWriter::create_or_resume(out, info, opts);
    done_before = w.n_done();
    prog->committed = static_cast<std::int32_t>(done_before);
    for (const knmf::Job& job : w.pending()) {
      prog->phase = computing;
      if (sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
      const auto r = knmf::test::synthetic_result(w.info(), job);
      prog->phase = writing;
      w.write(r);
      if (++since_commit == commit_every) {
        prog->phase = commit_data;
        w.commit();
        done_before = w.n_done();
        since_commit = 0;
      }
    }
    prog->phase = finishing;
    const bool complete = w.finish();
    prog->committed = static_cast<std::int32_t>(info.ks.size() * static_cast<std::size_t>(run.n_iter));
    prog->phase = done;
    return complete ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "results_file_kill_helper: %s\n", e.what());
    return 2;
  }
}
