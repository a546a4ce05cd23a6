// H5adWriter: round trips through H5adReader, atomic output, and (when Debian's python3 with
// anndata is installed) a check that anndata.read_h5ad loads what we write.

#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>

#include "test_h5ad_support.hpp"

namespace {

using knmf::InputError;
using knmf::io::CsrBlock;
using knmf::io::H5adReader;
using knmf::io::H5adWriteOptions;
using knmf::io::H5adWriter;
using knmf::io::StorageFormat;
using knmf::io::ValueType;
using knmf::test::read_csr_in_blocks;
using knmf::test::read_dense_all;
using knmf::test::TempDir;
using knmf::test::to_dense;

/// A reproducible sparse matrix with empty rows and fractional float64 values.
CsrBlock<double> sample_matrix(std::int64_t n, std::int64_t g, double density, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> x(static_cast<std::size_t>(n * g), 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    if (i % 5 == 3) continue;  // every fifth row empty
    for (std::int64_t c = 0; c < g; ++c)
      if (u(rng) < density)
        x[static_cast<std::size_t>(i * g + c)] = std::ldexp(std::floor(u(rng) * 1e6), -7) + 1e-9 * static_cast<double>(c);
  }
  return knmf::test::dense_to_csr_block<CsrBlock<double>>(x, g);
}

/// Rows [r0, r1) of m as a block.
template <class T>
CsrBlock<T> slice(const CsrBlock<double>& m, std::int64_t r0, std::int64_t r1) {
  CsrBlock<T> b;
  b.row_begin = r0;
  b.row_end = r1;
  b.ncols = m.ncols;
  b.row_offsets.clear();
  const auto p0 = m.row_offsets[static_cast<std::size_t>(r0)];
  for (std::int64_t r = r0; r <= r1; ++r) b.row_offsets.push_back(m.row_offsets[static_cast<std::size_t>(r)] - p0);
  const auto p1 = m.row_offsets[static_cast<std::size_t>(r1)];
  b.cols.assign(m.cols.begin() + p0, m.cols.begin() + p1);
  for (auto q = p0; q < p1; ++q) b.values.push_back(static_cast<T>(m.values[static_cast<std::size_t>(q)]));
  return b;
}

std::vector<std::string> names(const std::string& prefix, std::int64_t n) {
  std::vector<std::string> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(prefix + std::to_string(i) + (i % 3 == 0 ? "-β" : ""));
  return v;
}

/// Write m in uneven row blocks (1, 3, 7, then the rest), as CSR blocks or dense rows.
void write_blocks(H5adWriter& w, const CsrBlock<double>& m, bool dense_input, bool as_float) {
  std::int64_t r0 = 0;
  for (std::int64_t size : {1, 3, 7, 1 << 30}) {
    const std::int64_t r1 = std::min(m.rows(), r0 + size);
    if (dense_input) {
      const auto d = to_dense(slice<double>(m, r0, r1));
      if (as_float) {
        std::vector<float> f(d.begin(), d.end());
        w.write_dense_rows(r0, r1, f.data());
      } else {
        w.write_dense_rows(r0, r1, d.data());
      }
    } else if (as_float) {
      w.write_csr_rows(slice<float>(m, r0, r1));
    } else {
      w.write_csr_rows(slice<double>(m, r0, r1));
    }
    r0 = r1;
    if (r0 == m.rows()) break;
  }
  EXPECT_EQ(w.rows_written(), m.rows());
}

struct Case {
  StorageFormat format;
  ValueType value_type;
  bool dense_input;
  int gzip;
};

class WriterRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(WriterRoundTrip, ReadsBackExactly) {
  const Case c = GetParam();
  TempDir dir("knmf-h5ad");
  const auto path = dir / "out.h5ad";
  const auto m = sample_matrix(37, 11, 0.3, 7);
  const auto obs = names("cell", m.rows()), var = names("gene", m.ncols);
  H5adWriteOptions o;
  o.format = c.format;
  o.value_type = c.value_type;
  o.gzip_level = c.gzip;
  o.chunk_elements = 5;  // many chunks
  {
    H5adWriter w(path, m.rows(), m.ncols, o);
    w.set_obs_names(obs);
    w.set_var_names(var);
    write_blocks(w, m, c.dense_input, c.value_type == ValueType::Float32);
    EXPECT_FALSE(std::filesystem::exists(path)) << "visible before close()";
    w.close();
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1) << "temporary file left";

