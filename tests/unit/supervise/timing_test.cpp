#include "supervise/timing.h"

#include <gtest/gtest.h>

namespace rlock::supervise {
namespace {

using namespace std::chrono_literals;

Timing planned(Millis ttl, std::optional<Millis> kill_after = std::nullopt) {
  auto t = plan_timing({ttl, kill_after, std::nullopt, std::nullopt});
  EXPECT_TRUE(t.has_value()) << (t ? "" : t.error().message);
  return t.value_or(Timing{});
}

TEST(Timing, MarginIsFivePercentButAtLeastFiftyMilliseconds) {
  EXPECT_EQ(safety_margin(30s), 1500ms);
  EXPECT_EQ(safety_margin(5s), 250ms);
  EXPECT_EQ(safety_margin(1s), 50ms);
  EXPECT_EQ(safety_margin(500ms), 50ms);
}

TEST(Timing, MarginOfTinyTtlsIsATenth) {
  EXPECT_EQ(safety_margin(100ms), 10ms);
  EXPECT_EQ(safety_margin(300ms), 30ms);
}

TEST(Timing, DefaultKillAfterIsFiveSecondsOrAQuarterOfTheTtl) {
  EXPECT_EQ(default_kill_after(30s), 5s);
  EXPECT_EQ(default_kill_after(20s), 5s);
  EXPECT_EQ(default_kill_after(8s), 2s);
  EXPECT_EQ(default_kill_after(100ms), 25ms);
}

TEST(Timing, DefaultsFitEveryTtl) {
  for (Millis ttl = 100ms; ttl <= 24h; ttl = ttl * 3 / 2 + 7ms) {
    auto t = plan_timing({ttl, std::nullopt, std::nullopt, std::nullopt});
    ASSERT_TRUE(t.has_value()) << ttl.count() << ": " << t.error().message;
    EXPECT_GT(terminate_by(Deadline{}, *t), next_renewal(Deadline{}, *t)) << ttl.count();
  }
}

TEST(Timing, RejectsKillAfterThatCannotFinishBeforeTheLeaseEnds) {
  auto t = plan_timing({5s, 10s, std::nullopt, std::nullopt});
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code, Error::Code::usage);
  EXPECT_NE(t.error().message.find("--kill-after 10s"), std::string::npos);
  EXPECT_NE(t.error().message.find("2/3"), std::string::npos);
}

TEST(Timing, KillAfterLimitIsTwoThirdsOfTheTtlMinusTheMargin) {
  // 5s: 5000 - 1666 - 250 = 3084ms.
  EXPECT_EQ(kill_after_limit(5s), 3084ms);
  EXPECT_TRUE(plan_timing({5s, 3083ms, std::nullopt, std::nullopt}).has_value());
  EXPECT_FALSE(plan_timing({5s, 3084ms, std::nullopt, std::nullopt}).has_value());
}

TEST(Timing, ExplicitKillAfterIsKept) {
  EXPECT_EQ(planned(30s, 1s).kill_after, 1s);
  EXPECT_EQ(planned(30s, 0ms).kill_after, 0ms);
}

TEST(Timing, RenewsEveryThirdOfTheTtl) {
  auto t = planned(30s);
  EXPECT_EQ(t.renew_interval, 10s);
  Deadline sent{};
  EXPECT_EQ(next_renewal(sent, t), sent + 10s);
}

TEST(Timing, DeadlinesCountFromTheSendTimeOfTheLastConfirmedRenewal) {
  auto t = planned(30s);
  Deadline sent = Deadline{} + 1h;
  EXPECT_EQ(must_be_dead_by(sent, t), sent + 30s - 1500ms);
  EXPECT_EQ(terminate_by(sent, t), sent + 30s - 1500ms - 5s);
}

TEST(Timing, AnAttemptNeverOutlivesTheTimeLeft) {
  auto t = planned(30s);
  Deadline sent{};
  // Early: bounded by one renew interval.
  EXPECT_EQ(attempt_deadline(sent + 10s, sent, t), sent + 20s);
  // Late: bounded by the point where termination must begin.
  EXPECT_EQ(attempt_deadline(sent + 20s, sent, t), terminate_by(sent, t));
}

TEST(Timing, RetriesBackOffFromAHundredMillisecondsToOneSecond) {
  EXPECT_EQ(retry_delay(1), 100ms);
  EXPECT_EQ(retry_delay(2), 200ms);
  EXPECT_EQ(retry_delay(4), 800ms);
  EXPECT_EQ(retry_delay(5), 1s);
  EXPECT_EQ(retry_delay(1000), 1s);
}

TEST(Timing, MinHoldLeftCountsFromAcquisition) {
  auto t = plan_timing({30s, std::nullopt, 3s, std::nullopt}).value();
  Deadline acquired{};
  EXPECT_EQ(min_hold_left(acquired, acquired + 1s, t), 2s);
  EXPECT_EQ(min_hold_left(acquired, acquired + 5s, t), 0ms);
  EXPECT_EQ(min_hold_left(acquired, acquired + 1s, planned(30s)), 0ms);
}

TEST(Timing, MaxHoldEndsAfterItsDuration) {
  auto t = plan_timing({30s, std::nullopt, std::nullopt, 1s}).value();
  EXPECT_EQ(max_hold_end(Deadline{}, t), Deadline{} + 1s);
  EXPECT_FALSE(max_hold_end(Deadline{}, planned(30s)).has_value());
}

TEST(Timing, RejectsMinHoldLongerThanMaxHold) {
  EXPECT_FALSE(plan_timing({30s, std::nullopt, 5s, 1s}).has_value());
  EXPECT_FALSE(plan_timing({30s, std::nullopt, std::nullopt, 0ms}).has_value());
}

}  // namespace
}  // namespace rlock::supervise
