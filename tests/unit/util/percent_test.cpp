#include "util/percent.h"

#include <gtest/gtest.h>

namespace rlock::percent {
namespace {

bool comma(char c) {
  return c == ',';
}

TEST(Percent, EscapesThePercentSignAndTheChosenBytesOnly) {
  EXPECT_EQ(encode("a,b%c{", comma), "a%2Cb%25c{");
  EXPECT_EQ(encode(std::string("\xff\x00", 2), [](char c) { return c == '\xff' || c == 0; }),
            "%FF%00");
}

TEST(Percent, DecodesEveryEscape) {
  EXPECT_EQ(decode("a%2Cb%25c%7b"), "a,b%c{");
  EXPECT_FALSE(decode("50%").has_value());
  EXPECT_FALSE(decode("%4").has_value());
  EXPECT_FALSE(decode("%ZZ").has_value());
}

TEST(Percent, StrictDecodingAcceptsOnlyTheOneEncodedForm) {
  EXPECT_EQ(decode("a%2Cb%25", comma), "a,b%");
  EXPECT_FALSE(decode("a%2cb", comma).has_value()) << "lower-case hex is a second form";
  EXPECT_FALSE(decode("%41", comma).has_value()) << "an escape encode() never writes";
  EXPECT_FALSE(decode("a,b", comma).has_value()) << "a raw byte that must be escaped";
}

TEST(Percent, RoundTripsEveryByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  EXPECT_EQ(decode(encode(all, comma), comma), all);
}

}  // namespace
}  // namespace rlock::percent
