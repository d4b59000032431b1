#pragma once
/// Where a lock lives: `redis://[user[:pass]@]host[:port][/db]`,
/// `rediss://...` (TLS), `unix:///path/redis.sock[?db=N]`, a Cluster's seeds
/// `redis://h1:p1,h2:p2[/db]`, and a master found through Sentinels
/// `redis-sentinel://[user[:pass]@]s1:26379,s2:26379[/db]#MASTER` (and
/// `rediss-sentinel://`, TLS).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace rlock::redis {

/// One host of a URL: a server, a Cluster seed or a Sentinel.
struct Endpoint {
  std::string host;  // without IPv6 brackets
  int port = 6379;
  bool operator==(const Endpoint&) const = default;
};

struct Url {
  enum class Scheme { tcp, tls, unix_socket };
  /// tcp or tls for Sentinel URLs too (tls for rediss-sentinel://).
  Scheme scheme = Scheme::tcp;
  std::string host = "127.0.0.1";  // the first of hosts, without IPv6 brackets
  int port = 6379;                 // the first of hosts
  std::string path;                // unix socket path
  int db = 0;
  /// The user and password of the Redis server (for a Sentinel URL: of the
  /// master, as in Lettuce and redis-py; the Sentinels' own are separate).
  std::optional<std::string> user;      // percent-decoded
  std::optional<std::string> password;  // percent-decoded
  /// Every host of the URL, in order (for tcp and tls; empty for unix://).
  /// One entry, equal to host and port, for a one-host URL.
  std::vector<Endpoint> hosts;
  /// redis-sentinel:// or rediss-sentinel://: hosts are the Sentinels
  /// (default port 26379) and master_name the master they are asked for.
  bool sentinel = false;
  std::string master_name;  // the #fragment, percent-decoded; only for sentinel

  /// Several hosts in a redis:// or rediss:// URL: seeds of one Cluster.
  bool cluster_seeds() const { return !sentinel && hosts.size() > 1; }

  /// The URL as it may be shown to a person: never the password.
  std::string redacted() const;
};

/// Parses the URL of one deployment; a usage error says what is wrong
/// (scheme, host, port, db, master name, ...). A comma list of whole URLs
/// (`redis://a,redis://b`, a quorum) is refused: see split_deployments.
Result<Url> parse_url(std::string_view text);

/// Splits a comma list (RLOCK_URL, the config file's `url`) into the URLs
/// of its deployments: an entry that starts with a scheme (`redis://`...)
/// starts a new deployment, an entry without one is one more host of the
/// deployment before it (`redis://a:1,b:2/0` is one). Entries are trimmed of
/// blanks; empty entries are kept, so that parse_url reports them.
std::vector<std::string> split_deployments(std::string_view text);

}  // namespace rlock::redis
