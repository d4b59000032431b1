// The replicas a SENTINEL REPLICAS reply counts for --replicas all.

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "backend/sentinel.h"

namespace rlock::backend {
namespace {

redis::Reply bulk(std::string s) {
  redis::Reply r;
  r.type = redis::Reply::Type::string;
  r.str = std::move(s);
  return r;
}

/// One replica as Sentinel lists it (flat field/value pairs).
redis::Reply replica(const std::string& port, const std::string& flags,
                     const std::string& link = "ok") {
  redis::Reply r;
  r.type = redis::Reply::Type::array;
  for (const char* field :
       {"name", "ip", "port", "flags", "master-link-status", "slave-priority"}) {
    r.elements.push_back(bulk(field));
    const std::string f = field;
    r.elements.push_back(bulk(f == "flags"                ? flags
                              : f == "port"               ? port
                              : f == "master-link-status" ? link
                                                          : "x"));
  }
  return r;
}

redis::Reply list(std::initializer_list<redis::Reply> replicas) {
  redis::Reply r;
  r.type = redis::Reply::Type::array;
  r.elements = replicas;
  return r;
}

TEST(LiveReplicas, CountsReachableOnesAndTheOneJustPromoted) {
  EXPECT_EQ(live_replicas(list({})), 0);
  EXPECT_EQ(live_replicas(list({replica("1", "slave"), replica("2", "slave")})), 2);
  // The leading Sentinel, a moment into a failover: the promoted replica has
  // left the old master, which still takes writes.
  EXPECT_EQ(
      live_replicas(list({replica("1", "slave"), replica("2", "slave,disconnected,promoted")})), 2);
  EXPECT_EQ(
      live_replicas(list({replica("1", "slave,reconf_sent"), replica("2", "slave,promoted")})), 2);
  // Down, or out of the Sentinel's reach: not waited for.
  EXPECT_EQ(live_replicas(list({replica("1", "s_down,slave,disconnected"), replica("2", "slave")})),
            1);
  EXPECT_EQ(live_replicas(list({replica("1", "slave,disconnected")})), 0);
  // The link status the Sentinel last heard is not trusted: after a
  // failover it said "err" for an old master rejoining that did
  // acknowledge writes.
  EXPECT_EQ(live_replicas(list({replica("1", "slave", "err"), replica("2", "slave")})), 2);
  EXPECT_EQ(live_replicas(list({replica("1", "slave,promoted", "err")})), 1);
  EXPECT_EQ(live_replicas(list({replica("1", "s_down,slave,promoted")})), 0);
}

TEST(LiveReplicas, NotAListIsUnknown) {
  EXPECT_EQ(live_replicas(bulk("ERR unknown subcommand")), -1);
  redis::Reply nil;
  EXPECT_EQ(live_replicas(nil), -1);
}

}  // namespace
}  // namespace rlock::backend
