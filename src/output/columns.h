#pragma once
/// Table cells appended to one output buffer, for listings of many rows
/// (`status` of 100000 locks): the same bytes as fmt's "{:<N}" / "{:>N}" of
/// the same text, without a format string parsed and a string built per
/// cell. Plain ASCII, the common case, is copied and padded directly; any
/// other text goes through fmt, so that its idea of a character's width
/// (East Asian wide characters count two) stays the one that decides.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rlock::output {

/// `text` left-aligned in `width` columns, as fmt::format("{:<W}", text).
void append_left(std::string& out, std::string_view text, std::size_t width);
/// `text` right-aligned in `width` columns, as fmt::format("{:>W}", text).
void append_right(std::string& out, std::string_view text, std::size_t width);
/// `value` right-aligned in `width` columns, as fmt::format("{:>W}", value).
void append_right(std::string& out, std::int64_t value, std::size_t width);
/// Text read from Redis, made safe and cut to `width` and left-aligned:
/// append_left(out, clip(printable(text), width), width).
void append_shown(std::string& out, std::string_view text, std::size_t width);
/// Text read from Redis, made safe, uncut: out += printable(text).
void append_shown(std::string& out, std::string_view text);
/// The columns `text` takes once made safe, as append_shown writes it (East
/// Asian wide characters count two, as fmt counts them when it pads).
std::size_t shown_width(std::string_view text);

}  // namespace rlock::output
