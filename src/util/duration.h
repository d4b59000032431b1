#pragma once
/// Durations as the command line writes them: `1500ms`, `30s`, `5m`, `1h`,
/// `1h30m`, or a bare number of seconds with an optional fraction (`0.5`).

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/error.h"

namespace rlock {

using Millis = std::chrono::milliseconds;

/// rlock's one clock: CLOCK_BOOTTIME, which is CLOCK_MONOTONIC plus the time
/// the machine spent suspended. Redis' clock runs on through a suspend of
/// the client's machine, and so must a lease: counted on CLOCK_MONOTONIC
/// (steady_clock), a lease that ran out on the server during a suspend
/// would still look current after the resume, and the command run on
/// beside the next holder until a renewal failed. Steady (never set back);
/// waits (poll, ppoll) take a relative time computed from it. The guardian
/// reads the same clock (supervise/child.cpp).
struct Clock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<Clock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept;
};
using Deadline = Clock::time_point;

/// Parses a duration; a usage error names the text that is wrong.
Result<Millis> parse_duration(std::string_view text);

/// Renders a duration the way parse_duration reads it, shortest form first
/// (`1h30m`, `250ms`, `2.5s`).
std::string format_duration(Millis d);

}  // namespace rlock
