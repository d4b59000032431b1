#pragma once
/// Replies of the lock script, built by hand for the protocol tests.

#include <cstdint>
#include <string>
#include <vector>

#include "redis/reply.h"

namespace rlock::lock::test {

inline redis::Reply integer(std::int64_t n) {
  redis::Reply r;
  r.type = redis::Reply::Type::integer;
  r.integer = n;
  return r;
}

inline redis::Reply string(std::string s) {
  redis::Reply r;
  r.type = redis::Reply::Type::string;
  r.str = std::move(s);
  return r;
}

inline redis::Reply array(std::vector<redis::Reply> elements) {
  redis::Reply r;
  r.type = redis::Reply::Type::array;
  r.elements = std::move(elements);
  return r;
}

}  // namespace rlock::lock::test
