// The choice options as types (knmf/core/options.hpp): the option text round-trips, and a
// bad value is a one-line InputError naming the option, the value and the choices.
#include <gtest/gtest.h>

#include <string>

#include "knmf/core/error.hpp"
#include "knmf/core/options.hpp"

namespace {
using namespace knmf;

template <class F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Options, TextRoundTrips) {
  for (auto d : {Dtype::float32, Dtype::float64}) EXPECT_EQ(parse_dtype(to_string(d)), d);
  for (auto f : {XFormat::automatic, XFormat::dense, XFormat::sparse})
    EXPECT_EQ(parse_x_format(to_string(f)), f);
  for (auto d : {Distribution::jobs, Distribution::rows, Distribution::automatic})
    EXPECT_EQ(parse_distribution(to_string(d)), d);
  EXPECT_EQ(to_string(Dtype::float32), "float");
  EXPECT_EQ(to_string(Dtype::float64), "double");
  EXPECT_EQ(to_string(XFormat::automatic), "auto");
  EXPECT_EQ(to_string(Distribution::automatic), "auto");
  EXPECT_EQ(element_bytes(Dtype::float32), 4);
  EXPECT_EQ(element_bytes(Dtype::float64), 8);
}

TEST(Options, BadValuesNameTheOptionAndTheChoices) {
  EXPECT_EQ(input_error_of([] { parse_dtype("half"); }),
            "--dtype 'half' is invalid: expected float or double");
  EXPECT_EQ(input_error_of([] { parse_x_format("csr"); }),
            "--format 'csr' is invalid: expected auto, dense or sparse");
  EXPECT_EQ(input_error_of([] { parse_distribution("cells"); }),
            "--distribute 'cells' is invalid: expected jobs, rows or auto");
  EXPECT_EQ(input_error_of([] { parse_dtype("Float", "r.h5: root attribute dtype"); }),
            "r.h5: root attribute dtype 'Float' is invalid: expected float or double");
}

}  // namespace
