#include "supervise/environment.h"

#include <gtest/gtest.h>

#include <algorithm>

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
  EXPECT_EQ(env.size(), 3u);
  EXPECT_FALSE(has(env, "RLOCK_NAME=outer"));
  EXPECT_TRUE(has(env, "RLOCK_FENCE=42"));
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

TEST(WithoutPasswords, CleansEveryEntryOfAList) {
  EXPECT_EQ(without_passwords("redis://:p1@h1:1/0,redis://u:p2@h2:2/0"),
            "redis://h1:1/0,redis://u@h2:2/0");
}

}  // namespace
}  // namespace rlock::supervise
