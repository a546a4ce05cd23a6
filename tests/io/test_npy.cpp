// .npy reader and writer against files numpy 1.24 wrote (tests/scripts/make_io_fixtures.py).
#include <gtest/gtest.h>

#include <cmath>

#include "io_test_util.hpp"
#include "knmf/io/npy.hpp"

namespace {

using knmf::io::NpyArray;
using knmf::io::NpyKind;
using knmf::test::io_fixture;

TEST(Npy, ReadsEveryDtypeNumpyWrote) {
  const auto fixtures = knmf::test::load_json("io/fixtures.json");
  ASSERT_GE(fixtures["numeric"].size(), 14u);
  for (const auto& [name, want] : fixtures["numeric"].items()) {
    SCOPED_TRACE(name);
    const NpyArray a = knmf::io::read_npy(io_fixture(name));
    EXPECT_EQ(a.descr, want["descr"].get<std::string>());
    EXPECT_EQ(a.shape, want["shape"].get<std::vector<std::int64_t>>());
    EXPECT_EQ(a.fortran_order, want["fortran_order"].get<bool>());
    if (want.contains("doubles")) {
      EXPECT_EQ(a.kind, NpyKind::Float);
      ASSERT_EQ(a.doubles.size(), want["doubles"].size());
      for (std::size_t k = 0; k < a.doubles.size(); ++k)
        EXPECT_EQ(a.doubles[k], knmf::test::from_hex(want["doubles"][k])) << "element " << k;
    } else if (want.contains("ints")) {
      EXPECT_TRUE(a.kind == NpyKind::Int || a.kind == NpyKind::Bool);
      EXPECT_EQ(a.ints, want["ints"].get<std::vector<std::int64_t>>());
    } else {
      EXPECT_EQ(a.kind, NpyKind::Unicode);
      EXPECT_EQ(a.strings, want["strings"].get<std::vector<std::string>>());
    }
  }
}

TEST(Npy, FortranOrderBecomesRowMajor) {
  const NpyArray c = knmf::io::read_npy(io_fixture("f8_2d_c.npy"));
  const NpyArray f = knmf::io::read_npy(io_fixture("f8_2d_fortran.npy"));
  EXPECT_FALSE(c.fortran_order);
  EXPECT_TRUE(f.fortran_order);
  EXPECT_EQ(c.doubles, f.doubles);
  EXPECT_EQ(f.doubles[1], 1.0 / 7.0);  // element (0, 1)
  const NpyArray f3 = knmf::io::read_npy(io_fixture("f8_3d_fortran.npy"));
  for (int k = 0; k < 24; ++k) EXPECT_EQ(f3.doubles[k], double(k));
}

TEST(Npy, WriterMatchesNumpyByteForByte) {
  // numpy.save's exact layout: sorted keys, growth-axis padding, 64-byte aligned data.
  using V = std::vector<std::int64_t>;
  std::vector<double> f(12);
  for (int k = 0; k < 12; ++k) f[k] = k / 7.0;
  const std::pair<std::string, NpyArray> cases[] = {
      {"f8_2d_c.npy", NpyArray::from_doubles({3, 4}, f)},
      {"i8_1d.npy", NpyArray::from_int64({4}, V{0, -1, std::int64_t(1) << 62, std::numeric_limits<std::int64_t>::min()})},
      {"i4_2d.npy", NpyArray::from_int32({2, 2}, V{1, -2, 2147483647, -2147483648LL})},
      {"b1_1d.npy", NpyArray::from_bools({3}, {true, false, true})},
      {"U_1d.npy", NpyArray::from_strings({4}, {"TTLL10", "", "h\xc3\xa9llo", "\xf0\x9f\x98\x80x"})},
      {"f8_0d.npy", NpyArray::from_doubles({}, {3.25})},
      {"f8_empty.npy", NpyArray::from_doubles({0, 3}, {})},
  };
  for (const auto& [name, array] : cases) {
    SCOPED_TRACE(name);
    const std::string bytes = knmf::io::format_npy(array);
    EXPECT_EQ(bytes, knmf::test::slurp(io_fixture(name)));
    EXPECT_EQ((bytes.find('\n') + 1) % 64, 0u);  // data start aligned
  }
}

TEST(Npy, RoundTripThroughAFile) {
  knmf::test::TempDir dir("knmf-npy");
  const auto path = (dir / "a.npy").string();
  const NpyArray s = NpyArray::from_strings({2, 2}, {"a", "bcd", "", "\xce\xbb"});
  knmf::io::write_npy(path, s);
  const NpyArray back = knmf::io::read_npy(path);
  EXPECT_EQ(back.descr, "<U3");
  EXPECT_EQ(back.shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(back.strings, s.strings);

  const NpyArray d = NpyArray::from_doubles({2}, {std::nan(""), -0.0});
  knmf::io::write_npy(path, d);
  const NpyArray dback = knmf::io::read_npy(path);
  EXPECT_TRUE(std::isnan(dback.doubles[0]));
  EXPECT_TRUE(std::signbit(dback.doubles[1]));
}

TEST(Npy, LongHeaderSwitchesToVersion2) {
  std::vector<std::int64_t> shape(22000, 1);  // a header longer than 65535 bytes
  const std::string bytes = knmf::io::format_npy(NpyArray::from_doubles(shape, {2.5}));
  EXPECT_EQ(bytes[6], 2);
  const NpyArray back = knmf::io::parse_npy(bytes, "long header");
  EXPECT_EQ(back.shape.size(), 22000u);
  EXPECT_EQ(back.doubles, std::vector<double>{2.5});
  EXPECT_EQ(knmf::io::read_npy(io_fixture("i8_v2.npy")).ints, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
}

TEST(Npy, RejectsMalformedFiles) {
  const std::string good = knmf::test::slurp(io_fixture("f8_2d_c.npy"));
  KNMF_EXPECT_INPUT_ERROR(knmf::io::parse_npy("not numpy", "x.npy"), "x.npy", "bad magic");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::parse_npy(good.substr(0, good.size() - 8), "x.npy"), "x.npy",
                          "88 bytes of data, expected 96");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::parse_npy(good.substr(0, 50), "x.npy"), "truncated .npy header");
  std::string bad_descr = good;
  bad_descr.replace(bad_descr.find("<f8"), 3, "<c8");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::parse_npy(bad_descr, "x.npy"), "unsupported dtype '<c8'");
  std::string bad_shape = good;
  bad_shape.replace(bad_shape.find("(3, 4)"), 6, "(3, x)");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::parse_npy(bad_shape, "x.npy"), "bad .npy header", "bad shape");
  std::string structured = good;
  structured.replace(structured.find("'<f8'"), 5, "[('a',");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::parse_npy(structured, "x.npy"), "structured dtypes");
  std::string version = good;
  version[6] = 9;
  KNMF_EXPECT_INPUT_ERROR(knmf::io::parse_npy(version, "x.npy"), "format version 9.0");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_npy("/nonexistent/dir/a.npy"), "/nonexistent/dir/a.npy",
                          "cannot open");
}

