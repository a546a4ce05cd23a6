// The results file survives kill -9: a writer process (results_file_kill_helper) is SIGKILLed
// at random moments and at each step of the write protocol; after every kill the file must
// open, every replicate flagged completed must hold exactly its data, no replicate committed
// before the kill may be lost, and `complete` must be 0 unless every replicate is committed.
// Resuming then completes the run, and the result must equal an uninterrupted run's.
//
// KNMF_KILL_SEED=<n> changes the random kill moments (the default is fixed, for repeatability).

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "knmf/io/atomic_file.hpp"
#include "knmf/core/error.hpp"
#include "knmf/results/consensus_records.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/results/run_info.hpp"
#include "test_results_file_checks.hpp"
#include "test_results_file_support.hpp"
#include "test_support.hpp"

extern char** environ;

namespace fs = std::filesystem;
using knmf::results::ResultsReader;
using knmf::test::describe_status;
using knmf::test::killed_by;
using knmf::test::poll_child;
using knmf::test::read_bytes;
using knmf::test::TempDir;
using knmf::test::wait_child;

namespace {

const char* kHelper = KNMF_RESULTS_KILL_HELPER;

const char* phase_name(int p) {
  static const char* names[] = {"(not started)", "opening/creating", "created, before rename",
                                "computing", "write()", "commit: flushing data",
                                "commit: writing flags", "commit: flushing flags", "committed",
                                "finish: final commit", "finish: setting complete",
                                "finish: complete flushed", "done", "update: copying",
                                "update: copied, not renamed", "update: renamed", "update: done"};
  return p >= 0 && p <= 16 ? names[p] : "?";
}

bool in_commit(int p) { return p >= 5 && p <= 7; }
constexpr int kOpening = 1;    // main() started: create_or_resume running
constexpr int kComputing = 3;  // the file open at its final name, between replicates

struct Progress {
  volatile std::int32_t phase;
  volatile std::int32_t committed;
};

/// The helper's progress page, shared through a file mapped in both processes.
class ProgressFile {
public:
  explicit ProgressFile(const fs::path& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, sizeof(Progress)), 0);
    void* p = ::mmap(nullptr, sizeof(Progress), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    EXPECT_NE(p, MAP_FAILED);
    page_ = static_cast<Progress*>(p);
  }
  ~ProgressFile() { ::munmap(const_cast<Progress*>(page_), sizeof(Progress)); }
  void reset() {
    page_->phase = 0;
    page_->committed = 0;
  }
  int phase() const { return page_->phase; }
  int committed() const { return page_->committed; }
  const fs::path& path() const { return path_; }

private:
  fs::path path_;
  Progress* page_ = nullptr;
};

/// Start the helper; its stderr goes to `stderr_file` when given.
pid_t spawn_helper(const std::vector<std::string>& args, const fs::path& stderr_file = {}) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(kHelper));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!stderr_file.empty())
    posix_spawn_file_actions_addopen(&actions, 2, stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, kHelper, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(rc, 0) << "cannot start " << kHelper;
  return pid;
}

/// Wait (up to `timeout_s`) until the helper `pid` reports `phase` or later. Returns false
/// when it ended first; its status (knmf::test::exit_status: an exit code, or
/// killed_by(SIGKILL), the one signal it may die of) is then in `status`.
bool wait_for_phase(const ProgressFile& progress, pid_t pid, int phase, double timeout_s, int& status) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (progress.phase() < phase && std::chrono::steady_clock::now() < end) {
    if (poll_child(pid, status, SIGKILL, "the helper")) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return true;
}

/// Run the helper to its end; returns its exit code, or killed_by(signal) (exit_status). A
/// death by a signal other than `expected_signal` (SIGKILL where it is told to --die-at a
/// step) fails the test.
int run_helper(const std::vector<std::string>& args, int expected_signal = 0) {
  return wait_child(spawn_helper(args), expected_signal, "the helper");
}

