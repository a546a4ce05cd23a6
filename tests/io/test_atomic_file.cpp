// The one atomic-file writer (knmf/io/atomic_file.hpp): a target name only ever holds a whole
// file; uncommitted work leaves nothing; leftovers of dead writers are found by one pattern.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "io_test_util.hpp"
#include "knmf/core/error.hpp"
#include "knmf/io/atomic_file.hpp"

namespace {
namespace fs = std::filesystem;
using knmf::io::AtomicFile;

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

/// A process id that no process has now (a child that has exited and been reaped).
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  EXPECT_EQ(knmf::test::wait_child(pid), 0);
  return pid;
}

TEST(AtomicFile, CommitPutsTheWholeFileInPlaceAndLeavesNoTemporary) {
  knmf::test::TempDir dir("knmf-atomic");
  const fs::path target = dir / "out.txt";
  {
    AtomicFile f(target);
    EXPECT_EQ(f.temp().parent_path(), target.parent_path());
    EXPECT_EQ(knmf::io::temp_target(f.temp().filename().string()), "out.txt");
    f.write("hello ");
    EXPECT_FALSE(fs::exists(target)) << "the target appears only on commit";
    f.write(std::string("world"));
    f.commit();
    EXPECT_TRUE(f.committed());
  }
  EXPECT_EQ(knmf::test::slurp(target.string()), "hello world");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"out.txt"});
}

TEST(AtomicFile, UncommittedWorkLeavesNothingAndKeepsTheOldFile) {
  knmf::test::TempDir dir("knmf-atomic");
  const fs::path target = dir / "keep.txt";
  knmf::test::write_bytes(target.string(), "old");
  try {
    AtomicFile f(target);
    f.write("new, half written");
    throw std::runtime_error("writer failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(knmf::test::slurp(target.string()), "old");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"keep.txt"});
}

TEST(AtomicFile, ReplaceKeepsPermissionBitsAndNoReplaceRefusesAnExistingTarget) {
  knmf::test::TempDir dir("knmf-atomic");
  const fs::path target = dir / "shared.txt";
  knmf::test::write_bytes(target.string(), "v1");
  ASSERT_EQ(::chmod(target.c_str(), 0640), 0);
  {
    AtomicFile f(target);
    f.write("v2");
    f.commit(AtomicFile::Replace::yes);
  }
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(knmf::test::slurp(target.string()), "v2");
  {
    AtomicFile f(target, "the run file");
    f.write("v3");
    KNMF_EXPECT_INPUT_ERROR(f.commit(AtomicFile::Replace::no), "the run file", "appeared while it was being created");
  }
  EXPECT_EQ(knmf::test::slurp(target.string()), "v2");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"shared.txt"});
}

TEST(AtomicFile, ErrorsNameTheFileAndTheFolder) {
  knmf::test::TempDir dir("knmf-atomic");
  const fs::path missing = dir / "no" / "such" / "x.h5";
  KNMF_EXPECT_INPUT_ERROR(AtomicFile f(missing), missing.string(), "output folder", "does not exist");
  knmf::test::write_bytes((dir / "plain").string(), "");
  KNMF_EXPECT_INPUT_ERROR(AtomicFile f(dir / "plain" / "x.h5"), "is not a folder");
  // a folder where the file should go: the rename fails, the temporary is removed
  fs::create_directory(dir / "taken");
  {
    AtomicFile f(dir / "taken");
    f.write("x");
    KNMF_EXPECT_INPUT_ERROR(f.commit(), "taken", "cannot rename");
  }
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"plain", "taken"}));
  if (::geteuid() != 0) {  // root writes into read-only folders
    fs::create_directory(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    KNMF_EXPECT_INPUT_ERROR(AtomicFile f(dir / "ro" / "x"), "cannot create a file in output folder");
    fs::permissions(dir / "ro", fs::perms::owner_all);
  }
}

TEST(AtomicFile, TemporaryNamesFollowOnePattern) {
  pid_t pid = 0;
  EXPECT_EQ(knmf::io::temp_target(".RESULTS.h5.knmf-tmp-1234-7", &pid), "RESULTS.h5");
  EXPECT_EQ(pid, 1234);
  EXPECT_EQ(knmf::io::temp_target(".a.knmf-tmp-b.knmf-tmp-9-0"), "a.knmf-tmp-b");
  for (const char* no : {"RESULTS.h5", ".RESULTS.h5.tmp-1234-7", ".x.knmf-tmp-", ".x.knmf-tmp-12",
                         ".x.knmf-tmp-12-", ".x.knmf-tmp-a-1", "x.knmf-tmp-1-2", "..knmf-tmp-1-2"})
    EXPECT_EQ(knmf::io::temp_target(no), "") << no;
}

TEST(AtomicFile, LeftoversOfDeadWritersAreRemovedLiveOnesKept) {
  knmf::test::TempDir dir("knmf-atomic");
  const fs::path target = dir / "r.h5";
  const std::string dead = ".r.h5.knmf-tmp-" + std::to_string(dead_pid()) + "-0";
  const std::string live = ".r.h5.knmf-tmp-" + std::to_string(::getppid()) + "-3";
  const std::string other = ".s.h5.knmf-tmp-" + std::to_string(dead_pid()) + "-0";
  for (const auto& n : {dead, live, other}) knmf::test::write_bytes((dir / n).string(), "partial");
  EXPECT_EQ(knmf::io::remove_leftover_temps(target), 1);
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{live, other}));
  EXPECT_EQ(knmf::io::remove_leftover_temps(target, false), 1);  // the caller knows none is alive
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{other});
}

}  // namespace

namespace {

// writer_alive, the one rule both leftover sweeps use (remove_leftover_temps here, prepare's
// legacy staging folders): this process and a running one may still write; a reaped child
// cannot.
TEST(AtomicFile, WriterAliveOnlyWhileItsProcessRuns) {
  EXPECT_TRUE(knmf::io::writer_alive(::getpid()));
  EXPECT_TRUE(knmf::io::writer_alive(::getppid()));
  EXPECT_FALSE(knmf::io::writer_alive(dead_pid()));
}

// A failed write keeps its errno with the error (InputError::system_errno): the driver's
// full-disk note is chosen by that number, not by the message's words (tests/drivers/
// test_full_disk.cpp runs it end to end, through a shim that fails writes with ENOSPC).
TEST(AtomicFile, WriteFailuresKeepTheirErrno) {
  try {
    knmf::io::sync_path("/nonexistent-knmf-dir/x", false, "x");
    FAIL() << "no error";
  } catch (const knmf::InputError& e) {
    EXPECT_EQ(e.system_errno(), 0) << e.what();  // an open that failed: no write error
  }
  try {
    knmf::system_input_error(ENOSPC, "cannot write ", "f.h5");
    FAIL() << "no error";
  } catch (const knmf::InputError& e) {  // the helper appends the system's words, once
    EXPECT_EQ(e.system_errno(), ENOSPC);
    EXPECT_EQ(std::string(e.what()), "cannot write f.h5: " + std::string(std::strerror(ENOSPC)));
  }
  try {
    knmf::system_input_error(0, "cannot write ", "f.h5");
    FAIL() << "no error";
  } catch (const knmf::InputError& e) {  // no errno from the system: not strerror(0)'s "Success"
    EXPECT_EQ(e.system_errno(), 0);
    EXPECT_EQ(std::string(e.what()), "cannot write f.h5: write failed");
  }
  EXPECT_EQ(knmf::InputError("plain").system_errno(), 0);
}

}  // namespace
