#pragma once
/// Where a lock lives: `redis://[user[:pass]@]host[:port][/db]`,
/// `rediss://...` (TLS) and `unix:///path/redis.sock[?db=N]`.

#include <optional>
#include <string>
#include <string_view>

#include "util/error.h"

namespace rlock::redis {

struct Url {
  enum class Scheme { tcp, tls, unix_socket };
  Scheme scheme = Scheme::tcp;
  std::string host = "127.0.0.1";  // without IPv6 brackets
  int port = 6379;
  std::string path;  // unix socket path
  int db = 0;
  std::optional<std::string> user;      // percent-decoded
  std::optional<std::string> password;  // percent-decoded

  /// The URL as it may be shown to a person: never the password.
  std::string redacted() const;
};

/// Parses a URL; a usage error says what is wrong (scheme, port, db, ...).
Result<Url> parse_url(std::string_view text);

}  // namespace rlock::redis
