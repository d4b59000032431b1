#include "redis/url.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <climits>

#include "util/number.h"
#include "util/percent.h"

namespace rlock::redis {
namespace {

bool is_unreserved(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

bool needs_escape(char c) {
  return !is_unreserved(c);
}

bool needs_escape_in_path(char c) {
  return !is_unreserved(c) && c != '/';
}

/// Digits only (no sign, no spaces), within [min, max]: the project's one
/// number parser.
std::optional<int> parse_number(std::string_view text, int min, int max) {
  auto value = parse_integer(text, min, max);
  if (!value) return std::nullopt;
  return static_cast<int>(*value);
}

bool is_hostname(std::string_view host) {
  for (const char c : host) {
    if (!is_unreserved(c) || c == '~') return false;
  }
  return !host.empty();
}

/// The text of a URL that did not parse, without what would be its password:
/// everything between the first ':' of the user info and the last '@'.
std::string redact_text(std::string_view text) {
  const std::size_t scheme_end = text.find("://");
  const std::size_t start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const std::size_t at = text.rfind('@');
  if (at == std::string_view::npos || at < start) return std::string(text);
  const std::size_t colon = text.find(':', start);
  if (colon == std::string_view::npos || colon > at) return std::string(text);
  // Without a user, the '@' goes too: `redis://:secret@host` → `redis://host`.
  return fmt::format("{}{}", text.substr(0, colon), text.substr(colon == start ? at + 1 : at));
}

/// Splits `user[:password]` into the URL's percent-decoded user and password;
/// an empty part counts as absent (`redis://:secret@host` has no user).
bool parse_userinfo(std::string_view info, Url& url) {
  const std::size_t colon = info.find(':');
  auto user = percent::decode(info.substr(0, colon));
  if (!user) return false;
  if (!user->empty()) url.user = std::move(*user);
  if (colon == std::string_view::npos) return true;
  auto password = percent::decode(info.substr(colon + 1));
  if (!password) return false;
  if (!password->empty()) url.password = std::move(*password);
  return true;
}

/// `host[:port][/db]` after the user info.
const char* parse_tcp(std::string_view rest, Url& url) {
  std::string_view host;
  if (rest.starts_with('[')) {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return "unterminated IPv6 address";
    host = rest.substr(1, close - 1);
    in6_addr address{};
    if (inet_pton(AF_INET6, std::string(host).c_str(), &address) != 1) {
      return "invalid IPv6 address";
    }
    rest.remove_prefix(close + 1);
  } else {
    host = rest.substr(0, rest.find_first_of(":/"));
    if (host.empty()) return "missing host";
    if (!is_hostname(host)) return "invalid host";
    rest.remove_prefix(host.size());
  }
  url.host = host;
  if (rest.starts_with(':')) {
    const std::string_view port = rest.substr(1, rest.find('/') - 1);
    const auto value = parse_number(port, 1, 65535);
    if (!value) return "port must be a number from 1 to 65535";
    url.port = *value;
    rest.remove_prefix(1 + port.size());
  }
  if (rest.empty() || rest == "/") return nullptr;
  if (!rest.starts_with('/')) return "unexpected text after the host";
  const auto db = parse_number(rest.substr(1), 0, INT_MAX);
  if (!db) return "database must be a non-negative number";
  url.db = *db;
  return nullptr;
}

/// `/path[?db=N]` after `unix://`.
const char* parse_unix(std::string_view rest, Url& url) {
  const std::size_t query = rest.find('?');
  const auto path = percent::decode(rest.substr(0, query));
  if (!path || !path->starts_with('/') || path->size() < 2) return "missing socket path";
  url.path = *path;
  if (query == std::string_view::npos) return nullptr;
  const std::string_view params = rest.substr(query + 1);
  if (!params.starts_with("db=")) return "only the db parameter is allowed";
  const auto db = parse_number(params.substr(3), 0, INT_MAX);
  if (!db) return "database must be a non-negative number";
  url.db = *db;
  return nullptr;
}

}  // namespace

std::string Url::redacted() const {
  if (scheme == Scheme::unix_socket) {
    return db == 0
               ? fmt::format("unix://{}", percent::encode(path, needs_escape_in_path))
               : fmt::format("unix://{}?db={}", percent::encode(path, needs_escape_in_path), db);
  }
  const std::string who = user ? percent::encode(*user, needs_escape) + "@" : "";
  const bool ipv6 = host.find(':') != std::string::npos;
  return fmt::format("{}://{}{}{}{}:{}/{}", scheme == Scheme::tls ? "rediss" : "redis", who,
                     ipv6 ? "[" : "", host, ipv6 ? "]" : "", port, db);
}

/// True for a comma list of URLs or of hosts (`redis://a,redis://b`,
/// `redis://a:1,b:2/0`): the syntax of Cluster seeds and quorums, which this
/// version does not speak. A comma in the user info (a password) is fine.
bool is_list(std::string_view text) {
  for (const char* scheme : {",redis://", ",rediss://", ",unix://", ",redis-sentinel://"})
    if (text.find(scheme) != std::string_view::npos) return true;
  const std::size_t start = text.find("://");
  if (start == std::string_view::npos || text.starts_with("unix://")) return false;
  const std::size_t at = text.rfind('@');
  const std::size_t host = at == std::string_view::npos || at < start ? start + 3 : at + 1;
  return text.find(',', host) != std::string_view::npos;
}

Result<Url> parse_url(std::string_view text) {
  Url url;
  const char* problem = nullptr;
  if (is_list(text)) {
    problem =
        "a comma list of URLs or seed nodes (Cluster, Sentinel, quorum) is not supported yet; "
        "give one redis://, rediss:// or unix:// URL";
  } else if (text.starts_with("unix://")) {
    url.scheme = Url::Scheme::unix_socket;
    problem = parse_unix(text.substr(7), url);
  } else if (text.starts_with("redis://") || text.starts_with("rediss://")) {
    url.scheme = text.starts_with("rediss://") ? Url::Scheme::tls : Url::Scheme::tcp;
    std::string_view rest = text.substr(text.find("://") + 3);
    // The last '@' ends the user info, so an unencoded '@' or '/' in a
    // password still parses (and is still redacted).
    if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
      if (!parse_userinfo(rest.substr(0, at), url)) problem = "invalid percent-encoding";
      rest.remove_prefix(at + 1);
    }
    if (!problem) problem = parse_tcp(rest, url);
  } else {
    problem = "the scheme must be redis://, rediss:// or unix://";
  }
  if (problem)
    return fail(Error::Code::usage, fmt::format("invalid URL {}: {}", redact_text(text), problem));
  return url;
}

}  // namespace rlock::redis
