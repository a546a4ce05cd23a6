// Consensus outputs in the results file (format_version 2): round trip, replacement of a
// (k, threshold) group and of /k_selection, version-1 files (read, resumed, upgraded), the
// checks on additions (one-line errors, file untouched), compression keeping the groups, and
// the groups as h5py sees them. The kill tests are in test_results_file_kill.cpp.

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "knmf/core/error.hpp"
#include "knmf/results/consensus_records.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/results/writer.hpp"
#include "test_results_file_checks.hpp"
#include "test_results_file_support.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using knmf::InputError;
using knmf::Job;
using knmf::results::ConsensusRecord;
using knmf::results::ResultsAdditions;
using knmf::results::ResultsReader;
using knmf::results::ResultsWriteOptions;
using knmf::results::ResultsWriter;
using knmf::results::RunInfo;
using knmf::test::SyntheticRun;
using knmf::test::synthetic_consensus;
using knmf::test::synthetic_info;
using knmf::test::synthetic_k_selection;
using knmf::test::synthetic_result;
using knmf::test::TempDir;
using knmf::test::fast;
using knmf::test::input_error_of;
using knmf::test::slurp;

namespace {

/// A finished synthetic run at `path` (every replicate committed unless `leave` > 0).
RunInfo make_run(const fs::path& path, const SyntheticRun& s = {}, std::size_t leave = 0,
                 const ResultsWriteOptions& opts = fast()) {
  const RunInfo info = synthetic_info(s);
  auto w = ResultsWriter::create_or_resume(path, info, opts);
  const auto jobs = w.pending();
  for (std::size_t i = 0; i + leave < jobs.size(); ++i) w.write(synthetic_result(w.info(), jobs[i]));
  w.finish();
  return w.info();
}

std::vector<std::string> cell_names(const RunInfo& info) {
  std::vector<std::string> cells;
  for (std::int64_t i = 0; i < info.n_cells; ++i) cells.push_back("cell-" + std::to_string(i));
  return cells;
}

std::vector<fs::path> dir_listing(const fs::path& dir) {
  std::vector<fs::path> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().filename());
  std::sort(v.begin(), v.end());
  return v;
}

/// Rewrite the format_version attribute in place (a version-2 file without consensus groups
/// is byte for byte the version-1 schema apart from this value).
void set_format_version(const fs::path& path, std::int64_t v) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t a = H5Aopen_by_name(f, "/", "format_version", H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(a, 0);
  EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &v), 0);
  H5Aclose(a);
  H5Fclose(f);
}

}  // namespace

