#include "output/columns.h"

#include <algorithm>
#include <charconv>

#include "output/text.h"

namespace rlock::output {

namespace {

/// Printable ASCII only: one byte is one column, and printable() keeps it.
bool plain_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

}  // namespace

void append_left(std::string& out, std::string_view text, std::size_t width) {
  const std::size_t used = plain_ascii(text) ? text.size() : display_width(text);
  out.append(text);
  if (used < width) out.append(width - used, ' ');
}

void append_right(std::string& out, std::string_view text, std::size_t width) {
  const std::size_t used = plain_ascii(text) ? text.size() : display_width(text);
  if (used < width) out.append(width - used, ' ');
  out.append(text);
}

void append_right(std::string& out, std::int64_t value, std::size_t width) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  append_right(out, std::string_view(digits, static_cast<std::size_t>(end - digits)), width);
}

void append_shown(std::string& out, std::string_view text, std::size_t width) {
  if (!plain_ascii(text) || width == 0) {
    append_left(out, clip(text, width), width);
    return;
  }
  if (text.size() > width) {
    out.append(text.substr(0, width - 1));
    out += '~';
    return;
  }
  append_left(out, text, width);
}

std::string cell(std::string_view text, std::size_t width) {
  std::string out;
  append_shown(out, text, width);
  return out;
}

void append_shown(std::string& out, std::string_view text) {
  if (plain_ascii(text)) {
    out.append(text);
  } else {
    out += printable(text);
  }
}

std::size_t shown_width(std::string_view text) {
  if (plain_ascii(text)) return text.size();
  return display_width(printable(text));
}

}  // namespace rlock::output
