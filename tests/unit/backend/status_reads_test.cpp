#include "backend/status_reads.h"

#include <gtest/gtest.h>

#include "../lock/replies.h"
#include "lock/keys.h"
#include "lock/protocol.h"

namespace rlock::backend::status_reads {
namespace {

using lock::test::array;
using lock::test::integer;
using lock::test::string;

constexpr std::int64_t k_now = 1'700'000'000'000;

redis::Reply status(std::string text) {
  redis::Reply r;
  r.type = redis::Reply::Type::status;
  r.str = std::move(text);
  return r;
}

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

const std::vector<std::string> k_keys = lock::lock_keys("rlock:", "job");

/// The first round's replies of a lock held by A (5 s left) and B (expired),
/// with C queued (lease 2 s) and D queued (no lease).
std::vector<redis::Reply> held_and_queued() {
  return {status("hash"),
          string("2"),
          array({string("bbbbbbbbbb"), string(at(-1)), string("aaaaaaaaaa"), string(at(5000))}),
          array({}),
          array({string("cccccccccc"), string("dddddddddd")}),
          string("42"),
          nil()};
}

TEST(StatusReads, FirstRoundReadsWhatTheScriptReads) {
  Commands commands;
  first_round(k_keys, commands);
  ASSERT_EQ(commands.size(), k_first_round);
  EXPECT_EQ(commands[0], (std::vector<std::string>{"TYPE", "rlock:{job}:m"}));
  EXPECT_EQ(commands[2],
            (std::vector<std::string>{"ZRANGE", "rlock:{job}:h", "0", "-1", "WITHSCORES"}));
  EXPECT_EQ(commands[6], (std::vector<std::string>{"GET", "rlock:{job}:a"}));
}

TEST(StatusReads, GivesTheScriptsReplyForAHeldAndQueuedLock) {
  const auto first = held_and_queued();
  const auto pending = read_first(first, k_now);
  ASSERT_TRUE(pending);
  Commands second;
  ASSERT_EQ(second_round(*pending, k_keys, second), 4U);
  EXPECT_EQ(second[0], (std::vector<std::string>{"HGET", "rlock:{job}:i", "aaaaaaaaaa"}));
  EXPECT_EQ(second[1],
            (std::vector<std::string>{"ZRANGE", "rlock:{job}:l", "0", "-1", "WITHSCORES"}));
  const std::vector<redis::Reply> answers{
      string("7\n1\nexclusive\n30000\nblob-a"),
      array({string("dddddddddd"), string(at(-10)), string("cccccccccc"), string(at(2000))}),
      string("0\n2\nexclusive\n0\nblob-c"), nil()};
  const auto reply = finish(*pending, answers);
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

TEST(StatusReads, AbsentLimitAndFenceReadAsTheScriptsDefaults) {
  auto first = held_and_queued();
  first[1] = nil();
  first[5] = nil();
  first[4] = array({});
  const auto pending = read_first(first, k_now);
  ASSERT_TRUE(pending);
  EXPECT_EQ(pending->limit, 1);
  EXPECT_EQ(pending->last_fence, 0);
  Commands second;
  EXPECT_EQ(second_round(*pending, k_keys, second), 1U);  // the holder's record only
}

TEST(StatusReads, LeavesAnythingUnusualToTheScript) {
  const auto with = [](std::size_t index, redis::Reply reply) {
    auto first = held_and_queued();
    first[index] = std::move(reply);
    return read_first(first, k_now);
  };
  EXPECT_TRUE(with(0, status("hash")));
  EXPECT_FALSE(with(0, status("none")));    // gone since SCAN: the script checks every key
  EXPECT_FALSE(with(0, status("string")));  // foreign
  EXPECT_FALSE(with(1, string("abc")));     // Lua's tonumber: nil, then 1
  EXPECT_FALSE(with(1, string(" 3")));
  EXPECT_FALSE(with(2, error("WRONGTYPE Operation against a key holding the wrong kind of value")));
  EXPECT_FALSE(with(2, array({string("aaaaaaaaaa"), string("inf")})));
  EXPECT_FALSE(with(2, array({string("aaaaaaaaaa"), string("1.7e12")})));
  EXPECT_FALSE(with(2, array({string("aaaaaaaaaa"), string("1700000000000.5")})));
  EXPECT_FALSE(with(3, error("MOVED 3999 127.0.0.1:7001")));
  EXPECT_FALSE(with(4, error("NOPERM this user has no permissions to run the 'zrange' command")));
  EXPECT_FALSE(with(5, string("1e3")));
  EXPECT_TRUE(with(5, string("1795350950866118")));   // a real fence: 16 digits
  EXPECT_TRUE(with(5, string("9007199254740992")));   // 2^53
  EXPECT_FALSE(with(5, string("9007199254740993")));  // beyond: not exact in Lua
  EXPECT_FALSE(with(5, string("12345678901234567")));
  EXPECT_FALSE(with(6, error("WRONGTYPE Operation against a key holding the wrong kind of value")));
  const auto first = held_and_queued();
  EXPECT_FALSE(read_first(std::span(first).first(6), k_now));

  const auto pending = read_first(first, k_now);
  ASSERT_TRUE(pending);
  const std::vector<redis::Reply> wrongtype{
      error("WRONGTYPE Operation against a key holding the wrong kind of value"), array({}), nil(),
      nil()};
  EXPECT_FALSE(finish(*pending, wrongtype));
  const std::vector<redis::Reply> odd_lease{nil(), array({string("cccccccccc"), string("nan")}),
                                            nil(), nil()};
  EXPECT_FALSE(finish(*pending, odd_lease));
  EXPECT_FALSE(finish(*pending, std::span(wrongtype).first(3)));
}

TEST(StatusReads, NowIsTheServersTimeInMilliseconds) {
  EXPECT_EQ(now_of(array({string("1700000000"), string("123999")})), 1'700'000'000'123);
  EXPECT_FALSE(now_of(error("NOPERM")));
  EXPECT_FALSE(now_of(array({string("x"), string("1")})));
}

}  // namespace
}  // namespace rlock::backend::status_reads
