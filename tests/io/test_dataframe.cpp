// cNMF .df.npz DataFrames: the reference run's files against golden values
// (tests/scripts/make_golden_io.py), round trips, pandas' view of what we write, and the
// tab-separated text copies against pandas' to_csv.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "io_test_util.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/io/npy.hpp"
#include "knmf/io/zip.hpp"

namespace {

using knmf::io::DataFrame;
using knmf::io::Label;

nlohmann::json label_json(const Label& l) {
  if (const auto* i = std::get_if<std::int64_t>(&l)) return *i;
  return std::get<std::string>(l);
}

Label json_label(const nlohmann::json& j) {
  if (j.is_number_integer()) return j.get<std::int64_t>();
  return j.get<std::string>();
}

std::uint32_t labels_crc(const std::vector<Label>& labels) {
  std::string joined;
  for (std::size_t k = 0; k < labels.size(); ++k) {
    if (k) joined += '\n';
    joined += knmf::io::label_to_string(labels[k]);
  }
  return knmf::test::crc32_of(joined);
}

/// The values in their stored dtype, C order, as numpy's tobytes() gives them.
std::string data_bytes(const DataFrame& df) {
  std::string out;
  for (double x : df.data) {
    if (df.data_descr == "<f4") {
      const float f = static_cast<float>(x);
      char b[4];
      std::memcpy(b, &f, 4);
      out.append(b, 4);
    } else {
      char b[8];
      std::memcpy(b, &x, 8);
      out.append(b, 8);
    }
  }
  return out;
}

TEST(DataFrame, ReferenceRunFilesMatchPandas) {
  knmf::test::TempDir dir("knmf-df");
  const auto golden = knmf::test::load_json("io_golden.json");
  ASSERT_GE(golden["reference"].size(), 13u);
  for (const auto& g : golden["reference"]) {
    const std::string path = (knmf::test::real_dir() / g["file"].get<std::string>()).string();
    SCOPED_TRACE(path);
    const DataFrame df = knmf::io::read_df_npz(path);
    EXPECT_EQ(df.rows, g["rows"].get<std::int64_t>());
    EXPECT_EQ(df.cols, g["cols"].get<std::int64_t>());
    EXPECT_EQ(df.data_descr, g["descr"].get<std::string>());
    EXPECT_EQ(labels_crc(df.index), g["index_crc32"].get<std::uint32_t>());
    EXPECT_EQ(labels_crc(df.columns), g["columns_crc32"].get<std::uint32_t>());
    for (std::size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(label_json(df.index[k]), g["index_head"][k]);
      EXPECT_EQ(label_json(df.index[df.index.size() - 3 + k]), g["index_tail"][k]);
      EXPECT_EQ(label_json(df.columns[std::min<std::size_t>(k, df.columns.size() - 1)]),
                g["columns_head"][std::min<std::size_t>(k, g["columns_head"].size() - 1)]);
    }
    if (df.is_object()) {
      for (const auto& v : g["cells"]) {
        const auto& cell = df.cell(v[0], v[1]);
        const auto& want = v[2];
        if (want.is_boolean()) {
          EXPECT_EQ(std::get<bool>(cell), want.get<bool>());
        } else {
          EXPECT_EQ(std::get<std::int64_t>(cell), want.get<std::int64_t>());
        }
      }
      continue;
    }
    EXPECT_EQ(knmf::test::crc32_of(data_bytes(df)), g["data_crc32"].get<std::uint32_t>());
    for (const auto& v : g["values"])
      EXPECT_EQ(df.at(v[0], v[1]), knmf::test::from_hex(v[2])) << "at " << v[0] << ", " << v[1];
    // The .txt copy cNMF would write for this frame: byte-identical to pandas' to_csv.
    const auto txt = (dir / "frame.txt").string();
    knmf::io::write_df_txt(txt, df);
    const std::string text = knmf::test::slurp(txt);
    EXPECT_EQ(text.size(), g["to_csv_bytes"].get<std::size_t>());
    EXPECT_EQ(knmf::test::crc32_of(text), g["to_csv_crc32"].get<std::uint32_t>());
  }
}

TEST(DataFrame, MergedSpectraRowsAreReplicateTopics) {
  const DataFrame df = knmf::io::read_df_npz(
      (knmf::test::pbmc_reference_dir() / "pbmcA/cnmf_tmp/pbmcA.spectra.k_7.merged.df.npz")
          .string());
  ASSERT_EQ(df.rows, 140);
  ASSERT_EQ(df.cols, 2000);
  for (int r = 0; r < 20; ++r)
    for (int t = 1; t <= 7; ++t)
      EXPECT_EQ(std::get<std::string>(df.index[r * 7 + t - 1]),
                "iter" + std::to_string(r) + "_topic" + std::to_string(t));
  for (double x : df.data) ASSERT_GE(x, 0.0);  // NMF spectra are non-negative
}

TEST(DataFrame, FloatReprMatchesNumpy) {
  const auto golden = knmf::test::load_json("io_golden.json");
  ASSERT_GE(golden["float_repr"]["float64"].size(), 300u);
  for (const auto& c : golden["float_repr"]["float64"])
    EXPECT_EQ(knmf::io::format_float_repr(knmf::test::from_hex(c[0])), c[1].get<std::string>()) << c[0];
  for (const auto& c : golden["float_repr"]["float32"])
    EXPECT_EQ(knmf::io::format_float32_repr(static_cast<float>(knmf::test::from_hex(c[0]))),
              c[1].get<std::string>())
        << c[0];
  EXPECT_EQ(knmf::io::format_float_repr(std::nan("")), "nan");
  EXPECT_EQ(knmf::io::format_float_repr(-HUGE_VAL), "-inf");
}

DataFrame frame_from_json(const nlohmann::json& j) {
  DataFrame df;
  df.data_descr = j["descr"];
  for (const auto& l : j["index"]) df.index.push_back(json_label(l));
  for (const auto& l : j["columns"]) df.columns.push_back(json_label(l));
  df.rows = static_cast<std::int64_t>(df.index.size());
  df.cols = static_cast<std::int64_t>(df.columns.size());
  for (const auto& row : j["values"])
    for (const auto& v : row) df.data.push_back(knmf::test::from_hex(v));
  return df;
}

TEST(DataFrame, TextCopyMatchesPandasToCsv) {
  knmf::test::TempDir dir("knmf-df");
  const auto golden = knmf::test::load_json("io_golden.json");
  ASSERT_EQ(golden["to_csv"].size(), 4u);
  for (const auto& c : golden["to_csv"]) {
    SCOPED_TRACE(c["descr"].get<std::string>());
    const auto path = (dir / "t.txt").string();
    knmf::io::write_df_txt(path, frame_from_json(c));
    EXPECT_EQ(knmf::test::slurp(path), c["text"].get<std::string>());
  }
}

DataFrame sample_frame() {
  DataFrame df;
  df.rows = 3;
  df.cols = 4;
  df.data = {0.1, 1e-300, -2.5, 1e16, 0.0, -0.0, 3.0, std::nan(""), 1.0 / 3.0, 7.0, 1e-5, 42.0};
  df.index = {Label{"iter0_topic1"}, Label{"iter0_topic2"}, Label{"c\xc3\xa9ll"}};
  df.columns = {Label{"TTLL10"}, Label{"AL627309.1"}, Label{"MT-CO1"}, Label{""}};
  return df;
}

void expect_same(const DataFrame& a, const DataFrame& b) {
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.columns, b.columns);
  ASSERT_EQ(a.data.size(), b.data.size());
  for (std::size_t k = 0; k < a.data.size(); ++k) {
    if (std::isnan(a.data[k])) {
      EXPECT_TRUE(std::isnan(b.data[k]));
    } else {
      EXPECT_EQ(a.data[k], b.data[k]);
      EXPECT_EQ(std::signbit(a.data[k]), std::signbit(b.data[k]));
    }
  }
}

