// Fuzz target: the JSON writer. The input is a small program that builds a
// document (strings of arbitrary bytes, numbers, nesting); whatever it builds,
// dump() must be one valid JSON text (RFC 8259, strict UTF-8), checked by an
// independent validator below.
#include "output/json.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

using rlock::output::Json;

/// Reads the fuzz input as a stream of choices.
struct Input {
  std::string_view rest;
  uint8_t byte() {
    if (rest.empty()) return 0;
    auto b = static_cast<uint8_t>(rest.front());
    rest.remove_prefix(1);
    return b;
  }
  std::string text() {
    size_t n = std::min<size_t>(byte(), rest.size());
    std::string s(rest.substr(0, n));
    rest.remove_prefix(n);
    return s;
  }
  long long number() {
    long long v = 0;
    size_t n = std::min<size_t>(sizeof v, rest.size());
    std::memcpy(&v, rest.data(), n);
    rest.remove_prefix(n);
    return v;
  }
};

Json build(Input& in, int depth) {
  switch (in.byte() % (depth > 8 ? 4 : 6)) {
    case 0:
      return nullptr;
    case 1:
      return (in.byte() & 1) != 0;
    case 2:
      return in.number();
    case 3:
      return in.text();
    case 4: {
      Json::Array a;
      for (int n = in.byte() % 5; n > 0; --n) a.push_back(build(in, depth + 1));
      return a;
    }
    default: {
      Json::Object o;
      for (int n = in.byte() % 5; n > 0; --n) {
        auto key = in.text();
        o.emplace_back(std::move(key), build(in, depth + 1));
      }
      return o;
    }
  }
}

/// A strict recursive-descent JSON validator, independent of the writer.
struct Validator {
  std::string_view s;
  size_t i = 0;

  bool at(char c) const { return i < s.size() && s[i] == c; }
  bool literal(std::string_view word) {
    if (s.substr(i, word.size()) != word) return false;
    i += word.size();
    return true;
  }
  bool utf8() {
    auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
    auto cont = [&](size_t k) { return i + k < s.size() && (b(k) & 0xc0) == 0x80; };
    unsigned char c = b(0);
    uint32_t cp;
    size_t n;
    if (c < 0x80) return ++i, true;
    if (c >= 0xc2 && c <= 0xdf)
      n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
      n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
      n = 4, cp = c & 0x07;
    else
      return false;
    for (size_t k = 1; k < n; ++k) {
      if (!cont(k)) return false;
      cp = (cp << 6) | (b(k) & 0x3f);
    }
    static constexpr uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n;
    return true;
  }
  bool string() {
    if (!at('"')) return false;
    ++i;
    while (i < s.size() && s[i] != '"') {
      auto c = static_cast<unsigned char>(s[i]);
      if (c < 0x20) return false;
      if (c == '\\') {
        if (++i >= s.size()) return false;
        char e = s[i];
        if (e == 'u') {
          for (int k = 1; k <= 4; ++k)
            if (i + k >= s.size() || std::strchr("0123456789abcdefABCDEF", s[i + k]) == nullptr ||
                s[i + k] == '\0')
              return false;
          i += 5;
        } else if (std::strchr("\"\\/bfnrt", e) != nullptr && e != '\0') {
          ++i;
        } else {
          return false;
        }
      } else if (!utf8()) {
        return false;
      }
    }
    if (!at('"')) return false;
    ++i;
    return true;
  }
  bool number() {
    if (at('-')) ++i;
    if (at('0')) {
      ++i;
    } else {
      size_t start = i;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
      if (i == start || s[start] == '0') return false;
    }
    return true;
  }
  bool value() {
    if (at('"')) return string();
    if (at('{')) {
      ++i;
      if (at('}')) return ++i, true;
      for (;;) {
        if (!string() || !at(':')) return false;
        ++i;
        if (!value()) return false;
        if (at('}')) return ++i, true;
        if (!at(',')) return false;
        ++i;
      }
    }
    if (at('[')) {
      ++i;
      if (at(']')) return ++i, true;
      for (;;) {
        if (!value()) return false;
        if (at(']')) return ++i, true;
        if (!at(',')) return false;
        ++i;
      }
    }
    if (literal("null") || literal("true") || literal("false")) return true;
    return number();
  }
  bool document() { return value() && i == s.size(); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{std::string_view(reinterpret_cast<const char*>(data), size)};
  auto doc = build(in, 0).dump();
  if (!Validator{doc}.document()) std::abort();
  // Any bytes as one string, quoted alone, must be a valid JSON string too.
  auto quoted =
      rlock::output::json_quote(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!Validator{quoted}.document()) std::abort();
  return 0;
}
