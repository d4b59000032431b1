#pragma once
/// A decoded RESP2 reply, owned (no pointers into hiredis memory).

#include <cstdint>
#include <string>
#include <vector>

namespace rlock::redis {

struct Reply {
  enum class Type { string, status, integer, nil, array, error };
  Type type = Type::nil;
  std::string str;  // string, status and error replies
  std::int64_t integer = 0;
  std::vector<Reply> elements;

  bool is_nil() const { return type == Type::nil; }
  bool is_error() const { return type == Type::error; }
};

}  // namespace rlock::redis