/// The arguments of the run under test (small enough to take well under a second, large
/// enough that commits take a noticeable share of that time).
std::vector<std::string> run_args(const fs::path& out, const ProgressFile* progress,
                                  std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {out.string(), "--n-iter", "12", "--genes", "3000", "--cells", "200",
                                "--commit-every", "3", "--sleep-us", "2000"};
  if (progress) {
    a.push_back("--progress");
    a.push_back(progress->path().string());
  }
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

constexpr std::int64_t kReplicates = 3 * 12;

/// What a killed (or live) writer's file must satisfy. Returns the number of completed
/// replicates; -1 when the file does not exist (allowed only before the first rename).
std::int64_t check_after_kill(const fs::path& path, std::int64_t committed_at_least,
                              std::int64_t replicates, const std::string& when) {
  SCOPED_TRACE(when);
  if (!fs::exists(path)) {
    EXPECT_EQ(committed_at_least, 0) << "the file vanished after replicates were committed";
    return -1;
  }
  std::int64_t done = -1;
  try {
    const auto r = ResultsReader::open(path);
    int bad = 0;
    done = knmf::test::check_committed(r, &bad);
    EXPECT_EQ(bad, 0);
    EXPECT_GE(done, committed_at_least) << "committed replicates were lost";
    if (r.complete()) {
      EXPECT_EQ(done, replicates) << "complete = 1 with replicates missing";
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << path << " does not open after the kill: " << e.what();
  }
  return done;
}

/// Resume the run to its end and compare with the uninterrupted reference.
void resume_and_compare(const fs::path& path, const fs::path& reference,
                        std::vector<std::string> extra = {}) {
  ASSERT_EQ(run_helper(run_args(path, nullptr, extra)), 0) << "the resumed run failed";
  const auto a = ResultsReader::open(path), b = ResultsReader::open(reference);
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(knmf::test::check_committed(a), static_cast<std::int64_t>(a.info().jobs.size()));
  knmf::test::expect_same_content(a, b);
}

class ResultsKill : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("knmf-kill");
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(run_helper(run_args(reference(), nullptr)), 0) << "the uninterrupted run failed";
    run_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "uninterrupted run: %.3f s\n", run_seconds_);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path reference() { return *dir_ / "reference.h5"; }
  static TempDir* dir_;
  static double run_seconds_;
};
TempDir* ResultsKill::dir_ = nullptr;
double ResultsKill::run_seconds_ = 0;

}  // namespace

