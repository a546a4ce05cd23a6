#pragma once
/// \file
/// The two kinds of failure in knmf, kept visibly apart:
///  * bad user input (a file, an option, a value) -> knmf::InputError, thrown at the public
///    boundary in every build type, with a one-line message naming the file/option and value;
///  * broken internal invariants (a bug in knmf, not in the input) -> KNMF_ASSERT, which throws
///    knmf::LogicError (a std::logic_error) naming the condition, file and line. A library
///    never ends the program that hosts it: the host may catch it (Kokkos Kernels' way); the
///    driver prints it and exits with status 70 (EX_SOFTWARE).
/// On the device, NaN or divergence is a per-replicate status, never an exception.

#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

namespace knmf {

/// Bad user input: a malformed file, an option out of range, a value that cannot be used.
/// The message is one line and names what is wrong and where.
class InputError : public std::runtime_error {
public:
  explicit InputError(const std::string& what, int system_errno = 0)
      : std::runtime_error(what), errno_(system_errno) {}
  /// The errno of the failed system call this reports (ENOSPC: a full disk), 0 for any other
  /// input error: callers decide by the number, never by the message's text.
  int system_errno() const { return errno_; }

private:
  int errno_ = 0;
};

/// A broken internal invariant: knmf's bug, reported with the failed condition and its place.
class LogicError : public std::logic_error {
public:
  explicit LogicError(const std::string& what) : std::logic_error(what) {}
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  os.precision(17);
  (os << ... << args);
  return os.str();
}

[[noreturn]] inline void assert_fail(const char* cond, const char* file, int line,
                                     const std::string& msg) {
  throw LogicError(concat("internal error: ", msg.empty() ? std::string("invariant broken") : msg,
                          " (", cond, ") at ", file, ":", line));
}
}  // namespace detail

/// Throw an InputError whose message is the concatenation of the arguments.
template <class... Args>
[[noreturn]] void input_error(const Args&... args) {
  throw InputError(detail::concat(args...));
}

/// input_error for a failed read or write of the system, keeping its errno `err`
/// (InputError::system_errno). The message is the arguments (naming the file) followed by
/// ": " and strerror(err), or ": write failed" where the system gave no errno (err 0).
template <class... Args>
[[noreturn]] void system_input_error(int err, const Args&... args) {
  throw InputError(detail::concat(args..., ": ", err ? std::strerror(err) : "write failed"), err);
}

}  // namespace knmf

/// Internal invariant (host code; never inside a kernel or an OpenMP region, where an exception
/// cannot travel). Active in every build type: the checks are cheap and a silent wrong answer
/// costs HPC users far more than a branch. Throws knmf::LogicError.
#define KNMF_ASSERT(cond, ...)                                                          \
  do {                                                                                  \
    if (!(cond)) ::knmf::detail::assert_fail(#cond, __FILE__, __LINE__,                  \
                                             ::knmf::detail::concat("" __VA_ARGS__));   \
  } while (0)
