#include "test_support.hpp"

#include "knmf/io/h5ad.hpp"
#include "knmf/prepare/prepare.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

namespace knmf::test {

std::filesystem::path data_dir() {
  // The environment overrides the compiled-in path: test binaries built on one machine and run
  // on another (perf/gpu/check.sh on the device machine) find tests/data in the copied tree.
  if (const char* env = std::getenv("KNMF_TEST_DATA_DIR")) return env;
  return KNMF_TEST_DATA_DIR;
}

std::filesystem::path binary_dir() { return KNMF_BINARY_DIR; }

// (defined by tests/CMakeLists.txt and tests/drivers/CMakeLists.txt where the targets exist)
#ifndef KNMF_DRIVER_FILE
#define KNMF_DRIVER_FILE ""
#endif
#ifndef KNMF_ENOSPC_SHIM_FILE
#define KNMF_ENOSPC_SHIM_FILE ""
#endif
const char* driver_path() {
  if (!*KNMF_DRIVER_FILE) throw std::logic_error("this build has no driver (knmf) for the tests to run");
  return KNMF_DRIVER_FILE;
}
std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error(path.string() + ": cannot open for reading");
  std::string bytes(static_cast<std::size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    throw std::runtime_error(path.string() + ": cannot read");
  return bytes;
}
const char* enospc_shim_path() {
  if (!*KNMF_ENOSPC_SHIM_FILE) throw std::logic_error("this build has no full-disk shim for the tests");
  return KNMF_ENOSPC_SHIM_FILE;
}

std::filesystem::path real_dir() { return data_dir() / "real"; }
std::filesystem::path pbmc_prepare_dir() { return real_dir() / "cnmf-pbmc-donor-a" / "prepare" / "pbmcA"; }
std::filesystem::path pbmc_reference_dir() { return real_dir() / "cnmf-pbmc-donor-a" / "reference"; }

namespace {

// splitmix64's finalizer and the position-keyed sum of tests/scripts/make_real_fixtures.py.
constexpr std::uint64_t golden_gamma = 0x9E3779B97F4A7C15ull;
std::uint64_t splitmix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
struct WordHash {
  std::uint64_t sum = 0, i = 0;
  void add(std::uint64_t w) { sum += splitmix64(w + (++i) * golden_gamma); }
};

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::filesystem::path derived_dir() {
  if (const char* env = std::getenv("KNMF_TEST_DERIVED_DIR")) return env;
  const std::filesystem::path build = KNMF_BINARY_DIR;
  std::error_code ec;
  if (std::filesystem::is_directory(build, ec)) return build / "tests" / "derived";
  // Test programs run away from their build tree (perf/gpu/check.sh on the device machine).
  return std::filesystem::temp_directory_path() / "knmf-test-derived";
}

// Check `path` against cNMF's TPM fingerprint; returns the first difference, "" if none.
std::string tpm_difference(const std::filesystem::path& path, const nlohmann::json& fp) {
  const auto r = io::H5adReader::open(path);
  const auto& info = r.info();
  if (info.n_obs != fp["n_obs"].get<std::int64_t>() || info.n_vars != fp["n_vars"].get<std::int64_t>())
    return "shape " + std::to_string(info.n_obs) + " x " + std::to_string(info.n_vars);
  io::CsrBlock<float> X;
  r.read_csr_rows(0, info.n_obs, X);
  if (X.nnz() != fp["nnz"].get<std::int64_t>()) return "nnz " + std::to_string(X.nnz());
  const auto m = hex64(csr_fingerprint(X.row_offsets, X.cols, X.values));
  if (m != fp["matrix_hash"]) return "matrix hash " + m + ", cNMF's " + fp["matrix_hash"].get<std::string>();
  const auto o = hex64(names_fingerprint(r.obs_names()));
  if (o != fp["obs_names_hash"]) return "obs names hash " + o + ", cNMF's " + fp["obs_names_hash"].get<std::string>();
  const auto v = hex64(names_fingerprint(r.var_names()));
  if (v != fp["var_names_hash"]) return "var names hash " + v + ", cNMF's " + fp["var_names_hash"].get<std::string>();
  return "";
}

}  // namespace

std::uint64_t csr_fingerprint(const std::vector<std::int64_t>& row_offsets,
                              const std::vector<std::int32_t>& cols,
                              const std::vector<float>& values) {
  WordHash offsets, entries;
  for (auto o : row_offsets) offsets.add(static_cast<std::uint64_t>(o));
  std::vector<std::uint64_t> row;
  for (std::size_t i = 0; i + 1 < row_offsets.size(); ++i) {
    row.clear();
    for (auto e = row_offsets[i]; e < row_offsets[i + 1]; ++e) {
      std::uint32_t bits;
      std::memcpy(&bits, &values[std::size_t(e)], sizeof bits);
      row.push_back((std::uint64_t(std::uint32_t(cols[std::size_t(e)])) << 32) | bits);
    }
    std::sort(row.begin(), row.end());
    for (auto w : row) entries.add(w);
  }
  return offsets.sum * 3 + entries.sum;
}

std::uint64_t names_fingerprint(const std::vector<std::string>& names) {
  WordHash h;
  for (const auto& n : names) {
    for (unsigned char c : n) h.add(c);
    h.add(0);
  }
  return h.sum;
}

std::filesystem::path pbmc_tpm_h5ad() {
  static const std::filesystem::path path = [] {
    const auto fp = load_json("real/cnmf-pbmc-donor-a/tpm_fingerprint.json");
    const auto dir = derived_dir();
    std::filesystem::create_directories(dir);
    const auto out = dir / "pbmcA.tpm.h5ad";
    if (!std::filesystem::exists(out) || !tpm_difference(out, fp).empty()) {
      // cNMF's prepare on the raw counts, as in tests/prepare/test_prepare_cnmf.cpp.
      auto reader = io::H5adReader::open(real_dir() / "pbmc-donor-a" / "pbmc-donor-a.h5ad");
      prepare::PrepareOptions opts;
      opts.num_highvar_genes = 2000;
      opts.keep_tpm = true;
      const auto res = prepare::prepare_counts(prepare::count_source(reader, 1000), opts);
      io::write_h5ad(out, res.tpm, res.cell_names, reader.var_names());  // temp name + rename
    }
    const auto diff = tpm_difference(out, fp);
    if (!diff.empty())
      throw std::runtime_error(out.string() + " differs from cNMF's pbmcA.tpm.h5ad: " + diff);
    return out;
  }();
  return path;
}

nlohmann::json load_json(const std::string& name) {
  std::ifstream in(data_dir() / name);
  if (!in) throw std::runtime_error("missing golden file tests/data/" + name);
  return nlohmann::json::parse(in);
}

TempDir::TempDir(const std::string& tag) {
  std::random_device rd;
  const auto base = std::filesystem::temp_directory_path();
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto p = base / (tag + "-" + std::to_string(rd()));
    if (std::filesystem::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary directory");
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace knmf::test

namespace knmf::test {
std::vector<double> read_f64(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("missing golden array " + path.string());
  in.seekg(0, std::ios::end);
  const auto bytes = static_cast<size_t>(in.tellg());
  in.seekg(0);
  std::vector<double> v(bytes / sizeof(double));
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(double)));
  return v;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double d = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(a[i] - b[i]));
    s = std::max(s, std::abs(b[i]));
  }
  return s > 0 ? d / s : d;
}
}  // namespace knmf::test

