#pragma once
/// Durations as the command line writes them: `1500ms`, `30s`, `5m`, `1h`,
/// `1h30m`, or a bare number of seconds with an optional fraction (`0.5`).

#include <chrono>
#include <string>
#include <string_view>

#include "util/error.h"

namespace rlock {

using Millis = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

/// Parses a duration; a usage error names the text that is wrong.
Result<Millis> parse_duration(std::string_view text);

/// Renders a duration the way parse_duration reads it, shortest form first
/// (`1h30m`, `250ms`, `2.5s`).
std::string format_duration(Millis d);

}  // namespace rlock
