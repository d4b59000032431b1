#pragma once
/// Owner tokens and the short ids that stand for them in public output.

#include <string>
#include <string_view>

#include "util/error.h"

namespace rlock {

/// 128 random bits from the OS CSPRNG (getrandom), as 32 hex digits.
Result<std::string> new_token();

/// What Redis holds instead of a token: its SHA-1 in hex, which the lock
/// script computes itself (redis.sha1hex) from the token the client sends, so
/// whoever can read the keyspace learns nothing that renews or releases a
/// lock. The client needs it only to name its wake list.
std::string token_hash(std::string_view token);

/// The public id of a token: the first 8 hex digits of its hash (the first 8
/// of token_hash). Shown by status instead of the token.
std::string short_id(std::string_view token);

/// True if `text` has the shape of a token (32 lowercase hex digits).
bool looks_like_token(std::string_view text);

}  // namespace rlock
