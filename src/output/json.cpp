#include "output/json.h"

#include <fmt/format.h>

#include "output/text.h"

namespace rlock::output {

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  char32_t cp = 0;
  for (size_t i = 0; i < text.size();) {
    size_t n = utf8_sequence(text, i, cp);
    if (n == 0) {
      // Not UTF-8: the document must stay valid, so the byte becomes
      // U+FFFD. Names, whose exact bytes matter, also travel as name_b64.
      out += "\\ufffd";
      ++i;
      continue;
    }
    if (cp == '"' || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (is_unsafe_code_point(cp)) {
      // Controls, C1 and bidi marks as \u escapes: lossless for a parser,
      // and harmless if the document itself is shown on a terminal.
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
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
