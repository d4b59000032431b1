#pragma once
/// The names of a lock's keys, and the small encodings stored in them.
///
/// Every key of lock NAME is `PREFIX{ESCAPED}:X`, where ESCAPED is NAME with
/// `%`, `{` and `}` percent-encoded: the escaping is one-to-one, so two names
/// never share a key, and the hash tag is always exactly ESCAPED, so every key
/// of one lock lives in one Cluster slot whatever the name contains.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace rlock::lock {

inline constexpr size_t k_max_name_bytes = 512;

/// Checks a lock name (non-empty, at most 512 bytes, no NUL).
Result<void> validate_name(std::string_view name);
/// Checks a key prefix (no braces: they would move the hash tag); the
/// error names `source`, where the prefix came from.
Result<void> validate_prefix(std::string_view prefix, std::string_view source = "--prefix");

std::string escape_name(std::string_view name);
std::optional<std::string> unescape_name(std::string_view escaped);

/// `PREFIX{ESCAPED}:`, what every key of the lock starts with (then one
/// letter: see lock_keys).
std::string base_key(std::string_view prefix, std::string_view name);
/// The keys the lock script takes, in its KEYS order (h s q x l i m f a).
std::vector<std::string> lock_keys(std::string_view prefix, std::string_view name);
/// The list a waiter blocks on until a release says it may proceed (named by
/// the token's hash, never the token).
std::string wake_key(std::string_view prefix, std::string_view name, std::string_view token);
/// SCAN pattern matching the meta key of every live lock under the prefix.
std::string meta_pattern(std::string_view prefix);
/// The lock name of a meta key found by SCAN, if it is one of ours.
std::optional<std::string> name_of_meta_key(std::string_view prefix, std::string_view key);

/// Netstrings ("5:hello"): how free text travels inside one Redis value.
std::string netstrings(const std::vector<std::string>& fields);
std::optional<std::vector<std::string>> parse_netstrings(std::string_view text);

}  // namespace rlock::lock
