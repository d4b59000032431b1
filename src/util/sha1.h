#pragma once
/// The project's one SHA-1: script SHAs for EVALSHA, and the hash under which
/// the lock script stores a token (redis.sha1hex computes the same digits).

#include <string>
#include <string_view>

namespace rlock {

/// SHA-1 of `text` as 40 lowercase hex digits.
std::string sha1_hex(std::string_view text);

}  // namespace rlock
