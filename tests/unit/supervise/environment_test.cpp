#include "supervise/environment.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "util/token.h"

namespace rlock::supervise {
namespace {

bool has(const std::vector<std::string>& env, const std::string& entry) {
  return std::find(env.begin(), env.end(), entry) != env.end();
}

bool has_name(const std::vector<std::string>& env, const std::string& name) {
  return std::any_of(env.begin(), env.end(),
                     [&](const std::string& e) { return e.starts_with(name + "="); });
}

const HoldInfo k_hold{"deploy", "0123456789abcdef0123456789abcdef", 42};

TEST(ChildEnvironment, AddsNameTokenAndFence) {
  auto env = child_environment({"PATH=/bin", "HOME=/root"}, k_hold);
  EXPECT_TRUE(has(env, "PATH=/bin"));
  EXPECT_TRUE(has(env, "HOME=/root"));
  EXPECT_TRUE(has(env, "RLOCK_NAME=deploy"));
  EXPECT_TRUE(has(env, "RLOCK_TOKEN=0123456789abcdef0123456789abcdef"));
  EXPECT_TRUE(has(env, "RLOCK_FENCE=42"));
}

TEST(ChildEnvironment, ReplacesInheritedHoldVariables) {
  auto env = child_environment({"RLOCK_NAME=outer", "RLOCK_TOKEN=old", "RLOCK_FENCE=1"}, k_hold);
  EXPECT_EQ(env.size(), 4u);
  EXPECT_FALSE(has(env, "RLOCK_NAME=outer"));
  EXPECT_TRUE(has(env, "RLOCK_FENCE=42"));
}

TEST(ChildEnvironment, HeldListsThisHoldByShortIdNeverByToken) {
  auto env = child_environment({"PATH=/bin"}, k_hold);
  EXPECT_TRUE(has(env, "RLOCK_HELD=" + short_id(k_hold.token) + ":deploy"));
  for (const auto& e : env) {
    if (e.starts_with("RLOCK_HELD=")) {
      EXPECT_EQ(e.find(k_hold.token), std::string::npos);
    }
  }
}

TEST(ChildEnvironment, HeldKeepsTheEnclosingHoldsOutermostFirst) {
  auto env = child_environment({"RLOCK_HELD=aaaaaaaa:outer,bbbbbbbb:middle"}, k_hold);
  EXPECT_TRUE(
      has(env, "RLOCK_HELD=aaaaaaaa:outer,bbbbbbbb:middle," + short_id(k_hold.token) + ":deploy"));
}

TEST(ChildEnvironment, DeadlinesListTheEnclosingPagesThenThisOne) {
  HoldInfo hold = k_hold;
  hold.deadline_fd = 7;
  EXPECT_TRUE(has(child_environment({"RLOCK_DEADLINES=3,5"}, hold), "RLOCK_DEADLINES=3,5,7"));
  EXPECT_TRUE(has(child_environment({"PATH=/bin"}, hold), "RLOCK_DEADLINES=7"));
  // No page of its own: the enclosing ones are passed on as they were.
  EXPECT_TRUE(has(child_environment({"RLOCK_DEADLINES=3"}, k_hold), "RLOCK_DEADLINES=3"));
  EXPECT_FALSE(has_name(child_environment({"PATH=/bin"}, k_hold), "RLOCK_DEADLINES"));
}

TEST(HeldLocks, NamesWithCommasAndPercentsRoundTrip) {
  std::vector<HeldLock> held{{"aaaaaaaa", "a,b"}, {"bbbbbbbb", "100%"}, {"cccccccc", "x:y"}};
  EXPECT_EQ(format_held(held), "aaaaaaaa:a%2Cb,bbbbbbbb:100%25,cccccccc:x:y");
  EXPECT_EQ(parse_held(format_held(held)), held);
}

TEST(HeldLocks, MalformedEntriesAreSkipped) {
  auto held = parse_held(",nocolon,:noid,aaaaaaaa:,bbbbbbbb:bad%zz,cccccccc:ok,dddddddd:cut%2");
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0], (HeldLock{"cccccccc", "ok"}));
  EXPECT_TRUE(parse_held("").empty());
}

