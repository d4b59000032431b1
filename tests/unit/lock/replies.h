#pragma once
/// Replies of the lock script, built by hand for the protocol tests.

#include <cstdint>
#include <string>
#include <vector>

#include "redis/reply.h"

namespace rlock::lock::test {

inline redis::Reply integer(std::int64_t n) {
  return redis::Reply::of_integer(n);
}
inline redis::Reply string(std::string s) {
  return redis::Reply::of_string(std::move(s));
}
inline redis::Reply array(std::vector<redis::Reply> elements) {
  return redis::Reply::of_array(std::move(elements));
}

}  // namespace rlock::lock::test
