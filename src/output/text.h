#pragma once
/// Text that reaches a terminal or a JSON document. Anything read from Redis
/// (names, owners, hosts, commands, ids, audit records, error messages that
/// quote key names) may have been written by anyone who can write the lock's
/// keys, so it is never printed raw.

#include <string>
#include <string_view>

namespace rlock::output {

/// Length of the well-formed UTF-8 sequence at s[i] (1 to 4), storing its
/// code point in `cp`; 0 if the bytes there are not well-formed UTF-8
/// (stray continuation bytes, overlong forms, surrogates, beyond U+10FFFF,
/// truncated sequences).
size_t utf8_sequence(std::string_view s, size_t i, char32_t& cp);

/// True if `s` is well-formed UTF-8 throughout.
bool valid_utf8(std::string_view s);

/// True for code points a terminal acts on or that reorder what is shown:
/// C0 controls, DEL, C1 controls (U+0080-U+009F, which some terminals take
/// as CSI/OSC introducers) and the bidirectional marks and overrides
/// (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069), plus the line and
/// paragraph separators U+2028-U+2029.
bool is_unsafe_code_point(char32_t cp);

/// The one sanitiser for text shown on a terminal: every unsafe code point
/// becomes a visible escape (\x1b for C0 and DEL, \u{202e} for the others),
/// and every byte that is not well-formed UTF-8 becomes \xNN. The result is
/// valid UTF-8, one line, and cannot move the cursor, retitle the window or
/// reverse the text around it.
std::string printable(std::string_view s);

/// A lock name as text output shows it, so that two names never look alike
/// and each can be typed back into a shell: the name itself when it is
/// well-formed UTF-8 with no unsafe code point, backslash or single quote;
/// otherwise bash's ANSI-C quoting of it ($'...': \\ and \' for those two,
/// \xNN for control and non-UTF-8 bytes, \uNNNN for the other unsafe code
/// points), which printable() text never starts with unquoted.
std::string shown_name(std::string_view name);
/// Whether shown_name quotes `name` (otherwise it is the name itself).
bool name_needs_quoting(std::string_view name);

/// The name in a sentence: 'NAME', or its $'...' form as shown_name gives.
std::string quoted_name(std::string_view name);

/// The columns a terminal shows `s` in: none for a combining mark or a
/// format character, two for an East Asian wide or fullwidth character
/// (emoji included), one for any other character or invalid byte. Meant
/// for printable() text.
std::size_t display_width(std::string_view s);

/// printable(s) shortened to at most `width` columns (display_width; the
/// last one a '~' when it was cut), never splitting a UTF-8 sequence or an
/// escape.
std::string clip(std::string_view s, size_t width);

/// Standard base64 (RFC 4648, with padding).
std::string base64(std::string_view bytes);

}  // namespace rlock::output
