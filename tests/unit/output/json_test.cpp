#include "output/json.h"

#include <gtest/gtest.h>

namespace rlock::output {
namespace {

TEST(Json, EscapesControlCharactersAndQuotes) {
  EXPECT_EQ(json_quote("a\"b\\c\n\x01"), R"("a\"b\\c\n\u0001")");
}

TEST(Json, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(json_quote("ünï"), "\"ünï\"");
  EXPECT_EQ(json_quote("a\xff"), R"("a\ufffd")");
  EXPECT_EQ(json_quote("\xc3"), R"("\ufffd")");
}

TEST(Json, IsAlwaysValidUtf8) {
  // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
  EXPECT_EQ(json_quote("\xc0\xaf"), R"("\ufffd\ufffd")");
  EXPECT_EQ(json_quote("\xed\xa0\x80"), R"("\ufffd\ufffd\ufffd")");
  EXPECT_EQ(json_quote("\xf4\x90\x80\x80"), R"("\ufffd\ufffd\ufffd\ufffd")");
}

TEST(Json, EscapesC1AndBidiLosslessly) {
  EXPECT_EQ(json_quote("\xc2\x9b\xe2\x80\xae\x7f"), R"("\u009b\u202e\u007f")");
}

TEST(Json, DumpsNestedValuesInFieldOrder) {
  Json doc(Json::Object{{"b", 1}, {"a", Json(Json::Array{true, nullptr, "x"})}});
  EXPECT_EQ(doc.dump(), R"({"b":1,"a":[true,null,"x"]})");
}

}  // namespace
}  // namespace rlock::output
