#include "lock/keys.h"

#include <fmt/format.h>

#include <charconv>

#include "util/number.h"
#include "util/percent.h"
#include "util/token.h"

namespace rlock::lock {

Result<void> validate_name(std::string_view name) {
  if (name.empty()) return fail(Error::Code::usage, "lock name is empty");
  if (name.size() > k_max_name_bytes)
    return fail(Error::Code::usage, fmt::format("lock name is {} bytes long; the limit is {}",
                                                name.size(), k_max_name_bytes));
  if (name.find('\0') != std::string_view::npos)
    return fail(Error::Code::usage, "lock name contains a NUL byte");
  return {};
}

Result<void> validate_prefix(std::string_view prefix, std::string_view source) {
  if (prefix.find_first_of("{}") != std::string_view::npos || prefix.find('\0') != prefix.npos)
    return fail(Error::Code::usage,
                fmt::format("invalid {} {}: it may not contain '{{', '}}' or NUL", source,
                            quote_input(prefix)));
  return {};
}

namespace {
/// Braces would move the hash tag; `%` is always escaped by percent::encode.
bool needs_escape(char c) {
  return c == '{' || c == '}';
}
}  // namespace

std::string escape_name(std::string_view name) {
  return percent::encode(name, needs_escape);
}

std::optional<std::string> unescape_name(std::string_view escaped) {
  // Strict: only what escape_name produces, so that two key names never
  // decode to the same lock name.
  return percent::decode(escaped, needs_escape);
}

std::string base_key(std::string_view prefix, std::string_view name) {
  // Appended, not fmt::format: a status listing builds it for every lock,
  // and parsing the format string was most of its cost.
  std::string key;
  key.reserve(prefix.size() + name.size() + 4);
  key += prefix;
  key += '{';
  key += escape_name(name);
  key += "}:";
  return key;
}

std::vector<std::string> lock_keys(std::string_view prefix, std::string_view name) {
  std::string base = base_key(prefix, name);
  std::vector<std::string> keys;
  for (const char* suffix : {"h", "s", "q", "x", "l", "i", "m", "f", "a"})
    keys.push_back(base + suffix);
  return keys;
}

std::string wake_key(std::string_view prefix, std::string_view name, std::string_view token) {
  // Named by the token's hash, as the script names it: the key name is as
  // readable as any value.
  return base_key(prefix, name) + "w:" + token_hash(token);
}

std::string meta_pattern(std::string_view prefix) {
  // Escape glob metacharacters of the prefix; names match anything.
  std::string out;
  for (char c : prefix) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out + "{*}:m";
}

std::optional<std::string> name_of_meta_key(std::string_view prefix, std::string_view key) {
  if (!key.starts_with(prefix)) return std::nullopt;
  key.remove_prefix(prefix.size());
  if (key.size() < 4 || key.front() != '{' || !key.ends_with("}:m")) return std::nullopt;
  auto escaped = key.substr(1, key.size() - 4);
  if (escaped.find_first_of("{}") != std::string_view::npos) return std::nullopt;
  return unescape_name(escaped);
}

std::string netstrings(const std::vector<std::string>& fields) {
  std::string out;
  for (const auto& f : fields) out += fmt::format("{}:{}", f.size(), f);
  return out;
}

std::optional<std::vector<std::string>> parse_netstrings(std::string_view text) {
  std::vector<std::string> fields;
  while (!text.empty()) {
    auto colon = text.find(':');
    if (colon == std::string_view::npos || colon == 0) return std::nullopt;
    size_t size = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + colon, size);
    if (ec != std::errc() || end != text.data() + colon) return std::nullopt;
    text.remove_prefix(colon + 1);
    if (size > text.size()) return std::nullopt;
    fields.emplace_back(text.substr(0, size));
    text.remove_prefix(size);
  }
  return fields;
}

}  // namespace rlock::lock
