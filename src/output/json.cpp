#include "output/json.h"

#include <fmt/format.h>

#include <charconv>
#include <iterator>

#include "output/text.h"

namespace rlock::output {

namespace {

/// json_quote, appending to `out`.
void append_quoted(std::string& out, std::string_view text) {
  out += '"';
  char32_t cp = 0;
  for (size_t i = 0; i < text.size();) {
    // Plain printable ASCII, the common case, goes through in runs.
    size_t plain = i;
    while (plain < text.size() && text[plain] >= 0x20 && text[plain] < 0x7f && text[plain] != '"' &&
           text[plain] != '\\')
      ++plain;
    if (plain > i) {
      out.append(text.substr(i, plain - i));
      i = plain;
      continue;
    }
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
  out += '"';
}

}  // namespace

std::string json_quote(std::string_view text) {
  std::string out;
  append_quoted(out, text);
  return out;
}

void json_quote_to(std::string& out, std::string_view text) {
  append_quoted(out, text);
}

std::string& JsonWriter::name(std::string_view key) {
  if (!m_first) m_out += ',';
  m_first = false;
  append_quoted(m_out, key);
  m_out += ':';
  return m_out;
}

void JsonWriter::integer(std::string_view key, std::int64_t value) {
  char digits[24];
  name(key).append(digits, std::to_chars(digits, digits + sizeof digits, value).ptr);
}

std::string Json::dump() const {
  std::string out;
  dump_to(out);
  return out;
}

void Json::dump_to(std::string& out) const {
  // Appends to one string: a listing of 100000 locks would otherwise build
  // and copy a string per value at every level.
  struct Visitor {
    std::string& out;
    void operator()(std::nullptr_t) const { out += "null"; }
    void operator()(bool b) const { out += b ? "true" : "false"; }
    void operator()(std::int64_t v) const { fmt::format_to(std::back_inserter(out), "{}", v); }
    void operator()(const std::string& s) const { append_quoted(out, s); }
    void operator()(const Array& a) const {
      out += '[';
      for (size_t k = 0; k < a.size(); ++k) {
        if (k) out += ',';
        a[k].dump_to(out);
      }
      out += ']';
    }
    void operator()(const Object& o) const {
      out += '{';
      for (size_t k = 0; k < o.size(); ++k) {
        if (k) out += ',';
        append_quoted(out, o[k].first);
        out += ':';
        o[k].second.dump_to(out);
      }
      out += '}';
    }
  };
  std::visit(Visitor{out}, m_value);
}

}  // namespace rlock::output
