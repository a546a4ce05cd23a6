// H5adReader against the committed fixtures (tests/data/h5ad, made by
// tests/scripts/make_h5ad_fixtures.py) and the real matrices under tests/data/real.

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

#include <hdf5.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>

#include "io_test_util.hpp"
#include "test_h5ad_support.hpp"

namespace {

using knmf::InputError;
using knmf::io::CsrBlock;
using knmf::io::H5adReader;
using knmf::io::H5adReadOptions;
using knmf::io::StorageFormat;
using knmf::test::h5ad_fixture;
using knmf::test::read_csr_in_blocks;
using knmf::test::read_dense_all;
using knmf::test::to_dense;

const nlohmann::json& golden() {
  static const nlohmann::json g = knmf::test::load_json("h5ad/golden.json");
  return g;
}

std::vector<double> flatten(const nlohmann::json& m) {
  std::vector<double> v;
  for (const auto& row : m)
    for (const auto& x : row) v.push_back(x.get<double>());
  return v;
}

// ---- valid fixtures ----------------------------------------------------------------------

const std::vector<std::string> kValid = {
    "dense_f32.h5ad", "dense_f64.h5ad",     "dense_i64.h5ad",        "csr_f32.h5ad",
    "csr_f64.h5ad",   "csr_int32_values.h5ad", "csc_f32.h5ad",       "csr_i64_index.h5ad",
    "fixed_strings.h5ad", "named_index.h5ad", "legacy_compound.h5ad"};

TEST(H5adFixtures, GoldenListsEveryValidFixture) {
  EXPECT_EQ(golden()["fixtures"].size(), kValid.size());
  for (const auto& name : kValid) EXPECT_TRUE(golden()["fixtures"].contains(name)) << name;
}

class ValidFixture : public ::testing::TestWithParam<std::string> {
protected:
  const nlohmann::json& g() const { return golden()["fixtures"][GetParam()]; }
  std::filesystem::path path() const { return h5ad_fixture(GetParam()); }
};

TEST_P(ValidFixture, Info) {
  const auto r = H5adReader::open(path());
  const auto& i = r.info();
  EXPECT_EQ(i.n_obs, g()["shape"][0].get<std::int64_t>());
  EXPECT_EQ(i.n_vars, g()["shape"][1].get<std::int64_t>());
  EXPECT_EQ(knmf::io::to_string(i.format), g()["format"].get<std::string>());
  EXPECT_EQ(knmf::io::to_string(i.value_type), g()["value_type"].get<std::string>());
  EXPECT_EQ(i.nnz, g()["stored_nnz"].get<std::int64_t>());
  if (g()["index_type"].is_null()) {
    EXPECT_FALSE(i.index_type.has_value());
    EXPECT_FALSE(i.indptr_type.has_value());
  } else {
    ASSERT_TRUE(i.index_type && i.indptr_type);
    EXPECT_EQ(knmf::io::to_string(*i.index_type), g()["index_type"].get<std::string>());
    EXPECT_EQ(knmf::io::to_string(*i.indptr_type), g()["indptr_type"].get<std::string>());
  }
  EXPECT_EQ(r.path(), path());
}

TEST_P(ValidFixture, Names) {
  const auto r = H5adReader::open(path());
  EXPECT_EQ(r.var_names(), g()["var_names"].get<std::vector<std::string>>());
  EXPECT_EQ(r.obs_names(), g()["obs_names"].get<std::vector<std::string>>());
}

TEST_P(ValidFixture, DenseRowsExact) {
  const auto expect = flatten(g()["matrix"]);
  for (std::size_t chunk : {std::size_t{1}, std::size_t{12}, std::size_t{64} << 20}) {
    H5adReadOptions o;
    o.chunk_bytes = chunk;
    const auto r = H5adReader::open(path(), o);
    EXPECT_EQ(read_dense_all(r), expect) << "chunk_bytes " << chunk;
    // float destination, and row blocks of 4 (the last one short)
    const std::int64_t n = r.info().n_obs, gcols = r.info().n_vars;
    std::vector<float> f(static_cast<std::size_t>(n * gcols), -1.0f);
    for (std::int64_t r0 = 0; r0 < n; r0 += 4)
      r.read_dense_rows(r0, std::min(n, r0 + 4), f.data() + r0 * gcols);
    EXPECT_EQ(std::vector<double>(f.begin(), f.end()), expect) << "chunk_bytes " << chunk;
  }
}

TEST_P(ValidFixture, CsrBlocksExactInEveryBlockSize) {
  const auto expect = flatten(g()["matrix"]);
  const auto nonzeros = std::count_if(expect.begin(), expect.end(), [](double v) { return v != 0; });
  for (std::size_t chunk : {std::size_t{1}, std::size_t{20}, std::size_t{64} << 20}) {
    H5adReadOptions o;
    o.chunk_bytes = chunk;
    const auto r = H5adReader::open(path(), o);
    const auto ref = read_csr_in_blocks<double>(r, r.info().n_obs);
    EXPECT_EQ(to_dense(ref), expect);
    EXPECT_EQ(ref.nnz(), nonzeros);  // the fixtures hold no explicit zeros; dense zeros dropped
    for (std::int64_t i = 0; i < ref.rows(); ++i)
      EXPECT_TRUE(std::is_sorted(ref.cols.begin() + ref.row_offsets[static_cast<std::size_t>(i)],
                                 ref.cols.begin() + ref.row_offsets[static_cast<std::size_t>(i + 1)]));
    for (std::int64_t rows : {1, 2, 4}) {
      knmf::test::expect_same_csr(read_csr_in_blocks<double>(r, rows), ref);
      knmf::test::expect_same_csr(read_csr_in_blocks<float>(r, rows), ref);
    }
  }
}

TEST_P(ValidFixture, RowNnzAndEmptyRanges) {
  const auto r = H5adReader::open(path());
  const auto expect = flatten(g()["matrix"]);
  const std::int64_t n = r.info().n_obs, gcols = r.info().n_vars;
  const auto counts = r.row_nnz(0, n);
  ASSERT_EQ(static_cast<std::int64_t>(counts.size()), n);
  for (std::int64_t i = 0; i < n; ++i)
    EXPECT_EQ(counts[static_cast<std::size_t>(i)],
              std::count_if(expect.begin() + i * gcols, expect.begin() + (i + 1) * gcols, [](double v) { return v != 0; }));
  EXPECT_EQ(r.row_nnz(2, 4), std::vector<std::int64_t>(counts.begin() + 2, counts.begin() + 4));
  EXPECT_TRUE(r.row_nnz(3, 3).empty());
  CsrBlock<double> b;
  r.read_csr_rows(5, 5, b);
  EXPECT_EQ(b.rows(), 0);
  EXPECT_EQ(b.nnz(), 0);
  EXPECT_EQ(b.row_offsets, std::vector<std::int64_t>{0});
  EXPECT_THROW(r.read_csr_rows(0, n + 1, b), std::out_of_range);
  EXPECT_THROW(r.row_nnz(-1, 2), std::out_of_range);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ValidFixture, ::testing::ValuesIn(kValid),
                         [](const auto& info) {
                           std::string s = info.param.substr(0, info.param.find('.'));
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

TEST(H5adReader, SplitRowsByNnz) {
  using knmf::io::split_rows_by_nnz;
  EXPECT_EQ(split_rows_by_nnz({3, 1, 0, 2, 3, 2}, 4), (std::vector<std::int64_t>{0, 3, 4, 5, 6}));
  EXPECT_EQ(split_rows_by_nnz({3, 1, 0, 2, 3, 2}, 100), (std::vector<std::int64_t>{0, 6}));
  EXPECT_EQ(split_rows_by_nnz({9, 1}, 4), (std::vector<std::int64_t>{0, 1, 2}));  // an oversized row alone
  EXPECT_EQ(split_rows_by_nnz({}, 4), (std::vector<std::int64_t>{0}));
}

TEST(H5adReader, MovedReaderKeepsWorking) {
  auto a = H5adReader::open(h5ad_fixture("csr_f32.h5ad"));
  H5adReader b = std::move(a);
  EXPECT_EQ(b.info().n_obs, 6);
  EXPECT_EQ(b.row_nnz(0, 6).size(), 6u);
}

// ---- malformed fixtures --------------------------------------------------------------------

/// Open the file and use every entry point; return the message of the first InputError.
std::string first_error(const std::filesystem::path& p) {
  try {
    H5adReadOptions o;
    o.chunk_bytes = 16;  // many small hyperslabs
    const auto r = H5adReader::open(p, o);
    CsrBlock<float> b;
    for (std::int64_t r0 = 0; r0 < r.info().n_obs; ++r0) r.read_csr_rows(r0, r0 + 1, b);
    read_dense_all(r);
    r.row_nnz(0, r.info().n_obs);
    r.var_names();
    r.obs_names();
  } catch (const InputError& e) {
    return e.what();
  }
  return {};
}

class MalformedFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(MalformedFixture, OneLineMessageNamingFileAndProblem) {
  const auto path = h5ad_fixture(GetParam());
  const std::string msg = first_error(path);
  ASSERT_FALSE(msg.empty()) << GetParam() << " was accepted";
  EXPECT_EQ(msg.rfind(path.string() + ": ", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const auto& part : golden()["malformed"][GetParam()])
    EXPECT_NE(msg.find(part.get<std::string>()), std::string::npos) << "'" << part << "' not in: " << msg;
}

std::vector<std::string> malformed_names() {
  std::vector<std::string> v;
  for (const auto& [k, _] : golden()["malformed"].items()) v.push_back(k);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MalformedFixture, ::testing::ValuesIn(malformed_names()),
                         [](const auto& info) { return info.param.substr(0, info.param.find('.')); });

TEST(H5adReader, MalformedSetIsComplete) {
  for (const char* name : {"bad_truncated.h5ad", "bad_corrupt_chunk.h5ad", "bad_no_x.h5ad",
                           "bad_indptr_not_monotone.h5ad", "bad_index_out_of_range.h5ad",
                           "bad_shape_mismatch.h5ad", "bad_nan_value.h5ad", "bad_negative_value.h5ad",
                           "bad_not_anndata.h5ad", "bad_not_hdf5.h5ad", "bad_dense_inf.h5ad"})
    EXPECT_TRUE(golden()["malformed"].contains(name)) << name;
}

/// Value errors surface on every read path, each naming the same position.
TEST(H5adReader, BadValuesCaughtOnEveryPath) {
  for (const char* name : {"bad_nan_value.h5ad", "bad_negative_value.h5ad", "bad_index_out_of_range.h5ad"}) {
    const auto r = H5adReader::open(h5ad_fixture(name));
    const auto parts = golden()["malformed"][name];
    auto check = [&](auto&& f, const char* path) {
      try {
        f();
        ADD_FAILURE() << name << " accepted by " << path;
      } catch (const InputError& e) {
        for (const auto& part : parts)
          EXPECT_NE(std::string(e.what()).find(part.get<std::string>()), std::string::npos) << path << ": " << e.what();
      }
    };
    CsrBlock<double> b;
    std::vector<float> d(30);
    check([&] { r.read_csr_rows(0, 6, b); }, "csr");
    check([&] { r.read_csr_rows(3, 5, b); }, "csr rows 3..5");
    check([&] { r.read_dense_rows(0, 6, d.data()); }, "dense");
    // rows without the bad entry read fine
    r.read_csr_rows(0, 3, b);
    r.read_csr_rows(5, 6, b);
  }
}

/// Names must be UTF-8 (knmf stores them as UTF-8 strings): a name that is not is refused in
/// one line naming the file, the dataset, the name's position and its bytes.
TEST(H5adReader, NonUtf8NamesAreRefusedNamingPositionAndBytes) {
  knmf::test::TempDir tmp("knmf-h5ad-utf8");
  CsrBlock<float> X;
  X.row_end = 2;
  X.ncols = 3;
  X.row_offsets = {0, 1, 2};
  X.cols = {0, 2};
  X.values = {1.0f, 2.0f};
  const auto good = (tmp / "good.h5ad").string();
  knmf::io::H5adWriteOptions hostile;
  hostile.check_names_utf8 = false;  // the writer refuses such names itself (test_h5ad_writer)
  // 2-, 3- and 4-byte sequences are names like any other
  knmf::io::write_h5ad(good, X, {"cell\xc3\xa9", "c2"}, {"G\xc3\xa8ne", "\xe2\x82\xac", "\xf0\x9f\xa7\xac"});
  const auto ok = H5adReader::open(good);
  EXPECT_EQ(ok.var_names()[2], "\xf0\x9f\xa7\xac");
  EXPECT_EQ(ok.obs_names()[0], "cell\xc3\xa9");
  struct Case {
    std::string name, bytes;
    int at;
  };
  const std::vector<Case> bad = {
      {"Ge\xffne", "47 65 ff 6e 65", 2},        // not UTF-8 at all (Latin-1 y-umlaut)
      {"G\xe8ne", "47 e8 6e 65", 1},            // Latin-1 e-grave: a truncated sequence
      {"\xc0\xaf", "c0 af", 0},                // overlong '/'
      {"x\xed\xa0\x80", "78 ed a0 80", 1},     // a UTF-16 surrogate
      {"\xf4\x90\x80\x80", "f4 90 80 80", 0},  // above U+10FFFF
  };
  for (const auto& c : bad) {
    const auto path = (tmp / "bad.h5ad").string();
    knmf::io::write_h5ad(path, X, {}, {"A", c.name, "C"}, hostile);
    const auto r = H5adReader::open(path);
    KNMF_EXPECT_INPUT_ERROR(r.var_names(), path, "gene name 1 (/var/_index[1])",
                            "not valid UTF-8 at byte " + std::to_string(c.at), "(bytes " + c.bytes + ")");
  }
  const auto path = (tmp / "bad_obs.h5ad").string();
  knmf::io::write_h5ad(path, X, {"c1", "c\xfe"}, {}, hostile);
  const auto r = H5adReader::open(path);
  EXPECT_NO_THROW(r.var_names());
  KNMF_EXPECT_INPUT_ERROR(r.obs_names(), path, "cell name 1 (/obs/_index[1])", "(bytes 63 fe)");
}

TEST(H5adReader, MissingFile) {
  const auto p = h5ad_fixture("does_not_exist.h5ad");
  try {
    H5adReader::open(p);
    FAIL() << "opened a missing file";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), p.string() + ": cannot open: no such file");
  }
}

// ---- real matrices -------------------------------------------------------------------------

class RealFile : public ::testing::TestWithParam<std::string> {
protected:
  const nlohmann::json& g() const { return golden()["real"][GetParam()]; }
  std::filesystem::path path() const {
    return knmf::test::real_dir() / g()["path"].get<std::string>();
  }
};

TEST_P(RealFile, InfoAndNames) {
  const auto r = H5adReader::open(path());
  const auto& i = r.info();
  EXPECT_EQ(i.format, StorageFormat::Csr);
  EXPECT_EQ(i.n_obs, g()["n_obs"].get<std::int64_t>());
  EXPECT_EQ(i.n_vars, g()["n_vars"].get<std::int64_t>());
  EXPECT_EQ(i.nnz, g()["nnz"].get<std::int64_t>());
  EXPECT_EQ(knmf::io::to_string(i.value_type), g()["value_type"].get<std::string>());
  EXPECT_EQ(knmf::io::to_string(*i.index_type), g()["index_type"].get<std::string>());
  EXPECT_EQ(knmf::io::to_string(*i.indptr_type), g()["indptr_type"].get<std::string>());
  const auto var = r.var_names(), obs = r.obs_names();
  ASSERT_EQ(static_cast<std::int64_t>(var.size()), i.n_vars);
  ASSERT_EQ(static_cast<std::int64_t>(obs.size()), i.n_obs);
  EXPECT_EQ(std::vector<std::string>(var.begin(), var.begin() + 5), g()["var_first"].get<std::vector<std::string>>());
  EXPECT_EQ(std::vector<std::string>(var.end() - 5, var.end()), g()["var_last"].get<std::vector<std::string>>());
  EXPECT_EQ(std::vector<std::string>(obs.begin(), obs.begin() + 3), g()["obs_first"].get<std::vector<std::string>>());
  EXPECT_EQ(std::vector<std::string>(obs.end() - 3, obs.end()), g()["obs_last"].get<std::vector<std::string>>());
  const auto counts = r.row_nnz(0, i.n_obs);
  EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), std::int64_t{0}), i.nnz);
  for (const auto& [row, n] : g()["row_nnz"].items())
    EXPECT_EQ(counts[std::stoul(row)], n.get<std::int64_t>()) << "row " << row;
}

