// The one atomic-file writer (knmf/io/atomic_file.hpp).
#include "knmf/io/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "knmf/core/error.hpp"

namespace knmf::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMarker = ".knmf-tmp-";

fs::path folder_of(const fs::path& p) { return p.parent_path().empty() ? fs::path(".") : p.parent_path(); }

fs::path next_temp(const fs::path& target) {
  static std::atomic<unsigned> counter{0};
  return folder_of(target) / ("." + target.filename().string() + kMarker + std::to_string(::getpid()) +
                              "-" + std::to_string(counter++));
}

}  // namespace

void sync_path(const fs::path& p, bool directory, const std::string& what) {
  const int fd = ::open(p.c_str(), directory ? (O_RDONLY | O_DIRECTORY | O_CLOEXEC) : (O_RDONLY | O_CLOEXEC));
  if (fd < 0) input_error(what, ": cannot open ", p.string(), " to sync it: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && !(directory && (err == EINVAL || err == EROFS)))
    system_input_error(err, "cannot write ", what);
}

AtomicFile::AtomicFile(const fs::path& target, std::string what)
    : target_(target), what_(what.empty() ? target.string() : std::move(what)) {
  const fs::path dir = folder_of(target_);
  std::error_code ec;
  if (!fs::exists(dir, ec)) input_error(what_, ": output folder '", dir.string(), "' does not exist");
  if (!fs::is_directory(dir, ec)) input_error(what_, ": '", dir.string(), "' is not a folder");
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temp_ = next_temp(target_);
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST)
      input_error(what_, ": cannot create a file in output folder '", dir.string(), "': ", std::strerror(errno));
  }
  if (fd_ < 0) input_error(what_, ": cannot create a temporary file in '", dir.string(), "'");
}

AtomicFile::~AtomicFile() { abandon(); }

void AtomicFile::abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
}

void AtomicFile::write(const void* data, std::size_t size) {
  if (fd_ < 0) throw LogicError(what_ + ": internal error: write to a closed AtomicFile");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      system_input_error(err, "cannot write ", what_);
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit(Replace replace) {
  if (committed_ || temp_.empty()) throw LogicError(what_ + ": internal error: AtomicFile committed twice");
  if (fd_ >= 0) {
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) {
      const int err = errno;
      system_input_error(err, "cannot write ", what_);
    }
  }
  if (replace == Replace::yes) {
    // the new file takes the old one's permission bits (a group-writable file stays so)
    struct stat st {};
    if (::stat(target_.c_str(), &st) == 0) ::chmod(temp_.c_str(), st.st_mode & 07777);
  }
  sync_path(temp_, false, what_);
  if (replace == Replace::no) {
    // link() never replaces: a file created under the target name meanwhile is not clobbered
    if (::link(temp_.c_str(), target_.c_str()) == 0) {
      ::unlink(temp_.c_str());
    } else if (errno == EEXIST) {
      input_error(what_, " appeared while it was being created (is another knmf run writing it?)");
    } else if (std::error_code ec; fs::rename(temp_, target_, ec), ec) {
      input_error(what_, ": cannot rename ", temp_.string(), " into place: ", ec.message());
    }
  } else if (std::error_code ec; fs::rename(temp_, target_, ec), ec) {
    input_error(what_, ": cannot rename ", temp_.string(), " into place: ", ec.message());
  }
  committed_ = true;
  sync_path(folder_of(target_), true, what_);
}

void move_into_place(const fs::path& staged, const fs::path& target, const std::string& failure) {
  std::error_code ec;
  fs::rename(staged, target, ec);
  if (ec) input_error(failure.empty() ? target.string() + ": cannot move into place" : failure, ": ", ec.message());
}

void require_writable_target(const fs::path& target, const std::string& what) {
  const std::string w = what.empty() ? target.string() : what;
  std::error_code ec;
  if (target.filename().empty() || fs::is_directory(target, ec))
    input_error(w, ": is a folder, not a file");
  // a run killed while probing left its probe: removed here, like any temporary of the target
  // whose writer no longer runs (a live writer's is kept)
  remove_leftover_temps(target);
  AtomicFile probe(target, w);  // the folder takes a new file; the probe is removed on return
}

std::string temp_target(const std::string& filename, pid_t* pid) {
  // .<target>.knmf-tmp-<pid>-<n>
  const auto at = filename.rfind(kMarker);
  if (filename.size() < 2 || filename[0] != '.' || at == std::string::npos || at < 2) return "";
  const std::string rest = filename.substr(at + std::strlen(kMarker));
  const auto dash = rest.find('-');
  if (dash == 0 || dash == std::string::npos || dash + 1 == rest.size()) return "";
  for (std::size_t i = 0; i < rest.size(); ++i)
    if (i != dash && (rest[i] < '0' || rest[i] > '9')) return "";
  if (pid) *pid = static_cast<pid_t>(std::stoll(rest.substr(0, dash)));
  return filename.substr(1, at - 1);
}

bool writer_alive(pid_t pid) {
  return pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM;
}

int remove_leftover_temps(const fs::path& target, bool only_dead_writers) {
  int removed = 0;
  std::error_code ec;
  const std::string name = target.filename().string();
  for (const auto& e : fs::directory_iterator(folder_of(target), ec)) {
    pid_t pid = 0;
    if (temp_target(e.path().filename().string(), &pid) != name) continue;
    if (only_dead_writers && writer_alive(pid)) continue;  // it may still be writing
    std::error_code rm;
    if (fs::remove_all(e.path(), rm) > 0 && !rm) ++removed;
  }
  return removed;
}

AtomicFolder::AtomicFolder(const fs::path& target, std::string what) {
  if (what.empty()) what = target.string();
  const fs::path dir = folder_of(target);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) input_error(what, ": output folder '", dir.string(), "' does not exist");
  remove_leftover_temps(target);  // a killed writer's folder (its process no longer runs)
  for (int attempt = 0; attempt < 100; ++attempt) {
    const fs::path t = next_temp(target);
    if (::mkdir(t.c_str(), 0777) == 0) {
      temp_ = t;
      return;
    }
    if (errno != EEXIST)
      input_error(what, ": cannot create a folder in '", dir.string(), "': ", std::strerror(errno));
  }
  input_error(what, ": cannot create a temporary folder in '", dir.string(), "'");
}

AtomicFolder::~AtomicFolder() {
  if (dismissed_ || temp_.empty()) return;
  std::error_code ec;
  fs::remove_all(temp_, ec);
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec;
  const bool same = std::filesystem::equivalent(a, b, ec);  // st_dev and st_ino on POSIX
  return !ec && same;
}

}  // namespace knmf::io
