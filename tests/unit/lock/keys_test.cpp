#include "lock/keys.h"

#include <gtest/gtest.h>

#include <set>

#include "util/sha1.h"

namespace rlock::lock {
namespace {

TEST(LockKeys, AllKeysShareOneHashTag) {
  for (auto name : {"plain", "a{b}c", "}", "{", "x:y", "with space", "%7B"}) {
    auto keys = lock_keys("rlock:", name);
    std::string tag = "{" + escape_name(name) + "}";
    for (const auto& key : keys) {
      auto open = key.find('{');
      auto close = key.find('}', open + 1);
      ASSERT_NE(close, std::string::npos) << key;
      EXPECT_EQ(key.substr(open, close - open + 1), tag) << key;
    }
  }
}

TEST(LockKeys, WakeListIsNamedByTheTokensHashNotTheToken) {
  const std::string token = "0123456789abcdef0123456789abcdef";
  auto key = wake_key("rlock:", "a{b}", token);
  EXPECT_EQ(key, "rlock:{a%7Bb%7D}:w:" + sha1_hex(token));
  EXPECT_EQ(key.find(token), std::string::npos);
}

TEST(LockKeys, DistinctNamesNeverShareAKey) {
  std::set<std::string> seen;
  for (auto name : {"a", "a}", "{a", "a{b}", "%7B", "{", "}", "%", "%25", "a:h", "x y", "ü"}) {
    for (const auto& key : lock_keys("rlock:", name)) EXPECT_TRUE(seen.insert(key).second) << key;
  }
}

TEST(LockKeys, EscapingRoundTrips) {
  for (auto name : {"a{b}c", "100%", "%7B", "}{", "ünï"}) {
    auto back = unescape_name(escape_name(name));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, name);
  }
  EXPECT_FALSE(unescape_name("%ZZ").has_value());
}

TEST(LockKeys, MetaKeyNamesTheLock) {
  auto keys = lock_keys("rlock:", "a{b}");
  EXPECT_EQ(name_of_meta_key("rlock:", keys[6]), "a{b}");
  EXPECT_FALSE(name_of_meta_key("rlock:", keys[0]).has_value());
  EXPECT_FALSE(name_of_meta_key("other:", keys[6]).has_value());
  EXPECT_EQ(meta_pattern("a*b:"), "a\\*b:{*}:m");
}

TEST(LockNames, ValidatesLengthAndNul) {
  EXPECT_TRUE(validate_name("x").has_value());
  EXPECT_TRUE(validate_name(std::string(512, 'a')).has_value());
  EXPECT_FALSE(validate_name("").has_value());
  EXPECT_FALSE(validate_name(std::string(513, 'a')).has_value());
  EXPECT_FALSE(validate_name(std::string("a\0b", 3)).has_value());
  EXPECT_FALSE(validate_prefix("a{").has_value());
}

TEST(Netstrings, RoundTripAnyBytes) {
  std::vector<std::string> fields{"", "a:b", std::string("\0\n", 2), "12:x"};
  auto back = parse_netstrings(netstrings(fields));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, fields);
  EXPECT_FALSE(parse_netstrings("5:abc").has_value());
  EXPECT_FALSE(parse_netstrings("x:abc").has_value());
}

}  // namespace
}  // namespace rlock::lock