TEST(Npy, WriterRejectsWhatItCannotStore) {
  NpyArray wrong = NpyArray::from_doubles({2, 2}, {1.0, 2.0, 3.0});
  KNMF_EXPECT_INPUT_ERROR(knmf::io::format_npy(wrong, "w.npy"), "w.npy", "needs 4 values, got 3");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::format_npy(NpyArray::from_int32({1}, {std::int64_t(1) << 40})),
                          "does not fit in int32");
  NpyArray obj;
  obj.kind = NpyKind::Object;
  obj.shape = {0};
  KNMF_EXPECT_INPUT_ERROR(knmf::io::format_npy(obj), "no pickles");
  KNMF_EXPECT_INPUT_ERROR(NpyArray::from_strings({1}, {"\xff"}), "invalid UTF-8");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::write_npy("/nonexistent/dir/a.npy", NpyArray::from_doubles({1}, {1.0})),
                          "/nonexistent/dir/a.npy");
}

TEST(Npy, Utf8Helpers) {
  const std::string s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";  // a é € 😀
  const auto cps = knmf::io::utf8_to_code_points(s, "t");
  EXPECT_EQ(cps, (std::vector<char32_t>{U'a', 0xE9, 0x20AC, 0x1F600}));
  std::string le;
  for (char32_t c : cps)
    for (int b = 0; b < 4; ++b) le.push_back(static_cast<char>((c >> (8 * b)) & 0xff));
  le.append(8, '\0');  // trailing NULs are padding
  EXPECT_EQ(knmf::io::utf32le_to_utf8(le, "t"), s);
  KNMF_EXPECT_INPUT_ERROR(knmf::io::utf8_to_code_points("\xc3", "t"), "truncated UTF-8");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::utf8_to_code_points("\xc0\x80", "t"), "invalid UTF-8");  // overlong
  KNMF_EXPECT_INPUT_ERROR(knmf::io::utf8_to_code_points("\xed\xa0\x80", "t"), "invalid UTF-8");  // surrogate
  KNMF_EXPECT_INPUT_ERROR(knmf::io::utf32le_to_utf8(std::string("\x00\x00\x11\x00", 4), "t"), "invalid code point");
}

}  // namespace
