// The quorum arithmetic of the lock protocol (Redlock), without a server.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "lock/keys.h"
#include "lock/protocol.h"
#include "replies.h"
#include "supervise/timing.h"

namespace rlock::lock {
namespace {

using redis::Reply;
using State = MemberReply::State;

using test::array;
using test::integer;
using test::string;

MemberReply replied(Reply reply) {
  return MemberReply{State::replied, std::move(reply), ""};
}
MemberReply failed() {
  return MemberReply{State::failed, {}, "Connection refused"};
}
MemberReply pending() {
  return MemberReply{};
}
MemberReply granted(std::int64_t fence) {
  return replied(array({integer(1), integer(fence)}));
}
MemberReply queued(std::int64_t position) {
  return replied(array({integer(0), integer(position), string(""), integer(0), integer(5)}));
}
MemberReply young() {
  return replied(array({integer(-2), integer(1000)}));
}

TEST(Quorum, MajorityIsHalfRoundedDownPlusOne) {
  EXPECT_EQ(majority(1), 1u);
  EXPECT_EQ(majority(2), 2u);
  EXPECT_EQ(majority(3), 2u);
  EXPECT_EQ(majority(4), 3u);
  EXPECT_EQ(majority(5), 3u);
}

TEST(Quorum, ValidityIsTtlLessTimeSpentLessDrift) {
  EXPECT_EQ(clock_drift(Millis(10'000)), Millis(102));
  EXPECT_EQ(validity(Millis(10'000), Millis(50)), Millis(10'000 - 50 - 102));
  EXPECT_LE(validity(Millis(1000), Millis(990)), Millis(0));
}

TEST(Quorum, RunsSafetyMarginCoversTheDrift) {
  // run's deadline (last confirmed send + TTL - margin) ends before the
  // validity (send + TTL - drift) as long as the margin exceeds the drift.
  for (Millis ttl : {Millis(100), Millis(499), Millis(500), Millis(1000), Millis(2000),
                     Millis(30'000), Millis(3'600'000)})
    EXPECT_GT(supervise::safety_margin(ttl), clock_drift(ttl)) << ttl.count();
}

TEST(Quorum, AcquireVerdictAsRepliesArrive) {
  struct Case {
    const char* what;
    std::vector<MemberReply> members;
    Verdict verdict;
    std::int64_t fence;
  };
  const std::vector<Case> cases = {
      {"nothing yet", {pending(), pending(), pending(), pending(), pending()}, Verdict::pending, 0},
      {"two grants, three pending",
       {granted(5), granted(7), pending(), pending(), pending()},
       Verdict::pending,
       7},
      {"three of five granted, two frozen",
       {granted(5), granted(9), granted(7), pending(), pending()},
       Verdict::yes,
       9},
      {"three refusals: no majority possible",
       {granted(5), queued(1), queued(2), failed(), pending()},
       Verdict::no,
       5},
      {"two refusals and a dead member: busy or out of reach is not known yet",
       {queued(1), queued(2), failed(), pending(), pending()},
       Verdict::pending,
       0},
      {"three refusals and a dead member: busy",
       {queued(1), queued(2), failed(), queued(3), pending()},
       Verdict::no,
       0},
      {"three dead members and a refusal: out of reach",
       {queued(1), failed(), failed(), failed(), pending()},
       Verdict::no,
       0},
      {"two young members do not count",
       {granted(5), granted(6), young(), young(), queued(1)},
       Verdict::no,
       6},
      {"two refusals and a young member: busy or too young is not known yet",
       {queued(1), queued(2), young(), pending(), pending()},
       Verdict::pending,
       0},
      {"two refusals, a young member and two dead: no majority that counts",
       {queued(1), queued(2), young(), failed(), failed()},
       Verdict::no,
       0},
      {"three dead members",
       {granted(5), granted(6), failed(), failed(), failed()},
       Verdict::no,
       6},
      {"a malformed reply counts as failed",
       {granted(5), granted(6), replied(integer(3)), failed(), failed()},
       Verdict::no,
       6},
  };
  for (const auto& c : cases) {
    auto count = count_acquire(c.members);
    EXPECT_EQ(count.verdict, c.verdict) << c.what;
    EXPECT_EQ(count.fence, c.fence) << c.what;
  }
}

TEST(Quorum, AcquireSplitWhenOnlyTheSilentMembersCouldMakeAMajority) {
  struct Case {
    const char* what;
    std::vector<MemberReply> members;
    Verdict verdict;
    bool split;
  };
  const std::vector<Case> cases = {
      {"two grants, two refusals, one frozen (the probe's stall)",
       {granted(5), queued(1), queued(1), granted(6), pending()},
       Verdict::pending,
       true},
      {"the same with the fifth member dead",
       {granted(5), queued(1), queued(1), granted(6), failed()},
       Verdict::no,
       true},
      {"one grant, two refusals, two frozen",
       {queued(1), granted(5), pending(), queued(2), pending()},
       Verdict::pending,
       true},
      {"two grants, one refusal, two silent: the silent decide",
       {granted(5), granted(6), queued(1), pending(), pending()},
       Verdict::pending,
       true},
      {"two grants, two pending: no majority answered",
       {granted(5), granted(6), pending(), pending(), failed()},
       Verdict::pending,
       false},
      {"every member answered: the fifth broke the tie",
       {granted(5), queued(1), queued(1), granted(6), queued(2)},
       Verdict::no,
       false},
      {"one grant and three refusals: no majority even with the silent one",
       {granted(5), queued(1), queued(1), queued(2), pending()},
       Verdict::no,
       false},
      {"no grant", {queued(1), queued(1), queued(2), pending(), pending()}, Verdict::no, false},
      {"a majority granted",
       {granted(5), granted(6), granted(7), queued(1), pending()},
       Verdict::yes,
       false},
  };
  for (const auto& c : cases) {
    auto count = count_acquire(c.members);
    EXPECT_EQ(count.verdict, c.verdict) << c.what;
    EXPECT_EQ(count.split, c.split) << c.what;
  }
}

TEST(Quorum, AcquireRefusalShowsTheNearestQueuePositionAndTheQueuedMembers) {
  auto count = count_acquire({queued(3), granted(4), queued(1), failed(), queued(2)});
  EXPECT_EQ(count.verdict, Verdict::no);
  EXPECT_EQ(count.refusal.elements[1].integer, 1);
  EXPECT_EQ(count.queued, (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_EQ(count.grants, (std::vector<std::size_t>{1}));
}

TEST(Quorum, AcquireCountsTheMembersTooYoungToCount) {
  auto count = count_acquire({young(), young(), queued(1), young(), granted(4)});
  EXPECT_EQ(count.verdict, Verdict::no);
  EXPECT_EQ(count.young, 3u);
  EXPECT_EQ(count.refused, 4u);
}

TEST(Quorum, AnAcquireInAStateNoScriptGivesIsAFailedMember) {
  auto count = count_acquire({replied(array({integer(7), integer(0)})), granted(4),
                              replied(array({integer(-3), integer(0)}))});
  EXPECT_EQ(count.failed, 2u);
  EXPECT_EQ(count.young, 0u);
  EXPECT_EQ(count.refused, 0u);
  EXPECT_EQ(count.granted, 1u);
}

TEST(Quorum, AGrantFromAMemberYoungerThanAHolderOthersShowDoesNotCount) {
  // The probe's case: the holder renewed itself to 60 s with renew --ttl;
  // two of three members restarted empty and, up for longer than the
  // newcomer's 5 s TTL, granted: two grants of three were a second holder.
  const std::string run_id(40, 'a');
  const auto grant = [&](std::int64_t uptime_ms) {
    return replied(array({integer(1), integer(9), integer(uptime_ms), string(run_id)}));
  };
  // Busy: held by a holder whose record says since 1000, at server time 13000.
  const auto busy =
      replied(array({integer(0), integer(0), string("8\n1000\nexclusive\n5000\n"), integer(50000),
                     integer(13000), integer(600000), string(run_id)}));
  auto count = count_acquire({busy, grant(7000), grant(7000)});
  EXPECT_EQ(count.granted, 0u);
  EXPECT_EQ(count.verdict, Verdict::no);
  // Up for longer than the holder has held it: they would have seen it, and
  // their grants count.
  count = count_acquire({busy, grant(13000), grant(20000)});
  EXPECT_EQ(count.granted, 2u);
  EXPECT_EQ(count.verdict, Verdict::yes);
  // A holder whose lease is over (ttl 0) is no reason.
  const auto ended = replied(array({integer(0), integer(0), string("8\n1000\nexclusive\n5000\n"),
                                    integer(0), integer(13000), integer(600000), string(run_id)}));
  EXPECT_EQ(count_acquire({ended, grant(7000), grant(7000)}).verdict, Verdict::yes);
}

TEST(Quorum, OneHolderShownByAMajorityIsNoSplitAmongWaiters) {
  // {0, position, record, holder_ttl, now}: the record's fence and since
  // differ between members, its identity (after the fourth line) does not.
  const auto busy = [](std::string_view fence, std::string_view who, std::int64_t ttl) {
    return replied(array({integer(0), integer(1),
                          string(fmt::format("{}\n1000\nexclusive\n5000\n{}", fence, who)),
                          integer(ttl), integer(2000)}));
  };
  // The holder on two members of three, the third granting: held.
  auto count = count_acquire({busy("8", "4:h@x,1:x,3:123,4:true,", 4000),
                              busy("9", "4:h@x,1:x,3:123,4:true,", 4000), granted(3)});
  EXPECT_EQ(count.verdict, Verdict::no);
  EXPECT_TRUE(count.held_by_majority);
  // Two different waiters granted on two members: contention.
  count = count_acquire({busy("8", "4:h@x,1:x,3:123,4:true,", 4000),
                         busy("9", "4:h@x,1:x,3:124,4:true,", 4000), granted(3)});
  EXPECT_FALSE(count.held_by_majority);
  // Five members: the same holder on two only, a split with a third waiter.
  count = count_acquire(
      {busy("8", "a", 4000), busy("8", "a", 4000), busy("8", "b", 4000), granted(3), granted(4)});
  EXPECT_FALSE(count.held_by_majority);
  // A lease that is over, or a record without an identity, shows nobody.
  count = count_acquire({busy("8", "a", 0), busy("9", "a", 0), granted(3)});
  EXPECT_FALSE(count.held_by_majority);
  count = count_acquire({busy("8", "", 4000), busy("9", "", 4000), granted(3)});
  EXPECT_FALSE(count.held_by_majority);
}

TEST(Quorum, AcquireLimitMismatchFromAnyMemberIsTheRefusal) {
  auto count = count_acquire({queued(1), replied(array({integer(-1), integer(3)})), queued(1)});
  EXPECT_EQ(count.refusal.elements[0].integer, -1);
  EXPECT_EQ(count.refusal.elements[1].integer, 3);
}

TEST(Quorum, RenewNeedsAMajorityAndTellsLostFromUnreachable) {
  auto ok = count_renew({replied(integer(3000)), replied(integer(2000)), failed()});
  EXPECT_EQ(ok.verdict, Verdict::yes);
  EXPECT_EQ(ok.ttl, Millis(2000));
  auto waiting = count_renew({replied(integer(3000)), pending(), pending()});
  EXPECT_EQ(waiting.verdict, Verdict::pending);
  auto out_of_reach = count_renew({replied(integer(3000)), failed(), failed()});
  EXPECT_EQ(out_of_reach.verdict, Verdict::no);
  EXPECT_FALSE(out_of_reach.lost);
  auto lost = count_renew({replied(integer(3000)), replied(integer(0)), replied(integer(0))});
  EXPECT_EQ(lost.verdict, Verdict::no);
  EXPECT_TRUE(lost.lost);
}

TEST(Quorum, ReleaseIsDecidedByAllOrByAMajorityWithOneRelease) {
  EXPECT_FALSE(
      count_release({replied(integer(1)), pending(), pending(), pending(), pending()}).decided);
  auto majority_done =
      count_release({replied(integer(1)), replied(integer(0)), failed(), pending(), pending()});
  EXPECT_TRUE(majority_done.decided);
  EXPECT_EQ(majority_done.released, 1u);
  auto none = count_release({replied(integer(0)), replied(integer(0)), replied(integer(0))});
  EXPECT_TRUE(none.decided);
  EXPECT_EQ(none.released, 0u);
}

Reply status_reply(std::int64_t fence, std::vector<std::string> holders,
                   std::vector<std::string> waiters = {}) {
  std::vector<Reply> h, w;
  for (auto& id : holders) {
    h.push_back(string(id));
    h.push_back(integer(1000));
    h.push_back(string(""));
  }
  for (auto& id : waiters) {
    w.push_back(string(id));
    w.push_back(integer(1000));
    w.push_back(string(""));
  }
  return array({integer(7), integer(1), integer(fence), array(h), array(w), string("")});
}

TEST(Quorum, StatusShowsMajorityHoldersAndMarksEveryMember) {
  auto combined =
      combine_status({"a", "b", "c", "d", "e"}, {replied(status_reply(10, {"aaaa"}, {"w1"})),
                                                 replied(status_reply(12, {"aaaa"})),
                                                 replied(status_reply(9, {"aaaa"}, {"w2", "w1"})),
                                                 replied(status_reply(30, {"bbbb"})), failed()});
  auto view = decode_status("x", combined);
  ASSERT_TRUE(view.has_value()) << view.error().message;
  ASSERT_EQ(view->holders.size(), 1u);
  EXPECT_EQ(view->holders[0].id, "aaaa");
  EXPECT_EQ(view->last_fence, 30);
  ASSERT_EQ(view->waiters.size(), 2u);
  EXPECT_EQ(view->waiters[0].id, "w1");
  EXPECT_EQ(view->waiters[1].id, "w2");
  ASSERT_EQ(view->members.size(), 5u);
  EXPECT_EQ(view->members[0].state, "ok");
  EXPECT_EQ(view->members[3].member, "d");
  EXPECT_EQ(view->members[3].state, "disagrees");
  EXPECT_EQ(view->members[3].holders, (std::vector<std::string>{"bbbb"}));
  EXPECT_EQ(view->members[4].state, "unreachable");
  EXPECT_EQ(view->members[4].problem, "Connection refused");
}

/// A status reply whose audit key holds forced releases at `times` (the
/// member's own ms, newest first); the member's now is 10000.
Reply status_with_audit(const std::vector<std::int64_t>& times) {
  std::vector<std::string> entries;
  for (const auto t : times) entries.push_back(netstrings({std::to_string(t), "", "ops"}));
  return array(
      {integer(10000), integer(1), integer(1), array({}), array({}), string(netstrings(entries))});
}

// Before, the first member's audit was shown: one that was down during the
// release --force (none) hid the release the others recorded.
TEST(Quorum, StatusShowsTheForcedReleasesOfTheMemberThatSawTheLatest) {
  auto view =
      decode_status("x", combine_status({"a", "b", "c"}, {replied(status_with_audit({})),
                                                          replied(status_with_audit({9000, 5000})),
                                                          replied(status_with_audit({9000}))}));
  ASSERT_TRUE(view.has_value()) << view.error().message;
  ASSERT_EQ(view->forced.size(), 2u);
  EXPECT_EQ(view->forced[0].ago, Millis(1000));
  EXPECT_EQ(view->forced[0].acl_user, "ops");
  auto newer =
      decode_status("x", combine_status({"a", "b"}, {replied(status_with_audit({7000, 5000, 3000})),
                                                     replied(status_with_audit({9500}))}));
  ASSERT_TRUE(newer.has_value());
  ASSERT_EQ(newer->forced.size(), 1u);
  EXPECT_EQ(newer->forced[0].ago, Millis(500));
}

TEST(Quorum, StatusWithoutAMajorityHolderIsFree) {
  auto view = decode_status(
      "x", combine_status({"a", "b", "c"},
                          {replied(status_reply(1, {"aaaa"})), replied(empty_status()), failed()}));
  ASSERT_TRUE(view.has_value());
  EXPECT_TRUE(view->holders.empty());
  EXPECT_EQ(view->members[0].state, "disagrees");
  EXPECT_EQ(view->members[1].state, "ok");
}

constexpr Millis k_ttl{30000};

TEST(Quorum, HoldersOfAMinorityEachKeepingAMajorityFromGrantingIsContestedNotFree) {
  // Two members hold it for two different holders, one shows it free: no
  // holder has a majority, and no majority could grant it (probe Y: status
  // said "free" while acquire said busy).
  const auto split = holder_in_doubt({replied(status_reply(1, {"aaaa"})),
                                      replied(status_reply(1, {"bbbb"})), replied(empty_status())},
                                     k_ttl);
  ASSERT_TRUE(split.has_value());
  EXPECT_TRUE(split->contested);
  EXPECT_EQ(split->free, 1u);
  EXPECT_EQ(split->holders, "aaaa on 1, bbbb on 1");
  // Two of three show it free: free, no doubt.
  EXPECT_FALSE(holder_in_doubt({replied(status_reply(1, {"aaaa"})), replied(empty_status()),
                                replied(empty_status())},
                               k_ttl)
                   .has_value());
  // A majority holder: held, no doubt.
  EXPECT_FALSE(
      holder_in_doubt({replied(status_reply(1, {"aaaa"})), replied(status_reply(1, {"aaaa"})),
                       replied(status_reply(1, {"bbbb"}))},
                      k_ttl)
          .has_value());
}

TEST(Quorum, AHolderTheMembersOutOfReachCouldMakeAMajorityIsInDoubt) {
  const auto on = [](const char* id) { return replied(status_reply(1, {id})); };
  const auto none = [] { return replied(empty_status()); };
  // On one of three, one out of reach: it may be on two.
  auto doubt = holder_in_doubt({on("aaaa"), none(), failed()}, k_ttl);
  ASSERT_TRUE(doubt.has_value());
  EXPECT_EQ(doubt->holder, "aaaa");
  EXPECT_EQ(doubt->on, 1u);
  // On two of five, one out of reach, one not answered yet.
  doubt = holder_in_doubt({on("aaaa"), failed(), on("aaaa"), none(), none()}, k_ttl);
  ASSERT_TRUE(doubt.has_value());
  EXPECT_EQ(doubt->on, 2u);
  EXPECT_TRUE(
      holder_in_doubt({on("aaaa"), pending(), on("aaaa"), none(), none()}, k_ttl).has_value());
  // Held by a majority, or on too few to be one with every member: told.
  EXPECT_FALSE(holder_in_doubt({on("aaaa"), on("aaaa"), failed()}, k_ttl).has_value());
  EXPECT_FALSE(holder_in_doubt({on("aaaa"), failed(), none(), none(), none()}, k_ttl).has_value());
  EXPECT_FALSE(holder_in_doubt({none(), failed(), none(), none(), none()}, k_ttl).has_value());
  EXPECT_FALSE(holder_in_doubt({on("aaaa"), none(), none()}, k_ttl).has_value());
}

/// A member's status reply with its uptime (status_call(true)), holding `id`
/// (a record asking for `ttl_ms`) or nothing.
MemberReply aged(std::int64_t uptime_ms, const char* id = nullptr, std::int64_t ttl_ms = 30000) {
  Reply reply = id ? status_reply(1, {id}) : empty_status();
  if (id) reply.elements[3].elements[2] = string(fmt::format("1\n0\nexclusive\n{}\n", ttl_ms));
  reply.elements.push_back(integer(uptime_ms));
  return replied(std::move(reply));
}

TEST(Quorum, AMemberUpForLessThanTheTtlCannotSayTheLockIsFree) {
  // The probe's case: held on two old members, a third restarted empty
  // (young), two that never had it: "free" was false, the holder is in
  // doubt.
  auto doubt = holder_in_doubt(
      {aged(60000, "aaaa"), aged(60000, "aaaa"), aged(5000), aged(60000), aged(60000)}, k_ttl);
  ASSERT_TRUE(doubt.has_value());
  EXPECT_EQ(doubt->holder, "aaaa");
  EXPECT_EQ(doubt->on, 2u);
  EXPECT_EQ(doubt->young, 1u);
  // Nobody named, two out of reach, one young: only two old members say
  // free, not a majority.
  doubt = holder_in_doubt({aged(5000), failed(), aged(60000), failed(), aged(60000)}, k_ttl);
  ASSERT_TRUE(doubt.has_value());
  EXPECT_EQ(doubt->holder, "");
  EXPECT_EQ(doubt->old, 2u);
  EXPECT_EQ(doubt->young, 1u);
  // Old enough members decide as before: free, or held by a majority (a
  // young member that names the holder took it again after its restart).
  EXPECT_FALSE(holder_in_doubt({aged(5000), aged(60000), aged(60000), aged(60000), failed()}, k_ttl)
                   .has_value());
  EXPECT_FALSE(holder_in_doubt({aged(5000, "aaaa"), aged(60000, "aaaa"), aged(60000, "aaaa"),
                                aged(5000), aged(60000)},
                               k_ttl)
                   .has_value());
  // Young is measured against the longest TTL a record asks for.
  const std::vector<MemberReply> long_ttl = {aged(120000, "aaaa", 600000),
                                             aged(120000, "aaaa", 600000), aged(120000),
                                             aged(700000), aged(700000)};
  EXPECT_EQ(status_min_uptime(long_ttl, k_ttl), Millis(600000));
  EXPECT_TRUE(holder_in_doubt(long_ttl, status_min_uptime(long_ttl, k_ttl)).has_value());
  EXPECT_FALSE(holder_in_doubt(long_ttl, k_ttl).has_value());
}

/// A member's status reply with uptime, role and run_id (status_call(true)).
MemberReply with_role(const char* role, const char* id = nullptr, std::int64_t uptime = 60000) {
  MemberReply m = aged(uptime, id);
  m.reply.elements.push_back(string(role));
  m.reply.elements.push_back(string(""));
  return m;
}

TEST(Quorum, AReadOnlyReplicaNeverVotesForAHolder) {
  // Its master's copy shows the holder, but it cannot have granted it: a
  // minority holder does not become a majority through it.
  const auto replica = with_role("slave", "aaaa");
  EXPECT_TRUE(read_only_member(replica));
  EXPECT_FALSE(read_only_member(with_role("master", "aaaa")));
  MemberReply refused = failed();
  refused.read_only = true;
  EXPECT_TRUE(read_only_member(refused));
  auto view = decode_status("x", combine_status({"a", "b", "c"}, {with_role("master", "aaaa"),
                                                                  with_role("master"), replica}));
  ASSERT_TRUE(view.has_value()) << view.error().message;
  EXPECT_TRUE(view->holders.empty());
  EXPECT_EQ(view->members[0].state, "disagrees");
  EXPECT_EQ(view->members[1].state, "ok");
  EXPECT_EQ(view->members[2].state, "read-only");
  EXPECT_EQ(view->members[2].holders, (std::vector<std::string>{"aaaa"}));
  EXPECT_NE(view->members[2].problem.find("read-only replica"), std::string::npos);
  // Held on one master, the other out of reach: the replica's copy does
  // not make the holder a majority, so whether it holds the lock is in
  // doubt. Young or not, the replica says "not held".
  EXPECT_TRUE(holder_in_doubt({with_role("master", "aaaa"), failed(), replica}, k_ttl).has_value());
  // Both masters answered: not in doubt that a majority holds it, young
  // replica or not; but with one master free and the replica unable to
  // grant, no one can take it: neither held nor free (contested).
  const auto both = holder_in_doubt(
      {with_role("master", "aaaa"), with_role("master"), with_role("slave", "aaaa", 1000)}, k_ttl);
  ASSERT_TRUE(both.has_value());
  EXPECT_TRUE(both->contested);
  EXPECT_TRUE(both->holder.empty());
  EXPECT_EQ(both->free, 1u);
  EXPECT_EQ(both->holders, "aaaa on 1");
  // A master in its place that named the holder would have made a majority.
  view = decode_status(
      "x", combine_status({"a", "b", "c"}, {with_role("master", "aaaa"), with_role("master"),
                                            with_role("master", "aaaa")}));
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->holders.size(), 1u);
}

TEST(Quorum, AMemberUpForLessThanAHolderHasHeldTheLockMayHaveLostIt) {
  // A lease renewed beyond the TTL (renew --ttl 60s): the members that do
  // not name the holder restarted after it took the lock, though longer
  // ago than the TTL.
  const auto with = [](Reply reply, std::int64_t now, std::int64_t uptime) {
    reply.elements[0] = integer(now);
    reply.elements.push_back(integer(uptime));
    return replied(std::move(reply));
  };
  Reply held = status_reply(1, {"aaaa"});
  held.elements[3].elements[2] = string("1\n1000\nexclusive\n5000\n");
  const std::vector<MemberReply> members = {
      with(held, 61000, 600000), with(held, 61000, 600000), with(empty_status(), 61000, 40000),
      with(empty_status(), 61000, 40000), with(empty_status(), 61000, 700000)};
  auto doubt = holder_in_doubt(members, k_ttl);
  ASSERT_TRUE(doubt.has_value());
  EXPECT_EQ(doubt->holder, "aaaa");
  EXPECT_EQ(doubt->young, 2u);
  // Up for longer than the holder has held the lock: they would name it.
  const std::vector<MemberReply> older = {
      with(held, 61000, 600000), with(held, 61000, 600000), with(empty_status(), 61000, 70000),
      with(empty_status(), 61000, 70000), with(empty_status(), 61000, 700000)};
  EXPECT_FALSE(holder_in_doubt(older, k_ttl).has_value());
}

TEST(Quorum, TwoMembersThatAreOneServerAreFoundByRunId) {
  const std::string one(40, 'a'), other(40, 'b');
  const auto granted = [](const std::string& run_id) {
    return replied(array({integer(1), integer(7), string(run_id)}));
  };
  const auto queued = [](const std::string& run_id) {
    return replied(array(
        {integer(0), integer(2), string("record"), integer(900), integer(5), string(run_id)}));
  };
  // Replies without a run_id (not a quorum's acquire), errors, and pending
  // members name no server.
  EXPECT_FALSE(same_server({replied(array({integer(1), integer(7)})),
                            replied(array({integer(1), integer(7)})), failed(), pending()})
                   .has_value());
  EXPECT_FALSE(same_server({granted(one), queued(other), failed()}).has_value());
  auto pair = same_server({granted(other), failed(), granted(one), queued(one)});
  ASSERT_TRUE(pair.has_value());
  EXPECT_EQ(pair->first, 2u);
  EXPECT_EQ(pair->second, 3u);
  // A record (a string, not last) is not taken for a run_id.
  EXPECT_FALSE(same_server({queued(""), queued("")}).has_value());
}

TEST(Quorum, ForceListsEachEvictedHolderOnce) {
  auto reply = combine_force(
      {replied(array({integer(5), string("aaaa"), string("r")})),
       replied(array({integer(6), string("aaaa"), string("r"), string("bbbb"), string("r")})),
       failed()});
  ASSERT_EQ(reply.elements.size(), 5u);
  EXPECT_EQ(reply.elements[1].str, "aaaa");
  EXPECT_EQ(reply.elements[3].str, "bbbb");
}

TEST(Quorum, AcquireAndRaiseCallsCarryTheirArguments) {
  Request r;
  r.name = "job";
  r.ttl = Millis(20'000);
  auto call = acquire_call(r, "tok", true, Millis(20'000));
  EXPECT_EQ(operation_of(call), Operation::acquire);
  EXPECT_EQ(requested_ttl(call), Millis(20'000));
  EXPECT_EQ(requested_limit(call), 1);
  r.limit = 3;
  EXPECT_EQ(requested_limit(acquire_call(r, "tok", true)), 3);
  EXPECT_EQ(requested_limit(release_call("tok")), 1);
  ASSERT_EQ(call.args.size(), 9u);
  EXPECT_EQ(call.args[8], "20000");
  EXPECT_EQ(with_min_uptime(call, Millis(5)).args.size(), 9u);
  auto raise = raise_call(1234, "tok");
  EXPECT_EQ(operation_of(raise), Operation::raise);
  EXPECT_EQ(raise.args, (std::vector<std::string>{"raise", "1234", "tok"}));
}

TEST(Quorum, AMembersProblemDoesNotNameTheMemberAgain) {
  const std::string url = "redis://127.0.0.1:7001/0";
  EXPECT_EQ(without_member_name(url + ": timed out after 5s", url), "timed out after 5s");
  EXPECT_EQ(without_member_name("cannot connect to " + url + ": Connection refused", url),
            "cannot connect: Connection refused");
  // Another member's name, or the name inside the sentence, stays.
  EXPECT_EQ(without_member_name("cannot connect to redis://other:1/0: refused", url),
            "cannot connect to redis://other:1/0: refused");
  EXPECT_EQ(without_member_name("READONLY " + url, url), "READONLY " + url);
  EXPECT_EQ(without_member_name(url + "x: y", url), url + "x: y");
}

}  // namespace
}  // namespace rlock::lock