TEST_P(RealFile, SumsInEveryBlockSize) {
  const auto r = H5adReader::open(path());
  const auto all = read_csr_in_blocks<double>(r, r.info().n_obs);
  // Row and total sums against golden (exact for counts; float64 data summed in another order).
  const double tol = 1e-12;
  for (const auto& [row, s] : g()["row_sums"].items()) {
    const auto i = std::stoul(row);
    const double sum = std::accumulate(all.values.begin() + all.row_offsets[i], all.values.begin() + all.row_offsets[i + 1], 0.0);
    EXPECT_LE(knmf::test::rel_diff(sum, s.get<double>(), 1.0), tol) << "row " << row;
  }
  const double total = std::accumulate(all.values.begin(), all.values.end(), 0.0);
  EXPECT_LE(knmf::test::rel_diff(total, g()["total_sum"].get<double>()), tol);
  EXPECT_EQ(*std::max_element(all.values.begin(), all.values.end()), g()["max"].get<double>());
  // Identical results in blocks of 1 and 7 rows, in float, and through small hyperslab chunks.
  knmf::test::expect_same_csr(read_csr_in_blocks<double>(r, 1), all);
  knmf::test::expect_same_csr(read_csr_in_blocks<float>(r, 7), read_csr_in_blocks<float>(r, r.info().n_obs));
  H5adReadOptions small;
  small.chunk_bytes = 4096;
  knmf::test::expect_same_csr(read_csr_in_blocks<double>(H5adReader::open(path(), small), 7), all);
}

