// The restricted unpickler: decodes what numpy pickles for object arrays (fixtures from
// tests/scripts/make_io_fixtures.py) and rejects everything else without executing it.
#include <gtest/gtest.h>

#include <filesystem>

#include "io_test_util.hpp"
#include "knmf/io/npy.hpp"
#include "knmf/io/pickle.hpp"

namespace {

using knmf::io::Cell;
using knmf::test::io_fixture;

void expect_cell(const Cell& got, const nlohmann::json& want, std::size_t k) {
  SCOPED_TRACE("cell " + std::to_string(k) + " expected " + want.dump());
  if (want.is_null()) {
    EXPECT_TRUE(knmf::io::is_none(got));
  } else if (want.contains("int")) {
    ASSERT_TRUE(std::holds_alternative<std::int64_t>(got));
    EXPECT_EQ(std::get<std::int64_t>(got), want["int"].get<std::int64_t>());
  } else if (want.contains("float")) {
    ASSERT_TRUE(std::holds_alternative<double>(got));
    EXPECT_EQ(std::get<double>(got), knmf::test::from_hex(want["float"]));
  } else if (want.contains("bool")) {
    ASSERT_TRUE(std::holds_alternative<bool>(got));
    EXPECT_EQ(std::get<bool>(got), want["bool"].get<bool>());
  } else {
    ASSERT_TRUE(std::holds_alternative<std::string>(got));
    EXPECT_EQ(std::get<std::string>(got), want["str"].get<std::string>());
  }
}

TEST(Unpickler, DecodesNumpyObjectArrays) {
  const auto fixtures = knmf::test::load_json("io/fixtures.json");
  ASSERT_GE(fixtures["object"].size(), 5u);
  for (const auto& [name, want] : fixtures["object"].items()) {
    SCOPED_TRACE(name);
    const auto a = knmf::io::read_npy(io_fixture(name));
    EXPECT_EQ(a.kind, knmf::io::NpyKind::Object);
    EXPECT_EQ(a.descr, "|O");
    EXPECT_EQ(a.shape, want["shape"].get<std::vector<std::int64_t>>());
    ASSERT_EQ(a.cells.size(), want["cells"].size());
    for (std::size_t k = 0; k < a.cells.size(); ++k) expect_cell(a.cells[k], want["cells"][k], k);
  }
}

TEST(Unpickler, FortranObjectArrayCellsAreRowMajor) {
  // cNMF's job table is a Fortran-ordered object array; numpy pickles its elements in C order.
  const auto a = knmf::io::read_npy(io_fixture("object_jobs_fortran.npy"));
  EXPECT_TRUE(a.fortran_order);
  ASSERT_EQ(a.shape, (std::vector<std::int64_t>{3, 4}));
  for (std::int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(std::get<std::int64_t>(a.cells[r * 4 + 0]), 5);
    EXPECT_EQ(std::get<std::int64_t>(a.cells[r * 4 + 1]), r);
    EXPECT_EQ(std::get<std::int64_t>(a.cells[r * 4 + 2]), 1000 + r);
    EXPECT_EQ(std::get<bool>(a.cells[r * 4 + 3]), false);
  }
}

TEST(Unpickler, RejectsHostilePicklesWithoutExecutingThem) {
  const auto fixtures = knmf::test::load_json("io/fixtures.json");
  const std::string marker = fixtures["pwned_marker"];
  std::filesystem::remove(marker);
  ASSERT_GE(fixtures["malicious"].size(), 7u);
  for (const auto& [name, needle] : fixtures["malicious"].items()) {
    SCOPED_TRACE(name);
    const std::string path = io_fixture(name);
    KNMF_EXPECT_INPUT_ERROR(knmf::io::read_npy(path), path, needle.get<std::string>());
  }
  EXPECT_FALSE(std::filesystem::exists(marker)) << "a pickle payload ran: " << marker;
}

TEST(Unpickler, ErrorsNameTheGlobalAndTheOffset) {
  const std::string path = io_fixture("pickle_os_system.npy");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_npy(path), path, "forbidden global 'os.system'", "at pickle byte 2");
  const std::string unknown = io_fixture("pickle_unknown_opcode.npy");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_npy(unknown), "unsupported opcode 0xff", "at pickle byte 40");
  const std::string inst = io_fixture("pickle_inst_opcode.npy");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::read_npy(inst), "0x69 (INST)");
}