TEST_F(ResultsKill, RandomKillsNeverCorruptTheFile) {
  // A larger run than the other tests', so that commits (flush + fsync of ~1 MB) take a good
  // share of the time; its own uninterrupted reference.
  const std::vector<std::string> big = {"--n-iter", "30", "--genes", "8000", "--sleep-us", "1000"};
  const fs::path reference = *dir_ / "random-reference.h5";
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run_helper(run_args(reference, nullptr, big)), 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::int64_t replicates = 3 * 30;

  unsigned seed = 20240501;
  if (const char* s = std::getenv("KNMF_KILL_SEED")) seed = static_cast<unsigned>(std::stoul(s));
  std::mt19937 rng(seed);
  // Each session lives for a random part of a full run, so that many sessions (and kills)
  // are needed to finish one; rounds on fresh files until there were enough kills.
  std::uniform_real_distribution<double> lifetime(0.0, 0.12 * seconds);
  std::map<std::string, int> by_phase;
  int kills = 0, kills_in_commit = 0, live_checks = 0, rounds = 0;
  const int want_kills = 30;
  // (rounds go on until 3 kills landed inside a commit too: where a kill lands depends on the
  // machine's load and, in the sanitizer build, on its slow start-up; seen with 1 in 6 rounds)
  for (; (kills < want_kills || kills_in_commit < 3) && rounds < 24; ++rounds) {
    const fs::path path = *dir_ / ("random-" + std::to_string(rounds) + ".h5");
    ProgressFile progress(*dir_ / ("random-" + std::to_string(rounds) + ".progress"));
    std::int64_t last = 0;
    for (int session = 0; session < 200; ++session) {
      progress.reset();
      const pid_t pid = spawn_helper(run_args(path, &progress, big));
      // A session's life is counted from a point of its own progress, not from the spawn:
      // on a loaded machine the process start-up (dynamic loading of Kokkos and HDF5) and the
      // file's creation (HDF5 create, fsync behind other tests' writes) can each outlast 0.12
      // of a run, and every kill then landed before the file existed (seen: 4,800 kills in 24
      // rounds, none past "opening/creating", no round resumed; then, counting from main(),
      // 2,746 of 2,800 kills in "opening/creating"). One session in four counts from main()
      // (phase "opening": kills while the file is created or reopened), the others from the
      // first replicate's computation (the file is open at its final name).
      int status = 0;
      const bool exited = !wait_for_phase(progress, pid, session % 4 == 0 ? kOpening : kComputing, 30, status);
      ASSERT_FALSE(exited && progress.phase() == 0) << "the helper ended before its main() started";
      if (!exited) std::this_thread::sleep_for(std::chrono::duration<double>(lifetime(rng)));
      // Reading while the writer runs is allowed too (every other session).
      if (session % 2 == 1) {
        check_after_kill(path, 0, replicates, "read while the writer runs");
        ++live_checks;
      }
      if (!exited && !poll_child(pid, status, SIGKILL, "the helper")) {
        ::kill(pid, SIGKILL);
        status = wait_child(pid, SIGKILL, "the killed helper");
      }
      if (status != killed_by(SIGKILL)) {
        ASSERT_EQ(status, 0) << "the helper failed: " << describe_status(status);
        std::fprintf(stderr, "round %d: session %d finished the run\n", rounds, session);
        break;
      }
      ++kills;
      const int phase = progress.phase();
      ++by_phase[phase_name(phase)];
      kills_in_commit += in_commit(phase) ? 1 : 0;
      const std::int64_t done = check_after_kill(path, progress.committed(), replicates,
                                                 "kill " + std::to_string(kills) + " during " + phase_name(phase));
      if (done >= 0 || last > 0) {
        EXPECT_GE(done, last) << "replicates completed before were lost";
      }
      last = std::max<std::int64_t>(last, done);
      std::fprintf(stderr, "round %d, kill %2d during %-26s: %2lld of %lld replicates committed\n",
                   rounds, kills, phase_name(phase), static_cast<long long>(std::max<std::int64_t>(done, 0)),
                   static_cast<long long>(replicates));
    }
    resume_and_compare(path, reference, big);
    EXPECT_GE(ResultsReader::open(path).sessions().size(), 2u);
  }
  std::fprintf(stderr, "%d kills in %d runs (%d inside a commit), %d reads of a live writer's file; by phase:\n",
               kills, rounds, kills_in_commit, live_checks);
  for (const auto& [name, n] : by_phase) std::fprintf(stderr, "  %-26s %d\n", name.c_str(), n);
  EXPECT_GE(kills, want_kills) << "too few kills to mean anything";
  EXPECT_GE(kills_in_commit, 3) << "too few kills landed inside a commit";
}

// Kill the writer exactly at each step of the protocol.
TEST_F(ResultsKill, KillAtEachProtocolStep) {
  struct Case {
    const char* step;  // --die-at
    std::int64_t min_done, max_done;
    bool exists, complete;
  };
  // Commits come every 3 replicates; the 2nd commit is the one interrupted.
  const Case cases[] = {
      {"created:1", 0, 0, false, false},        // before the rename: no file yet
      {"data_flushed:2", 3, 3, true, false},    // flags of the 2nd commit not written
      {"flags_written:2", 3, 6, true, false},   // flags written but maybe still buffered
      {"committed:2", 6, 6, true, false},       // 2nd commit durable
      {"completing:1", kReplicates, kReplicates, true, false},
      {"completed:1", kReplicates, kReplicates, true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.step);
    const std::string tag = std::string(c.step).substr(0, std::string(c.step).find(':'));
    const fs::path path = *dir_ / ("step-" + tag + ".h5");
    ProgressFile progress(*dir_ / ("step-" + tag + ".progress"));
    EXPECT_EQ(run_helper(run_args(path, &progress, {"--die-at", c.step}), SIGKILL), killed_by(SIGKILL));
    EXPECT_EQ(fs::exists(path), c.exists);
    if (c.exists) {
      const auto r = ResultsReader::open(path);
      const std::int64_t done = knmf::test::check_committed(r);
      EXPECT_GE(done, c.min_done);
      EXPECT_LE(done, c.max_done);
      EXPECT_EQ(r.complete(), c.complete);
      std::fprintf(stderr, "killed at %-16s: file opens, %lld replicates committed, complete = %d\n",
                   c.step, static_cast<long long>(done), int(r.complete()));
    } else {
      std::fprintf(stderr, "killed at %-16s: no file at the final name (as required)\n", c.step);
    }
    resume_and_compare(path, reference());
  }
}

