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

TEST(Json, DumpsNestedValuesInFieldOrder) {
  Json doc(Json::Object{{"b", 1}, {"a", Json(Json::Array{true, nullptr, "x"})}});
  EXPECT_EQ(doc.dump(), R"({"b":1,"a":[true,null,"x"]})");
}

}  // namespace
}  // namespace rlock::output
