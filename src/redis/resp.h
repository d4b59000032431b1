#pragma once
/// RESP2 on the wire, via hiredis' reader and formatter: bytes in whatever
/// pieces the socket delivers become owned Reply values, and argument vectors
/// become binary-safe commands.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "redis/reply.h"
#include "util/error.h"

struct redisReader;

namespace rlock::redis {

/// Decodes a stream of RESP bytes into replies, one at a time.
class RespReader {
 public:
  RespReader();

  /// Appends bytes received from the server.
  void feed(std::string_view bytes);

  /// The next complete reply, or nullopt when more bytes are needed. A
  /// malformed stream is Error::Code::protocol, and stays so: the reader
  /// cannot find the next reply boundary again.
  Result<std::optional<Reply>> next();

 private:
  struct Free {
    void operator()(redisReader* reader) const;
  };
  std::unique_ptr<redisReader, Free> m_reader;
};

/// One command as RESP (an array of bulk strings); arguments may hold any
/// bytes, NUL and CR LF included.
std::string format_command(std::span<const std::string> args);

}  // namespace rlock::redis