// The same for the compressing finish(): killed before or after the compressed copy replaces
// the file, the file is either the complete uncompressed one with complete = 0 or the
// compressed one with complete = 1.
TEST_F(ResultsKill, KillWhileCompressing) {
  for (const auto& [step, name] : {std::pair{"completing:1", "gzip-before.h5"},
                                    std::pair{"completed:1", "gzip-after.h5"}}) {
    SCOPED_TRACE(step);
    const fs::path path = *dir_ / name;
    EXPECT_EQ(run_helper(run_args(path, nullptr, {"--gzip", "4", "--die-at", step}), SIGKILL), killed_by(SIGKILL));
    const auto r = ResultsReader::open(path);
    EXPECT_EQ(knmf::test::check_committed(r), kReplicates);
    EXPECT_EQ(r.complete(), std::string(step) == "completed:1");
    resume_and_compare(path, reference(), {"--gzip", "4"});
  }
}

// HDF5's file lock keeps a second writer out while the first one runs; readers still get in.
TEST_F(ResultsKill, SecondWriterIsRefused) {
  const fs::path path = *dir_ / "locked.h5";
  ProgressFile progress(*dir_ / "locked.progress");
  const pid_t first = spawn_helper(run_args(path, &progress, {"--sleep-us", "100000"}));
  int first_status = 0;
  wait_for_phase(progress, first, kComputing, 5, first_status);
  ASSERT_GE(progress.phase(), kComputing) << "the first writer did not start";
  const fs::path err = *dir_ / "second.stderr";
  const pid_t second = spawn_helper(run_args(path, nullptr), err);
  EXPECT_EQ(wait_child(second, 0, "the second writer"), 2);
  std::ifstream in(err);
  const std::string msg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(msg.find(path.string() + ": cannot open for writing (is another knmf run writing it"),
            std::string::npos) << msg;
  check_after_kill(path, 0, kReplicates, "read while another process writes");
  ::kill(first, SIGKILL);
  wait_child(first, SIGKILL, "the killed first writer");
  resume_and_compare(path, reference());
}

// ---- consensus updates (update_results_file) -----------------------------------------------

namespace {

/// Which update a file holds: the version whose every addition (consensus of k = 3 and 5, the
/// k-selection table) it holds exactly; -1 when it holds none of them, -2 for a mix or a
/// partial state (never allowed). Also checks that every replicate is still there.
int update_state(const fs::path& path, int a, int b, const std::string& when) {
  SCOPED_TRACE(when);
  try {
    const auto r = ResultsReader::open(path);
    int bad = 0;
    EXPECT_EQ(knmf::test::check_committed(r, &bad), static_cast<std::int64_t>(r.info().jobs.size()))
        << "replicates were lost";
    EXPECT_EQ(bad, 0);
    EXPECT_TRUE(r.complete());
    if (r.consensus_list().empty() && !r.k_selection()) return -1;
    for (int v : {a, b}) {
      const auto want = knmf::test::synthetic_update(r.info(), v);
      if (r.consensus_list().size() != 2 || !r.has_consensus(3, 0.5) || !r.has_consensus(5, 0.5) ||
          !r.k_selection())
        break;
      if (knmf::test::same_record(r.consensus(3, 0.5), want.consensus[0]) &&
          knmf::test::same_record(r.consensus(5, 0.5), want.consensus[1]) &&
          knmf::test::same_k_selection(*r.k_selection(), *want.k_selection) &&
          r.consensus_cells() == want.cells)
        return v;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << path << " does not open after the kill: " << e.what();
    return -3;
  }
  ADD_FAILURE() << path << " holds neither update " << a << " nor update " << b << " whole";
  return -2;
}

std::vector<std::string> update_args(const fs::path& out, int version, const ProgressFile* progress,
                                     std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {out.string(), "--update", std::to_string(version)};
  if (progress) {
    a.push_back("--progress");
    a.push_back(progress->path().string());
  }
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::size_t stray_temporaries(const fs::path& dir, const std::string& name) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    n += knmf::io::temp_target(e.path().filename().string()) == name;
  return n;
}

}  // namespace

// Kill an update (a consensus added to a finished run) at random moments: the file is always
// the old one or the new one, whole, never a mix; the replicates are always all there.
TEST_F(ResultsKill, RandomKillsDuringAConsensusUpdate) {
  const std::vector<std::string> big = {"--n-iter", "30", "--genes", "8000", "--sleep-us", "0"};
  const fs::path path = *dir_ / "update.h5";
  ASSERT_EQ(run_helper(run_args(path, nullptr, big)), 0);
  ASSERT_EQ(run_helper(update_args(path, 1, nullptr)), 0);
  ASSERT_EQ(update_state(path, 1, 1, "first update"), 1);
  // how long an uninterrupted update takes (process start included)
  const fs::path timing = *dir_ / "update-timing.h5";
  fs::copy_file(path, timing);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run_helper(update_args(timing, 2, nullptr)), 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "uninterrupted update of a %.1f MB file: %.3f s\n",
               double(fs::file_size(timing)) / 1e6, seconds);

