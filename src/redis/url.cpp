#include "redis/url.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
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
/// everything between the first ':' of the user info and the last '@', and
/// the query, where other clients take one (`?password=...`: rlock does not,
/// but a user may try it).
std::string redact_text(std::string_view text) {
  std::string shown;
  const std::size_t scheme_end = text.find("://");
  const std::size_t start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const std::size_t at = text.rfind('@');
  // The query starts after the user info (a '?' typed in a password is not one).
  const std::size_t query = text.find('?', at == std::string_view::npos || at < start ? start : at);
  if (query != std::string_view::npos) text = text.substr(0, query);
  const std::size_t colon = text.find(':', start);
  if (at == std::string_view::npos || at < start) {
    // No user info, but a "port" that is not a number may be a password
    // typed without its `@host` (`redis://:secret`, `redis://user:secret`).
    // Nothing after such a port is shown: the password may hold a '/'.
    const std::size_t end = std::min(text.find_first_of("/#", start), text.size());
    for (std::size_t from = start; from <= end;) {
      const std::size_t comma = std::min(text.find(',', from), end);
      const std::string_view host = text.substr(from, comma - from);
      const std::size_t bracket = host.starts_with('[') ? host.find(']') : 0;
      const std::size_t port = host.find(':', bracket == std::string_view::npos ? 0 : bracket);
      // So is one with no host before it (`redis://:123456`), or beyond
      // any port (`redis://user:20240915`).
      if (port != std::string_view::npos && port + 1 < host.size() &&
          (port == 0 || !parse_number(host.substr(port + 1), 0, 65535)))
        return fmt::format("{}...", text.substr(0, from + port + 1));
      from = comma + 1;
    }
    shown = text;
  } else if (colon == std::string_view::npos || colon > at) {
    shown = text;
  } else {
    // Without a user, the '@' goes too: `redis://:secret@host` → `redis://host`.
    shown = fmt::format("{}{}", text.substr(0, colon), text.substr(colon == start ? at + 1 : at));
  }
  // Other clients' forms that rlock does not read may carry a password
  // too: key=value options (`host:6380,password=...`, `/0;password=...`)
  // and a fragment (a URL that did not parse is often a REDIS_URL set for
  // another program, and errors go to cron mail and CI logs). Nothing from
  // the first '=', ';', '#' or blank on is shown.
  std::size_t cut = shown.size();
  for (std::size_t k = start; k < shown.size() && cut == shown.size(); ++k) {
    const auto c = static_cast<unsigned char>(shown[k]);
    if (c <= ' ' || c == 0x7f || c == '=' || c == ';' || c == '#') cut = k;
  }
  if (cut < shown.size()) {
    shown.resize(cut);
    shown += "...";
  }
  if (query != std::string_view::npos) shown += "?...";
  return shown;
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

/// `host[:port]` or `[v6addr][:port]`: one entry of a URL's host list.
const char* parse_endpoint(std::string_view text, int default_port, Endpoint& endpoint) {
  std::string_view host;
  if (text.starts_with('[')) {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return "unterminated IPv6 address";
    host = text.substr(1, close - 1);
    in6_addr address{};
    if (inet_pton(AF_INET6, std::string(host).c_str(), &address) != 1) {
      return "invalid IPv6 address";
    }
    text.remove_prefix(close + 1);
  } else {
    host = text.substr(0, text.find(':'));
    if (host.empty()) return "missing host";
    if (!is_hostname(host)) return "invalid host";
    text.remove_prefix(host.size());
  }
  endpoint.host = host;
  endpoint.port = default_port;
  if (text.empty()) return nullptr;
  if (!text.starts_with(':')) return "unexpected text after the host";
  const auto value = parse_number(text.substr(1), 1, 65535);
  if (!value) return "port must be a number from 1 to 65535";
  endpoint.port = *value;
  return nullptr;
}

/// `host[:port][,host[:port]...][/db]` after the user info. A comma inside
/// IPv6 brackets is no separator (inet_pton refuses it anyway).
const char* parse_tcp(std::string_view rest, int default_port, Url& url) {
  // Other clients read options there (?password=, ?timeout=, ?db=): rlock
  // reads none, and the hosts and database before them may well be fine.
  if (rest.find('?') != std::string_view::npos)
    return "rlock reads no options after '?' in a URL (only a unix:// URL's ?db=N): the "
           "database goes in the path (/N), a password in RLOCK_PASSWORD or --password-file";
  std::size_t end = 0;
  for (bool bracket = false; end < rest.size(); ++end) {
    if (rest[end] == '[') bracket = true;
    if (rest[end] == ']') bracket = false;
    if (rest[end] == '/' && !bracket) break;
  }
  std::string_view list = rest.substr(0, end);
  rest.remove_prefix(end);
  for (;;) {
    std::size_t comma = 0;
    for (bool bracket = false; comma < list.size(); ++comma) {
      if (list[comma] == '[') bracket = true;
      if (list[comma] == ']') bracket = false;
      if (list[comma] == ',' && !bracket) break;
    }
    const std::string_view entry = list.substr(0, comma);
    if (entry.empty() && !url.hosts.empty()) return "empty host in the list";
    Endpoint endpoint;
    if (const char* problem = parse_endpoint(entry, default_port, endpoint)) return problem;
    url.hosts.push_back(std::move(endpoint));
    if (comma == list.size()) break;
    list.remove_prefix(comma + 1);
    if (list.empty()) return "empty host in the list";
  }
  url.host = url.hosts.front().host;
  url.port = url.hosts.front().port;
  if (rest.empty() || rest == "/") return nullptr;
  // redis://h1:1/0,h2:2: a comma after the database is a second
  // deployment without its scheme, or a seed list written the wrong way.
  if (rest.find(',') != std::string_view::npos)
    return "a comma after the database: a Cluster's seed nodes come before it "
           "(redis://h1:6379,h2:6379/0), and each deployment of a quorum starts with its "
           "own scheme (redis://h1:6379/0,redis://h2:6379/0)";
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

/// Where a URL's scheme ends (the index of its "://"), or npos: a scheme is
/// a letter and then letters, digits, '+', '-' or '.' (RFC 3986).
std::size_t scheme_end(std::string_view text) {
  const std::size_t end = text.find("://");
  if (end == std::string_view::npos || end == 0 ||
      !std::isalpha(static_cast<unsigned char>(text[0])))
    return std::string_view::npos;
  for (const char c : text.substr(0, end))
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.')
      return std::string_view::npos;
  return end;
}

std::string_view trim_blanks(std::string_view text) {
  const std::size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

std::string format_endpoint(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return fmt::format("{}{}{}:{}", ipv6 ? "[" : "", host, ipv6 ? "]" : "", port);
}

}  // namespace

std::vector<std::string> split_deployments(std::string_view text) {
  std::vector<std::string> out;
  if (trim_blanks(text).empty()) return out;
  for (;;) {
    const std::size_t comma = text.find(',');
    const std::string_view entry = trim_blanks(text.substr(0, comma));
    if (out.empty() || scheme_end(entry) != std::string_view::npos)
      out.emplace_back(entry);
    else
      out.back().append(",").append(entry);
    if (comma == std::string_view::npos) return out;
    text.remove_prefix(comma + 1);
  }
}

std::string Url::redacted() const {
  if (scheme == Scheme::unix_socket) {
    return db == 0
               ? fmt::format("unix://{}", percent::encode(path, needs_escape_in_path))
               : fmt::format("unix://{}?db={}", percent::encode(path, needs_escape_in_path), db);
  }
  const std::string who = user ? percent::encode(*user, needs_escape) + "@" : "";
  // One host: host and port, which a caller may have changed since parsing.
  std::string where = format_endpoint(host, port);
  if (hosts.size() > 1 || (sentinel && !hosts.empty())) {
    where.clear();
    for (const auto& endpoint : hosts)
      where += (where.empty() ? "" : ",") + format_endpoint(endpoint.host, endpoint.port);
  }
  const char* name = scheme == Scheme::tls ? (sentinel ? "rediss-sentinel" : "rediss")
                                           : (sentinel ? "redis-sentinel" : "redis");
  const std::string master = sentinel ? "#" + percent::encode(master_name, needs_escape) : "";
  return fmt::format("{}://{}{}/{}{}", name, who, where, db, master);
}

Result<Url> parse_url(std::string_view text) {
  Url url;
  const char* problem = nullptr;
  const std::size_t end = scheme_end(text);
  const std::string_view scheme = end == std::string_view::npos ? "" : text.substr(0, end);
  std::string_view rest = end == std::string_view::npos ? "" : text.substr(end + 3);
  url.sentinel = scheme == "redis-sentinel" || scheme == "rediss-sentinel";
  if (text.ends_with(',')) {
    // A trailing comma would otherwise read as part of the database number.
    // (An empty entry between two commas of a list ends its URL the same.)
    problem =
        "it ends with a comma, or two commas have nothing between them (a list of URLs has a "
        "URL after every comma)";
  } else if (split_deployments(text).size() > 1) {
    problem =
        "one URL was expected here, not a comma list: give each deployment of a quorum its "
        "own --url, or the comma list in RLOCK_URL or in the config file's url";
  } else if (scheme == "unix") {
    url.scheme = Url::Scheme::unix_socket;
    problem = parse_unix(rest, url);
  } else if (scheme == "redis" || scheme == "rediss" || url.sentinel) {
    url.scheme = scheme.starts_with("rediss") ? Url::Scheme::tls : Url::Scheme::tcp;
    // A Sentinel URL ends with #MASTER: the last '#', so that a password may
    // hold one (a '#' in the master's name is written %23).
    if (url.sentinel) {
      const std::size_t hash = rest.rfind('#');
      auto name = hash == std::string_view::npos ? std::optional<std::string>()
                                                 : percent::decode(rest.substr(hash + 1));
      if (hash == std::string_view::npos)
        problem = "a Sentinel URL must end with #MASTER, the name of the master to ask for";
      else if (!name)
        problem = "invalid percent-encoding";
      else if (name->empty())
        problem = "the master name after '#' is empty";
      else
        url.master_name = std::move(*name), rest = rest.substr(0, hash);
    }
    // The last '@' ends the user info, so an unencoded '@' or '/' in a
    // password still parses (and is still redacted).
    if (const std::size_t at = rest.rfind('@'); !problem && at != std::string_view::npos) {
      if (!parse_userinfo(rest.substr(0, at), url)) problem = "invalid percent-encoding";
      rest.remove_prefix(at + 1);
    }
    if (!problem && rest.find('#') != std::string_view::npos)
      problem = "a #MASTER name is only for redis-sentinel:// and rediss-sentinel:// URLs";
    if (!problem) problem = parse_tcp(rest, url.sentinel ? 26379 : 6379, url);
  } else {
    problem =
        "the scheme must be redis://, rediss://, unix://, redis-sentinel:// or rediss-sentinel://";
  }
  if (problem)
    return fail(Error::Code::usage, fmt::format("invalid URL {}: {}", redact_text(text), problem));
  return url;
}

}  // namespace rlock::redis
