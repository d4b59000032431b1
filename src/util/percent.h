#pragma once
/// The one percent-encoding of the project (%XX, upper-case hex): URL parts,
/// lock names inside key names, and lock names inside RLOCK_HELD each escape
/// their own set of bytes with it.

#include <optional>
#include <string>
#include <string_view>

namespace rlock::percent {

/// True for a byte that must be escaped in a given context.
using NeedsEscape = bool (*)(char);

/// Escapes every byte of `text` for which `needs` is true (and `%` itself,
/// always, so that decoding is unambiguous).
std::string encode(std::string_view text, NeedsEscape needs);

/// Decodes every %XX; nullopt for a `%` not followed by two hex digits. With
/// `strict`, only the exact output of encode(…, strict) is accepted, so that
/// every decoded text has exactly one encoded form (key names must map
/// one-to-one to lock names).
std::optional<std::string> decode(std::string_view text, NeedsEscape strict = nullptr);

}  // namespace rlock::percent