TEST(ResultsConsensus, RoundTripAndReplacement) {
  TempDir dir;
  const fs::path path = dir / "run.h5";
  const RunInfo info = make_run(path);
  // a copy to compare with, and a reader of the file itself left open during the update
  fs::copy_file(path, dir / "before.h5");
  const auto open_reader = ResultsReader::open(path);
  const auto before = ResultsReader::open(dir / "before.h5");
  EXPECT_EQ(before.format_version(), 3);
  EXPECT_TRUE(before.consensus_list().empty());
  EXPECT_FALSE(before.k_selection());
  EXPECT_TRUE(before.consensus_cells().empty());

  // two consensus groups, one with float32 TPM outputs, and the k-selection table
  ResultsAdditions add;
  add.consensus = {synthetic_consensus(info, 3, 0.5, 1, false),
                   synthetic_consensus(info, 4, 0.5, 1, true, true)};
  add.cells = cell_names(info);
  add.k_selection = synthetic_k_selection(info, 1);
  knmf::results::update_results_file(path, add);
  EXPECT_EQ(dir_listing(dir.path()), (std::vector<fs::path>{"before.h5", "run.h5"})) << "a temporary file was left";
  {
    const auto r = ResultsReader::open(path);
    EXPECT_EQ(r.format_version(), 3);  // stays 3: consensus outputs need 2
    knmf::test::expect_same_content(r, before);  // the replicates, run and table are unchanged
    EXPECT_EQ(r.sessions(), before.sessions());
    EXPECT_EQ(r.info().created, before.info().created);
    EXPECT_EQ(r.info().device, "test device");
    const auto list = r.consensus_list();
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(list[0].group, "/consensus/k_3/dt_0_5");
    EXPECT_EQ(list[1].group, "/consensus/k_4/dt_0_5");
    EXPECT_EQ(list[1].local_density_threshold, 0.5);
    EXPECT_TRUE(r.has_consensus(3, 0.5));
    EXPECT_FALSE(r.has_consensus(5, 0.5));
    knmf::test::expect_same_record(r.consensus(3, 0.5), add.consensus[0]);
    const ConsensusRecord c4 = r.consensus(4, 0.5);
    knmf::test::expect_same_record(c4, add.consensus[1]);
    EXPECT_TRUE(c4.float32);
    EXPECT_FALSE(c4.settings.created.empty());
    EXPECT_FALSE(c4.settings.knmf_version.empty());
    EXPECT_EQ(r.consensus_cells(), add.cells);
    const auto ks = r.k_selection();
    ASSERT_TRUE(ks);
    EXPECT_TRUE(knmf::test::same_k_selection(*ks, *add.k_selection));
    knmf::test::expect_same_settings(ks->settings, add.k_selection->settings);
    const std::string missing = input_error_of([&] { r.consensus(7, 0.5); });
    EXPECT_NE(missing.find("no consensus of k = 7 at local density threshold 0_5"), std::string::npos) << missing;
    EXPECT_NE(missing.find("k_3/dt_0_5, k_4/dt_0_5"), std::string::npos) << missing;
  }
  // the reader opened before the update still reads the old file
  EXPECT_TRUE(open_reader.consensus_list().empty());
  knmf::test::expect_same_content(open_reader, before);

  // again for k = 3 at 0.5 (replaced), a new threshold for k = 3, a new k-selection table;
  // cells not given: the stored ones stay
  ResultsAdditions again;
  again.consensus = {synthetic_consensus(info, 3, 0.5, 2, true), synthetic_consensus(info, 3, 0.7, 2, false)};
  again.k_selection = synthetic_k_selection(info, 2);
  knmf::results::update_results_file(path, again);
  {
    const auto r = ResultsReader::open(path);
    knmf::test::expect_same_content(r, before);
    const auto list = r.consensus_list();
    ASSERT_EQ(list.size(), 3u);
    EXPECT_EQ(list[0].group, "/consensus/k_3/dt_0_5");
    EXPECT_EQ(list[1].group, "/consensus/k_3/dt_0_7");
    EXPECT_EQ(list[2].group, "/consensus/k_4/dt_0_5");
    const ConsensusRecord c3 = r.consensus(3, 0.5);
    knmf::test::expect_same_record(c3, again.consensus[0]);
    EXPECT_FALSE(knmf::test::same_record(c3, add.consensus[0]));
    knmf::test::expect_same_record(r.consensus(3, 0.7), again.consensus[1]);
    knmf::test::expect_same_record(r.consensus(4, 0.5), add.consensus[1]);  // copied as it was
    EXPECT_EQ(r.consensus_cells(), add.cells);
    EXPECT_TRUE(knmf::test::same_k_selection(*r.k_selection(), *again.k_selection));
  }
  // a k-selection alone keeps every consensus group
  ResultsAdditions only_k;
  only_k.k_selection = synthetic_k_selection(info, 3);
  knmf::results::update_results_file(path, only_k);
  {
    const auto r = ResultsReader::open(path);
    EXPECT_EQ(r.consensus_list().size(), 3u);
    EXPECT_TRUE(knmf::test::same_k_selection(*r.k_selection(), *only_k.k_selection));
  }
  // replacing keeps no trace of the old groups: the same update twice gives the same size
  // the file keeps its permission bits
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                            fs::perms::group_write);
  knmf::results::update_results_file(path, again);
  EXPECT_EQ(fs::status(path).permissions(), fs::perms::owner_read | fs::perms::owner_write |
                                                fs::perms::group_read | fs::perms::group_write);
  const auto size = fs::file_size(path);
  for (int i = 0; i < 3; ++i) {
    knmf::results::update_results_file(path, again);
    EXPECT_EQ(fs::file_size(path), size);
  }
}

