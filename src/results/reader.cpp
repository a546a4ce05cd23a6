/// \file
/// ResultsReader: opens a results file (schema checked, metadata only) and reads replicates
/// and consensus records on demand (include/knmf/results/reader.hpp).

#include "knmf/results/reader.hpp"

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

using namespace detail;

// ---- ResultsReader ---------------------------------------------------------------------------

struct ResultsReader::Impl {
  fs::path path;
  std::string file;
  h5::File fid;
  RunInfo info;
  bool complete = false;
  int format_version = 0;
  std::vector<KGroup> groups;
  h5::Datatype status_mem = status_type(H5T_NATIVE_INT8);

  const KGroup& group(int k) const {
    const auto pos = std::lower_bound(info.ks.begin(), info.ks.end(), k);
    if (pos == info.ks.end() || *pos != k)
      input_error(file, " has no k = ", k, " (ks: ", join_ints(info.ks), ")");
    return groups[static_cast<std::size_t>(pos - info.ks.begin())];
  }

  void check_iter(int k, int iter) const {
    if (iter < 0 || iter >= info.n_iter)
      input_error(file, ": replicate ", iter, " of k = ", k, " is outside [0, ", info.n_iter, ")");
  }
};

ResultsReader::ResultsReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResultsReader::ResultsReader(ResultsReader&&) noexcept = default;
ResultsReader& ResultsReader::operator=(ResultsReader&&) noexcept = default;
ResultsReader::~ResultsReader() {
  if (!impl_) return;
  h5::ErrorSilencer quiet;
  impl_->groups.clear();
  impl_->fid.reset();
}

ResultsReader ResultsReader::open(const fs::path& path) {
  h5::ErrorSilencer quiet;
  auto m = std::make_unique<Impl>();
  m->path = path;
  m->file = path.string();
  std::error_code ec;
  if (!fs::exists(path, ec)) input_error(m->file, ": no such file");
  if (fs::is_directory(path, ec)) input_error(m->file, " is a folder, not a results file");
  if (H5Fis_hdf5(m->file.c_str()) <= 0)
    input_error(m->file, " is not a knmf results file (not an HDF5 file)");
  h5::PropList fapl = file_access(false);
  m->fid = h5::File(H5Fopen(m->file.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!m->fid) h5::fail(m->file, "cannot open");
  m->info = read_info(m->file, m->fid.get());
  h5::Group root(H5Gopen2(m->fid.get(), "/", H5P_DEFAULT));
  m->complete = need_int(m->file, root.get(), "complete") != 0;
  m->format_version = static_cast<int>(need_int(m->file, root.get(), "format_version"));
  for (int k : m->info.ks) m->groups.push_back(open_kgroup(m->file, m->fid.get(), m->info, k));
  return ResultsReader(std::move(m));
}

const fs::path& ResultsReader::path() const { return impl_->path; }
const RunInfo& ResultsReader::info() const { return impl_->info; }
bool ResultsReader::complete() const { return impl_->complete; }
const std::vector<int>& ResultsReader::ks() const { return impl_->info.ks; }
int ResultsReader::n_iter() const { return impl_->info.n_iter; }
std::int64_t ResultsReader::n_cells() const { return impl_->info.n_cells; }
std::int64_t ResultsReader::n_genes() const { return impl_->info.n_genes(); }
bool ResultsReader::has_usages() const { return impl_->info.save_usages; }

std::vector<std::string> ResultsReader::sessions() const {
  h5::ErrorSilencer quiet;
  const Impl& m = *impl_;
  h5::Dataset d = open_dataset(m.file, m.fid.get(), "/sessions", {kSessionSlots});
  auto all = h5::read_string_dataset(m.file, d.get(), "/sessions");
  all.erase(std::remove(all.begin(), all.end(), std::string()), all.end());
  return all;
}

std::vector<std::uint8_t> ResultsReader::completed(int k) const {
  h5::ErrorSilencer quiet;
  const KGroup& kg = impl_->group(k);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(impl_->info.n_iter));
  read_all(impl_->file, kg.completed.get(), kg.ds("completed"), H5T_NATIVE_UINT8, out.data());
  return out;
}