  const auto r = H5adReader::open(path);
  EXPECT_EQ(r.info().format, c.format);
  EXPECT_EQ(r.info().value_type, c.value_type);
  EXPECT_EQ(r.info().n_obs, m.rows());
  EXPECT_EQ(r.info().n_vars, m.ncols);
  if (c.format == StorageFormat::Csr) {
    EXPECT_EQ(r.info().nnz, m.nnz());
    EXPECT_EQ(*r.info().index_type, ValueType::Int32);
    EXPECT_EQ(*r.info().indptr_type, ValueType::Int64);
  }
  EXPECT_EQ(r.obs_names(), obs);
  EXPECT_EQ(r.var_names(), var);
  if (c.value_type == ValueType::Float64) {
    knmf::test::expect_same_csr(read_csr_in_blocks<double>(r, 4), m);
    EXPECT_EQ(read_dense_all(r), to_dense(m));
  } else {
    knmf::test::expect_same_csr(read_csr_in_blocks<float>(r, 4), slice<float>(m, 0, m.rows()));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, WriterRoundTrip,
    ::testing::Values(Case{StorageFormat::Csr, ValueType::Float64, false, 4},
                      Case{StorageFormat::Csr, ValueType::Float32, false, 0},
                      Case{StorageFormat::Csr, ValueType::Float64, true, 1},
                      Case{StorageFormat::Dense, ValueType::Float64, true, 4},
                      Case{StorageFormat::Dense, ValueType::Float32, true, 0},
                      Case{StorageFormat::Dense, ValueType::Float64, false, 9}),
    [](const auto& info) {
      const Case& c = info.param;
      return std::string(knmf::io::to_string(c.format)) + "_" + knmf::io::to_string(c.value_type) +
             (c.dense_input ? "_from_dense" : "_from_csr") + "_gzip" + std::to_string(c.gzip);
    });

TEST(H5adWriter, DefaultNamesAndConvenienceFunction) {
  TempDir dir("knmf-h5ad");
  const auto m = sample_matrix(4, 3, 0.5, 1);
  knmf::io::write_h5ad(dir / "x.h5ad", m);
  const auto r = H5adReader::open(dir / "x.h5ad");
  EXPECT_EQ(r.obs_names(), (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(r.var_names(), (std::vector<std::string>{"0", "1", "2"}));
  knmf::test::expect_same_csr(read_csr_in_blocks<double>(r, 4), slice<float>(m, 0, 4));
}

// indptr_int32: scipy's indptr type below 2^31 entries (what cNMF's files and scikit-learn's
// sparse routines with int32 indices need); the values read back are the same.
TEST(H5adWriter, Int32Indptr) {
  TempDir dir("knmf-h5ad");
  const auto m = sample_matrix(40, 7, 0.4, 3);
  H5adWriteOptions o;
  o.indptr_int32 = true;
  knmf::io::write_h5ad(dir / "x.h5ad", m, {}, {}, o);
  knmf::io::write_h5ad(dir / "y.h5ad", m);
  const auto r = H5adReader::open(dir / "x.h5ad");
  ASSERT_TRUE(r.info().indptr_type.has_value());
  EXPECT_EQ(*r.info().indptr_type, ValueType::Int32);
  EXPECT_EQ(*H5adReader::open(dir / "y.h5ad").info().indptr_type, ValueType::Int64);
  knmf::test::expect_same_csr(read_csr_in_blocks<double>(r, 9), slice<float>(m, 0, 40));
}

TEST(H5adWriter, EmptyMatrices) {
  TempDir dir("knmf-h5ad");
  for (auto format : {StorageFormat::Csr, StorageFormat::Dense}) {
    H5adWriteOptions o;
    o.format = format;
    H5adWriter(dir / "rows0.h5ad", 0, 5, o).close();
    const auto a = H5adReader::open(dir / "rows0.h5ad");
    EXPECT_EQ(a.info().n_obs, 0);
    EXPECT_EQ(a.info().n_vars, 5);
    EXPECT_EQ(a.obs_names().size(), 0u);
    EXPECT_EQ(a.var_names().size(), 5u);
    H5adWriter w(dir / "cols0.h5ad", 2, 0, o);
    w.write_dense_rows(0, 2, static_cast<const float*>(nullptr));
    w.close();
    const auto b = H5adReader::open(dir / "cols0.h5ad");
    EXPECT_EQ(b.info().n_obs, 2);
    EXPECT_EQ(b.row_nnz(0, 2), (std::vector<std::int64_t>{0, 0}));
  }
}

TEST(H5adWriter, NoPartialOutput) {
  TempDir dir("knmf-h5ad");
  const auto path = dir / "x.h5ad";
  const auto m = sample_matrix(10, 4, 0.5, 3);
  {
    H5adWriter w(path, 10, 4);
    w.write_csr_rows(slice<double>(m, 0, 5));
    // out of order, wrong width, incomplete: each refused with a message naming the file
    try {
      w.write_csr_rows(slice<double>(m, 6, 8));
      FAIL() << "accepted rows out of order";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
    auto wide = slice<double>(m, 5, 6);
    wide.ncols = 5;
    EXPECT_THROW(w.write_csr_rows(wide), InputError);
    auto bad_col = slice<double>(m, 5, 6);
    if (!bad_col.cols.empty()) {
      bad_col.cols[0] = 4;
      EXPECT_THROW(w.write_csr_rows(bad_col), InputError);
    }
    EXPECT_THROW(w.set_obs_names({"a"}), InputError);
    EXPECT_THROW(w.close(), InputError);  // only 5 of 10 rows
    EXPECT_FALSE(std::filesystem::exists(path));
  }  // destroyed without a successful close: the temporary file goes too
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 0);
}

// Issue 27: names are stored as UTF-8 strings; a name that is not UTF-8 made a file anndata
// cannot read. The writer refuses it, naming the file, the position and the bytes, and leaves
// nothing behind; check_names_utf8 = false writes it (hostile fixtures of the reader's tests).
TEST(H5adWriter, NamesThatAreNotUtf8AreRefused) {
  TempDir dir("knmf-h5ad");
  const auto path = dir / "x.h5ad";
  const auto m = sample_matrix(3, 2, 1.0, 5);
  {
    H5adWriter w(path, 3, 2);
    try {
      w.set_obs_names({"c0", "c\xe9", "c2"});
      FAIL() << "accepted a Latin-1 cell name";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path.string() + ": cell name 1 (obs_names[1]) is not valid UTF-8 at byte 1 (bytes 63 e9)"),
                std::string::npos) << what;
    }
    EXPECT_THROW(w.set_var_names({"g\xed\xa0\x80", "g1"}), InputError);  // a UTF-16 surrogate
    w.set_var_names({"g\xc3\xa9", "\xf0\x9f\xa7\xac"});                    // é and a 4-byte character
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 0);
  H5adWriteOptions hostile;
  hostile.check_names_utf8 = false;
  knmf::io::write_h5ad(path, m, {"c0", "c\xe9", "c2"}, {}, hostile);
  EXPECT_THROW(H5adReader::open(path.string()).obs_names(), InputError);
}

TEST(H5adWriter, ReplacesAnExistingFileOnlyOnClose) {
  TempDir dir("knmf-h5ad");
  const auto path = dir / "x.h5ad";
  { std::ofstream(path) << "old"; }
  const auto m = sample_matrix(3, 2, 0.9, 5);
  H5adWriter w(path, 3, 2);
  w.write_csr_rows(slice<double>(m, 0, 3));
  EXPECT_EQ(std::filesystem::file_size(path), 3u);
  w.close();
  EXPECT_EQ(H5adReader::open(path).info().n_obs, 3);
}

TEST(H5adWriter, BadOptions) {
  TempDir dir("knmf-h5ad");
  H5adWriteOptions o;
  o.gzip_level = 10;
  EXPECT_THROW(H5adWriter(dir / "a.h5ad", 1, 1, o), InputError);
  o = {};
  o.format = StorageFormat::Csc;
  EXPECT_THROW(H5adWriter(dir / "a.h5ad", 1, 1, o), InputError);
  o = {};
  o.value_type = ValueType::Int32;
  EXPECT_THROW(H5adWriter(dir / "a.h5ad", 1, 1, o), InputError);
  EXPECT_THROW(H5adWriter(dir / "no-such-dir" / "a.h5ad", 1, 1), InputError);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 0);
}

/// A real matrix written as a dense file and read back as CSR: the dense-to-CSR path on real
/// data (zeros dropped) must give back the original CSR exactly.
TEST(H5adWriter, RealMatrixThroughDenseFile) {
  const auto src = H5adReader::open(knmf::test::real_dir() / "pbmc1k-v3-chr21/pbmc1k-v3-chr21.h5ad");
  const auto m = read_csr_in_blocks<float>(src, src.info().n_obs);
  TempDir dir("knmf-h5ad");
  H5adWriteOptions o;
  o.format = StorageFormat::Dense;
  o.chunk_elements = 4096;
  H5adWriter w(dir / "dense.h5ad", m.rows(), m.ncols, o);
  w.set_var_names(src.var_names());
  for (std::int64_t r0 = 0; r0 < m.rows(); r0 += 100) {
    CsrBlock<float> b;
    src.read_csr_rows(r0, std::min(m.rows(), r0 + 100), b);
    w.write_csr_rows(b);
  }
  w.close();
  knmf::io::H5adReadOptions small;
  small.chunk_bytes = 3000;  // 507 float32 columns: one row per HDF5 read
  const auto r = H5adReader::open(dir / "dense.h5ad", small);
  EXPECT_EQ(r.info().format, StorageFormat::Dense);
  EXPECT_EQ(r.var_names(), src.var_names());
  knmf::test::expect_same_csr(read_csr_in_blocks<float>(r, 7), m);
  knmf::test::expect_same_csr(read_csr_in_blocks<double>(r, r.info().n_obs), m);
  const auto counts = r.row_nnz(0, r.info().n_obs);
  EXPECT_EQ(counts, src.row_nnz(0, src.info().n_obs));
}

// ---- anndata ---------------------------------------------------------------------------------

const char* kPython = "/usr/bin/python3";

TEST(H5adWriter, AnndataReadsWhatWeWrite) {
  const std::string py = std::string("env -u PYTHONPATH -u PYTHONHOME ") + kPython;
  if (!std::filesystem::exists(kPython) || knmf::test::run_command(py + " -c 'import anndata'").status != 0) {
    // cmake/bootstrap.sh installs Debian's python3-anndata: a missing one fails
    FAIL() << kPython << " with anndata is missing (cmake/bootstrap.sh installs python3-anndata): "
                         "the anndata check cannot run";
  }
  TempDir dir("knmf-h5ad");
  const auto m = sample_matrix(23, 9, 0.4, 11);
  const auto obs = names("cell", m.rows()), var = names("gene", m.ncols);
  for (auto format : {StorageFormat::Csr, StorageFormat::Dense}) {
    const auto path = dir / (std::string(knmf::io::to_string(format)) + ".h5ad");
    H5adWriteOptions o;
    o.format = format;
    o.value_type = ValueType::Float64;
    o.chunk_elements = 7;
    H5adWriter w(path, m.rows(), m.ncols, o);
    w.set_obs_names(obs);
    w.set_var_names(var);
    write_blocks(w, m, false, false);
    w.close();
    const std::string script =
        "import sys, json, anndata, scipy.sparse as sp\n"
        "a = anndata.read_h5ad(sys.argv[1])\n"
        "X = a.X\n"
        "print(json.dumps({'shape': list(a.shape), 'var': list(a.var_names), 'obs': list(a.obs_names),\n"
        "  'sparse': bool(sp.issparse(X)), 'dtype': str(X.dtype), 'sum': float(X.astype('float64').sum()),\n"
        "  'nnz': int(X.nnz) if sp.issparse(X) else -1}))\n";
    const auto script_path = dir / "check.py";
    std::ofstream(script_path) << script;
    const auto r = knmf::test::run_command(py + " " + script_path.string() + " " + path.string());
    const std::string& out = r.out;
    ASSERT_EQ(r.status, 0) << out;
    const auto j = nlohmann::json::parse(out.substr(out.rfind('{')));
    EXPECT_EQ(j["shape"], (std::vector<std::int64_t>{m.rows(), m.ncols}));
    EXPECT_EQ(j["var"].get<std::vector<std::string>>(), var);
    EXPECT_EQ(j["obs"].get<std::vector<std::string>>(), obs);
    EXPECT_EQ(j["dtype"], "float64");
    EXPECT_EQ(j["sparse"].get<bool>(), format == StorageFormat::Csr);
    if (format == StorageFormat::Csr) {
      EXPECT_EQ(j["nnz"].get<std::int64_t>(), m.nnz());
    }
    const double sum = std::accumulate(m.values.begin(), m.values.end(), 0.0);
    EXPECT_LE(knmf::test::rel_diff(j["sum"].get<double>(), sum), 1e-12);
  }
}

}  // namespace