TEST(ResultsConsensus, Float32OutputsAreRoundedAndStoredAsFloat32) {
  TempDir dir;
  const fs::path path = dir / "run.h5";
  const RunInfo info = make_run(path);
  ConsensusRecord rec = synthetic_consensus(info, 4, 0.5, 1, true, false);  // float64 values
  rec.float32 = true;                                                        // stored float32
  ResultsAdditions add;
  add.consensus = {rec};
  add.cells = cell_names(info);
  knmf::results::update_results_file(path, add);
  const ConsensusRecord back = ResultsReader::open(path).consensus(4, 0.5);
  ASSERT_EQ(back.usages.size(), rec.usages.size());
  std::size_t rounded = 0;
  for (std::size_t i = 0; i < rec.usages.size(); ++i) {
    EXPECT_EQ(back.usages[i], static_cast<double>(static_cast<float>(rec.usages[i])));
    rounded += back.usages[i] != rec.usages[i];
  }
  EXPECT_GT(rounded, rec.usages.size() / 2);
  for (std::size_t i = 0; i < rec.spectra_tpm.size(); ++i)
    EXPECT_EQ(back.spectra_tpm[i], static_cast<double>(static_cast<float>(rec.spectra_tpm[i])));
  EXPECT_EQ(back.spectra, rec.spectra);                // float64 stays float64
  EXPECT_EQ(back.spectra_score, rec.spectra_score);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  for (const auto& [name, size] : {std::pair{"usages", 4}, std::pair{"spectra_tpm", 4},
                                    std::pair{"spectra", 8}, std::pair{"spectra_score", 8},
                                    std::pair{"starcat", 8}, std::pair{"local_density", 8}}) {
    hid_t d = H5Dopen2(f, (std::string("/consensus/k_4/dt_0_5/") + name).c_str(), H5P_DEFAULT);
    ASSERT_GE(d, 0) << name;
    hid_t t = H5Dget_type(d);
    EXPECT_EQ(H5Tget_class(t), H5T_FLOAT) << name;
    EXPECT_EQ(static_cast<int>(H5Tget_size(t)), size) << name;
    H5Tclose(t);
    H5Dclose(d);
  }
  H5Fclose(f);
}

// A version-1 file (the schema of format_version 1: no consensus groups) is read, resumed and
// finished as such, and becomes version 2 when consensus outputs are added.
TEST(ResultsConsensus, VersionOneFilesAreReadResumedAndUpgraded) {
  TempDir dir;
  const fs::path path = dir / "v1.h5";
  const RunInfo info = make_run(path, {}, 5);  // 5 replicates pending
  set_format_version(path, 1);
  {
    const auto r = ResultsReader::open(path);
    EXPECT_EQ(r.format_version(), 1);
    EXPECT_FALSE(r.complete());
    EXPECT_EQ(knmf::test::check_committed(r), static_cast<std::int64_t>(info.jobs.size()) - 5);
    EXPECT_TRUE(r.consensus_list().empty());
    EXPECT_TRUE(r.consensus_cells().empty());
    EXPECT_FALSE(r.k_selection());
    EXPECT_FALSE(r.has_consensus(3, 0.5));
    EXPECT_NE(input_error_of([&] { r.consensus(3, 0.5); }).find("the file holds none"), std::string::npos);
  }
  {
    auto w = ResultsWriter::create_or_resume(path, info, fast());
    EXPECT_TRUE(w.resumed());
    EXPECT_EQ(w.pending().size(), 5u);
    for (const Job& j : w.pending()) w.write(synthetic_result(w.info(), j));
    EXPECT_TRUE(w.finish());
  }
  const fs::path copy = dir / "v1-finished.h5";
  fs::copy_file(path, copy);
  {
    const auto v1 = ResultsReader::open(copy);
    EXPECT_EQ(v1.format_version(), 1);  // resuming does not change the version
    EXPECT_TRUE(v1.complete());
    ResultsAdditions add;
    add.consensus = {synthetic_consensus(info, 5, 0.5, 1, false)};
    add.cells = cell_names(info);
    knmf::results::update_results_file(path, add);
    const auto v2 = ResultsReader::open(path);
    EXPECT_EQ(v2.format_version(), 2);
    knmf::test::expect_same_content(v2, v1);
    knmf::test::expect_same_record(v2.consensus(5, 0.5), add.consensus[0]);
  }
  // a newer version than this knmf knows is refused
  set_format_version(copy, 4);
  const std::string msg = input_error_of([&] { ResultsReader::open(copy); });
  EXPECT_NE(msg.find("format_version 4 is not one this knmf reads (1..3)"), std::string::npos) << msg;
}