TEST(DataFrame, WriteReadRoundTrip) {
  knmf::test::TempDir dir("knmf-df");
  const auto path = (dir / "x.df.npz").string();
  const DataFrame df = sample_frame();
  knmf::io::write_df_npz(path, df);
  const DataFrame back = knmf::io::read_df_npz(path);
  EXPECT_EQ(back.data_descr, "<f8");
  expect_same(df, back);

  DataFrame ints;
  ints.rows = 2;
  ints.cols = 3;
  ints.data_descr = "<i8";
  ints.data = {5, 0, 59886188, 8, 19, -1};
  ints.index = {Label{std::int64_t{0}}, Label{std::int64_t{1}}};
  ints.columns = {Label{"n_components"}, Label{"iter"}, Label{"nmf_seed"}};
  knmf::io::write_df_npz(path, ints);
  const DataFrame iback = knmf::io::read_df_npz(path);
  EXPECT_EQ(iback.data_descr, "<i8");
  expect_same(ints, iback);
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename(), "x.df.npz") << "left behind: " << e.path();
}

// Float32 frames (cNMF's usages and gene_spectra_tpm) are stored as '<f4', as numpy saves
// them: the values rounded to float32, 4 bytes each; read back as a float32 frame; the .txt
// copy prints the same float32 numbers.
TEST(DataFrame, Float32FramesAreStoredAsF4) {
  knmf::test::TempDir dir("knmf-df");
  const auto path = (dir / "f4.df.npz").string();
  DataFrame df = sample_frame();
  df.data[1] = 1e-30;  // 1e-300 underflows float32; keep a representable tiny value
  df.data[3] = 1e16;
  df.data_descr = "<f4";
  knmf::io::write_df_npz(path, df);
  knmf::io::ZipReader zip(path);
  const knmf::io::NpyArray raw = knmf::io::parse_npy(zip.read("data.npy"), "data.npy");
  EXPECT_EQ(raw.descr, "<f4");
  EXPECT_EQ(raw.shape, (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(zip.read("data.npy").size(), 128u + 4u * 12u);  // 128-byte header, 4 bytes a value
  const DataFrame back = knmf::io::read_df_npz(path);
  EXPECT_EQ(back.data_descr, "<f4");
  EXPECT_TRUE(back.is_float32());
  DataFrame want = df;
  for (double& x : want.data) x = static_cast<double>(static_cast<float>(x));
  EXPECT_NE(want.data[8], df.data[8]) << "1/3 must have been rounded";
  expect_same(want, back);
  // re-writing what was read keeps '<f4' and the bytes
  const auto again = (dir / "again.df.npz").string();
  knmf::io::write_df_npz(again, back);
  EXPECT_EQ(knmf::io::ZipReader(again).read("data.npy"), zip.read("data.npy"));
  // a big-endian float32 frame read from numpy is written little-endian
  DataFrame be = df;
  be.data_descr = ">f4";
  knmf::io::write_df_npz(again, be);
  EXPECT_EQ(knmf::io::ZipReader(again).read("data.npy"), zip.read("data.npy"));
  // the .txt copy prints the float32 values
  const auto txt = (dir / "f4.txt").string();
  knmf::io::write_df_txt(txt, df);
  const std::string text = knmf::test::slurp(txt);
  EXPECT_NE(text.find("\t0.33333334\t"), std::string::npos) << text;
  ASSERT_TRUE(knmf::test::python_with_pandas());
  const auto json_out = (dir / "seen.json").string();
  const std::string script = R"(
import json, sys
import numpy as np, pandas as pd
with np.load(sys.argv[1], allow_pickle=True) as f:
    a = pd.DataFrame(**f)
t = pd.read_csv(sys.argv[2], sep="\t", index_col=0)
assert np.array_equal(t.values.astype(np.float32), a.values, equal_nan=True), (t.values, a.values)
json.dump({"dtype": str(a.values.dtype), "values": [float(v).hex() for v in a.values.ravel()]},
          open(sys.argv[3], "w"))
)";
  const auto py = knmf::test::run_python(dir.path(), script, path + " " + txt + " " + json_out);
  ASSERT_EQ(py.status, 0) << py.out;
  const auto seen = nlohmann::json::parse(knmf::test::slurp(json_out));
  EXPECT_EQ(seen["dtype"], "float32");
  for (std::size_t k = 0; k < want.data.size(); ++k) {
    const double v = knmf::test::from_hex(seen["values"][k]);
    if (std::isnan(want.data[k])) {
      EXPECT_TRUE(std::isnan(v));
    } else {
      EXPECT_EQ(v, want.data[k]) << k;
    }
  }
}

TEST(DataFrame, RewritingAReferenceFileKeepsItsContent) {
  knmf::test::TempDir dir("knmf-df");
  const DataFrame ref = knmf::io::read_df_npz(
      (knmf::test::pbmc_reference_dir() / "pbmcA/cnmf_tmp/pbmcA.spectra.k_7.dt_0_5.consensus.df.npz")
          .string());
  const auto path = (dir / "copy.df.npz").string();
  knmf::io::write_df_npz(path, ref);
  expect_same(ref, knmf::io::read_df_npz(path));
}

TEST(DataFrame, WriterErrorsNameThePath) {
  knmf::test::TempDir dir("knmf-df");
  const std::string missing = (dir / "no/such/dir/x.df.npz").string();
  KNMF_EXPECT_INPUT_ERROR(knmf::io::write_df_npz(missing, sample_frame()), missing, "does not exist");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::write_df_txt(missing, sample_frame()), missing, "does not exist");

  // A directory where the file should go: the rename fails, no temporary file is left.
  std::filesystem::create_directory(dir / "target.df.npz");
  const std::string target = (dir / "target.df.npz").string();
  KNMF_EXPECT_INPUT_ERROR(knmf::io::write_df_npz(target, sample_frame()), target, "rename");
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 0u);

  // A frame that cannot be stored leaves an existing file untouched.
  const auto path = (dir / "keep.df.npz").string();
  knmf::io::write_df_npz(path, sample_frame());
  const std::string before = knmf::test::slurp(path);
  DataFrame mixed = sample_frame();
  mixed.index[1] = Label{std::int64_t{7}};
  KNMF_EXPECT_INPUT_ERROR(knmf::io::write_df_npz(path, mixed), path, "mix ints and strings");
  EXPECT_EQ(knmf::test::slurp(path), before);

  DataFrame short_data = sample_frame();
  short_data.data.pop_back();
  KNMF_EXPECT_INPUT_ERROR(knmf::io::write_df_npz(path, short_data), path, "holds 11 values");
  DataFrame short_index = sample_frame();
  short_index.index.pop_back();
  KNMF_EXPECT_INPUT_ERROR(knmf::io::write_df_npz(path, short_index), path, "2 index labels");
  DataFrame fractional = sample_frame();
  fractional.data_descr = "<i8";
  KNMF_EXPECT_INPUT_ERROR(knmf::io::write_df_npz(path, fractional), path, "not an int64");
  DataFrame object = sample_frame();
  object.data_descr = "|O";
  object.data.clear();
  object.object_data.assign(12, knmf::io::Cell{std::int64_t{1}});
  KNMF_EXPECT_INPUT_ERROR(knmf::io::write_df_npz(path, object), path, "object-valued");

  // issue 27: labels that are not UTF-8 (a Latin-1 gene name), named with their position and
  // bytes, in both writers; the existing file untouched, no temporary left
  DataFrame latin1 = sample_frame();
  latin1.columns[1] = Label{std::string("Caf\xe9")};
  KNMF_EXPECT_INPUT_ERROR(knmf::io::write_df_npz(path, latin1), path,
                          "column label 1 is not valid UTF-8 at byte 3 (bytes 43 61 66 e9)");
  const auto txt = (dir / "keep.txt").string();
  latin1.columns[1] = Label{std::string("ok")};
  latin1.index[0] = Label{std::string("\xff")};
  KNMF_EXPECT_INPUT_ERROR(knmf::io::write_df_txt(txt, latin1), txt, "index label 0 is not valid UTF-8");
  EXPECT_EQ(knmf::test::slurp(path), before);
  EXPECT_FALSE(std::filesystem::exists(txt));
}

