// knmf's two failure kinds (knmf/core/error.hpp): bad input is an InputError; a broken
// invariant is a LogicError that the host program can catch (the library never aborts it).
#include <gtest/gtest.h>

#include <string>

#include "knmf/core/error.hpp"

namespace {

int checked_half(int x) {
  KNMF_ASSERT(x % 2 == 0, "odd value ", x);
  return x / 2;
}

TEST(Error, BrokenInvariantThrowsACatchableLogicError) {
  EXPECT_EQ(checked_half(8), 4);
  try {
    checked_half(7);
    FAIL() << "no exception";
  } catch (const knmf::LogicError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("internal error: odd value 7"), std::string::npos) << what;
    EXPECT_NE(what.find("(x % 2 == 0)"), std::string::npos) << what;
    EXPECT_NE(what.find("test_error.cpp:"), std::string::npos) << what;
  }
  // a std::logic_error, and not mistaken for bad input
  EXPECT_THROW(checked_half(3), std::logic_error);
  bool as_input = false;
  try {
    checked_half(5);
  } catch (const knmf::InputError&) {
    as_input = true;
  } catch (const std::exception&) {
  }
  EXPECT_FALSE(as_input);
}

TEST(Error, AssertWithoutMessageStillNamesTheCondition) {
  try {
    KNMF_ASSERT(1 + 1 == 3);
    FAIL() << "no exception";
  } catch (const knmf::LogicError& e) {
    EXPECT_NE(std::string(e.what()).find("invariant broken (1 + 1 == 3)"), std::string::npos) << e.what();
  }
}

TEST(Error, InputErrorCarriesItsOneLineMessage) {
  try {
    knmf::input_error("x.h5ad", ": k = ", 0, " (must be >= 1)");
    FAIL() << "no exception";
  } catch (const knmf::InputError& e) {
    EXPECT_STREQ(e.what(), "x.h5ad: k = 0 (must be >= 1)");
  }
}

}  // namespace