TEST(ResultsConsensus, BadAdditionsAreOneLineErrorsAndChangeNothing) {
  TempDir dir;
  const fs::path path = dir / "run.h5";
  const RunInfo info = make_run(path);
  const std::string bytes = slurp(path);
  auto expect_refused = [&](const ResultsAdditions& add, std::vector<std::string> fragments) {
    const std::string msg = input_error_of([&] { knmf::results::update_results_file(path, add); });
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(msg.rfind(path.string(), 0), 0u) << "the message starts with the file: " << msg;
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg << "\n  lacks: " << f;
    std::printf("  InputError: %s\n", msg.c_str());
    EXPECT_EQ(slurp(path), bytes) << "the file changed";
    EXPECT_EQ(dir_listing(dir.path()), std::vector<fs::path>{"run.h5"});
  };
  const auto cells = cell_names(info);
  auto with = [&](ConsensusRecord r) {
    ResultsAdditions a;
    a.consensus = {std::move(r)};
    a.cells = cells;
    return a;
  };
  auto base = [&] { return synthetic_consensus(info, 3, 0.5, 1, true); };
  {
    auto r = base();
    r.k = 7;
    expect_refused(with(r), {"consensus k = 7", "k = 7 is not a k of the run (ks: 3 4 5)"});
  }
  for (double t : {0.0, -0.5, 2.5}) {
    auto r = base();
    r.settings.local_density_threshold = t;
    expect_refused(with(r), {"local density threshold", "outside (0, 2]"});
  }
  {
    auto r = base();
    r.spectra.pop_back();
    expect_refused(with(r), {"consensus k = 3 dt 0_5", "spectra holds 119 values", "k x genes 3 x 40 = 120"});
  }
  {
    auto r = base();
    r.usages.resize(10);
    expect_refused(with(r), {"usages holds 10 values", "cells x k 30 x 3 = 90"});
  }
  {
    auto r = base();
    r.cluster.pop_back();
    expect_refused(with(r), {"cluster holds"});
  }
  {
    auto r = base();
    r.replicate_rows[2] = 18;
    expect_refused(with(r), {"replicate row 18 (entry 2) is outside [0, n_iter * k = 18)"});
  }
  {
    auto r = base();
    r.cluster[0] = 4;
    expect_refused(with(r), {"cluster 4 (entry 0) is outside [0, 3]"});
  }
  {
    auto r = base();
    r.spectra_score.resize(3);
    expect_refused(with(r), {"spectra_score holds 3 values", "k x TPM genes 3 x 43"});
  }
  {
    auto a = with(base());
    a.consensus.push_back(base());
    expect_refused(a, {"/consensus/k_3/dt_0_5 is added twice"});
  }
  {
    auto a = with(base());
    a.cells.pop_back();
    expect_refused(a, {"29 cell names", "30 cells"});
    a.cells.clear();
    expect_refused(a, {"needs the cell names"});
  }
  {
    ResultsAdditions a;
    a.k_selection = synthetic_k_selection(info, 1);
    a.k_selection->silhouette.pop_back();
    expect_refused(a, {"columns differ in length"});
    a.k_selection = synthetic_k_selection(info, 1);
    a.k_selection->k[1] = 9;
    expect_refused(a, {"k-selection: k = 9 is not a k of the run"});
  }
  // files that are not results files are never touched
  const fs::path other = dir / "other.h5";
  {
    hid_t f = H5Fcreate(other.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(f);
  }
  const std::string other_bytes = slurp(other);
  auto add = with(base());
  std::string msg = input_error_of([&] { knmf::results::update_results_file(other, add); });
  EXPECT_NE(msg.find("is not a knmf results file"), std::string::npos) << msg;
  EXPECT_EQ(slurp(other), other_bytes);
  msg = input_error_of([&] { knmf::results::update_results_file(dir / "missing.h5", add); });
  EXPECT_NE(msg.find("missing.h5: no such file"), std::string::npos) << msg;
  msg = input_error_of([&] { knmf::results::check_results_updatable(other); });
  EXPECT_NE(msg.find("is not a knmf results file"), std::string::npos) << msg;
  // an update abandoned before the rename (here: by the step callback) leaves the file as it was
  knmf::results::ResultsUpdateOptions abandon;
  abandon.on_step = [](knmf::results::UpdateStep s) {
    if (s == knmf::results::UpdateStep::copied) throw InputError("abandoned");
  };
  EXPECT_THROW(knmf::results::update_results_file(path, add, abandon), InputError);
  EXPECT_EQ(slurp(path), bytes);
  EXPECT_EQ(dir_listing(dir.path()), (std::vector<fs::path>{"other.h5", "run.h5"}));
  // check_results_updatable changes nothing
  knmf::results::check_results_updatable(path);
  EXPECT_EQ(slurp(path), bytes);
  EXPECT_EQ(dir_listing(dir.path()), (std::vector<fs::path>{"other.h5", "run.h5"}));
}

// finish() with compression rewrites the file: the consensus groups added before come along.
TEST(ResultsConsensus, CompressionKeepsTheConsensusGroups) {
  TempDir dir;
  const fs::path path = dir / "gz.h5";
  ResultsWriteOptions gz = fast();
  gz.gzip_level = 4;
  const RunInfo info = make_run(path, {}, 4, gz);  // 4 pending: not compressed yet
  ResultsAdditions add;
  add.consensus = {synthetic_consensus(info, 3, 0.5, 1, true, true)};
  add.cells = cell_names(info);
  add.k_selection = synthetic_k_selection(info, 1);
  knmf::results::update_results_file(path, add);
  {
    auto w = ResultsWriter::create_or_resume(path, info, gz);
    for (const Job& j : w.pending()) w.write(synthetic_result(w.info(), j));
    EXPECT_TRUE(w.finish());
  }
  {
    const auto r = ResultsReader::open(path);
    EXPECT_TRUE(r.complete());
    EXPECT_EQ(knmf::test::check_committed(r), static_cast<std::int64_t>(info.jobs.size()));
    knmf::test::expect_same_record(r.consensus(3, 0.5), add.consensus[0]);
    EXPECT_EQ(r.consensus_cells(), add.cells);
    EXPECT_TRUE(knmf::test::same_k_selection(*r.k_selection(), *add.k_selection));
  }
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "/k_3/spectra", H5P_DEFAULT);
  hid_t dcpl = H5Dget_create_plist(d);
  EXPECT_EQ(H5Pget_nfilters(dcpl), 2) << "the run was compressed";
  H5Pclose(dcpl);
  H5Dclose(d);
  H5Fclose(f);
}