  unsigned seed = 20240502;
  if (const char* s = std::getenv("KNMF_KILL_SEED")) seed = static_cast<unsigned>(std::stoul(s));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> lifetime(0.0, 1.2 * seconds);
  ProgressFile progress(*dir_ / "update.progress");
  auto bytes_of = [](const fs::path& p) { return read_bytes(p); };
  std::string current = bytes_of(path);  // the file as the last finished update left it
  int version = 1, kills = 0, kept_old = 0, got_new = 0, finished = 0, before_rename = 0;
  std::map<std::string, int> by_phase;
  for (int attempt = 0; attempt < 120 && kills < 30; ++attempt) {
    progress.reset();
    const int next = version + 1;
    const pid_t pid = spawn_helper(update_args(path, next, &progress));
    std::this_thread::sleep_for(std::chrono::duration<double>(lifetime(rng)));
    int status = 0;
    if (!poll_child(pid, status, SIGKILL, "the update")) {
      ::kill(pid, SIGKILL);
      status = wait_child(pid, SIGKILL, "the killed update");
    }
    const int phase = progress.phase();
    if (status != killed_by(SIGKILL)) {
      ASSERT_EQ(status, 0) << "the update failed: " << describe_status(status);
      ++finished;
      ASSERT_EQ(update_state(path, version, next, "finished update"), next);
      version = next;
      current = bytes_of(path);
      continue;
    }
    ++kills;
    ++by_phase[phase_name(phase)];
    before_rename += phase == 14 ? 1 : 0;
    const int state = update_state(path, version, next, "kill " + std::to_string(kills) + " during " + phase_name(phase));
    ASSERT_TRUE(state == version || state == next) << "state " << state;
    // (in phase 14 the rename may or may not have happened: the phase is set just before it)
    if (phase < 14) {
      EXPECT_EQ(state, version) << "the file changed before the new one was whole";
    }
    if (phase >= 15) {
      EXPECT_EQ(state, next) << "the rename happened but the file is old";
    }
    if (state == version) {
      EXPECT_TRUE(bytes_of(path) == current) << "killed before its rename, the update changed the old file";
    } else {
      current = bytes_of(path);
    }
    (state == next ? got_new : kept_old) += 1;
    std::fprintf(stderr, "update kill %2d during %-28s: file holds update %d (%s)\n", kills, phase_name(phase),
                 state, state == next ? "new" : "old");
    version = state;
  }
  const std::size_t strays = stray_temporaries(dir_->path(), "update.h5");
  std::fprintf(stderr, "%d kills (%d between copy and rename), %d left the old file, %d the new one, "
               "%d updates finished; %zu stray temporary files; by phase:\n",
               kills, before_rename, kept_old, got_new, finished, strays);
  for (const auto& [name, n] : by_phase) std::fprintf(stderr, "  %-28s %d\n", name.c_str(), n);
  EXPECT_GE(kills, 30) << "too few kills to mean anything";
  EXPECT_GE(kept_old, 5) << "too few kills landed before the rename";
  // every update removes the temporaries of killed ones: at most the last kill's is left
  EXPECT_LE(strays, 1u);
  // the next update still works on the file, and removes that one too
  ASSERT_EQ(run_helper(update_args(path, version + 1, nullptr)), 0);
  EXPECT_EQ(update_state(path, version + 1, version + 1, "after the kills"), version + 1);
  EXPECT_EQ(stray_temporaries(dir_->path(), "update.h5"), 0u);
}