// Hand-made streams for the corners numpy itself never produces.
using namespace std::string_literals;

std::string object_array_pickle(const std::string& elements, int count) {
  std::string p = "\x80\x03"s;
  p += "cnumpy.core.multiarray\n_reconstruct\n"s;
  p += "cnumpy\nndarray\n"s;
  p += "K\x00\x85" "C\x01" "b\x87R"s;                         // _reconstruct(ndarray, (0,), b'b')
  p += "(K\x01K"s;
  p += static_cast<char>(count);
  p += "\x85"s;                                               // (1, (count,),
  p += "cnumpy\ndtype\nX\x02\x00\x00\x00O8\x89\x88\x87R"s;     //  dtype('O8', False, True)
  p += "(K\x03X\x01\x00\x00\x00|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK?tb"s;
  p += "\x89]q\x01("s + elements + "etb."s;                 //  False, [elements])
  return p;
}

TEST(Unpickler, MemoReferencesAndWideInts) {
  // 'ab' memoized then fetched twice; LONG1 of 8 bytes (-2^63); BINFLOAT (big-endian) 0.5.
  const std::string elems = "X\x02\x00\x00\x00" "abq\x07" "h\x07" "j\x07\x00\x00\x00"s +
                            "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80"s + "G\x3f\xe0\x00\x00\x00\x00\x00\x00"s;
  const auto a = knmf::io::unpickle_object_array(object_array_pickle(elems, 5), "crafted");
  ASSERT_EQ(a.cells.size(), 5u);
  EXPECT_EQ(std::get<std::string>(a.cells[0]), "ab");
  EXPECT_EQ(std::get<std::string>(a.cells[1]), "ab");
  EXPECT_EQ(std::get<std::string>(a.cells[2]), "ab");
  EXPECT_EQ(std::get<std::int64_t>(a.cells[3]), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(std::get<double>(a.cells[4]), 0.5);
}

TEST(Unpickler, RejectsMalformedStreams) {
  const std::string nine_byte_long = "\x8a\x09"s + std::string(9, '\x01');
  KNMF_EXPECT_INPUT_ERROR(knmf::io::unpickle_object_array(object_array_pickle(nine_byte_long, 1), "crafted"),
                          "crafted", "wider than 64 bits");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::unpickle_object_array(object_array_pickle("h\x09", 1), "crafted"),
                          "memo key 9");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::unpickle_object_array(object_array_pickle("NN", 1), "crafted"),
                          "1 elements holds 2");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::unpickle_object_array(object_array_pickle("]", 1), "crafted"),
                          "element 0 is a list");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::unpickle_object_array(object_array_pickle("C\x01z", 1), "crafted"),
                          "element 0 is a bytes");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::unpickle_object_array(object_array_pickle("N", 1) + "N", "crafted"),
                          "1 bytes after STOP");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::unpickle_object_array("\x80\x03N"s, "crafted"),
                          "no STOP");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::unpickle_object_array("\x80\x01N."s, "crafted"),
                          "protocol 1");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::unpickle_object_array("X\xff\xff\xff\x7f"s, "crafted"),
                          "truncated");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::unpickle_object_array("e", "crafted"), "without a MARK");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::unpickle_object_array("a", "crafted"), "empty stack");
  KNMF_EXPECT_INPUT_ERROR(knmf::io::unpickle_object_array("", "crafted"), "no STOP");
  // A builtins global is refused even though it would be harmless here.
  KNMF_EXPECT_INPUT_ERROR(knmf::io::unpickle_object_array("cbuiltins\nint\n.", "crafted"),
                          "forbidden global 'builtins.int'");
}

}  // namespace