// ---- the groups as h5py reads them -----------------------------------------------------------

TEST(ResultsConsensus, PythonReadsTheConsensusGroups) {
  const char* python = "/usr/bin/python3";
  if (!fs::exists(python) ||
      knmf::test::run_command(std::string(python) + " -c 'import h5py, numpy'").status != 0) {
    // cmake/bootstrap.sh installs python3-h5py and python3-numpy: a missing one fails
    FAIL() << python << " with h5py and numpy is missing (cmake/bootstrap.sh installs python3-h5py, "
                        "python3-numpy): the h5py check cannot run";
  }
  TempDir dir;
  const fs::path path = dir / "run.h5";
  const RunInfo info = make_run(path);
  ResultsAdditions add;
  add.consensus = {synthetic_consensus(info, 4, 0.5, 1, true, true)};
  add.cells = cell_names(info);
  add.k_selection = synthetic_k_selection(info, 1);
  knmf::results::update_results_file(path, add);
  const ConsensusRecord& c = add.consensus[0];
  {
    std::ofstream o(dir / "want.f64", std::ios::binary);
    auto put = [&o](const std::vector<double>& v) {
      o.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 8));
    };
    put(c.spectra);
    put(c.usages);
    put(c.spectra_tpm);
    put(add.k_selection->prediction_error);
  }
  const std::string script = R"PY(