TEST(DataFrame, ReaderErrorsNameTheFile) {
  const std::string malicious = knmf::test::io_fixture("malicious_index.df.npz");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_df_npz(malicious), malicious + ":index.npy",
                          "forbidden global 'os.system'");
  knmf::test::TempDir dir("knmf-df");
  const std::string no_columns = (dir / "nc.df.npz").string();
  std::string out;
  {
    knmf::io::ZipWriter w([&](const char* p, std::size_t n) { out.append(p, n); });
    w.add("data.npy", knmf::io::format_npy(knmf::io::NpyArray::from_doubles({1, 1}, {1.0})));
    w.add("index.npy", knmf::io::format_npy(knmf::io::NpyArray::from_int64({1}, {0})));
    w.finish();
  }
  knmf::test::write_bytes(no_columns, out);
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_df_npz(no_columns), no_columns, "no 'columns' array");
}

TEST(DataFrame, PandasLoadsWhatWeWriteAsCnmfDoes) {
  ASSERT_TRUE(knmf::test::python_with_pandas());
  knmf::test::TempDir dir("knmf-df");
  const auto path = (dir / "x.df.npz").string();
  const auto json_out = (dir / "seen.json").string();
  const DataFrame df = sample_frame();
  knmf::io::write_df_npz(path, df);
  // Exactly cNMF's load_df_from_npz, then again without pickles: both must agree.
  const std::string script = R"(
import json, sys
import numpy as np, pandas as pd
with np.load(sys.argv[1], allow_pickle=True) as f:
    a = pd.DataFrame(**f)
with np.load(sys.argv[1], allow_pickle=False) as f:
    b = pd.DataFrame(**f)
assert a.equals(b)
assert list(a.index) == list(b.index) and list(a.columns) == list(b.columns)
lab = lambda v: int(v) if isinstance(v, (int, np.integer)) else str(v)
json.dump({"shape": list(a.shape), "dtype": str(a.values.dtype),
           "index": [lab(v) for v in a.index], "columns": [lab(v) for v in a.columns],
           "values": [float(v).hex() for v in a.values.ravel()]}, open(sys.argv[2], "w"))
)";
  const auto py = knmf::test::run_python(dir.path(), script, path + " " + json_out);
  ASSERT_EQ(py.status, 0) << py.out;
  const auto seen = nlohmann::json::parse(knmf::test::slurp(json_out));
  EXPECT_EQ(seen["shape"], nlohmann::json::array({3, 4}));
  EXPECT_EQ(seen["dtype"], "float64");
  for (std::size_t k = 0; k < 3; ++k) EXPECT_EQ(seen["index"][k], label_json(df.index[k]));
  for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(seen["columns"][k], label_json(df.columns[k]));
  for (std::size_t k = 0; k < df.data.size(); ++k) {
    const double v = knmf::test::from_hex(seen["values"][k]);
    if (std::isnan(df.data[k])) {
      EXPECT_TRUE(std::isnan(v));
    } else {
      EXPECT_EQ(v, df.data[k]);
    }
  }
}

}  // namespace
