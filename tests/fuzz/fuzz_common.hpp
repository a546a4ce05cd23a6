#pragma once
// Shared by the libFuzzer harnesses (tests/fuzz/README.md).
//
// The contract under test: a parser given any bytes returns a value or throws knmf::InputError.
// Everything else -- a crash, a sanitizer report, a leak, a timeout, an allocation past
// -malloc_limit_mb, or any other exception (knmf::LogicError, std::bad_alloc,
// std::out_of_range, a yaml-cpp or HDF5 exception escaping) -- is a finding: the harness lets
// it escape, libFuzzer reports "deadly signal" (uncaught exception -> std::terminate -> abort)
// and saves the input.

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "knmf/core/error.hpp"

namespace knmf::fuzz {

/// Runs `f`; an InputError is the parser's documented answer to bad bytes and is swallowed.
template <class F>
void input_errors_only(F&& f) {
  try {
    f();
  } catch (const knmf::InputError&) {
  }
}

/// A property the harness checks on what a parser accepted (not a parser error: a wrong result).
#define KNMF_FUZZ_CHECK(cond)                                                          \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "knmf fuzz check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

/// The input as a file, for the readers that take a path (ZIP/.npz, DataFrames, the job table,
/// the yaml parameters): one memfd per process, rewritten for each input and opened by the
/// parser through /proc/self/fd/N. Nothing touches a disk.
class MemFile {
public:
  static const std::string& write(const std::uint8_t* data, std::size_t size) {
    static MemFile file;
    if (ftruncate(file.fd_, 0) != 0) fail("ftruncate");
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = pwrite(file.fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) fail("pwrite");
      done += static_cast<std::size_t>(n);
    }
    return file.path_;
  }

private:
  MemFile() : fd_(memfd_create("knmf-fuzz-input", 0)) {
    if (fd_ < 0) fail("memfd_create");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  [[noreturn]] static void fail(const char* what) {
    std::perror(what);
    std::abort();
  }
  int fd_;
  std::string path_;
};

inline std::string_view as_bytes(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace knmf::fuzz
