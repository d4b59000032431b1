#include "backend/status_reads.h"

#include <gtest/gtest.h>

#include "../lock/replies.h"
#include "lock/keys.h"
#include "lock/protocol.h"
#include "redis/resp.h"

namespace rlock::backend::status_reads {
namespace {

using lock::test::array;
using lock::test::integer;
using lock::test::string;

constexpr std::int64_t k_now = 1'700'000'000'000;

redis::Reply nil() {
  return redis::Reply{};
}

redis::Reply error(std::string text) {
  redis::Reply r;
  r.type = redis::Reply::Type::error;
  r.str = std::move(text);
  return r;
}

std::string at(std::int64_t offset) {
  return std::to_string(k_now + offset);
}

const std::string k_base = lock::base_key("rlock:", "job");

/// `commands` as RESP, one after the other.
std::string resp(const std::vector<std::vector<std::string>>& commands) {
  std::string out;
  for (const auto& command : commands) out += redis::format_command(command);
  return out;
}

/// The first round's replies of a lock held by A (5 s left) and B (expired),
/// with C queued (lease 2 s) and D queued (no lease).
std::vector<redis::Reply> held_and_queued() {
  std::vector<redis::Reply> replies;
  replies.push_back(string("2"));
  replies.push_back(
      array({string("bbbbbbbbbb"), string(at(-1)), string("aaaaaaaaaa"), string(at(5000))}));
  replies.push_back(array({}));
  replies.push_back(array({string("cccccccccc"), string("dddddddddd")}));
  replies.push_back(string("42"));
  replies.push_back(nil());
  return replies;
}

/// read_first on a copy of `replies`.
std::optional<Pending> read(std::vector<redis::Reply> replies) {
  return read_first(replies, k_now);
}

TEST(StatusReads, FirstRoundReadsWhatTheScriptReads) {
  std::string request;
  first_round(k_base, request);
  EXPECT_EQ(request, resp({{"HGET", "rlock:{job}:m", "limit"},
                           {"ZRANGE", "rlock:{job}:h", "0", "-1", "WITHSCORES"},
                           {"ZRANGE", "rlock:{job}:s", "0", "-1", "WITHSCORES"},
                           {"ZRANGE", "rlock:{job}:q", "0", "-1"},
                           {"GET", "rlock:{job}:f"},
                           {"GET", "rlock:{job}:a"}}));
  EXPECT_EQ(k_first_round, 6U);
}

TEST(StatusReads, GivesTheScriptsReplyForAHeldAndQueuedLock) {
  auto pending = read(held_and_queued());
  ASSERT_TRUE(pending);
  std::string second;
  ASSERT_EQ(second_round(*pending, k_base, second), 4U);
  EXPECT_EQ(second, resp({{"HGET", "rlock:{job}:i", "aaaaaaaaaa"},
                          {"ZRANGE", "rlock:{job}:l", "0", "-1", "WITHSCORES"},
                          {"HGET", "rlock:{job}:i", "cccccccccc"},
                          {"HGET", "rlock:{job}:i", "dddddddddd"}}));
  std::vector<redis::Reply> answers;
  answers.push_back(string("7\n1\nexclusive\n30000\nblob-a"));
  answers.push_back(
      array({string("dddddddddd"), string(at(-10)), string("cccccccccc"), string(at(2000))}));
  answers.push_back(string("0\n2\nexclusive\n0\nblob-c"));
  answers.push_back(nil());
  const auto reply = finish(std::move(*pending), answers);
  ASSERT_TRUE(reply);
  const auto expected =
      array({integer(k_now), integer(2), integer(42),
             array({string("aaaaaaaa"), integer(5000), string("7\n1\nexclusive\n30000\nblob-a")}),
             array({string("cccccccc"), integer(2000), string("0\n2\nexclusive\n0\nblob-c")}),
             string("")});
  ASSERT_EQ(reply->elements.size(), expected.elements.size());
  for (std::size_t k = 0; k < 3; ++k)
    EXPECT_EQ(reply->elements[k].integer, expected.elements[k].integer);
  for (const std::size_t k : {3, 4}) {
    ASSERT_EQ(reply->elements[k].elements.size(), 3U);
    EXPECT_EQ(reply->elements[k].elements[0].str, expected.elements[k].elements[0].str);
    EXPECT_EQ(reply->elements[k].elements[1].integer, expected.elements[k].elements[1].integer);
    EXPECT_EQ(reply->elements[k].elements[2].str, expected.elements[k].elements[2].str);
  }
  EXPECT_EQ(reply->elements[5].type, redis::Reply::Type::string);
  // And the decoder reads it as a status reply.
  const auto view = lock::decode_status("job", *reply);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->limit, 2);
  EXPECT_EQ(view->holders.size(), 1U);
  EXPECT_EQ(view->waiters.size(), 1U);
}

TEST(StatusReads, AbsentFenceReadsAsTheScriptsDefault) {
  auto first = held_and_queued();
  first[4] = nil();
  first[3] = array({});
  const auto pending = read(std::move(first));
  ASSERT_TRUE(pending);
  EXPECT_EQ(pending->limit, 2);
  EXPECT_EQ(pending->last_fence, 0);
  std::string second;
  EXPECT_EQ(second_round(*pending, k_base, second), 1U);  // the holder's record only
}

TEST(StatusReads, AFreeLockNeedsNoSecondRound) {
  auto first = held_and_queued();
  first[1] = array({string("bbbbbbbbbb"), string(at(-1))});
  first[3] = array({});
  auto pending = read(std::move(first));
  ASSERT_TRUE(pending);
  std::string second;
  EXPECT_EQ(second_round(*pending, k_base, second), 0U);
  EXPECT_EQ(second, "");
  const auto reply = finish(std::move(*pending), {});
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->elements[3].elements.empty());
  EXPECT_EQ(reply->elements[2].integer, 42);
}

