#pragma once
/// A minimal JSON value, enough for rlock's --json documents.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace rlock::output {

class Json {
 public:
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;  // keeps field order

  Json() : m_value(nullptr) {}
  Json(std::nullptr_t) : m_value(nullptr) {}
  Json(bool b) : m_value(b) {}
  Json(int v) : m_value(static_cast<std::int64_t>(v)) {}
  Json(long v) : m_value(static_cast<std::int64_t>(v)) {}
  Json(long long v) : m_value(static_cast<std::int64_t>(v)) {}
  Json(std::string s) : m_value(std::move(s)) {}
  Json(std::string_view s) : m_value(std::string(s)) {}
  Json(const char* s) : m_value(std::string(s)) {}
  Json(Array a) : m_value(std::move(a)) {}
  Json(Object o) : m_value(std::move(o)) {}

  std::string dump() const;
  /// Appends the document to `out`.
  void dump_to(std::string& out) const;

 private:
  std::variant<std::nullptr_t, bool, std::int64_t, std::string, Array, Object> m_value;
};

/// `text` as a JSON string literal, quotes included. Control characters, C1
/// controls and bidi marks are \u-escaped; bytes that are not UTF-8 become
/// U+FFFD, so the document is always valid UTF-8 and always parses.
std::string json_quote(std::string_view text);
/// json_quote, appended to `out`.
void json_quote_to(std::string& out, std::string_view text);

/// One JSON object written straight into `out`, field by field, in the
/// order given: the same bytes as a Json::Object of the same fields dumped,
/// without a tree built and a string allocated per value (a listing of
/// 100000 locks writes ~4 million values).
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : m_out(out) { m_out += '{'; }
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;
  ~JsonWriter() { m_out += '}'; }

  void text(std::string_view key, std::string_view text) {
    name(key);
    json_quote_to(m_out, text);
  }
  void integer(std::string_view key, std::int64_t value);
  void boolean(std::string_view key, bool value) {
    name(key);
    m_out += value ? "true" : "false";
  }
  void value(std::string_view key, const Json& value) {
    name(key);
    value.dump_to(m_out);
  }
  /// `"key":`, the value for the caller to append.
  std::string& name(std::string_view key);

 private:
  std::string& m_out;
  bool m_first = true;
};

}  // namespace rlock::output
