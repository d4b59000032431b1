#pragma once
/// Owner tokens and the short ids that stand for them in public output.

#include <string>
#include <string_view>

#include "util/error.h"

namespace rlock {

/// 128 random bits from the OS CSPRNG (getrandom), as 32 hex digits.
Result<std::string> new_token();

/// The public id of a token: the first 8 hex digits of its SHA-1, as the lock
/// script computes it (redis.sha1hex). Shown by status instead of the token.
std::string short_id(std::string_view token);

/// True if `text` has the shape of a token (32 lowercase hex digits).
bool looks_like_token(std::string_view text);

}  // namespace rlock