TEST(StatusReads, LeavesAnythingUnusualToTheScript) {
  const auto with = [](std::size_t index, redis::Reply reply) {
    auto first = held_and_queued();
    first[index] = std::move(reply);
    return read(std::move(first));
  };
  const auto wrongtype = [] {
    return error("WRONGTYPE Operation against a key holding the wrong kind of value");
  };
  EXPECT_TRUE(with(0, string("2")));
  EXPECT_FALSE(with(0, nil()));        // gone since SCAN (the script checks every key), or no limit
  EXPECT_FALSE(with(0, wrongtype()));  // a foreign meta key
  EXPECT_FALSE(with(0, string("abc")));  // Lua's tonumber: nil, then 1
  EXPECT_FALSE(with(0, string(" 3")));
  EXPECT_FALSE(with(1, wrongtype()));
  EXPECT_FALSE(with(1, array({string("aaaaaaaaaa"), string("inf")})));
  EXPECT_FALSE(with(1, array({string("aaaaaaaaaa"), string("1.7e12")})));
  EXPECT_FALSE(with(1, array({string("aaaaaaaaaa"), string("1700000000000.5")})));
  EXPECT_FALSE(with(2, error("MOVED 3999 127.0.0.1:7001")));
  EXPECT_FALSE(with(3, error("NOPERM this user has no permissions to run the 'zrange' command")));
  EXPECT_FALSE(with(4, string("1e3")));
  EXPECT_TRUE(with(4, string("1795350950866118")));   // a real fence: 16 digits
  EXPECT_TRUE(with(4, string("9007199254740992")));   // 2^53
  EXPECT_FALSE(with(4, string("9007199254740993")));  // beyond: not exact in Lua
  EXPECT_FALSE(with(4, string("12345678901234567")));
  EXPECT_FALSE(with(5, wrongtype()));
  auto first = held_and_queued();
  EXPECT_FALSE(read_first(std::span(first).first(5), k_now));

  const auto pending = read(held_and_queued());
  ASSERT_TRUE(pending);
  std::vector<redis::Reply> refused;
  refused.push_back(wrongtype());
  refused.push_back(array({}));
  refused.push_back(nil());
  refused.push_back(nil());
  EXPECT_FALSE(finish(*pending, refused));
  std::vector<redis::Reply> odd_lease;
  odd_lease.push_back(nil());
  odd_lease.push_back(array({string("cccccccccc"), string("nan")}));
  odd_lease.push_back(nil());
  odd_lease.push_back(nil());
  EXPECT_FALSE(finish(*pending, odd_lease));
  EXPECT_FALSE(finish(*pending, std::span(refused).first(3)));
}

TEST(StatusReads, NowIsTheServersTimeInMilliseconds) {
  EXPECT_EQ(now_of(array({string("1700000000"), string("123999")})), 1'700'000'000'123);
  EXPECT_FALSE(now_of(error("NOPERM")));
  EXPECT_FALSE(now_of(array({string("x"), string("1")})));
}

}  // namespace
}  // namespace rlock::backend::status_reads
