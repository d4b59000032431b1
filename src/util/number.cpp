#include "util/number.h"

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <string>

namespace rlock {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

/// Beyond this many characters an echoed input is cut: an error is one line.
constexpr std::size_t k_max_quoted = 40;

}  // namespace

std::string quote_input(std::string_view text) {
  if (text.size() <= k_max_quoted) return fmt::format("'{}'", text);
  return fmt::format("'{}...' ({} characters)", text.substr(0, k_max_quoted), text.size());
}

Result<std::int64_t> parse_integer(std::string_view text, std::int64_t min, std::int64_t max) {
  auto wrong = [&] {
    return fail(Error::Code::usage,
                fmt::format("{} is not a whole number from {} to {}", quote_input(text), min, max));
  };
  std::string_view digits = text;
  if (min < 0 && digits.starts_with('-')) digits.remove_prefix(1);
  if (digits.empty()) return wrong();
  for (char c : digits)
    if (!is_digit(c)) return wrong();
  std::int64_t value = 0;
  // from_chars reports overflow instead of wrapping: hundreds of digits are
  // simply out of range.
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < min || value > max)
    return wrong();
  return value;
}

Result<double> parse_decimal(std::string_view text, double max) {
  auto wrong = [&](std::string_view why) {
    return fail(Error::Code::usage, fmt::format("{} {}", quote_input(text), why));
  };
  bool dot = false, digit = false;
  for (char c : text) {
    if (c == '.' && !dot) {
      dot = true;
    } else if (is_digit(c)) {
      digit = true;
    } else {
      return wrong("is not a number");
    }
  }
  if (!digit) return wrong("is not a number");
  // strtod, correctly rounded like from_chars, which for double would link
  // libstdc++'s long double parser and with it libm (see CMakeLists.txt).
  // The text is digits and at most one '.', read in the C locale (rlock
  // never calls setlocale), so strtod sees nothing else it would accept.
  const std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(copy.c_str(), &end);
  // A value beyond the range of double is out of range for any caller too.
  if (errno == ERANGE && value > 1) return wrong(fmt::format("is larger than {}", max));
  if (end != copy.c_str() + copy.size()) return wrong("is not a number");
  if (!(value <= max)) return wrong(fmt::format("is larger than {}", max));
  return value;
}

}  // namespace rlock
