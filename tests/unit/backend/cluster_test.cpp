#include "backend/cluster.h"

#include <gtest/gtest.h>

#include "../lock/replies.h"
#include "lock/keys.h"

namespace rlock::backend {
namespace {

using lock::test::array;
using lock::test::integer;
using lock::test::string;

redis::Reply node(std::string host, int port, std::string id = "0123abcd") {
  return array({string(std::move(host)), integer(port), string(std::move(id))});
}

TEST(Crc16, MatchesTheReferenceCheckValue) {
  // The XMODEM check value, as in the Redis Cluster specification.
  EXPECT_EQ(crc16("123456789"), 0x31C3);
  EXPECT_EQ(crc16(""), 0);
}

TEST(KeySlot, MatchesRedisForPlainKeys) {
  // Values from CLUSTER KEYSLOT on Redis 7.
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("bar"), 5061);
  EXPECT_EQ(key_slot("123456789"), 12739);
}

TEST(KeySlot, HashesOnlyTheFirstNonEmptyTag) {
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("{user1000}.followers"), key_slot("user1000"));
  // Only the first `{` counts, up to the next `}`.
  EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
  EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));
  // An empty tag, or none closed, hashes the whole key.
  EXPECT_EQ(key_slot("foo{}{bar}"), crc16("foo{}{bar}") % 16384);
  EXPECT_EQ(key_slot("foo{bar"), crc16("foo{bar") % 16384);
}

TEST(KeySlot, EveryKeyOfALockAndItsWakeListsShareOneSlot) {
  for (const std::string name : {"build", "a{b}c", "{}", "}{", "100%", "x:y:z", "\xff\xfe"}) {
    const auto keys = lock::lock_keys("rlock:", name);
    const int slot = key_slot(keys.front());
    EXPECT_EQ(slot, key_slot(lock::escape_name(name))) << name;
    for (const auto& key : keys) EXPECT_EQ(key_slot(key), slot) << key;
    EXPECT_EQ(key_slot(lock::wake_key("rlock:", name, "sometoken")), slot) << name;
  }
}

TEST(ParseClusterSlots, ReadsRangesMastersAndReplicas) {
  const auto reply = array({
      array({integer(0), integer(5460), node("127.0.0.1", 7000), node("127.0.0.1", 7004)}),
      array({integer(5461), integer(10922), node("127.0.0.1", 7001)}),
      array({integer(10923), integer(16383), node("::1", 7002), node("127.0.0.1", 7003),
             node("127.0.0.1", 7005)}),
  });
  auto ranges = parse_cluster_slots(reply, "10.0.0.1");
  ASSERT_TRUE(ranges) << ranges.error().message;
  ASSERT_EQ(ranges->size(), 3u);
  EXPECT_EQ((*ranges)[0].first, 0);
  EXPECT_EQ((*ranges)[0].last, 5460);
  EXPECT_EQ((*ranges)[0].master, (NodeAddress{"127.0.0.1", 7000}));
  ASSERT_EQ((*ranges)[0].replicas.size(), 1u);
  EXPECT_EQ((*ranges)[0].replicas[0], (NodeAddress{"127.0.0.1", 7004}));
  EXPECT_TRUE((*ranges)[1].replicas.empty());
  EXPECT_EQ((*ranges)[2].master.text(), "[::1]:7002");
  EXPECT_EQ((*ranges)[2].replicas.size(), 2u);
}

TEST(ParseClusterSlots, AnEmptyHostIsTheNodeAskedAndAnUnknownOneIsSkipped) {
  const auto reply = array({
      array({integer(0), integer(100), node("", 7000), node("?", 7003)}),
      array({integer(101), integer(200), node("?", 7001)}),
  });
  auto ranges = parse_cluster_slots(reply, "10.0.0.1");
  ASSERT_TRUE(ranges) << ranges.error().message;
  ASSERT_EQ(ranges->size(), 1u);
  EXPECT_EQ((*ranges)[0].master, (NodeAddress{"10.0.0.1", 7000}));
  EXPECT_TRUE((*ranges)[0].replicas.empty());
}

