#include "util/duration.h"

#include <fmt/format.h>
#include <time.h>

#include <cstdint>
#include <optional>

#include "util/number.h"

namespace rlock {

Clock::time_point Clock::now() noexcept {
  timespec ts{};
  // Cannot fail: CLOCK_BOOTTIME exists since Linux 2.6.39.
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return time_point(duration(std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec));
}

namespace {

// A week is far beyond any sensible lease or wait and keeps every value well
// inside the range Redis accepts for PX and BLPOP.
constexpr double k_max_ms = 7.0 * 24 * 3600 * 1000;

Result<Millis> bad(std::string_view text, std::string_view why) {
  return fail(Error::Code::usage,
              fmt::format("invalid duration {}: {} (use e.g. 1500ms, 30s, 5m, 1h30m, 0.5)",
                          quote_input(text), why));
}

/// Reads a non-negative decimal number (digits with at most one '.') at pos;
/// nullopt when there is none. A number too large for any duration still
/// parses (as more than a week), so the error says so.
std::optional<double> read_number(std::string_view text, size_t& pos) {
  size_t start = pos;
  bool dot = false;
  while (pos < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[pos])) || (text[pos] == '.' && !dot))) {
    dot = dot || text[pos] == '.';
    ++pos;
  }
  auto number = parse_decimal(text.substr(start, pos - start), k_max_ms);
  if (number) return *number;
  if (pos > start && text.substr(start, pos - start) != ".") return k_max_ms * 2;
  return std::nullopt;
}

}  // namespace

Result<Millis> parse_duration(std::string_view text) {
  if (text.empty()) return bad(text, "empty");
  double total = 0;
  size_t pos = 0;
  // Units must come in decreasing order, each at most once (1h30m, not 30m1h).
  int last_rank = 4;
  bool any_unit = false;
  while (pos < text.size()) {
    auto number = read_number(text, pos);
    if (!number) return bad(text, "expected a number");
    double value = *number;
    if (pos == text.size()) {
      if (any_unit) return bad(text, "missing unit after the last number");
      total = value * 1000;  // bare number: seconds, as flock -w
      break;
    }
    int rank = 0;
    double scale = 0;
    if (text.substr(pos, 2) == "ms") {
      rank = 0, scale = 1, pos += 2;
    } else if (text[pos] == 's') {
      rank = 1, scale = 1000, pos += 1;
    } else if (text[pos] == 'm') {
      rank = 2, scale = 60'000, pos += 1;
    } else if (text[pos] == 'h') {
      rank = 3, scale = 3'600'000, pos += 1;
    } else {
      return bad(text, fmt::format("unknown unit '{}'", text.substr(pos)));
    }
    if (rank >= last_rank) return bad(text, "units out of order");
    last_rank = rank;
    any_unit = true;
    total += value * scale;
  }
  if (total > k_max_ms) return bad(text, "longer than a week");
  // Rounded to the nearest ms, halves up (llround for a value >= 0, without
  // libm: rlock does not load it).
  auto whole = static_cast<Millis::rep>(total);
  if (total - static_cast<double>(whole) >= 0.5) ++whole;
  return Millis(whole);
}

std::string format_duration(Millis d) {
  // The magnitude as unsigned: negating the most negative value would
  // overflow (and recurse forever through the sign branch), and a value
  // from a forged record may be any 64-bit number.
  auto count = d.count();
  std::uint64_t ms =
      count < 0 ? 0 - static_cast<std::uint64_t>(count) : static_cast<std::uint64_t>(count);
  std::string out = count < 0 ? "-" : "";
  if (ms < 1000) return out + fmt::format("{}ms", ms);
  if (ms < 60'000) {
    if (ms % 1000 == 0) return out + fmt::format("{}s", ms / 1000);
    // Exact, not rounded: 1999ms is "1.999s", never "2.0s" (a limit in an
    // error message must read back as the limit).
    auto fraction = fmt::format("{:03}", ms % 1000);
    fraction.erase(fraction.find_last_not_of('0') + 1);
    return out + fmt::format("{}.{}s", ms / 1000, fraction);
  }
  auto s = ms / 1000;
  if (s >= 3600) out += fmt::format("{}h", s / 3600);
  if (s % 3600 >= 60) out += fmt::format("{}m", s % 3600 / 60);
  if (s % 60) out += fmt::format("{}s", s % 60);
  return out;
}

}  // namespace rlock
