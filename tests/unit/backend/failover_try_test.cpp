// The share of a deadline one try on a possibly failing-over master gets.

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

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

/// The message an operation gives up with, after pausing until `deadline`.
std::string given_up(Backoff& backoff, const Error& error) {
  for (;;) {
    auto paused = backoff.pause(error, "X", "no usable master");
    if (!paused) return paused.error().message;
  }
}

/// The duration in "...after DURATION: ..." in ms ("1.2s" or "350ms").
long after_ms(const std::string& message) {
  const auto at = message.find(" after ");
  if (at == std::string::npos) return -1;
  const std::string d = message.substr(at + 7, message.find(':', at) - at - 7);
  if (d.ends_with("ms")) return std::stol(d);
  return std::lround(std::stod(d) * 1000);
}

TEST(Backoff, AnOutageIsTimedFromTheFirstOperationThatGaveUpOnIt) {
  std::optional<Refusing> refusing;
  std::optional<Clock::time_point> missing;
  const Error down{Error::Code::unreachable, "cannot connect", redis::ServerError::none};
  {
    Backoff first(Clock::now() + Millis(150), -1, refusing, &missing);
    const std::string message = given_up(first, down);
    EXPECT_TRUE(message.starts_with("X: no usable master after ")) << message;
    EXPECT_LT(after_ms(message), 400) << message;
  }
  ASSERT_TRUE(missing.has_value());
  // A waiter's pause, then its next try gives up too: the whole outage.
  std::this_thread::sleep_for(Millis(300));
  {
    Backoff second(Clock::now() + Millis(50), -1, refusing, &missing);
    const std::string message = given_up(second, down);
    EXPECT_GE(after_ms(message), 300) << message;  // the sleep alone
  }
  // An operation that ends otherwise (it succeeded) ends the outage.
  { Backoff third(Clock::now() + Millis(50), -1, refusing, &missing); }
  EXPECT_FALSE(missing.has_value());
  // Without a record, each operation counts its own time, as before.
  Backoff alone(Clock::now() + Millis(50), -1, refusing);
  EXPECT_LT(after_ms(given_up(alone, down)), 400);
}

}  // namespace
}  // namespace rlock::backend