namespace knmf::test {

namespace {
constexpr int kNoStatus = -1000;  // no exit code nor signal (waitpid failed)
}  // namespace

int exit_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return killed_by(WTERMSIG(wait_status));
  return kNoStatus;  // neither (a stopped child is never waited for here)
}

std::string describe_status(int status) {
  if (status >= 0) return "exit code " + std::to_string(status);
  if (status == kNoStatus) return "no exit status";
  const int sig = -status;
  const char* name = strsignal(sig);
  return "killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
}

namespace {
// A failure for a death by a signal the test did not send; `out`: the child's output, if kept.
void check_signal(int status, int expected_signal, const std::string& what, const std::string* out = nullptr) {
  if (status < 0 && status != kNoStatus && status != killed_by(expected_signal))
    ADD_FAILURE() << what << " was " << describe_status(status)
                  << (out ? "; its output:\n" + *out : std::string());
}

// Block until `pid` ends; its exit_status (kNoStatus and a failure where waitpid fails).
int reap(pid_t pid, const std::string& what) {
  int st = 0;
  pid_t got;
  while ((got = ::waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
  }
  if (got != pid) {
    ADD_FAILURE() << "waitpid(" << pid << ") for " << what << ": " << std::strerror(errno);
    return kNoStatus;
  }
  return exit_status(st);
}
}  // namespace

ProcResult run_command(const std::string& command) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
  std::fflush(nullptr);  // nothing buffered here is written twice by the child
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error("fork: " + std::string(std::strerror(errno)));
  }
  if (pid == 0) {  // only async-signal-safe calls from here to exec
    ::close(fds[0]);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    if (fds[1] > 2) ::close(fds[1]);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  ProcResult r;
  char buf[4096];
  for (;;) {
    const ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got > 0) {
      r.out.append(buf, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  const std::string what = "`" + command + "`";
  r.status = reap(pid, what);
  check_signal(r.status, 0, what, &r.out);
  return r;
}

int wait_child(pid_t pid, int expected_signal, const std::string& what) {
  const int status = reap(pid, what);
  check_signal(status, expected_signal, what);
  return status;
}

bool poll_child(pid_t pid, int& status, int expected_signal, const std::string& what) {
  int st = 0;
  const pid_t got = ::waitpid(pid, &st, WNOHANG);
  if (got == 0 || (got < 0 && errno == EINTR)) return false;  // still running
  if (got != pid) {
    ADD_FAILURE() << "waitpid(" << pid << ") for " << what << ": " << std::strerror(errno);
    status = kNoStatus;
    return true;
  }
  status = exit_status(st);
  check_signal(status, expected_signal, what);
  return true;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace knmf::test