// Kill an update right before and right after its rename.
TEST_F(ResultsKill, KillAtEachUpdateStep) {
  const fs::path base = *dir_ / "update-base.h5";
  ASSERT_EQ(run_helper(run_args(base, nullptr)), 0);
  ASSERT_EQ(run_helper(update_args(base, 1, nullptr)), 0);
  const std::string before = read_bytes(base);
  for (const auto& [step, want] : {std::pair{"copied:1", 1}, std::pair{"renamed:1", 2}}) {
    SCOPED_TRACE(step);
    const fs::path path = *dir_ / (std::string("update-step-") + std::string(step).substr(0, 6) + ".h5");
    fs::copy_file(base, path);
    EXPECT_EQ(run_helper(update_args(path, 2, nullptr, {"--die-at", step}), SIGKILL), killed_by(SIGKILL));
    EXPECT_EQ(update_state(path, 1, 2, step), want);
    if (want == 1) {
      EXPECT_TRUE(read_bytes(path) == before) << "killed before the rename, the file must be byte for byte the old one";
    }
    std::fprintf(stderr, "update killed at %-9s: the file holds update %d\n", step, want);
    ASSERT_EQ(run_helper(update_args(path, 3, nullptr)), 0);
    EXPECT_EQ(update_state(path, 3, 3, "update after the kill"), 3);
  }
}

// The update and the replicate writer exclude each other (HDF5 file lock): an update while
// factorize writes is refused, and a factorize resumed while an update runs is refused.
TEST_F(ResultsKill, UpdateAndWriterExcludeEachOther) {
  const fs::path path = *dir_ / "exclusive.h5";
  ProgressFile progress(*dir_ / "exclusive.progress");
  const pid_t writer = spawn_helper(run_args(path, &progress, {"--sleep-us", "100000"}));
  for (int i = 0; i < 500 && progress.phase() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(progress.phase(), 3) << "the writer did not start";
  const knmf::results::RunInfo info = ResultsReader::open(path).info();
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      if (attempt == 0) {
        knmf::results::check_results_updatable(path);
      } else {
        knmf::results::update_results_file(path, knmf::test::synthetic_update(info, 1));
      }
      ADD_FAILURE() << "an update was allowed while a writer runs";
    } catch (const knmf::InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path.string() + ": cannot open for updating (is knmf factorize still writing it"),
                std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  ::kill(writer, SIGKILL);
  wait_child(writer, SIGKILL, "the killed writer");
  ASSERT_EQ(run_helper(run_args(path, nullptr)), 0);  // finish the run

  // an update that holds (before its rename) keeps a resumed writer out
  ProgressFile up(*dir_ / "exclusive-update.progress");
  const pid_t updater = spawn_helper(update_args(path, 1, &up, {"--hold-us", "1500000"}));
  for (int i = 0; i < 500 && up.phase() < 14; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(up.phase(), 14) << "the update did not reach its rename";
  const fs::path err = *dir_ / "exclusive.stderr";
  const pid_t second = spawn_helper(run_args(path, nullptr), err);
  EXPECT_EQ(wait_child(second, 0, "the second writer"), 2) << "a writer ran during the update";
  std::ifstream in(err);
  const std::string msg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(msg.find("cannot open for writing"), std::string::npos) << msg;
  EXPECT_EQ(wait_child(updater, 0, "the held update"), 0);
  EXPECT_EQ(update_state(path, 1, 1, "after the held update"), 1);
}
