// Reading one field of an INFO reply (status' eviction warning).

#include <gtest/gtest.h>

#include "backend/node.h"

namespace rlock::backend {
namespace {

TEST(InfoField, FindsTheWholeFieldNotAPrefixOfAnother) {
  const std::string info =
      "# Memory\r\nused_memory:1000\r\nmaxmemory_human:0B\r\nmaxmemory:1048576\r\n"
      "maxmemory_policy:allkeys-lru\r\n";
  EXPECT_EQ(info_field(info, "maxmemory"), "1048576");
  EXPECT_EQ(info_field(info, "maxmemory_policy"), "allkeys-lru");
  EXPECT_EQ(info_field(info, "used_memory"), "1000");
  EXPECT_EQ(info_field(info, "memory"), "");
  EXPECT_EQ(info_field(info, "maxmemory_policy_x"), "");
}

TEST(InfoField, LastLineWithoutNewlineAndBareNewlines) {
  EXPECT_EQ(info_field("a:1\nb:2", "b"), "2");
  EXPECT_EQ(info_field("a:1\nb:", "b"), "");
  EXPECT_EQ(info_field("", "a"), "");
  EXPECT_EQ(info_field("a", "a"), "");
}

}  // namespace
}  // namespace rlock::backend
