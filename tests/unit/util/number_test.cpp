#include "util/number.h"

#include <gtest/gtest.h>

#include <string>

namespace rlock {
namespace {

TEST(Number, ReadsWholeNumbersInRange) {
  EXPECT_EQ(parse_integer("0", 0, 255).value_or(-1), 0);
  EXPECT_EQ(parse_integer("255", 0, 255).value_or(-1), 255);
  EXPECT_EQ(parse_integer("-3", -5, 5).value_or(0), -3);
  EXPECT_EQ(parse_integer("007", 1, 10).value_or(0), 7);
}

TEST(Number, RejectsOutOfRangeAndGarbageAsUsageErrors) {
  for (auto bad : {"", "256", "-1", "1.5", " 1", "1 ", "+1", "0x10", "1e3", "ten", "-", "--1",
                   "99999999999999999999999999"}) {
    auto n = parse_integer(bad, 0, 255);
    ASSERT_FALSE(n.has_value()) << bad;
    EXPECT_EQ(n.error().code, Error::Code::usage);
    EXPECT_NE(n.error().message.find("from 0 to 255"), std::string::npos) << n.error().message;
  }
}

TEST(Number, HundredsOfDigitsAreOutOfRangeNotACrash) {
  std::string huge(400, '9');
  EXPECT_FALSE(parse_integer(huge, 1, 1000).has_value());
  auto d = parse_decimal(huge, 1e9);
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.error().message.find("larger than"), std::string::npos);
  EXPECT_FALSE(parse_decimal(huge + "." + huge, 1e9).has_value());
}

TEST(Number, LongInputIsCutInMessages) {
  std::string huge(400, '9');
  auto n = parse_integer(huge, 1, 10);
  ASSERT_FALSE(n.has_value());
  EXPECT_LT(n.error().message.size(), 120u) << n.error().message;
  EXPECT_NE(n.error().message.find("400 characters"), std::string::npos);
}

TEST(Number, ReadsDecimals) {
  EXPECT_DOUBLE_EQ(parse_decimal("0.5", 10).value_or(-1), 0.5);
  EXPECT_DOUBLE_EQ(parse_decimal(".5", 10).value_or(-1), 0.5);
  EXPECT_DOUBLE_EQ(parse_decimal("3.", 10).value_or(-1), 3);
  EXPECT_DOUBLE_EQ(parse_decimal("10", 10).value_or(-1), 10);
  for (auto bad : {"", ".", "1.2.3", "-1", "1e3", "inf", "nan", " 1"})
    EXPECT_FALSE(parse_decimal(bad, 10).has_value()) << bad;
  EXPECT_FALSE(parse_decimal("10.5", 10).has_value());
}

TEST(Number, DecimalsAreCorrectlyRoundedAndTinyOnesAreNearZero) {
  // The nearest double, as from_chars gives (strtod reads them now).
  EXPECT_EQ(parse_decimal("0.1", 10).value_or(-1), 0.1);
  EXPECT_EQ(parse_decimal("2.675", 10).value_or(-1), 2.675);
  EXPECT_EQ(parse_decimal("9007199254740993", 1e300).value_or(-1), 9007199254740992.0);
  // Below the smallest double: a number next to nothing, not "too large".
  std::string tiny = "0." + std::string(400, '0') + "1";
  auto d = parse_decimal(tiny, 10);
  ASSERT_TRUE(d.has_value()) << d.error().message;
  EXPECT_LT(*d, 1e-300);
}

}  // namespace
}  // namespace rlock
