// `knmf prepare` (the driver) against `cnmf prepare`: the golden facts of
// tests/data/prepare/cnmf_prepare_cli.json (tests/scripts/make_golden_prepare_cli.py ran the
// real cNMF 1.7.1 on inputs of tests/data/real), every input format against the .h5ad of the
// same matrix, the refusals (one line, non-zero exit, no run folder), a prepare into an
// existing run folder, and the native pipeline prepare -> factorize -> consensus.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <zlib.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <thread>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "../drivers/driver_support.hpp"
#include "knmf/core/error.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/io/fingerprint.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/io/zip.hpp"
#include "knmf/prepare/cnmf_prepare.hpp"
#include "knmf/prepare/count_inputs.hpp"
#include "test_support.hpp"

namespace {
using namespace knmf;
using namespace knmf::test;
namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void spit(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

std::string hex16(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", (unsigned long long)v);
  return b;
}

fs::path chr21_h5ad() { return real_dir() / "pbmc1k-v3-chr21" / "pbmc1k-v3-chr21.h5ad"; }
fs::path tenx_dir() { return data_dir() / "prepare" / "pbmc1k-v3-chr21-10x"; }

struct H5adFacts {
  std::int64_t n = 0, g = 0, nnz = 0;
  std::string fingerprint, obs_hash, var_hash;
  std::vector<std::string> obs, var;
};

H5adFacts h5ad_facts(const fs::path& p) {
  auto r = io::H5adReader::open(p);
  H5adFacts f;
  f.n = r.info().n_obs;
  f.g = r.info().n_vars;
  io::CsrBlock<double> b;
  io::XFingerprint fp;
  r.read_csr_rows<double>(0, f.n, b, &fp);
  for (double v : b.values) f.nnz += v != 0;
  f.fingerprint = fp.text(f.n, f.g);
  f.obs = r.obs_names();
  f.var = r.var_names();
  f.obs_hash = hex16(names_fingerprint(f.obs));
  f.var_hash = hex16(names_fingerprint(f.var));
  return f;
}

void expect_h5ad_matches(const fs::path& p, const nlohmann::json& g, const std::string& what) {
  const auto f = h5ad_facts(p);
  EXPECT_EQ(f.n, g["n_obs"].get<std::int64_t>()) << what;
  EXPECT_EQ(f.g, g["n_vars"].get<std::int64_t>()) << what;
  EXPECT_EQ(f.nnz, g["nnz"].get<std::int64_t>()) << what;
  EXPECT_EQ(f.fingerprint, g["fingerprint"].get<std::string>()) << what << ": values differ";
  EXPECT_EQ(f.obs_hash, g["obs_names_hash"].get<std::string>()) << what;
  EXPECT_EQ(f.var_hash, g["var_names_hash"].get<std::string>()) << what;
}

std::vector<std::string> tree(const fs::path& root) {
  std::vector<std::string> v;
  if (!fs::exists(root)) return v;
  for (const auto& e : fs::recursive_directory_iterator(root))
    v.push_back(e.path().lexically_relative(root).string() + (e.is_directory() ? "/" : ""));
  std::sort(v.begin(), v.end());
  return v;
}

const nlohmann::json& golden() {
  static const nlohmann::json g = load_json("prepare/cnmf_prepare_cli.json");
  return g;
}

const nlohmann::json& golden_case(const std::string& id) {
  for (const auto& c : golden()["cases"])
    if (c["id"] == id) return c;
  throw std::runtime_error("no golden case " + id);
}

std::vector<std::string> case_args(const nlohmann::json& c, const fs::path& out) {
  std::vector<std::string> a{"prepare", "--output-dir", out.string(), "--name", c["name"].get<std::string>(),
                             "-c", (real_dir() / c["counts"].get<std::string>()).string()};
  for (const auto& x : c["args"]) a.push_back(x.get<std::string>());
  return a;
}

std::map<std::string, std::string> zip_members(const fs::path& p) {
  io::ZipReader z(p.string());
  std::map<std::string, std::string> m;
  for (const auto& name : {"data.npy", "index.npy", "columns.npy"}) m[name] = z.read(name);
  return m;
}

// ---- against cNMF ---------------------------------------------------------------------------

class PrepareVsCnmf : public ::testing::TestWithParam<std::string> {};

void expect_run_folder_matches(const nlohmann::json& c, const fs::path& out);

TEST_P(PrepareVsCnmf, SameRunFolder) {
  const auto& c = golden_case(GetParam());
  ASSERT_EQ(c["cnmf_exit"].get<int>(), 0) << c.dump();
  TempDir tmp("knmf-prepare-cli");
  const auto r = run_knmf(case_args(c, tmp.path()));
  ASSERT_EQ(r.status, 0) << r.out;
  expect_run_folder_matches(c, tmp.path());
}

// --tpm: the TPM of the chr21 run given back; cNMF's outputs with it (the same as without).
TEST(PrepareVsCnmf, GivenTpm) {
  const auto& c = golden_case("pbmc1k_chr21_tpm");
  ASSERT_EQ(c["cnmf_exit"].get<int>(), 0) << c.dump();
  const auto& first = golden_case(c["tpm_from"].get<std::string>());
  TempDir tmp("knmf-prepare-tpm");
  const auto base = tmp / "base";
  auto r = run_knmf(case_args(first, base));
  ASSERT_EQ(r.status, 0) << r.out;
  const auto tpm = io::CnmfPaths(base.string(), first["name"].get<std::string>()).tpm();
  const auto out = tmp / "out";
  auto args = case_args(c, out);
  args.insert(args.end(), {"--tpm", tpm});
  r = run_knmf(args);
  ASSERT_EQ(r.status, 0) << r.out;
  expect_run_folder_matches(c, out);
  // the same TPM as a float32 DataFrame .df.npz gives the same run folder
  {
    auto reader = io::H5adReader::open(tpm);
    const auto n = reader.info().n_obs, g = reader.info().n_vars;
    std::vector<float> X(size_t(n * g));
    reader.read_dense_rows<float>(0, n, X.data());
    io::DataFrame df;
    df.rows = n;
    df.cols = g;
    df.data_descr = "<f4";
    df.data.assign(X.begin(), X.end());
    for (const auto& o : reader.obs_names()) df.index.emplace_back(o);
    for (const auto& v : reader.var_names()) df.columns.emplace_back(v);
    io::write_df_npz((tmp / "tpm.df.npz").string(), df);
  }
  const auto out2 = tmp / "out2";
  args = case_args(c, out2);
  args.insert(args.end(), {"--tpm", (tmp / "tpm.df.npz").string()});
  r = run_knmf(args);
  ASSERT_EQ(r.status, 0) << r.out;
  expect_run_folder_matches(c, out2);
}

void expect_run_folder_matches(const nlohmann::json& c, const fs::path& out) {
  struct { const fs::path& path() const { return p; } fs::path p; } tmp{out};
  const std::string name = c["name"];
  const io::CnmfPaths p(tmp.path().string(), name);

  // cNMF's folders and files, plus knmf's record of the options and the seed
  std::vector<std::string> expected;
  for (const auto& d : c["folders"]) expected.push_back(d.get<std::string>() + "/");
  for (const auto& f : c["files"]) expected.push_back(f.get<std::string>());
  expected.push_back("cnmf_tmp/" + name + ".knmf_prepare.json");
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(tree(p.run_dir()), expected);
  EXPECT_EQ(tree(tmp.path()), [&] {
    std::vector<std::string> v{name + "/"};
    for (auto& e : expected) v.push_back(name + "/" + e);
    std::sort(v.begin(), v.end());
    return v;
  }()) << "nothing else (no staging folder) is left in the output folder";

  EXPECT_EQ(slurp(p.nmf_genes_list()), c["genes_text"].get<std::string>());
  EXPECT_EQ(slurp(p.nmf_run_parameters()), c["yaml_text"].get<std::string>());

  // the job table: what cNMF's load_df_from_npz reads, and knmf's reader
  const auto& jt = c["job_table"];
  const auto jobs = io::read_cnmf_job_table(p.nmf_replicate_parameters());
  ASSERT_EQ(jobs.size(), jt["rows"].size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto& row = jt["rows"][i];
    EXPECT_EQ(jobs[i].k, row[0].get<int>()) << i;
    EXPECT_EQ(jobs[i].iter, row[1].get<int>()) << i;
    EXPECT_EQ(jobs[i].seed, row[2].get<std::int64_t>()) << i;
    EXPECT_FALSE(row[3].get<bool>());
  }
  const auto df = io::read_df_npz(p.nmf_replicate_parameters());
  EXPECT_TRUE(df.is_object()) << "cNMF's frame is an object array (dtypes " << jt["dtypes"].dump() << ")";
  ASSERT_EQ(df.columns.size(), 4u);
  for (size_t j = 0; j < 4; ++j) EXPECT_EQ(io::label_to_string(df.columns[j]), jt["columns"][j].get<std::string>());
  for (std::int64_t i = 0; i < df.rows; ++i)
    EXPECT_EQ(io::cell_to_string(df.cell(i, 3)), "False") << "completed is a bool, as cNMF's";

  expect_h5ad_matches(p.normalized_counts(), c["norm_counts"], "norm_counts");
  for (const auto& f : {p.normalized_counts(), p.tpm()}) {  // scipy's (and cNMF's) index types
    const auto info = io::H5adReader::open(f).info();
    EXPECT_EQ(info.indptr_type, io::ValueType::Int32) << f;
    EXPECT_EQ(info.index_type, io::ValueType::Int32) << f;
  }
  expect_h5ad_matches(p.tpm(), c["tpm"], "tpm");

  // tpm_stats: knmf accumulates in float64 (cNMF: scikit-learn's StandardScaler)
  const auto st = io::read_df_npz(p.tpm_stats());
  const auto& gs = c["tpm_stats"];
  ASSERT_EQ(st.rows, gs["rows"].get<std::int64_t>());
  std::vector<std::string> index;
  for (const auto& l : st.index) index.push_back(io::label_to_string(l));
  EXPECT_EQ(hex16(names_fingerprint(index)), gs["index_hash"].get<std::string>()) << "index: the gene names";
  double max_rel = 0;
  auto cmp = [&](double a, double b) { max_rel = std::max(max_rel, rel_diff(a, b, 1e-300)); };
  if (gs.contains("mean")) {
    for (std::int64_t j = 0; j < st.rows; ++j) {
      cmp(st.at(j, 0), gs["mean"][size_t(j)].get<double>());
      cmp(st.at(j, 1), gs["std"][size_t(j)].get<double>());
    }
  } else {
    double ms = 0, ss = 0;
    for (std::int64_t j = 0; j < st.rows; ++j) {
      ms += st.at(j, 0);
      ss += st.at(j, 1);
    }
    cmp(ms, gs["mean_sum"].get<double>());
    cmp(ss, gs["std_sum"].get<double>());
    for (size_t i = 0; i < gs["sample_rows"].size(); ++i) {
      const auto r = gs["sample_rows"][i].get<std::int64_t>();
      cmp(st.at(r, 0), gs["sample_mean"][i].get<double>());
      cmp(st.at(r, 1), gs["sample_std"][i].get<double>());
    }
  }
  EXPECT_LT(max_rel, 1e-6) << "tpm_stats";
  ::testing::Test::RecordProperty("tpm_stats_max_rel_diff", std::to_string(max_rel));
  std::printf("tpm_stats max relative difference to cNMF: %.3g\n", max_rel);
}

INSTANTIATE_TEST_SUITE_P(Golden, PrepareVsCnmf,
                         ::testing::Values("pbmc_donor_a", "pbmc1k_chr21", "pbmc1k_chr21_kl",
                                           "pbmc1k_chr21_is"));

// The job table's npz members are cNMF's bytes (pickled object arrays included).
TEST(PrepareVsCnmf, JobTableBytesAreCnmfs) {
  TempDir tmp("knmf-prepare-cli");
  const auto r = run_knmf(case_args(golden_case("pbmc_donor_a"), tmp.path()));
  ASSERT_EQ(r.status, 0) << r.out;
  const auto mine = zip_members(io::CnmfPaths(tmp.path().string(), "pbmcA").nmf_replicate_parameters());
  const auto cnmf = zip_members(pbmc_prepare_dir() / "cnmf_tmp" / "pbmcA.nmf_params.df.npz");
  for (const auto& [member, bytes] : cnmf) EXPECT_TRUE(mine.at(member) == bytes) << member;
}

// cNMF refuses mouse-brain (3 cells without counts in the HVGs, one with none at all) and
// chr21 with 100 genes (2 cells); so does knmf, naming the same cells.
class PrepareRefusedAsCnmf : public ::testing::TestWithParam<std::string> {};

TEST_P(PrepareRefusedAsCnmf, SameCellsReported) {
  const auto& c = golden_case(GetParam());
  ASSERT_NE(c["cnmf_exit"].get<int>(), 0);
  const std::string cnmf_msg = c["cnmf_error"];  // "Exception: Error: 3 cells have zero counts ..."
  TempDir tmp("knmf-prepare-cli");
  const auto out = tmp / "out";
  const auto r = run_knmf(case_args(c, out));
  EXPECT_EQ(r.status, 1) << r.out;
  ASSERT_EQ(lines(r.out).size(), 1u) << r.out;
  const auto at = cnmf_msg.find("Error: ");
  ASSERT_NE(at, std::string::npos);
  const auto core = cnmf_msg.substr(at + 7, cnmf_msg.find(". Filter") - at - 7);  // "3 cells ... E.g. a, b, c"
  EXPECT_NE(r.out.find(core), std::string::npos) << r.out << "\ncNMF: " << cnmf_msg;
  EXPECT_FALSE(fs::exists(out)) << "no output folder after a refusal";
}

// mouse-brain-e18-10k: 1 all-zero cell and 285 all-zero genes; pbmc1k-v3-chr21 at 100 genes.
INSTANTIATE_TEST_SUITE_P(Golden, PrepareRefusedAsCnmf, ::testing::Values("mouse_brain", "pbmc1k_chr21_100"));

// ---- every input format gives the .h5ad's outputs ---------------------------------------------

struct RunFiles {
  std::map<std::string, std::string> bytes;  // non-HDF5 files
  H5adFacts norm, tpm;
};

RunFiles run_files(const fs::path& dir, const std::string& name) {
  RunFiles f;
  const io::CnmfPaths p(dir.string(), name);
  f.bytes["genes"] = slurp(p.nmf_genes_list());
  f.bytes["yaml"] = slurp(p.nmf_run_parameters());
  for (auto& [m, b] : zip_members(p.nmf_replicate_parameters())) f.bytes["jobs:" + m] = b;
  for (auto& [m, b] : zip_members(p.tpm_stats())) f.bytes["tpm_stats:" + m] = b;
  f.norm = h5ad_facts(p.normalized_counts());
  f.tpm = h5ad_facts(p.tpm());
  return f;
}

void expect_same(const RunFiles& a, const RunFiles& b, const std::string& what) {
  for (const auto& [k, v] : a.bytes) EXPECT_TRUE(b.bytes.at(k) == v) << what << ": " << k;
  for (auto [x, y] : {std::pair{&a.norm, &b.norm}, std::pair{&a.tpm, &b.tpm}}) {
    EXPECT_EQ(x->fingerprint, y->fingerprint) << what;
    EXPECT_EQ(x->nnz, y->nnz) << what;
    EXPECT_EQ(x->obs, y->obs) << what;
    EXPECT_EQ(x->var, y->var) << what;
  }
}

// The chr21 matrix as cNMF's tab-separated table and as a DataFrame .df.npz.
void write_table_inputs(const fs::path& tsv, const fs::path& npz) {
  auto r = io::H5adReader::open(chr21_h5ad());
  const auto n = r.info().n_obs, g = r.info().n_vars;
  std::vector<float> X(size_t(n * g));
  r.read_dense_rows<float>(0, n, X.data());
  const auto obs = r.obs_names(), var = r.var_names();
  std::string t = "";
  for (const auto& v : var) t += "\t" + v;
  t += "\n";
  for (std::int64_t i = 0; i < n; ++i) {
    t += obs[size_t(i)];
    for (std::int64_t j = 0; j < g; ++j) {
      const float x = X[size_t(i * g + j)];
      t += "\t" + (x == std::floor(x) ? std::to_string(std::int64_t(x)) : io::format_float_repr(x));
    }
    t += "\n";
  }
  spit(tsv, t);
  io::DataFrame df;
  df.rows = n;
  df.cols = g;
  df.data.assign(X.begin(), X.end());
  for (const auto& o : obs) df.index.emplace_back(o);
  for (const auto& v : var) df.columns.emplace_back(v);
  io::write_df_npz(npz.string(), df);
}

TEST(PrepareFormats, EveryFormatGivesTheH5adOutputs) {
  TempDir tmp("knmf-prepare-formats");
  write_table_inputs(tmp / "counts.tsv", tmp / "counts.df.npz");
  const std::vector<std::string> opts{"-k", "3", "4", "-n", "3", "--seed", "5", "--numgenes", "150"};
  auto run = [&](const std::string& label, const fs::path& counts, std::vector<std::string> extra = {}) {
    std::vector<std::string> a{"prepare", "--output-dir", (tmp / label).string(), "--name", "r", "-c",
                               counts.string()};
    a.insert(a.end(), opts.begin(), opts.end());
    a.insert(a.end(), extra.begin(), extra.end());
    const auto res = run_knmf(a);
    EXPECT_EQ(res.status, 0) << label << ": " << res.out;
    return run_files(tmp / label, "r");
  };
  const auto ref = run("h5ad", chr21_h5ad());
  EXPECT_EQ(ref.norm.n, 1107);
  EXPECT_EQ(ref.norm.g, 150);
  expect_same(ref, run("mtx.gz", tenx_dir() / "filtered_feature_bc_matrix" / "matrix.mtx.gz"), "10x mtx.gz");
  expect_same(ref, run("h5", tenx_dir() / "filtered_feature_bc_matrix.h5"), "10x h5");
  expect_same(ref, run("tsv", tmp / "counts.tsv"), "tsv");
  expect_same(ref, run("npz", tmp / "counts.df.npz"), "df.npz");
  expect_same(ref, run("densify", chr21_h5ad(), {"--densify"}), "h5ad --densify");
  expect_same(ref, run("mtx-densify", tenx_dir() / "filtered_feature_bc_matrix" / "matrix.mtx.gz", {"--densify"}),
              "mtx --densify");
  expect_same(ref, run("blocks", chr21_h5ad(), {"--block-rows", "97"}), "h5ad in blocks of 97 cells");
}

// Cell Ranger 2's uncompressed folder (genes.tsv) and a repeated gene symbol: AnnData's
// make_unique names ('X', 'X-1'); a feature that is not "Gene Expression" is dropped (v3).
TEST(PrepareFormats, TenxV2FolderAndUniqueNames) {
  EXPECT_EQ(prepare::make_names_unique({"A", "B", "A", "A", "A-1"}),
            (std::vector<std::string>{"A", "B", "A-2", "A-3", "A-1"}));
  TempDir tmp("knmf-prepare-v2");
  const auto d = tmp / "v2";
  fs::create_directories(d);
  spit(d / "genes.tsv", "g1\tA\ng2\tB\ng3\tA\ng4\tC\n");
  spit(d / "barcodes.tsv", "c1\nc2\nc3\n");
  spit(d / "matrix.mtx",
       "%%MatrixMarket matrix coordinate integer general\n% c\n4 3 7\n1 1 2\n3 1 1\n2 2 5\n4 2 1\n1 3 1\n2 3 1\n4 3 3\n");
  const auto f = prepare::CountFile::open((d / "matrix.mtx").string());
  const auto& s = f.source();
  EXPECT_EQ(s.var_names, (std::vector<std::string>{"A", "B", "A-1", "C"}));
  EXPECT_EQ(s.obs_names, (std::vector<std::string>{"c1", "c2", "c3"}));
  io::CsrBlock<float> b;
  s.read_rows(0, 3, b);
  EXPECT_EQ(b.row_offsets, (std::vector<std::int64_t>{0, 2, 4, 7}));
  EXPECT_EQ(b.cols, (std::vector<std::int32_t>{0, 2, 1, 3, 0, 1, 3}));
  EXPECT_EQ(b.values, (std::vector<float>{2, 1, 5, 1, 1, 1, 3}));
  // v3: the antibody-capture row is dropped (scanpy's gex_only)
  const auto d3 = tmp / "v3";
  fs::create_directories(d3);
  spit(d3 / "features.tsv", "g1\tA\tGene Expression\ng2\tCD3\tAntibody Capture\ng3\tB\tGene Expression\n");
  spit(d3 / "barcodes.tsv", "c1\nc2\n");
  spit(d3 / "matrix.mtx", "%%MatrixMarket matrix coordinate real general\n3 2 3\n1 1 1.5\n2 1 9\n3 2 2\n");
  const auto f3 = prepare::CountFile::open((d3 / "matrix.mtx").string());
  EXPECT_EQ(f3.source().var_names, (std::vector<std::string>{"A", "B"}));
  f3.source().read_rows(0, 2, b);
  EXPECT_EQ(b.cols, (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(b.values, (std::vector<float>{1.5f, 2.0f}));
}

// A Cell Ranger 2 .h5: one group per genome, `gene_names`, genes x cells stored by cell.
void write_tenx_v2_h5(const fs::path& path, const std::vector<std::string>& genes) {
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t g = H5Gcreate2(f, "hg19", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  auto ints = [&](const char* name, hid_t type, const std::vector<std::int64_t>& v) {
    const hsize_t n = v.size();
    const hid_t sp = H5Screate_simple(1, &n, nullptr);
    const hid_t d = H5Dcreate2(g, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Dclose(d);
    H5Sclose(sp);
  };
  auto strings = [&](const char* name, const std::vector<std::string>& v) {
    std::string buf;
    for (const auto& x : v) buf += x + std::string(8 - x.size(), '\0');
    const hsize_t n = v.size();
    const hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 8);
    const hid_t sp = H5Screate_simple(1, &n, nullptr);
    const hid_t d = H5Dcreate2(g, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
    H5Dclose(d);
    H5Sclose(sp);
    H5Tclose(t);
  };
  // cells x genes: c1 = {A: 2, A-dup: 1}, c2 = {B: 5, C: 1}, c3 = {A: 1, B: 1, C: 3}
  ints("data", H5T_STD_I32LE, {2, 1, 5, 1, 1, 1, 3});
  ints("indices", H5T_STD_I64LE, {0, 2, 1, 3, 0, 1, 3});
  ints("indptr", H5T_STD_I64LE, {0, 2, 4, 7});
  ints("shape", H5T_STD_I32LE, {4, 3});
  strings("genes", {"g1", "g2", "g3", "g4"});
  strings("gene_names", genes);
  strings("barcodes", {"c1", "c2", "c3"});
  H5Gclose(g);
  H5Fclose(f);
}

TEST(PrepareFormats, TenxV2H5) {
  TempDir tmp("knmf-prepare-h5v2");
  write_tenx_v2_h5(tmp / "v2.h5", {"A", "B", "A", "C"});
  const auto f = prepare::CountFile::open((tmp / "v2.h5").string());
  EXPECT_EQ(f.source().var_names, (std::vector<std::string>{"A", "B", "A-1", "C"}));
  EXPECT_EQ(f.source().obs_names, (std::vector<std::string>{"c1", "c2", "c3"}));
  io::CsrBlock<float> b;
  f.source().read_rows(1, 3, b);
  EXPECT_EQ(b.row_offsets, (std::vector<std::int64_t>{0, 2, 5}));
  EXPECT_EQ(b.cols, (std::vector<std::int32_t>{1, 3, 0, 1, 3}));
  EXPECT_EQ(b.values, (std::vector<float>{5, 1, 1, 1, 3}));
  // gene names that do not match the matrix's genes
  write_tenx_v2_h5(tmp / "short.h5", {"A", "B", "C"});
  try {
    prepare::CountFile::open((tmp / "short.h5").string());
    ADD_FAILURE() << "accepted 3 gene names for 4 genes";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("3 feature names for the 4 genes"), std::string::npos) << e.what();
  }
}

// ---- refusals ---------------------------------------------------------------------------------

std::string gzip_text(const std::string& s) {
  std::string out(compressBound(uLong(s.size())) + 64, '\0');
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
  z.avail_in = uInt(s.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(PrepareRefusals, OneLineNamingTheCauseAndNoRunFolder) {
  TempDir tmp("knmf-prepare-bad");
  const std::string mtx_head = "%%MatrixMarket matrix coordinate integer general\n";
  auto tenx = [&](const std::string& label, const std::string& matrix, const std::string& genes,
                  bool gz = false) {
    const auto d = tmp / label;
    fs::create_directories(d);
    spit(d / "genes.tsv", genes);
    spit(d / "barcodes.tsv", "c1\nc2\nc3\n");
    const auto m = d / (gz ? "matrix.mtx.gz" : "matrix.mtx");
    spit(m, matrix);
    return m.string();
  };
  const std::string genes3 = "g1\tA\ng2\tB\ng3\tC\n";
  const std::string good_entries = "3 3 5\n1 1 1\n2 2 2\n3 3 3\n1 2 1\n2 3 4\n";
  const auto good = tenx("good", mtx_head + good_entries, genes3);
  const std::string full_gz = gzip_text(mtx_head + good_entries);
  // a truncated .h5: the first 40% of the 10x h5 fixture
  const auto h5 = slurp(tenx_dir() / "filtered_feature_bc_matrix.h5");
  spit(tmp / "truncated.h5", h5.substr(0, h5.size() * 2 / 5));
  spit(tmp / "ragged.tsv", "\tA\tB\nc1\t1\t2\nc2\t3\n");
  spit(tmp / "text.tsv", "\tA\tB\nc1\t1\t2\nc2\t3\tx7\n");
  spit(tmp / "nan.tsv", "\tA\tB\nc1\t1\t2\nc2\t3\tnan\n");
  // issue 27: names that are not UTF-8 (a Latin-1 byte), which the .h5ad outputs would have
  // stored as UTF-8 strings that anndata cannot read
  spit(tmp / "latin1-cell.tsv", "\tA\tB\nc1\t1\t2\nc\xe9" "2\t3\t4\n");
  spit(tmp / "latin1-gene.tsv", "\tA\tB\xff\nc1\t1\t2\nc2\t3\t4\n");
  const auto latin1_barcode = tenx("latin1bc", mtx_head + good_entries, genes3);
  spit(fs::path(latin1_barcode).parent_path() / "barcodes.tsv", "c1\nc\xe9" "2\nc3\n");
  const auto latin1_gene = tenx("latin1g", mtx_head + good_entries, "g1\tA\ng2\tB\xc3\ng3\tC\n");

  struct Case {
    std::string label;
    std::vector<std::string> args;
    std::string expect;  // a fragment of the message
  };
  auto with = [&](const std::string& counts, std::vector<std::string> extra = {}) {
    std::vector<std::string> a{"-c", counts, "-k", "2", "--n-iter", "2", "--seed", "1"};
    const bool numgenes = std::find(extra.begin(), extra.end(), "--numgenes") != extra.end();
    if (!numgenes) a.insert(a.end(), {"--numgenes", "2"});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const std::vector<Case> cases = {
      {"bad header", with(tenx("hdr", "%%MatrixMarket matrix array real general\n3 3\n", genes3)),
       "is not supported"},
      {"not mtx", with(tenx("nomtx", "hello\n", genes3)), "not a Matrix Market header"},
      {"short entry list", with(tenx("short", mtx_head + "3 3 6\n1 1 1\n2 2 2\n", genes3)),
       "2 entries but the size line says 6"},
      {"index out of range", with(tenx("range", mtx_head + "3 3 2\n1 1 1\n4 2 2\n", genes3)),
       "entry (4, 2) is outside the 3 x 3 matrix"},
      {"bad entry", with(tenx("entry", mtx_head + "3 3 2\n1 1 1\n2 two 2\n", genes3)), "'2 two 2'"},
      {"negative count", with(tenx("neg", mtx_head + "3 3 2\n1 1 1\n2 2 -2\n", genes3)), "value -2"},
      {"features length", with(tenx("feat", mtx_head + good_entries, "g1\tA\ng2\tB\n")),
       "3 genes (rows) but"},
      {"truncated mtx.gz", with(tenx("gz", full_gz.substr(0, full_gz.size() - 12), genes3, true)),
       "matrix.mtx.gz"},
      {"truncated h5", with((tmp / "truncated.h5").string()), "truncated.h5"},
      {"ragged tsv", with((tmp / "ragged.tsv").string()), "line 3 has 2 fields; the header has 3"},
      {"non-numeric tsv", with((tmp / "text.tsv").string()), "'x7' is not a number"},
      {"non-finite tsv", with((tmp / "nan.tsv").string()), "value nan"},
      {"tsv cell not UTF-8", with((tmp / "latin1-cell.tsv").string()),
       "latin1-cell.tsv: line 3, field 1 (a cell name) is not valid UTF-8 at byte 1 (bytes 63 e9 32)"},
      {"tsv gene not UTF-8", with((tmp / "latin1-gene.tsv").string()),
       "latin1-gene.tsv: line 1, field 3 (a gene name) is not valid UTF-8 at byte 1 (bytes 42 ff)"},
      {"10x barcode not UTF-8", with(latin1_barcode),
       "barcodes.tsv: line 2 (a cell barcode) is not valid UTF-8 at byte 1 (bytes 63 e9 32)"},
      {"10x gene not UTF-8", with(latin1_gene),
       "genes.tsv: line 2 (a gene name) is not valid UTF-8 at byte 1 (bytes 42 c3)"},
      {"missing counts", with((tmp / "none.h5ad").string()), "none.h5ad: no such file"},
      {"beta loss", with(good, {"--beta-loss", "poisson"}), "--beta-loss 'poisson'"},
      {"init", with(good, {"--init", "nndsvda"}), "--init 'nndsvda'"},
      {"numgenes", with(good, {"--numgenes", "4"}), "--numgenes 4 is larger than the 3 genes"},
      {"k < 1", {"-c", good, "-k", "0", "--seed", "1"}, "k = 0 is invalid"},
      {"n-iter < 1", {"-c", good, "-k", "2", "-n", "0", "--seed", "1"}, "--n-iter 0 is invalid"},
      {"seed", {"-c", good, "-k", "2", "--seed", "-1"}, "--seed -1 is invalid"},
      {"tpm shape", with(good, {"--tpm", chr21_h5ad().string()}),
       "the TPM matrix is 1107 cells x 507 genes, the counts 3 x 3"},
      {"tpm missing", with(good, {"--tpm", (tmp / "tpm.h5ad").string()}), "tpm.h5ad: no such file"},
      {"genes file", with(good, {"--genes-file", (tmp / "nogenes.txt").string()}), "nogenes.txt"},
  };
  spit(tmp / "genes.txt", "A\nZ\n");
  std::vector<Case> all = cases;
  all.push_back({"gene not in input", with(good, {"--genes-file", (tmp / "genes.txt").string()}), "gene 'Z'"});
  // a cell without counts in the selected genes: cNMF's message
  all.push_back({"zero cell", with(tenx("zero", mtx_head + "3 3 3\n1 1 1\n2 1 2\n2 2 2\n", genes3)),
                 "1 cells have zero counts of overdispersed genes. E.g. c3"});
  for (const auto& c : all) {
    const auto out = tmp / ("out-" + std::to_string(&c - all.data()));
    std::vector<std::string> a{"prepare", "--output-dir", out.string(), "--name", "run"};
    a.insert(a.end(), c.args.begin(), c.args.end());
    const auto r = run_knmf(a);
    EXPECT_EQ(r.status, 1) << c.label << ": " << r.out;
    EXPECT_EQ(lines(r.out).size(), 1u) << c.label << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.label << ": " << r.out;
    EXPECT_FALSE(fs::exists(out)) << c.label << ": an output folder was left";
  }
  // the good folder itself is accepted
  const auto r = run_knmf({"prepare", "--output-dir", (tmp / "ok").string(), "--name", "run", "-c", good,
                           "-k", "2", "--seed", "1", "--numgenes", "3"});
  EXPECT_EQ(r.status, 0) << r.out;
}

// Issue 27: `knmf prepare` killed with SIGKILL 20 times, each kill only once its staging
// folder exists (so every kill lands while it writes: at a random moment of the time an
// uninterrupted run takes from there), then run once more: the run folder is an uninterrupted
// run's, and no temporary file or folder is left (the staging folder of a killed run was
// left behind for good before: 12-17 MB each time).
TEST(PrepareRunFolder, KilledTwentyTimesWhileWritingThenRerunIsAnUninterruptedRun) {
  TempDir tmp("knmf-prepare-kill");
  const auto counts = (tenx_dir() / "filtered_feature_bc_matrix" / "matrix.mtx.gz").string();
  auto args = [&](const fs::path& out) {
    return std::vector<std::string>{"prepare", "--output-dir", out.string(), "--name", "run", "-c", counts,
                                    "-k", "2", "3", "-n", "2", "--seed", "1", "--numgenes", "150"};
  };
  const fs::path out = tmp / "killed";
  fs::create_directories(out);
  // this process's staging folder (a killed one's stays until the next run removes it)
  auto staging = [&](pid_t pid) {
    const std::string mark = ".knmf-tmp-" + std::to_string(pid) + "-";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out, ec))
      if (e.is_directory() && e.path().filename().string().find(mark) != std::string::npos) return true;
    return false;
  };
  auto start = [&](const std::vector<std::string>& a) {
    std::vector<std::string> argv_s{driver_path()};
    argv_s.insert(argv_s.end(), a.begin(), a.end());
    const pid_t pid = fork();
    if (pid == 0) {
      std::freopen("/dev/null", "w", stdout);
      std::freopen("/dev/null", "w", stderr);
      std::vector<char*> argv;
      for (auto& x : argv_s) argv.push_back(x.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    return pid;
  };
  // an uninterrupted run, timed from its staging folder's creation to its end
  using clock = std::chrono::steady_clock;
  double write_s = 0.0;
  {
    const pid_t pid = start(args(out));
    int st = 0;
    std::optional<clock::time_point> seen;
    while (!poll_child(pid, st, 0, "the uninterrupted prepare")) {
      if (!seen && staging(pid)) seen = clock::now();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ASSERT_EQ(st, 0) << describe_status(st);
    ASSERT_TRUE(seen) << "the staging folder was never seen";
    write_s = std::chrono::duration<double>(clock::now() - *seen).count();
  }
  const auto reference = run_files(out, "run");
  fs::remove_all(out / "run");
  std::mt19937 rng(27);
  int landed = 0;
  for (int attempt = 0; attempt < 400 && landed < 20; ++attempt) {
    const pid_t pid = start(args(out));
    int st = 0;
    bool done = false;
    while (!staging(pid)) {
      if (poll_child(pid, st, 0, "a prepare to be killed")) {
        done = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (done) continue;  // finished before its staging folder was seen: no kill landed
    std::this_thread::sleep_for(std::chrono::duration<double>(
        std::uniform_real_distribution<double>(0.0, 0.9)(rng) * write_s));
    const bool running = !poll_child(pid, st, 0, "a prepare to be killed");
    if (running) {
      kill(pid, SIGKILL);
      wait_child(pid, SIGKILL, "a killed prepare");
    }
    landed += running;
  }
  EXPECT_EQ(landed, 20);
  const auto r = run_knmf(args(out));
  ASSERT_EQ(r.status, 0) << r.out;
  expect_same(reference, run_files(out, "run"), "a rerun after 20 kills");
  for (const auto& e : fs::recursive_directory_iterator(out))
    EXPECT_EQ(e.path().filename().string().find(".knmf-"), std::string::npos)
        << e.path() << " was left behind";
}

// A prepare into an existing run folder replaces its prepare files and keeps the rest (as
// cNMF), marks jobs whose spectra exist as completed; a refused one changes nothing.
TEST(PrepareRunFolder, ExistingFolderReplacedWholeOrNotAtAll) {
  TempDir tmp("knmf-prepare-again");
  const std::string dir = tmp.path().string();
  auto args = [&](const std::string& numgenes) {
    return std::vector<std::string>{"prepare", "--output-dir", dir, "--name", "r", "-c", chr21_h5ad().string(),
                                    "-k", "3", "-n", "2", "--seed", "9", "--numgenes", numgenes};
  };
  ASSERT_EQ(run_knmf(args("150")).status, 0);
  const io::CnmfPaths p(dir, "r");
  spit(p.iter_spectra(3, 1), "not really spectra");
  const auto before = run_files(tmp.path(), "r");
  const auto bad = run_knmf(args("5000"));
  EXPECT_EQ(bad.status, 1) << bad.out;
  expect_same(before, run_files(tmp.path(), "r"), "after a refused prepare");
  const auto again = run_knmf(args("200"));
  ASSERT_EQ(again.status, 0) << again.out;
  EXPECT_NE(again.out.find("1 runs already appear completed"), std::string::npos) << again.out;
  EXPECT_EQ(h5ad_facts(p.normalized_counts()).g, 200);
  EXPECT_EQ(slurp(p.iter_spectra(3, 1)), "not really spectra");
  const auto df = io::read_df_npz(p.nmf_replicate_parameters());
  ASSERT_EQ(df.rows, 2);
  EXPECT_EQ(io::cell_to_string(df.cell(0, 3)), "False");
  EXPECT_EQ(io::cell_to_string(df.cell(1, 3)), "True");
  for (const auto& f : tree(tmp.path()))
    EXPECT_EQ(f.find("knmf-prepare-"), std::string::npos) << "staging left: " << f;
}

// No --seed: one is drawn, printed and recorded, and repeats the job table.
TEST(PrepareRunFolder, DrawnSeedIsRecorded) {
  TempDir tmp("knmf-prepare-seed");
  const std::string dir = tmp.path().string();
  const auto r = run_knmf({"prepare", "--output-dir", dir, "--name", "a", "-c", chr21_h5ad().string(), "-k",
                           "2", "-n", "3", "--numgenes", "150"});
  ASSERT_EQ(r.status, 0) << r.out;
  const auto rec = nlohmann::json::parse(slurp(tmp / "a" / "cnmf_tmp" / "a.knmf_prepare.json"));
  const auto seed = rec["seed"].get<std::int64_t>();
  EXPECT_NE(r.out.find("--seed " + std::to_string(seed)), std::string::npos) << r.out;
  EXPECT_EQ(rec["seed_source"].get<std::string>().rfind("drawn", 0), 0u);
  const auto r2 = run_knmf({"prepare", "--output-dir", dir, "--name", "b", "-c", chr21_h5ad().string(), "-k",
                            "2", "-n", "3", "--numgenes", "150", "--seed", std::to_string(seed)});
  ASSERT_EQ(r2.status, 0) << r2.out;
  EXPECT_TRUE(zip_members(io::CnmfPaths(dir, "a").nmf_replicate_parameters()) ==
              zip_members(io::CnmfPaths(dir, "b").nmf_replicate_parameters()));
}

// ---- the native pipeline -----------------------------------------------------------------------

TEST(PreparePipeline, PrepareFactorizeConsensus) {
  TempDir tmp("knmf-prepare-pipeline");
  const std::string dir = tmp.path().string();
  auto r = run_knmf({"prepare", "--output-dir", dir, "--name", "p", "-c",
                     (tenx_dir() / "filtered_feature_bc_matrix.h5").string(), "-k", "3", "4", "-n", "5",
                     "--seed", "14", "--numgenes", "150"});
  ASSERT_EQ(r.status, 0) << r.out;
  r = run_knmf({"factorize", "--output-dir", dir, "--name", "p", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.out;
  const io::CnmfPaths p(dir, "p");
  for (int k : {3, 4})
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(fs::exists(p.iter_spectra(k, i))) << k << " " << i;
  r = run_knmf({"consensus", "--output-dir", dir, "--name", "p", "--components", "4",
                "--local-density-threshold", "2"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(fs::exists(p.consensus_spectra(4, 2.0)));
  EXPECT_TRUE(fs::exists(p.consensus_usages(4, 2.0)));
  const auto usage = io::read_df_npz(p.consensus_usages(4, 2.0));
  EXPECT_EQ(usage.rows, 1107);
  EXPECT_EQ(usage.cols, 4);
  const auto spectra = io::read_df_npz(p.consensus_spectra(4, 2.0));
  EXPECT_EQ(spectra.rows, 4);
  EXPECT_EQ(spectra.cols, 150);
}

// The all-native pipeline against the all-cNMF one on a real dataset: knmf prepare -> knmf
// factorize -> knmf consensus on pbmc1k-v3-chr21 with cNMF's options of the cnmf-pbmc1k-kl
// fixture (KL, k = 3 and 4, 3 replicates, seed 14, 150 genes), against the consensus cNMF
// 1.7.1 computed from its own prepare and factorize (tests/scripts/make_cnmf_variant_fixtures.py).
TEST(PreparePipeline, AllNativeConsensusMatchesCnmfsPipeline) {
  TempDir tmp("knmf-native-vs-cnmf");
  const std::string dir = tmp.path().string();
  auto r = run_knmf({"prepare", "--output-dir", dir, "--name", "chr21kl", "-c", chr21_h5ad().string(),
                     "-k", "3", "4", "-n", "3", "--seed", "14", "--numgenes", "150", "--beta-loss",
                     "kullback-leibler"});
  ASSERT_EQ(r.status, 0) << r.out;
  r = run_knmf({"factorize", "--output-dir", dir, "--name", "chr21kl", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.out;
  const io::CnmfPaths p(dir, "chr21kl");
  const auto ref_dir = real_dir() / "cnmf-pbmc1k-kl" / "reference";
  for (int k : {3, 4}) {
    r = run_knmf({"consensus", "--output-dir", dir, "--name", "chr21kl", "--components",
                  std::to_string(k), "--local-density-threshold", "2.0",
                  "--local-neighborhood-size", "0.5"});
    ASSERT_EQ(r.status, 0) << r.out;
    const std::string ks = std::to_string(k);
    for (const std::string what : {"spectra", "usages"}) {
      const auto mine = io::read_df_npz(what == "spectra" ? p.consensus_spectra(k, 2.0)
                                                          : p.consensus_usages(k, 2.0));
      // the usages: cNMF's consensus with its TPM spectra refitted on TPM^T as CSR
      // (scikit-learn 1.2.1 misreads the CSC matrix cNMF passes: test_consensus_beta.cpp)
      const auto ref = io::read_df_npz(
          (ref_dir / (what == "usages" ? "csr_refit" : "") /
           ("chr21kl." + what + ".k_" + ks + ".dt_2_0.consensus.df.npz")).string());
      ASSERT_EQ(mine.rows, ref.rows);
      ASSERT_EQ(mine.cols, ref.cols);
      EXPECT_EQ(mine.index, ref.index);
      EXPECT_EQ(mine.columns, ref.columns);
      // program t of both (the same order: cNMF's reorder by total usage): the correlation of
      // its spectrum over the genes, or of its usage over the cells
      const bool rows = what == "spectra";
      const std::int64_t len = rows ? ref.cols : ref.rows;
      double worst = 1, dmax = 0, smax = 0;
      for (int t = 0; t < k; ++t) {
        std::vector<double> a(static_cast<size_t>(len)), b(static_cast<size_t>(len));
        for (std::int64_t e = 0; e < len; ++e) {
          a[size_t(e)] = rows ? mine.at(t, e) : mine.at(e, t);
          b[size_t(e)] = rows ? ref.at(t, e) : ref.at(e, t);
          dmax = std::max(dmax, std::abs(a[size_t(e)] - b[size_t(e)]));
          smax = std::max(smax, std::abs(b[size_t(e)]));
        }
        worst = std::min(worst, correlation(a.data(), b.data(), a.size()));
      }
      std::printf("k=%d %s: all-native vs all-cNMF pipeline, worst program correlation %.12f, "
                  "max rel diff %.3g\n", k, what.c_str(), worst, dmax / smax);
      EXPECT_GE(worst, 0.999) << "k " << k << " " << what;
    }
  }
}

}  // namespace
