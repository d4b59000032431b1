#pragma once
/// Table cells appended to one output buffer, for listings of many rows
/// (`status` of 100000 locks), without a format string parsed and a string
/// built per cell. Plain ASCII, the common case, is one column a byte; any
/// other text is padded by its display_width (output/text.h: combining
/// marks take none, East Asian wide characters and emoji two), the width
/// a terminal gives it, which fmt's own padding does not know.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rlock::output {

/// `text` left-aligned in `width` columns (display_width).
void append_left(std::string& out, std::string_view text, std::size_t width);
/// `text` right-aligned in `width` columns (display_width).
void append_right(std::string& out, std::string_view text, std::size_t width);
/// `value` right-aligned in `width` columns, as fmt::format("{:>W}", value).
void append_right(std::string& out, std::int64_t value, std::size_t width);
/// Text read from Redis, made safe and cut to `width` and left-aligned:
/// append_left(out, clip(printable(text), width), width).
void append_shown(std::string& out, std::string_view text, std::size_t width);
/// append_shown(text, width) as a string, for a cell of a format string.
std::string cell(std::string_view text, std::size_t width);
/// Text read from Redis, made safe, uncut: out += printable(text).
void append_shown(std::string& out, std::string_view text);
/// The columns `text` takes once made safe, as append_shown writes it
/// (display_width).
std::size_t shown_width(std::string_view text);

}  // namespace rlock::output
