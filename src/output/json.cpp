#include "output/json.h"

#include <fmt/format.h>

namespace rlock::output {

namespace {

/// Length of the valid UTF-8 sequence at s[i], or 0 if it is not valid.
size_t utf8_length(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  return n;
}

}  // namespace

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04x}", c);
    } else if (c >= 0x80) {
      size_t n = utf8_length(text, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
        continue;
      }
      out.append(text.substr(i, n));
      i += n;
      continue;
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out + "\"";
}

std::string Json::dump() const {
  struct Visitor {
    std::string operator()(std::nullptr_t) const { return "null"; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(std::int64_t v) const { return std::to_string(v); }
    std::string operator()(const std::string& s) const { return json_quote(s); }
    std::string operator()(const Array& a) const {
      std::string out = "[";
      for (size_t k = 0; k < a.size(); ++k) out += (k ? "," : "") + a[k].dump();
      return out + "]";
    }
    std::string operator()(const Object& o) const {
      std::string out = "{";
      for (size_t k = 0; k < o.size(); ++k)
        out += (k ? "," : "") + json_quote(o[k].first) + ":" + o[k].second.dump();
      return out + "}";
    }
  };
  return std::visit(Visitor{}, m_value);
}

}  // namespace rlock::output