TEST_P(RealFile, CsrAsDenseAgrees) {
  const auto r = H5adReader::open(path());
  const std::int64_t n = r.info().n_obs, gcols = r.info().n_vars;
  CsrBlock<double> b;
  std::vector<double> dense(static_cast<std::size_t>(7 * gcols));
  std::vector<double> col_sums(static_cast<std::size_t>(gcols), 0.0);
  std::int64_t mismatches = 0;
  for (std::int64_t r0 = 0; r0 < n; r0 += 7) {
    const std::int64_t r1 = std::min(n, r0 + 7);
    r.read_dense_rows(r0, r1, dense.data());
    r.read_csr_rows(r0, r1, b);
    const auto scattered = to_dense(b);
    for (std::size_t k = 0; k < scattered.size(); ++k) mismatches += scattered[k] != dense[k];
    for (std::int64_t i = 0; i < r1 - r0; ++i)
      for (std::int64_t c = 0; c < gcols; ++c) col_sums[static_cast<std::size_t>(c)] += dense[static_cast<std::size_t>(i * gcols + c)];
  }
  EXPECT_EQ(mismatches, 0);
  for (const auto& [col, s] : g()["col_sums"].items())
    EXPECT_LE(knmf::test::rel_diff(col_sums[std::stoul(col)], s.get<double>(), 1.0), 1e-12) << "column " << col;
}

