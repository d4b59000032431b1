#include "util/percent.h"

namespace rlock::percent {
namespace {

constexpr char k_hex[] = "0123456789ABCDEF";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string encode(std::string_view text, NeedsEscape needs) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '%' || needs(c)) {
      const auto byte = static_cast<unsigned char>(c);
      out += '%';
      out += k_hex[byte >> 4];
      out += k_hex[byte & 0xF];
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<std::string> decode(std::string_view text, NeedsEscape strict) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = hex_value(text[i + 1]);
    const int low = hex_value(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  if (strict && encode(out, strict) != text) return std::nullopt;
  return out;
}

}  // namespace rlock::percent
