#include "util/duration.h"

#include <gtest/gtest.h>

namespace rlock {
namespace {

Millis ok(std::string_view text) {
  auto d = parse_duration(text);
  EXPECT_TRUE(d.has_value()) << text;
  return d.value_or(Millis(-1));
}

TEST(Duration, ReadsEachUnit) {
  EXPECT_EQ(ok("1500ms"), Millis(1500));
  EXPECT_EQ(ok("30s"), Millis(30'000));
  EXPECT_EQ(ok("5m"), Millis(300'000));
  EXPECT_EQ(ok("1h"), Millis(3'600'000));
}

TEST(Duration, CombinesUnitsInDecreasingOrder) {
  EXPECT_EQ(ok("1h30m"), Millis(5'400'000));
  EXPECT_EQ(ok("1m30s"), Millis(90'000));
  EXPECT_EQ(ok("2s500ms"), Millis(2500));
}

TEST(Duration, BareNumberIsSecondsWithFractions) {
  EXPECT_EQ(ok("0"), Millis(0));
  EXPECT_EQ(ok("10"), Millis(10'000));
  EXPECT_EQ(ok("0.5"), Millis(500));
  EXPECT_EQ(ok("1.25s"), Millis(1250));
}

TEST(Duration, RejectsGarbage) {
  for (auto bad : {"", "x", "5x", "-1s", "1s1h", "s", "1h1h", "1.2.3", " 5s", "5s ", "5 s", "1m5",
                   "ms", "+5s", "1e3"}) {
    auto d = parse_duration(bad);
    ASSERT_FALSE(d.has_value()) << bad;
    EXPECT_EQ(d.error().code, Error::Code::usage);
  }
}

TEST(Duration, RejectsMoreThanAWeek) {
  EXPECT_FALSE(parse_duration("200h").has_value());
}

TEST(Duration, FormatsShortestForm) {
  EXPECT_EQ(format_duration(Millis(250)), "250ms");
  EXPECT_EQ(format_duration(Millis(2000)), "2s");
  EXPECT_EQ(format_duration(Millis(2500)), "2.5s");
  EXPECT_EQ(format_duration(Millis(5'400'000)), "1h30m");
  EXPECT_EQ(format_duration(Millis(61'000)), "1m1s");
}

// Found by fuzz/duration.cpp: "{:.1f}s" printed 1250ms as "1.2s" and 1999ms
// as "2.0s", so a limit in an error message did not read back as itself.
TEST(Duration, FormatsFractionsOfASecondExactly) {
  EXPECT_EQ(format_duration(Millis(1250)), "1.25s");
  EXPECT_EQ(format_duration(Millis(1999)), "1.999s");
  EXPECT_EQ(format_duration(Millis(59'001)), "59.001s");
  EXPECT_EQ(parse_duration(format_duration(Millis(1999))), Millis(1999));
}

}  // namespace
}  // namespace rlock

namespace rlock {
namespace {

TEST(Duration, HundredsOfDigitsAreAUsageErrorNotACrash) {
  std::string huge(300, '9');
  for (const std::string& text :
       {huge, huge + "s", huge + "ms", "1h" + huge + "m", "0." + huge, huge + "." + huge + "s"}) {
    auto d = parse_duration(text);
    if (text.starts_with("0.")) {
      EXPECT_TRUE(d.has_value()) << text;  // 0.999... s rounds to 1000 ms
      continue;
    }
    ASSERT_FALSE(d.has_value()) << text;
    EXPECT_EQ(d.error().code, Error::Code::usage);
    EXPECT_LT(d.error().message.size(), 160u) << d.error().message;
  }
}

TEST(Duration, RoundsToTheNearestMillisecondHalvesUp) {
  EXPECT_EQ(parse_duration("1.0004s").value_or(Millis(-1)), Millis(1000));
  EXPECT_EQ(parse_duration("1.0005s").value_or(Millis(-1)), Millis(1001));
  EXPECT_EQ(parse_duration("0.4999ms").value_or(Millis(-1)), Millis(0));
  EXPECT_EQ(parse_duration("0.5ms").value_or(Millis(-1)), Millis(1));
  EXPECT_EQ(parse_duration("2.5ms").value_or(Millis(-1)), Millis(3));
  EXPECT_EQ(parse_duration("1h0.5ms").value_or(Millis(-1)), Millis(3'600'001));
}

}  // namespace
}  // namespace rlock
