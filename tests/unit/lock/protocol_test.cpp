#include "lock/protocol.h"

#include <gtest/gtest.h>

#include "replies.h"

namespace rlock::lock {
namespace {

using redis::Reply;

using test::array;
using test::integer;
using test::string;

Request request(int limit = 1) {
  Request r;
  r.name = "job";
  r.ttl = Millis(20'000);
  r.limit = limit;
  r.who = Identity{"me@host", "host", 42, "make"};
  return r;
}

TEST(Protocol, AcquireEncodesEveryArgumentInTheScriptsOrder) {
  auto call = acquire_call(request(3), "tok", true);
  ASSERT_EQ(call.args.size(), 8U);
  EXPECT_EQ(call.args[0], "acquire");
  EXPECT_EQ(call.args[1], "tok");
  EXPECT_EQ(call.args[2], "exclusive");
  EXPECT_EQ(call.args[3], "3");
  EXPECT_EQ(call.args[4], "20000");
  EXPECT_EQ(call.args[6], "1");
  EXPECT_EQ(call.args[7], std::to_string(k_waiter_lease.count()));
  Request shared = request();
  shared.shared = true;
  EXPECT_EQ(acquire_call(shared, "tok", false).args[2], "shared");
  EXPECT_EQ(acquire_call(shared, "tok", false).args[6], "0");
}

TEST(Protocol, OnlyLeaseWritesAskForReplicas) {
  EXPECT_EQ(acquire_call(request(), "t", true).replicate_within, Millis(1000));
  EXPECT_EQ(renew_call("t", Millis(3000)).replicate_within, Millis(300));
  EXPECT_FALSE(release_call("t").replicate_within);
  EXPECT_FALSE(status_call().replicate_within);
  EXPECT_FALSE(force_call("", Identity{}, "default").replicate_within);
}

TEST(Protocol, AGiveBackThatKeepsTheQueuePlaceSaysSo) {
  using Args = std::vector<std::string>;
  EXPECT_EQ(release_call("t").args, (Args{"release", "t"}));
  EXPECT_EQ(release_call("t", KeepPlace::queued).args, (Args{"release", "t", "1"}));
  EXPECT_EQ(release_call("t", KeepPlace::granted).args, (Args{"release", "t", "2"}));
}

TEST(Protocol, OnlyAnExactRenewalMayShortenTheLease) {
  using Args = std::vector<std::string>;
  EXPECT_EQ(renew_call("t", Millis(1000)).args, (Args{"renew", "t", "1000"}));
  EXPECT_EQ(renew_call("t", Millis(1000), true).args, (Args{"renew", "t", "1000", "exact"}));
}

TEST(Protocol, ReplicationTimeoutIsATenthOfTheTtlAtMostOneSecond) {
  EXPECT_EQ(replication_timeout(Millis(100)), Millis(10));
  EXPECT_EQ(replication_timeout(Millis(2000)), Millis(200));
  EXPECT_EQ(replication_timeout(Millis(10'000)), Millis(1000));
  EXPECT_EQ(replication_timeout(Millis(3'600'000)), Millis(1000));
  EXPECT_EQ(replication_timeout(Millis(5)), Millis(1));
}

TEST(Protocol, LeaseWrittenOnlyWhenGrantedOrExtended) {
  auto acquire = acquire_call(request(), "t", true);
  ASSERT_NE(acquire.wrote_lease, nullptr);
  EXPECT_TRUE(acquire.wrote_lease(array({integer(1), integer(7)})));
  EXPECT_FALSE(acquire.wrote_lease(array({integer(0), integer(2)})));
  EXPECT_FALSE(acquire.wrote_lease(integer(1)));
  auto renew = renew_call("t", Millis(0));
  ASSERT_NE(renew.wrote_lease, nullptr);
  EXPECT_TRUE(renew.wrote_lease(integer(30'000)));
  EXPECT_FALSE(renew.wrote_lease(integer(0)));
}

TEST(Protocol, AttemptGrantedCarriesTheFence) {
  auto a = decode_attempt(request(), array({integer(1), integer(1'732'272'000'000'123)}));
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->acquired);
  EXPECT_EQ(a->fence, 1'732'272'000'000'123);
}

TEST(Protocol, AttemptQueuedCarriesPositionAndHolder) {
  // fence, since, mode, ttl, blob (lock.lua's record)
  const std::string record = "5\n1000\nexclusive\n20000\n7:alice@a1:a2:424:make";
  auto a = decode_attempt(
      request(), array({integer(0), integer(2), string(record), integer(1500), integer(4000)}));
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->acquired);
  EXPECT_EQ(a->position, 2);
  ASSERT_TRUE(a->holder);
  EXPECT_EQ(a->holder->fence, 5);
  EXPECT_EQ(a->holder->age, Millis(3000));
}

TEST(Protocol, AttemptWithAnotherLimitIsAUsageError) {
  auto a = decode_attempt(request(2), array({integer(-1), integer(5)}));
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, Error::Code::usage);
  EXPECT_NE(a.error().message.find("--limit 5, not --limit 2"), std::string::npos);
}

TEST(Protocol, AnAttemptInAStateNoScriptGivesIsAProtocolError) {
  for (const long long state : {7LL, 2LL, -2LL, -9LL}) {
    auto a = decode_attempt(request(), array({integer(state), integer(0)}));
    ASSERT_FALSE(a) << state;
    EXPECT_EQ(a.error().code, Error::Code::protocol) << state;
  }
}

TEST(Protocol, MalformedRepliesAreProtocolErrors) {
  for (const Reply& r :
       {integer(1), array({}), array({integer(1)}), array({array({}), integer(1)})}) {
    auto a = decode_attempt(request(), r);
    ASSERT_FALSE(a);
    EXPECT_EQ(a.error().code, Error::Code::protocol);
  }
  EXPECT_EQ(decode_status("x", integer(1)).error().code, Error::Code::protocol);
  EXPECT_EQ(decode_force(integer(1)).error().code, Error::Code::protocol);
  EXPECT_FALSE(decode_renew("x", array({})));
  EXPECT_FALSE(decode_release("x", string("yes")));
}

TEST(Protocol, RenewAndReleaseOfALostTokenAreNotOwner) {
  EXPECT_EQ(*decode_renew("x", integer(30'000)), Millis(30'000));
  EXPECT_EQ(decode_renew("x", integer(0)).error().code, Error::Code::not_owner);
  EXPECT_TRUE(decode_release("x", integer(1)));
  EXPECT_EQ(decode_release("x", integer(0)).error().code, Error::Code::not_owner);
}

TEST(Protocol, StatusDecodesHoldersWaitersAndLastFence) {
  const std::string holder = "9\n1000\nexclusive\n20000\n7:alice@a1:a2:424:make";
  const std::string waiter = "0\n2000\nexclusive\n0\n5:bob@b1:b2:430:";
  auto view = decode_status(
      "job", array({integer(5000), integer(1), integer(9),
                    array({string("aaaaaaaa"), integer(15'000), string(holder)}),
                    array({string("bbbbbbbb"), integer(0), string(waiter)}), string("")}));
  ASSERT_TRUE(view);
  EXPECT_EQ(view->name, "job");
  EXPECT_EQ(view->last_fence, 9);
  ASSERT_EQ(view->holders.size(), 1U);
  EXPECT_EQ(view->holders[0].id, "aaaaaaaa");
  EXPECT_EQ(view->holders[0].who.owner, "alice@a");
  EXPECT_EQ(view->holders[0].ttl_left, Millis(15'000));
  ASSERT_EQ(view->waiters.size(), 1U);
  EXPECT_EQ(view->waiters[0].position, 1);
  EXPECT_EQ(view->waiters[0].waiting, Millis(3000));
}

TEST(Protocol, ForceDecodesTheEvictedHolders) {
  const std::string holder = "3\n1000\nshared\n20000\n7:alice@a1:a2:424:make";
  auto evicted = decode_force(array({integer(2000), string("cccccccc"), string(holder)}));
  ASSERT_TRUE(evicted);
  ASSERT_EQ(evicted->size(), 1U);
  EXPECT_EQ((*evicted)[0].id, "cccccccc");
  EXPECT_EQ((*evicted)[0].mode, "shared");
  EXPECT_EQ(force_call("cccccccc", Identity{}, "ops").args[3], "ops");
}

}  // namespace
}  // namespace rlock::lock

namespace rlock::lock {
namespace {

TEST(NestedRun, RunsAtOnceOnlyWhenTheEnclosingHoldCoversTheRequest) {
  auto request = [](bool shared, int limit) {
    Request r;
    r.name = "n";
    r.shared = shared;
    r.limit = limit;
    return r;
  };
  auto held = [](std::string mode, bool recorded = true) {
    HolderView h;
    h.mode = std::move(mode);
    h.recorded = recorded;
    return h;
  };
  // Exclusive covers exclusive and shared; shared only shared; a semaphore
  // slot only the same limit.
  EXPECT_TRUE(nested_request_fits(request(false, 1), held("exclusive"), 1).has_value());
  EXPECT_TRUE(nested_request_fits(request(true, 1), held("exclusive"), 1).has_value());
  EXPECT_TRUE(nested_request_fits(request(true, 1), held("shared"), 1).has_value());
  EXPECT_TRUE(nested_request_fits(request(false, 3), held("semaphore"), 3).has_value());
  auto upgrade = nested_request_fits(request(false, 1), held("shared"), 1);
  ASSERT_FALSE(upgrade.has_value());
  EXPECT_EQ(upgrade.error().code, Error::Code::usage);
  EXPECT_NE(upgrade.error().message.find("held shared"), std::string::npos);
  EXPECT_NE(upgrade.error().message.find("taking it exclusively"), std::string::npos);
  EXPECT_FALSE(nested_request_fits(request(false, 1), held("semaphore"), 3).has_value());
  EXPECT_FALSE(nested_request_fits(request(false, 2), held("semaphore"), 3).has_value());
  EXPECT_FALSE(nested_request_fits(request(true, 1), held("semaphore"), 3).has_value());
  EXPECT_FALSE(nested_request_fits(request(false, 2), held("exclusive"), 1).has_value());
  EXPECT_FALSE(nested_request_fits(request(false, 2), held("shared"), 1).has_value());
  // A holder whose record is gone: how it holds the lock is unknown.
  EXPECT_FALSE(nested_request_fits(request(true, 1), held("", false), 1).has_value());
}

}  // namespace
}  // namespace rlock::lock