INSTANTIATE_TEST_SUITE_P(Shared, RealFile,
                         ::testing::Values("pbmc1k-v3-chr21", "mouse-brain-e18-10k", "pbmcA.norm_counts"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

}  // namespace

// ---- unsupported dtypes (issue 15, defect 9) -------------------------------------------------

namespace {

/// numpy's float16 as h5py stores it: an IEEE half (sign 15, exponent 10..14, mantissa 0..9).
hid_t float16_type() {
  const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, 10, 5, 0, 10);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, 15);
  return t;
}

/// A copy of fixture `from` in `dir` whose dataset `name` is replaced by a float16 one of
/// the same shape (all 1.0).
std::string with_float16(const knmf::test::TempDir& dir, const std::string& from, const char* name) {
  const auto path = (dir / ("f16_" + from)).string();
  std::filesystem::copy_file(h5ad_fixture(from), path);
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  EXPECT_GE(f, 0);
  const hid_t old = H5Dopen2(f, name, H5P_DEFAULT);
  const hid_t old_space = H5Dget_space(old);
  hsize_t dims[2] = {0, 0};
  const int rank = H5Sget_simple_extent_dims(old_space, dims, nullptr);
  const auto n = H5Sget_simple_extent_npoints(old_space);
  H5Sclose(old_space);
  H5Dclose(old);
  const hid_t space = H5Screate_simple(rank, dims, nullptr);  // fixed size: contiguous
  H5Ldelete(f, name, H5P_DEFAULT);
  const hid_t t = float16_type();
  const hid_t d = H5Dcreate2(f, name, t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const std::vector<std::uint16_t> ones(static_cast<std::size_t>(n), 0x3C00);
  EXPECT_GE(H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, ones.data()), 0);
  H5Dclose(d);
  H5Tclose(t);
  H5Sclose(space);
  H5Fclose(f);
  return path;
}

}  // namespace

