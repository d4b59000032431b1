// The share of a deadline one try on a possibly failing-over master gets.

#include <gtest/gtest.h>

#include "backend/node.h"

namespace rlock::backend {
namespace {

Millis left_of(Deadline by, Clock::time_point from) {
  return std::chrono::round<Millis>(by - from);
}

TEST(FailoverTryDeadline, HalfOfWhatIsLeftASecondAtLeastNeverPastTheDeadline) {
  const auto now = Clock::now();
  // Half of 5 s (plus whatever time passed before the call: never less).
  const auto half = left_of(failover_try_deadline(now + Millis(5000)), now).count();
  EXPECT_GE(half, 2500);
  EXPECT_LE(half, 3000);
  // Half of 1.5 s is under a second: a second.
  const auto second = left_of(failover_try_deadline(now + Millis(1500)), now).count();
  EXPECT_GE(second, 1000);
  EXPECT_LE(second, 1500);
  // Less than a second left: all of it, never more.
  const Deadline soon = now + Millis(400);
  EXPECT_EQ(failover_try_deadline(soon), soon);
  const Deadline past = now - Millis(10);
  EXPECT_EQ(failover_try_deadline(past), past);
}

}  // namespace
}  // namespace rlock::backend
