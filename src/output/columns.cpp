#include "output/columns.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>

#include "output/text.h"

namespace rlock::output {

namespace {

/// Printable ASCII only: one byte is one column, and printable() keeps it.
bool plain_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

}  // namespace

void append_left(std::string& out, std::string_view text, std::size_t width) {
  if (!plain_ascii(text)) {
    fmt::format_to(std::back_inserter(out), "{:<{}}", text, width);
    return;
  }
  out.append(text);
  if (text.size() < width) out.append(width - text.size(), ' ');
}

void append_right(std::string& out, std::string_view text, std::size_t width) {
  if (!plain_ascii(text)) {
    fmt::format_to(std::back_inserter(out), "{:>{}}", text, width);
    return;
  }
  if (text.size() < width) out.append(width - text.size(), ' ');
  out.append(text);
}

void append_right(std::string& out, std::int64_t value, std::size_t width) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  append_right(out, std::string_view(digits, static_cast<std::size_t>(end - digits)), width);
}

void append_shown(std::string& out, std::string_view text, std::size_t width) {
  if (!plain_ascii(text) || width == 0) {
    append_left(out, clip(printable(text), width), width);
    return;
  }
  if (text.size() > width) {
    out.append(text.substr(0, width - 1));
    out += '~';
    return;
  }
  append_left(out, text, width);
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
  // fmt's own width of the text: what it adds as padding up to a width
  // wider than any text says how wide the text is.
  const std::string shown = printable(text);
  const std::size_t wide = shown.size() * 2 + 1;
  return wide - (fmt::formatted_size("{:<{}}", shown, wide) - shown.size());
}

}  // namespace rlock::output
