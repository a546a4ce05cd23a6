#pragma once
/// \file
/// The one way knmf writes a file: under a temporary name beside the target, then synced and
/// renamed into place, so that the target name only ever holds a complete file.
///
///   temporary name   .<target file name>.knmf-tmp-<pid>-<n>   (same folder: rename is atomic)
///   commit()         fsync the temporary, rename (or link) it onto the target, fsync the folder
///   not committed    (an error, an exception) the temporary is removed by the destructor
///   killed           the temporary stays behind; remove_leftover_temps() removes it later
///
/// Writers of bytes (data frames, npz, text, PNG) use write(); writers of HDF5 files create
/// the file at temp() with HDF5 itself, close it, then commit().

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace knmf::io {

class AtomicFile {
public:
  /// Claims a fresh temporary beside `target` (created exclusively: two writers never share
  /// one). Errors (missing or unwritable folder) are InputErrors naming `what` (the target's
  /// path by default).
  explicit AtomicFile(const std::filesystem::path& target, std::string what = {});
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::filesystem::path& target() const { return target_; }
  const std::filesystem::path& temp() const { return temp_; }

  /// Appends bytes to the temporary (short writes and EINTR retried; ENOSPC and other errors
  /// are InputErrors).
  void write(const void* data, std::size_t size);
  void write(const std::string& bytes) { write(bytes.data(), bytes.size()); }

  enum class Replace { yes, no };
  /// Syncs the temporary and moves it onto the target, then syncs the folder.
  /// Replace::yes overwrites an existing target (keeping its permission bits); Replace::no
  /// refuses if a target appeared meanwhile (another run creating the same file).
  void commit(Replace replace = Replace::yes);
  /// Removes the temporary now (what the destructor does for an uncommitted file).
  void abandon();
  bool committed() const { return committed_; }

private:
  std::filesystem::path target_, temp_;
  std::string what_;
  int fd_ = -1;
  bool committed_ = false;
};

/// A folder built under a temporary name beside `target` (`.<target name>.knmf-tmp-<pid>-<n>`,
/// the naming of AtomicFile's temporaries, so that remove_leftover_temps() removes the folder
/// of a killed writer as it removes its files), created exclusively after that sweep has run
/// for `target`. Removed with its contents by the destructor unless dismiss()ed (the caller
/// has moved it or its contents into place). Its files are written with AtomicFile.
class AtomicFolder {
public:
  explicit AtomicFolder(const std::filesystem::path& target, std::string what = {});
  ~AtomicFolder();
  AtomicFolder(const AtomicFolder&) = delete;
  AtomicFolder& operator=(const AtomicFolder&) = delete;

  const std::filesystem::path& path() const { return temp_; }
  /// Nothing left to remove (the folder was renamed into place, or emptied and removed).
  void dismiss() { dismissed_ = true; }

private:
  std::filesystem::path temp_;
  bool dismissed_ = false;
};

/// Moves a staged file or folder (one built in the target's folder, such as an AtomicFolder or
/// a file in it) onto `target` with one rename, replacing a file there. On failure an
/// InputError "<failure>: <system message>"; `failure` is "<target>: cannot move into place"
/// when empty. The caller syncs the folders it changed (sync_path).
void move_into_place(const std::filesystem::path& staged, const std::filesystem::path& target,
                     const std::string& failure = {});

/// Checks, before anything is computed, that an AtomicFile could write `target`: InputError
/// naming `what` (the target's path by default) when `target` is a folder or its folder is
/// missing or takes no new file. Leaves nothing behind (a probe temporary is created and
/// removed), and removes what a killed probe or writer of `target` left (remove_leftover_temps).
void require_writable_target(const std::filesystem::path& target, const std::string& what = {});

/// The file name of the target that `filename` (no folder) is a temporary of, and in `pid`
/// the process that made it; "" when `filename` is no temporary.
std::string temp_target(const std::string& filename, pid_t* pid = nullptr);

/// True when `a` and `b` both exist and are the same file (device and inode: another path, a
/// symbolic or a hard link to it), so that an output never replaces an input of the command.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

/// Whether process `pid` may still be writing a temporary it made: this process, a running
/// one, or one that exists but is not ours (kill(pid, 0) fails with EPERM). A leftover of a
/// pid for which this is false belongs to a writer that was killed.
bool writer_alive(pid_t pid);

/// Removes the temporaries of `target` (files, and AtomicFolder's folders with their contents)
/// left in its folder by processes that no longer run (or every one of them,
/// `only_dead_writers` false, where the caller knows no writer is alive). Returns how many it
/// removed.
int remove_leftover_temps(const std::filesystem::path& target, bool only_dead_writers = true);

/// fsync of a file or folder by path (folders that cannot be synced, EINVAL/EROFS, pass: that
/// only weakens power-cut safety). Errors name `what`.
void sync_path(const std::filesystem::path& p, bool directory, const std::string& what);

}  // namespace knmf::io
