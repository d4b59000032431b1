#pragma once
/// The project's one number parser: every number a user types (options,
/// environment variables, config values, durations) is read here, strictly
/// (digits only, no sign unless negatives are allowed, no spaces, no `0x`,
/// no exponent) and range-checked, so that no input can overflow or throw.

#include <cstdint>
#include <string>
#include <string_view>

#include "util/error.h"

namespace rlock {

/// A whole number within [min, max]. The usage error says what was wrong
/// with `text`; the caller prefixes it with the option, variable or
/// `file:line` it came from.
Result<std::int64_t> parse_integer(std::string_view text, std::int64_t min, std::int64_t max);

/// A non-negative decimal number (`12`, `0.5`, `.5`, `3.`) as a double.
/// Fails on anything else, and on numbers above `max` (however many digits
/// they have: `max` bounds the value before any conversion can overflow).
Result<double> parse_decimal(std::string_view text, double max);

/// `text` as an error message may quote it: at most a line's worth.
std::string quote_input(std::string_view text);

}  // namespace rlock