TEST(H5adReader, Float16IsNamedAsNotSupported) {
  knmf::test::TempDir dir("knmf-h5ad-f16");
  for (const auto& [fixture, dataset] : {std::pair<std::string, const char*>{"dense_f32.h5ad", "/X"},
                                         {"csr_f32.h5ad", "/X/data"}}) {
    const auto path = with_float16(dir, fixture, dataset);
    try {
      H5adReader::open(path);
      ADD_FAILURE() << path << ": float16 X accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                path + ": " + dataset +
                    " has dtype float16, which knmf does not support (expected integers, "
                    "float32 or float64)");
    }
  }
}

// An attribute's declared extent (X's `shape` here, 2^60-odd values in an attribute that
// stores 16 bytes) sized the reader's vector before HDF5 read it: std::length_error escaped
// open() (found by tests/fuzz/fuzz_h5ad; the input is in its seed corpus).
TEST(H5adReader, AttributeDeclaringMoreValuesThanItStoresIsAnInputError) {
  const auto path = knmf::test::data_dir().parent_path() / "fuzz" / "corpus" / "h5ad" /
                    "regress-int-attr-declared-size.h5";
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  try {
    (void)H5adReader::open(path);
    FAIL() << "opened a file whose X shape attribute is damaged";
  } catch (const knmf::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("regress-int-attr-declared-size.h5"), std::string::npos) << m;
    EXPECT_NE(m.find("attribute"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

// A variable-length string's stored length is trusted by HDF5 1.10, which allocates and clears
// what it states before checking it against the heap object it points to (found by
// tests/fuzz/fuzz_h5ad: tests/fuzz/hdf5-bugs/oom-vlen-names-length.h5, 1.8 GB for one name, the
// fuzzer's 2 GB RSS limit passed). The file here: a fixture whose gene names are rewritten as
// a dataset of variable-length strings, contiguous (h5py's layout) or chunked, the first
// name's stored length then set to 0x70000000 (1.9 GB) in the raw data (16 bytes an element,
// the length first). Returns the file.
std::string fixture_with_huge_name_length(const knmf::test::TempDir& dir, bool chunked) {
  const auto path = (dir / (chunked ? "huge_name_chunked.h5ad" : "huge_name.h5ad")).string();
  std::filesystem::copy_file(h5ad_fixture("csr_f32.h5ad"), path);
  const auto genes = H5adReader::open(path).var_names();
  EXPECT_FALSE(genes.empty());
  haddr_t at = HADDR_UNDEF;
  {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    EXPECT_GE(H5Ldelete(f, "/var/_index", H5P_DEFAULT), 0);
    const hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    const hsize_t n = genes.size();
    const hid_t sp = H5Screate_simple(1, &n, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunked) H5Pset_chunk(dcpl, 1, &n);
    const hid_t d = H5Dcreate2(f, "/var/_index", t, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    std::vector<const char*> ptrs;
    for (const auto& g : genes) ptrs.push_back(g.c_str());
    EXPECT_GE(H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), 0);
    if (chunked) {
      const hsize_t origin = 0;
      unsigned mask = 0;
      hsize_t bytes = 0;
      H5Dflush(d);
      EXPECT_GE(H5Dget_chunk_info_by_coord(d, &origin, &mask, &at, &bytes), 0);
    } else {
      at = H5Dget_offset(d);
    }
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
  }
  EXPECT_EQ(H5adReader::open(path).var_names(), genes) << "the rewritten names read back";
  EXPECT_NE(at, HADDR_UNDEF);
  std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
  io.seekp(static_cast<std::streamoff>(at));
  const unsigned char len[4] = {0x00, 0x00, 0x00, 0x70};  // little-endian 0x70000000
  io.write(reinterpret_cast<const char*>(len), 4);
  EXPECT_TRUE(io.good());
  return path;
}

std::string var_names_error(const std::string& path) {
  try {
    (void)H5adReader::open(path).var_names();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// Contiguous: the stored lengths are checked before HDF5 reads the names, so the process grows
// by far less than the stated length.
TEST(H5adReader, NameWhoseStoredLengthIsHugeIsAnInputError) {
  knmf::test::TempDir dir("knmf-h5ad-vlen-length");
  const auto path = fixture_with_huge_name_length(dir, false);
  struct rusage before {}, after {};
  getrusage(RUSAGE_SELF, &before);
  const std::string m = var_names_error(path);
  getrusage(RUSAGE_SELF, &after);
  EXPECT_NE(m.find(path + ": /var/_index[0] states a length of 1879048192 bytes (more than 1048576)"),
            std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 256L * 1024) << "KB of peak RSS added";
}

// Chunked (chunks may be filtered: not parsed by knmf): HDF5 allocates the stated length, and
// the reader's allocator refuses the string, so the read ends in an InputError all the same.
TEST(H5adReader, NameWhoseStoredLengthIsHugeIsAnInputErrorInAChunkedDataset) {
  knmf::test::TempDir dir("knmf-h5ad-vlen-length");
  const auto path = fixture_with_huge_name_length(dir, true);
  const std::string m = var_names_error(path);
  EXPECT_NE(m.find(path + ": /var/_index[0:"), std::string::npos) << m;
  EXPECT_NE(m.find("holds a name of 1879048193 bytes (more than 1048576)"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

// A names dataset's declared length costs the file nothing (a chunked dataset with no chunk
// written): it must agree with X before anything is sized by it. It was reserved first, and a
// length of 2^62 ended in std::length_error instead of an InputError (found by
// tests/fuzz/fuzz_h5ad; its input: tests/fuzz/corpus/h5ad/regress-names-declared-length.h5ad).
TEST(H5adReader, HugeDeclaredNamesLengthIsAnInputError) {
  knmf::test::TempDir dir("knmf-h5ad-names-length");
  const auto path = (dir / "huge_var_index.h5ad").string();
  std::filesystem::copy_file(h5ad_fixture("csr_f32.h5ad"), path);
  {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    H5Ldelete(f, "/var/_index", H5P_DEFAULT);
    const hsize_t dims = hsize_t{1} << 62, maxdims = H5S_UNLIMITED, chunk = 16;
    const hid_t space = H5Screate_simple(1, &dims, &maxdims);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    const hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    const hid_t d = H5Dcreate2(f, "/var/_index", t, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    H5Dclose(d);
    H5Tclose(t);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
  }
  const auto r = H5adReader::open(path);
  try {
    r.var_names();
    ADD_FAILURE() << "a /var/_index of 2^62 names was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": /var/_index has 4611686018427387904 names but X has " +
                                         std::to_string(r.info().n_vars) + " columns");
  }
}

// open_image is open() over bytes in memory: the same checks, the same matrix.
TEST(H5adReader, FileImageReadsAsTheFile) {
  for (const char* name : {"csr_f32.h5ad", "csc_f32.h5ad", "dense_f64.h5ad", "legacy_compound.h5ad"}) {
    const auto path = h5ad_fixture(name);
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto a = H5adReader::open(path);
    const auto b = H5adReader::open_image(bytes.data(), bytes.size(), "image:" + std::string(name));
    EXPECT_EQ(b.path(), std::filesystem::path("image:" + std::string(name)));
    EXPECT_EQ(a.info().n_obs, b.info().n_obs);
    EXPECT_EQ(a.info().n_vars, b.info().n_vars);
    EXPECT_EQ(a.info().nnz, b.info().nnz);
    EXPECT_EQ(a.var_names(), b.var_names());
    EXPECT_EQ(a.obs_names(), b.obs_names());
    std::vector<double> da(std::size_t(a.info().n_obs * a.info().n_vars)), db(da.size());
    a.read_dense_rows(0, a.info().n_obs, da.data());
    b.read_dense_rows(0, b.info().n_obs, db.data());
    EXPECT_EQ(da, db) << name;
  }
  const std::string junk = "not an HDF5 file image";
  EXPECT_THROW(H5adReader::open_image(junk.data(), junk.size(), "junk"), InputError);
  EXPECT_THROW(H5adReader::open_image(junk.data(), 0, "empty"), InputError);
}
