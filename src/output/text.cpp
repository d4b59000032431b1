#include "output/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "output/char_width.h"

namespace rlock::output {

size_t utf8_sequence(std::string_view s, size_t i, char32_t& cp) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  size_t n = 0;
  char32_t min = 0;
  if ((c & 0xe0) == 0xc0) {
    n = 2, cp = c & 0x1f, min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3, cp = c & 0x0f, min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return 0;  // a continuation byte, or 0xf8-0xff
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  // Overlong forms would let one character hide behind another encoding;
  // surrogates and values past U+10FFFF are not characters at all.
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

bool valid_utf8(std::string_view s) {
  char32_t cp = 0;
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence(s, i, cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

bool is_unsafe_code_point(char32_t cp) {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

namespace {

/// Appends what printable() makes of the code point (or invalid byte) at
/// s[i]; returns how many bytes of `s` that took.
size_t append_printable(std::string& out, std::string_view s, size_t i) {
  char32_t cp = 0;
  const size_t n = utf8_sequence(s, i, cp);
  if (n == 0) {
    out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i]));
    return 1;
  }
  if (!is_unsafe_code_point(cp))
    out.append(s.substr(i, n));
  else if (cp < 0x80)
    out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
  else
    out += fmt::format("\\u{{{:04x}}}", static_cast<unsigned>(cp));
  return n;
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) i += append_printable(out, s, i);
  return out;
}

bool name_needs_quoting(std::string_view name) {
  // A space at either end would vanish in a padded column, or read as the
  // name without it.
  if (!name.empty() && (name.front() == ' ' || name.back() == ' ')) return true;
  // Printable ASCII, the common case (one test a byte: a status listing
  // asks this of every name).
  if (std::all_of(name.begin(), name.end(),
                  [](char c) { return c >= 0x20 && c < 0x7f && c != '\\' && c != '\''; }))
    return false;
  char32_t cp = 0;
  for (size_t i = 0; i < name.size();) {
    const size_t n = utf8_sequence(name, i, cp);
    if (n == 0 || is_unsafe_code_point(cp) || cp == '\\' || cp == '\'') return true;
    i += n;
  }
  return false;
}

std::string shown_name(std::string_view name) {
  if (!name_needs_quoting(name)) return std::string(name);
  std::string out = "$'";
  char32_t cp = 0;
  for (size_t i = 0; i < name.size();) {
    const size_t n = utf8_sequence(name, i, cp);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(name[i]));
      ++i;
      continue;
    }
    if (cp == '\\' || cp == '\'') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (!is_unsafe_code_point(cp)) {
      out.append(name.substr(i, n));
    } else if (cp < 0x80) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
    }
    i += n;
  }
  return out + "'";
}

std::string quoted_name(std::string_view name) {
  return name_needs_quoting(name) ? shown_name(name) : "'" + std::string(name) + "'";
}

namespace {

bool in_ranges(const CodePointRange* first, const CodePointRange* last, char32_t cp) {
  const auto* found = std::upper_bound(
      first, last, cp, [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return found != first && cp <= (found - 1)->last;
}

/// The columns a terminal shows a code point in (a wcwidth(3) that does
/// not depend on the locale): none for combining marks and format
/// characters, two for East Asian wide and fullwidth ones (emoji
/// included), one for the rest.
std::size_t columns_of(char32_t cp) {
  if (cp < 0x300) return 1;
  if (in_ranges(std::begin(k_zero_width), std::end(k_zero_width), cp)) return 0;
  return in_ranges(std::begin(k_double_width), std::end(k_double_width), cp) ? 2 : 1;
}

}  // namespace

std::size_t display_width(std::string_view s) {
  std::size_t width = 0;
  char32_t cp = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i, cp);
    width += n ? columns_of(cp) : 1;
    i += n ? n : 1;
  }
  return width;
}

std::string clip(std::string_view s, size_t width) {
  if (width == 0) return {};
  std::string shown = printable(s);
  if (display_width(shown) <= width) return shown;
  // Whole characters and whole escapes only, leaving a column for the '~'
  // (a zero-width one stays with the character it marks): an escape cut
  // short (\x1 of \x1b) would read as something else.
  std::string out;
  size_t used = 0;
  for (size_t i = 0; i < s.size();) {
    std::string unit;
    i += append_printable(unit, s, i);
    const size_t w = display_width(unit);
    if (used + w > width - 1) break;
    out += unit;
    used += w;
  }
  return out + "~";
}

std::string base64(std::string_view bytes) {
  // Not OpenSSL's EVP_EncodeBlock: OpenSSL is loaded only for TLS.
  static constexpr char k_alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve(4 * ((bytes.size() + 2) / 3));
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    std::uint32_t group = 0;
    for (size_t j = 0; j < 3; ++j) {
      group = group << 8 | (j < n ? static_cast<unsigned char>(bytes[i + j]) : 0U);
    }
    for (size_t j = 0; j < 4; ++j) {
      out += j <= n ? k_alphabet[(group >> (18 - 6 * j)) & 0x3f] : '=';
    }
  }
  return out;
}

}  // namespace rlock::output
