#pragma once
/// A decoded RESP2 reply, owned (no pointers into hiredis memory).

#include <cstdint>
#include <string>
#include <utility>
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

  /// Replies built by rlock itself (a quorum's combined answer, a status
  /// read without the script, tests), shaped as the server's would be.
  static Reply of_integer(std::int64_t value) {
    Reply r;
    r.type = Type::integer;
    r.integer = value;
    return r;
  }
  static Reply of_string(std::string text) {
    Reply r;
    r.type = Type::string;
    r.str = std::move(text);
    return r;
  }
  static Reply of_array(std::vector<Reply> elements = {}) {
    Reply r;
    r.type = Type::array;
    r.elements = std::move(elements);
    return r;
  }
};

}  // namespace rlock::redis