ReplicateTable ResultsReader::table(int k) const {
  h5::ErrorSilencer quiet;
  const Impl& m = *impl_;
  const KGroup& kg = m.group(k);
  const auto n = static_cast<std::size_t>(m.info.n_iter);
  ReplicateTable t;
  t.completed = completed(k);
  t.seeds.resize(n);
  t.iterations.resize(n);
  t.error_at_init.resize(n);
  t.final_error.resize(n);
  t.seconds.resize(n);
  std::vector<std::int8_t> status(n);
  read_all(m.file, kg.seeds.get(), kg.ds("seeds"), H5T_NATIVE_INT64, t.seeds.data());
  read_all(m.file, kg.iterations.get(), kg.ds("iterations"), H5T_NATIVE_INT32, t.iterations.data());
  read_all(m.file, kg.error_at_init.get(), kg.ds("error_at_init"), H5T_NATIVE_DOUBLE, t.error_at_init.data());
  read_all(m.file, kg.final_error.get(), kg.ds("final_error"), H5T_NATIVE_DOUBLE, t.final_error.data());
  read_all(m.file, kg.seconds.get(), kg.ds("seconds"), H5T_NATIVE_DOUBLE, t.seconds.data());
  read_all(m.file, kg.status.get(), kg.ds("status"), m.status_mem.get(), status.data());
  t.status.reserve(n);
  for (auto s : status) {
    if (s < 0 || s > 3) input_error(m.file, ": ", kg.ds("status"), " holds ", int(s), ", not a state 0..3");
    t.status.push_back(static_cast<ReplicateState>(s));
  }
  return t;
}

std::vector<double> ResultsReader::spectra(int k) const {
  h5::ErrorSilencer quiet;
  const Impl& m = *impl_;
  const KGroup& kg = m.group(k);
  std::vector<double> out(static_cast<std::size_t>(m.info.n_iter) * static_cast<std::size_t>(k) *
                          static_cast<std::size_t>(m.info.n_genes()));
  read_all(m.file, kg.spectra.get(), kg.ds("spectra"), H5T_NATIVE_DOUBLE, out.data());
  return out;
}

std::vector<double> ResultsReader::spectra(int k, int iter) const {
  h5::ErrorSilencer quiet;
  const Impl& m = *impl_;
  const KGroup& kg = m.group(k);
  m.check_iter(k, iter);
  const auto hk = static_cast<hsize_t>(k), hg = static_cast<hsize_t>(m.info.n_genes());
  std::vector<double> out(hk * hg);
  read_block(m.file, kg.spectra.get(), kg.ds("spectra"), H5T_NATIVE_DOUBLE,
             {static_cast<hsize_t>(iter), 0, 0}, {1, hk, hg}, out.data());
  return out;
}

std::vector<double> ResultsReader::usages(int k, int iter) const {
  h5::ErrorSilencer quiet;
  const Impl& m = *impl_;
  const KGroup& kg = m.group(k);
  m.check_iter(k, iter);
  if (!m.info.save_usages)
    input_error(m.file, ": the run did not save usages (save_usages = 0; rerun with --save-usages)");
  const auto hk = static_cast<hsize_t>(k), hn = static_cast<hsize_t>(m.info.n_cells);
  std::vector<double> out(hn * hk);
  read_block(m.file, kg.usages.get(), kg.ds("usages"), H5T_NATIVE_DOUBLE,
             {static_cast<hsize_t>(iter), 0, 0}, {1, hn, hk}, out.data());
  return out;
}

// ---- consensus outputs (results_consensus.cpp reads them) ---------------------------------

int ResultsReader::format_version() const { return impl_->format_version; }

std::vector<ConsensusKey> ResultsReader::consensus_list() const {
  h5::ErrorSilencer quiet;
  return read_consensus_list(impl_->file, impl_->fid.get());
}

bool ResultsReader::has_consensus(int k, double local_density_threshold) const {
  h5::ErrorSilencer quiet;
  return h5::exists(impl_->fid.get(), consensus_group(k, local_density_threshold));
}

ConsensusRecord ResultsReader::consensus(int k, double local_density_threshold) const {
  h5::ErrorSilencer quiet;
  return read_consensus(impl_->file, impl_->fid.get(), impl_->info, k, local_density_threshold);
}

std::vector<std::string> ResultsReader::consensus_cells() const {
  h5::ErrorSilencer quiet;
  return read_consensus_cells(impl_->file, impl_->fid.get(), impl_->info);
}

std::optional<KSelectionTable> ResultsReader::k_selection() const {
  h5::ErrorSilencer quiet;
  return read_k_selection(impl_->file, impl_->fid.get());
}

}  // namespace knmf::results
