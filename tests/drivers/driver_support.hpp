#pragma once
// Running the knmf driver as a separate process from tests.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace knmf::test {

/// Run `knmf args...` to completion (in the folder `cwd` when given) with run_command: stdout
/// and stderr captured together, a death by a signal a test failure. `env`: variable
/// assignments for the driver's environment ("A=1 B=2", shell-quoted). The driver is started unbound (OMP_PROC_BIND=false, as every test:
/// KNMF_TEST_OMP_ENV in tests/CMakeLists.txt), whatever thread count it is given.
inline ProcResult run_knmf(const std::vector<std::string>& args, const std::string& env = "",
                           const std::string& cwd = "") {
  std::string cmd = cwd.empty() ? "" : "cd " + shell_quote(cwd) + " && ";
  cmd += "OMP_PROC_BIND=false " + env + " " + shell_quote(knmf::test::driver_path());
  for (const auto& a : args) cmd += " " + shell_quote(a);
  return run_command(cmd);
}

/// Start `knmf args...` in the background (output to `log`); returns its pid.
inline pid_t spawn_knmf(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("OMP_PROC_BIND", "false", 1);
    std::freopen(log.c_str(), "w", stdout);
    std::freopen(log.c_str(), "a", stderr);
    std::vector<char*> argv{const_cast<char*>(knmf::test::driver_path())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(knmf::test::driver_path(), argv.data());
    _exit(127);
  }
  return pid;
}

/// Lines of a text (for "one line" error checks).
inline std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

/// True when /usr/bin/python3 can import every module in `modules`.
inline bool have_python(const std::string& modules) {
  return run_command("/usr/bin/python3 -c 'import " + modules + "'").status == 0;
}

/// Run a Python snippet (written to a file) with /usr/bin/python3 (run_command).
inline ProcResult run_python(const std::string& code, const std::filesystem::path& dir) {
  const auto path = dir / "snippet.py";
  std::ofstream(path) << code;
  return run_command("/usr/bin/python3 " + shell_quote(path.string()));
}

}  // namespace knmf::test