TEST(ParseClusterSlots, RefusesMalformedReplies) {
  const redis::Reply bad[] = {
      string("OK"),
      array({array({integer(0), integer(100)})}),                      // no master
      array({array({integer(100), integer(0), node("h", 1)})}),        // reversed
      array({array({integer(0), integer(16384), node("h", 1)})}),      // past the last slot
      array({array({integer(0), integer(1), node("h", 0)})}),          // port 0
      array({array({integer(0), integer(1), array({string("h")})})}),  // no port
      array({array({string("0"), integer(1), node("h", 1)})}),         // slot as string
  };
  for (const auto& reply : bad) {
    auto ranges = parse_cluster_slots(reply, "h");
    ASSERT_FALSE(ranges);
    EXPECT_EQ(ranges.error().code, Error::Code::protocol);
  }
}

TEST(ParseRedirect, ReadsMovedAndAsk) {
  auto moved = parse_redirect("MOVED 3999 127.0.0.1:6381", "seed");
  ASSERT_TRUE(moved);
  EXPECT_FALSE(moved->ask);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->node, (NodeAddress{"127.0.0.1", 6381}));

  auto ask = parse_redirect("ASK 16383 [::1]:7000", "seed");
  ASSERT_TRUE(ask);
  EXPECT_TRUE(ask->ask);
  EXPECT_EQ(ask->slot, 16383);
  EXPECT_EQ(ask->node, (NodeAddress{"::1", 7000}));

  // Redis 7 leaves the host out when it does not know the node's endpoint.
  auto bare = parse_redirect("MOVED 1 :7001", "10.1.1.1");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->node, (NodeAddress{"10.1.1.1", 7001}));
  // A hostname endpoint (cluster-preferred-endpoint-type hostname).
  auto named = parse_redirect("MOVED 7 redis-2.example:6379", "seed");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->node, (NodeAddress{"redis-2.example", 6379}));
}

TEST(ParseRedirect, RefusesAnythingElse) {
  for (const char* message :
       {"ERR MOVED 1 h:1", "MOVED", "MOVED 1", "MOVED x h:1", "MOVED 16384 h:1", "MOVED 1 h",
        "MOVED 1 h:0", "MOVED 1 h:99999", "ASKING 1 h:1", "CLUSTERDOWN The cluster is down"})
    EXPECT_FALSE(parse_redirect(message, "seed")) << message;
}

}  // namespace
}  // namespace rlock::backend

namespace rlock::backend {
namespace {

TEST(MigratingSlots, SeenOnlyOnTheNodesOwnLine) {
  const std::string idle =
      "07c3 127.0.0.1:30004@40004 slave e7d1 0 1426238317239 4 connected\n"
      "67ed 127.0.0.1:30002@40002 master - 0 1426238316232 2 connected 5461-10922\n"
      "e7d1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460\n";
  EXPECT_FALSE(migrating_slots(idle));
  EXPECT_FALSE(migrating_slots(""));
  // Migrating away, importing: both on the node's own ("myself") line.
  EXPECT_TRUE(migrating_slots(
      "e7d1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 [93->-67ed]\n"));
  EXPECT_TRUE(migrating_slots(
      "67ed 127.0.0.1:30002@40002 master - 0 1 2 connected 5461-10922\n"
      "e7d1 127.0.0.1:30001@40001 master,myself - 0 0 1 connected 0-5460 [77-<-67ed]"));
  // A marker on another node's line is not this node's (Redis never
  // writes one there; a hostname with the characters neither counts).
  EXPECT_FALSE(
      migrating_slots("67ed 127.0.0.1:30002@40002,a->-b master - 0 1 2 connected 5461-10922\n"
                      "e7d1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460\n"));
}

}  // namespace
}  // namespace rlock::backend
