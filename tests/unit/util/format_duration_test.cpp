#include <gtest/gtest.h>

#include <limits>

#include "util/duration.h"

namespace rlock {
namespace {

TEST(FormatDuration, NegativeValuesKeepTheirSign) {
  EXPECT_EQ(format_duration(Millis(-250)), "-250ms");
  EXPECT_EQ(format_duration(Millis(-5'400'000)), "-1h30m");
}

TEST(FormatDuration, ExtremeValuesNeitherOverflowNorRecurse) {
  // A forged lease once made status recurse forever on INT64_MIN.
  auto min = std::numeric_limits<Millis::rep>::min();
  auto max = std::numeric_limits<Millis::rep>::max();
  EXPECT_EQ(format_duration(Millis(min)), "-2562047788015h12m55s");
  EXPECT_EQ(format_duration(Millis(max)), "2562047788015h12m55s");
}

}  // namespace
}  // namespace rlock