TEST(ChildEnvironment, DropsPasswords) {
  auto env = child_environment({"RLOCK_PASSWORD=hunter2", "REDISCLI_AUTH=hunter2", "A=1"}, k_hold);
  EXPECT_FALSE(has_name(env, "RLOCK_PASSWORD"));
  EXPECT_FALSE(has_name(env, "REDISCLI_AUTH"));
  EXPECT_TRUE(has(env, "A=1"));
}

TEST(ChildEnvironment, RemovesThePasswordFromUrls) {
  auto env = child_environment(
      {"RLOCK_URL=redis://app:hunter2@127.0.0.1:7000/2", "REDIS_URL=redis://:hunter2@db"}, k_hold);
  EXPECT_TRUE(has(env, "RLOCK_URL=redis://app@127.0.0.1:7000/2"));
  EXPECT_TRUE(has(env, "REDIS_URL=redis://db:6379/0"));
  for (const auto& e : env) EXPECT_EQ(e.find("hunter2"), std::string::npos) << e;
}

TEST(ChildEnvironment, KeepsUrlsWithoutPasswordsAsTheyAre) {
  auto env = child_environment({"RLOCK_URL=redis://127.0.0.1:7000,unix:///tmp/r.sock"}, k_hold);
  EXPECT_TRUE(has(env, "RLOCK_URL=redis://127.0.0.1:7000,unix:///tmp/r.sock"));
}

TEST(ChildEnvironment, DropsAUrlListItCannotParse) {
  auto env = child_environment({"RLOCK_URL=redis://a:b@c:notaport,redis://x"}, k_hold);
  EXPECT_FALSE(has_name(env, "RLOCK_URL"));
}

TEST(ChildEnvironment, PassesOnAnotherClientsUrlThatHoldsNoSecret) {
  // rlock cannot parse them, but nothing in them can be a password.
  for (const char* url : {"redis://cache:6379/0?timeout=5", "valkey://cache:6379", "REDIS://cache",
                          "redis://cache:6379/0#x",
                          // Host names with a word like "key" in them, a socket's options.
                          "redis://valkey:6379/0?timeout=5", "redis://keydb:6379/0?timeout=5",
                          "unix:///run/redis/redis.sock?timeout=5",
                          "redis://[fe80::1%25eth0]:6379/0", "rediss://cache:6380/1"}) {
    auto env = child_environment({std::string("REDIS_URL=") + url}, k_hold);
    EXPECT_TRUE(has(env, std::string("REDIS_URL=") + url)) << url;
  }
  // What may hold one still goes: user information, a password option.
  for (const char* url :
       {"redis://:pw@cache:6379/0?timeout=5", "valkey://u:pw@cache", "redis://cache/0?password=pw",
        "redis://cache/0?Auth=pw", "cache:6379",
        // A password typed without its @host, in every place it can go.
        "redis://:hunter2", "redis://default:hunter2", "unix://:hunter2",
        "redis-sentinel://:hunter2", "redis://[::1]:hunter2", "redis://cache:6379,:hunter2",
        "redis://:Zx9!kq", "redis://:123456", "redis://h/0?key=SECRET", "redis://default:123456",
        "redis://cache:6379/0?%70assword=hunter2", "redis://user%3Ahunter2%40cache",
        "redis://[:hunter2]:6379", "redis://cache:6379/0?timeout=5,:hunter2"}) {
    auto env = child_environment({std::string("REDIS_URL=") + url}, k_hold);
    EXPECT_FALSE(has_name(env, "REDIS_URL")) << url;
  }
}

TEST(WithoutPasswords, CleansEveryEntryOfAList) {
  EXPECT_EQ(without_passwords("redis://:p1@h1:1/0,redis://u:p2@h2:2/0"),
            "redis://h1:1/0,redis://u@h2:2/0");
  // A Sentinel URL's hosts are one entry, not a list of broken URLs.
  EXPECT_EQ(without_passwords("redis-sentinel://:pw@s1:1,s2:2/0#m,redis://h:3/0"),
            "redis-sentinel://s1:1,s2:2/0#m,redis://h:3/0");
}

TEST(ChildEnvironment, DropsTheSentinelPassword) {
  auto env = child_environment({"RLOCK_SENTINEL_PASSWORD=hunter2", "A=1"}, k_hold);
  EXPECT_FALSE(has_name(env, "RLOCK_SENTINEL_PASSWORD"));
}

}  // namespace
}  // namespace rlock::supervise
