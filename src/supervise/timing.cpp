#include "supervise/timing.h"

#include <fmt/format.h>

#include <algorithm>

namespace rlock::supervise {

namespace {
// The fractions of the TTL named in timing.h, as divisors.
constexpr int k_margin_divisor = 20;
constexpr int k_small_margin_divisor = 10;
constexpr int k_kill_after_divisor = 4;
constexpr int k_renew_divisor = 3;
}  // namespace

Millis safety_margin(Millis ttl) {
  return std::max(ttl / k_margin_divisor, std::min(k_min_margin, ttl / k_small_margin_divisor));
}

Millis default_kill_after(Millis ttl) {
  return std::min(k_default_kill_after, ttl / k_kill_after_divisor);
}

Millis renew_interval(Millis ttl) {
  return ttl / k_renew_divisor;
}

Millis kill_after_limit(Millis ttl) {
  return ttl - renew_interval(ttl) - safety_margin(ttl);
}

Result<Timing> plan_timing(const TimingOptions& o) {
  Timing t;
  t.ttl = o.ttl;
  t.margin = safety_margin(o.ttl);
  t.renew_interval = renew_interval(o.ttl);
  t.kill_after = o.kill_after.value_or(default_kill_after(o.ttl));
  if (t.kill_after < Millis(0))
    return fail(Error::Code::usage, "--kill-after must not be negative");
  if (t.kill_after >= kill_after_limit(o.ttl))
    return fail(Error::Code::usage,
                fmt::format("--kill-after {} does not fit --ttl {}: the command must be dead "
                            "before the lease can expire, so --kill-after + {} (safety margin) "
                            "must be less than 2/3 of the TTL (the time left after the first "
                            "renewal); use --kill-after below {} or a longer --ttl",
                            format_duration(t.kill_after), format_duration(o.ttl),
                            format_duration(t.margin), format_duration(kill_after_limit(o.ttl))));
  if (o.max_hold && *o.max_hold <= Millis(0))
    return fail(Error::Code::usage, "--max-hold must be longer than 0");
  if (o.min_hold && *o.min_hold < Millis(0))
    return fail(Error::Code::usage, "--min-hold must not be negative");
  if (o.min_hold && o.max_hold && *o.min_hold > *o.max_hold)
    return fail(Error::Code::usage, "--min-hold cannot be longer than --max-hold");
  t.min_hold = o.min_hold;
  t.max_hold = o.max_hold;
  return t;
}

Deadline must_be_dead_by(Deadline sent, const Timing& t) {
  return sent + t.ttl - t.margin;
}

Deadline terminate_by(Deadline sent, const Timing& t) {
  return must_be_dead_by(sent, t) - t.kill_after;
}

Deadline next_renewal(Deadline sent, const Timing& t) {
  return sent + t.renew_interval;
}

Deadline attempt_deadline(Deadline now, Deadline confirmed_sent, const Timing& t) {
  return std::min(now + t.renew_interval, terminate_by(confirmed_sent, t));
}

Millis retry_delay(int failures) {
  Millis delay = k_first_retry;
  for (int k = 1; k < failures && delay < k_max_retry; ++k) delay *= 2;
  return std::min(delay, k_max_retry);
}

Millis min_hold_left(Deadline acquired, Deadline now, const Timing& t) {
  if (!t.min_hold) return Millis(0);
  auto left = std::chrono::ceil<Millis>(acquired + *t.min_hold - now);
  return std::max(left, Millis(0));
}

std::optional<Deadline> max_hold_end(Deadline acquired, const Timing& t) {
  if (!t.max_hold) return std::nullopt;
  return acquired + *t.max_hold;
}

}  // namespace rlock::supervise
