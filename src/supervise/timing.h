#pragma once
/// The clock arithmetic of `rlock run`: when to renew, when the command must
/// be terminated so that it is dead before the lease can expire, and which
/// --kill-after / --ttl combinations make that possible at all.
///
/// All times are local and monotonic (Clock: CLOCK_BOOTTIME, which also
/// counts a suspend of the machine). The server's lease ends
/// at (server time when it ran the script) + TTL, which is never earlier than
/// (our clock when we *sent* the command) + TTL, up to the clocks' rate
/// difference. So every deadline here starts from the send time of the last
/// confirmed acquire or renewal, and a safety margin absorbs rate drift and
/// our own scheduling delay.

#include <optional>

#include "util/duration.h"
#include "util/error.h"

namespace rlock::supervise {

/// The first retry after a failed renewal: short, since a reconnect after a
/// dropped connection usually succeeds at once.
inline constexpr Millis k_first_retry{100};
/// Retries back off to at most this: a failover or restart takes about a
/// second, and a faster loop would only add load to a struggling server.
inline constexpr Millis k_max_retry{1000};
/// The margin is never below this (for TTLs of at least 1s): poll wake-up,
/// the kill(2) itself and a busy machine's run queue take milliseconds, and
/// 50ms covers them with room to spare.
inline constexpr Millis k_min_margin{50};
/// --kill-after when not given (unless TTL/4 is shorter): enough for a
/// command to flush output and remove its temporary files after SIGTERM,
/// short enough that a stuck one does not hold the lock much longer.
inline constexpr Millis k_default_kill_after{5000};

/// Everything the supervisor needs to know about time, checked.
struct Timing {
  Millis ttl{30'000};
  Millis kill_after{k_default_kill_after};
  Millis margin{1500};
  Millis renew_interval{10'000};
  std::optional<Millis> min_hold;
  std::optional<Millis> max_hold;
};

/// What the user gave; nullopt = not given.
struct TimingOptions {
  Millis ttl{30'000};
  std::optional<Millis> kill_after;
  std::optional<Millis> min_hold;
  std::optional<Millis> max_hold;
};

/// TTL/20 (5%: far beyond any real clock-rate drift between two machines,
/// NTP slews at most 0.05%), but at least 50ms for scheduling, except for
/// TTLs under 500ms where it is TTL/10, so that the default kill-after always
/// fits.
Millis safety_margin(Millis ttl);

/// 5s, or TTL/4 if shorter: with the margin (<= TTL/10) that leaves more than
/// half of the lease for renewal attempts before termination must begin.
Millis default_kill_after(Millis ttl);

/// TTL/3, as redis-based leases conventionally do: two renewals can fail
/// before the lease is in danger.
Millis renew_interval(Millis ttl);

/// The longest --kill-after a TTL allows (exclusive bound): the first
/// renewal is tried at TTL/3, and termination must be able to start after
/// it and still finish a margin before the lease ends:
///   kill_after + margin < TTL - TTL/3.
Millis kill_after_limit(Millis ttl);

/// Checks and completes the options; a usage error states the rule.
Result<Timing> plan_timing(const TimingOptions& options);

/// The point by which the command must be dead: the lease that started at
/// `sent` ends no earlier than sent + TTL; the margin keeps us clear of it.
Deadline must_be_dead_by(Deadline sent, const Timing& timing);

/// The point at which SIGTERM must go out so that SIGKILL (kill_after later)
/// still lands by must_be_dead_by().
Deadline terminate_by(Deadline sent, const Timing& timing);

/// When the next renewal is due after one confirmed at `sent`.
Deadline next_renewal(Deadline sent, const Timing& timing);

/// The deadline for one renewal attempt started at `now`: never later than
/// terminate_by (a later answer is useless: termination has begun), and
/// never longer than one renew interval, so a hung connection is abandoned
/// in time to retry on a fresh one.
Deadline attempt_deadline(Deadline now, Deadline confirmed_sent, const Timing& timing);

/// The pause after `failures` consecutive failed renewals (1, 2, ...):
/// 100ms doubling up to 1s.
Millis retry_delay(int failures);

/// What is left of --min-hold at `now` for a lock acquired at `acquired`
/// (0 when none is left or none was asked for).
Millis min_hold_left(Deadline acquired, Deadline now, const Timing& timing);

/// When --max-hold runs out (nullopt: never).
std::optional<Deadline> max_hold_end(Deadline acquired, const Timing& timing);

}  // namespace rlock::supervise
