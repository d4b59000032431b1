#pragma once
/// RESP2 on the wire, via hiredis' reader and formatter: bytes in whatever
/// pieces the socket delivers become owned Reply values, and argument vectors
/// become binary-safe commands.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "redis/reply.h"
#include "util/error.h"

struct redisReader;

namespace rlock::redis {

/// What one reply may be. hiredis allocates what a header announces before
/// the bytes arrive (`*2147483647` is a 16 GiB pointer array), so a broken
/// or hostile server could exhaust memory with a few bytes. No reply rlock
/// asks for comes anywhere near these.
struct ReplyLimits {
  /// Elements of all arrays in one reply, nesting included.
  std::size_t max_elements = 1'000'000;
  /// Bytes of all bulk strings in one reply.
  std::size_t max_bulk_bytes = std::size_t{64} * 1024 * 1024;
  /// One status, error or integer line (and any header line).
  std::size_t max_line = std::size_t{1024} * 1024;
};

/// Decodes a stream of RESP bytes into replies, one at a time.
class RespReader {
 public:
  explicit RespReader(ReplyLimits limits = {});

  /// Appends bytes received from the server. Their headers are checked
  /// against the limits before hiredis sees them.
  void feed(std::string_view bytes);

  /// The next complete reply, or nullopt when more bytes are needed. A
  /// malformed stream, or a reply over the limits, is Error::Code::protocol,
  /// and stays so: the reader cannot find the next reply boundary again.
  Result<std::optional<Reply>> next();

 private:
  /// Follows the RESP framing of the bytes fed (header lines, bulk
  /// payloads, open arrays) to check each header before hiredis acts on it.
  /// Returns how many of `bytes` may go to hiredis: all of them, or up to
  /// the first header over a limit (and m_too_large says why).
  std::size_t check(std::string_view bytes);
  bool check_header(std::string_view line);
  /// One item (a scalar, a bulk string, a complete array) ended.
  void item_done();

  struct Free {
    void operator()(redisReader* reader) const;
  };
  std::unique_ptr<redisReader, Free> m_reader;
  ReplyLimits m_limits;
  std::string m_line;                // the header line read so far
  std::uint64_t m_skip = 0;          // bulk payload (and CR LF) still to come
  std::vector<std::int64_t> m_open;  // items still to come in each open array
  std::size_t m_elements = 0;        // in the current top-level reply
  std::size_t m_bulk_bytes = 0;      // in the current top-level reply
  bool m_unchecked = false;          // a header hiredis will reject: stop checking
  std::string m_too_large;           // why the stream was refused, if it was
};

/// One command as RESP (an array of bulk strings); arguments may hold any
/// bytes, NUL and CR LF included.
std::string format_command(std::span<const std::string> args);
/// format_command, appended to `out` (a request of many commands built in
/// one buffer, without a string per argument).
void append_command(std::string& out, std::initializer_list<std::string_view> args);

}  // namespace rlock::redis