import sys
import h5py, numpy as np
path, d = sys.argv[1], sys.argv[2]
f = h5py.File(path, "r")
assert int(f.attrs["format_version"]) == 3
n, g = (int(x) for x in f.attrs["input_shape"])
want = np.fromfile(d + "/want.f64", dtype="<f8")
spectra, usages, tpm, err = np.split(want, np.cumsum([4 * g, n * 4, 4 * (g + 3)]))
grp = f["consensus/k_4/dt_0_5"]
a = grp.attrs
assert int(a["k"]) == 4 and a["local_density_threshold"] == 0.5 and a["dt"] == "0_5", dict(a)
assert a["refit_solver"] == "mu" and a["refit_status"] == "converged" and int(a["has_tpm"]) == 1
for name in ["silhouette", "prediction_error", "local_neighborhood_size", "kmeans_tol", "refit_tol"]:
    assert np.asarray(a[name]).dtype == np.float64 and np.ndim(a[name]) == 0, name
for name in ["n_neighbors", "kmeans_seed", "kmeans_n_init", "refit_n_iter", "refit_max_iter"]:
    assert np.asarray(a[name]).dtype == np.int64, name
assert grp["spectra"].dtype == np.float64 and grp["spectra"].shape == (4, g)
assert grp["usages"].dtype == np.float32 and grp["usages"].shape == (n, 4)
assert grp["spectra_tpm"].dtype == np.float32 and grp["spectra_score"].dtype == np.float64
assert grp["cluster"].dtype == np.int32 and grp["replicate_rows"].dtype == np.int64
assert np.array_equal(grp["spectra"][:], spectra.reshape(4, g))
assert np.array_equal(grp["usages"][:], usages.reshape(n, 4).astype(np.float32))
assert np.array_equal(grp["spectra_tpm"][:], tpm.reshape(4, g + 3).astype(np.float32))
genes = grp["tpm_genes"].asstr()[:]
assert len(genes) == g + 3 and genes[2] == "T2é"
cells = f["consensus/cells"].asstr()[:]
assert len(cells) == n and cells[7] == "cell-7"
rows, cl = grp["replicate_rows"][:], grp["cluster"][:]
assert rows.shape == cl.shape == grp["local_density"].shape and cl.max() <= 4 and cl.min() >= 0
ks = f["k_selection"]
assert list(ks["k"][:]) == [3, 4, 5] and np.array_equal(ks["prediction_error"][:], err)
assert set(ks.keys()) == {"k", "local_density_threshold", "silhouette", "prediction_error"}
print("h5py consensus check: ok")
)PY";
  std::ofstream(dir / "check.py") << script;
  const std::string cmd = std::string(python) + " " + (dir / "check.py").string() + " " + path.string() + " " +
                          dir.path().string();
  const auto r = knmf::test::run_command(cmd);
  std::fputs(r.out.c_str(), stdout);
  EXPECT_EQ(r.status, 0) << "the h5py check failed:\n" << r.out;
}
