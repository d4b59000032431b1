#include "supervise/environment.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>

#include "redis/url.h"
#include "util/number.h"
#include "util/percent.h"
#include "util/token.h"

extern char** environ;

namespace rlock::supervise {

namespace {

std::string_view name_of(std::string_view entry) {
  return entry.substr(0, entry.find('='));
}

bool is_one_of(std::string_view name, auto const& names) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

constexpr std::string_view k_held_variable = "RLOCK_HELD";

constexpr std::string_view k_deadlines_variable = "RLOCK_DEADLINES";

bool is_hold_variable(std::string_view name) {
  return name == "RLOCK_NAME" || name == "RLOCK_TOKEN" || name == "RLOCK_FENCE" ||
         name == k_held_variable || name == k_deadlines_variable;
}

/// `,` separates the list, so it never occurs in a name (nor does `%`,
/// always escaped by percent::encode).
bool needs_escape(char c) {
  return c == ',';
}

}  // namespace

std::string format_held(const std::vector<HeldLock>& held) {
  std::string out;
  for (const auto& h : held) {
    if (!out.empty()) out += ',';
    out += h.id + ":" + percent::encode(h.name, needs_escape);
  }
  return out;
}

std::vector<HeldLock> parse_held(std::string_view value) {
  std::vector<HeldLock> out;
  for (std::string_view rest = value; !rest.empty();) {
    auto comma = rest.find(',');
    auto entry = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    auto colon = entry.find(':');
    if (colon == 0 || colon == std::string_view::npos) continue;
    auto name = percent::decode(entry.substr(colon + 1));
    if (!name || name->empty()) continue;
    out.push_back({std::string(entry.substr(0, colon)), std::move(*name)});
  }
  return out;
}

namespace {

/// A host of another client's URL that holds nothing but a host: a name
/// (letters, digits, '-', '.', '_'), or an IPv6 address in brackets; and a
/// port from 1 to 65535, or none. `redis://:secret` and
/// `redis://user:123456` are passwords typed without their `@host`.
bool plain_host(std::string_view host) {
  std::string_view name = host;
  std::optional<std::string_view> port;
  if (host.starts_with('[')) {
    const std::size_t bracket = host.find(']');
    if (bracket == std::string_view::npos) return false;
    std::string address(host.substr(1, bracket - 1));
    address = address.substr(0, address.find('%'));  // a zone: fe80::1%25eth0
    in6_addr parsed{};
    if (inet_pton(AF_INET6, address.c_str(), &parsed) != 1) return false;
    const std::string_view after = host.substr(bracket + 1);
    if (!after.empty() && !after.starts_with(':')) return false;
    if (!after.empty()) port = after.substr(1);
    name = {};
  } else if (const std::size_t colon = host.find(':'); colon != std::string_view::npos) {
    name = host.substr(0, colon);
    port = host.substr(colon + 1);
    if (name.empty()) return false;
  }
  return std::ranges::all_of(name,
                             [](unsigned char c) {
                               return std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_';
                             }) &&
         (!port || parse_integer(*port, 1, 65535).has_value());
}

/// An entry rlock cannot parse (another client's URL: `?timeout=5`,
/// `valkey://`) is passed on as it is only when nothing in it can be a
/// secret: no user information (`@`, percent-encoded too), only plain
/// hosts (plain_host), and after them no ':' and no option named like a
/// password, key or token (percent-decoded).
bool plainly_public(std::string_view entry) {
  const std::size_t scheme = entry.find("://");
  if (scheme == std::string_view::npos) return false;
  const auto decoded = percent::decode(entry.substr(scheme + 3));
  if (!decoded || decoded->find('@') != std::string::npos ||
      entry.find('@') != std::string_view::npos)
    return false;
  const std::string_view rest = entry.substr(scheme + 3);
  const std::size_t end = std::min(rest.find_first_of("/?#"), rest.size());
  const std::string_view authority = rest.substr(0, end);
  // unix:///path: no host at all.
  for (std::size_t from = 0; !authority.empty() && from <= authority.size();) {
    const std::size_t comma = std::min(authority.find(',', from), authority.size());
    if (!plain_host(authority.substr(from, comma - from))) return false;
    from = comma + 1;
  }
  const auto tail = percent::decode(rest.substr(end));
  if (!tail || tail->find(':') != std::string::npos) return false;
  std::string lower(*tail);
  std::ranges::transform(lower, lower.begin(),
                         [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::ranges::none_of(std::array{"pass", "pw", "auth", "secret", "token", "cred", "key"},
                              [&](const char* word) { return lower.contains(word); });
}

}  // namespace

std::string without_passwords(std::string_view list) {
  std::string out;
  // By deployment, not by comma: `redis-sentinel://:pw@s1,s2#m` is one URL.
  for (const auto& entry : redis::split_deployments(list)) {
    if (entry.empty()) continue;
    auto url = redis::parse_url(entry);
    // An entry we cannot parse that may hold a password somewhere: drop
    // the whole variable rather than guess.
    if (!url && !plainly_public(entry)) return "";
    if (!out.empty()) out += ',';
    out += url && url->password ? url->redacted() : entry;
  }
  return out;
}

std::vector<std::string> child_environment(const std::vector<std::string>& parent,
                                           const HoldInfo& hold) {
  std::vector<std::string> env;
  env.reserve(parent.size() + 4);
  std::vector<HeldLock> held;
  std::string deadlines;
  for (const auto& entry : parent) {
    auto name = name_of(entry);
    if (name == k_held_variable) held = parse_held(std::string_view(entry).substr(name.size() + 1));
    if (name == k_deadlines_variable) deadlines = entry.substr(name.size() + 1);
    if (is_one_of(name, k_secret_variables) || is_hold_variable(name)) continue;
    if (is_one_of(name, k_url_variables)) {
      auto cleaned = without_passwords(std::string_view(entry).substr(name.size() + 1));
      if (!cleaned.empty()) env.push_back(std::string(name) + "=" + cleaned);
      continue;
    }
    env.push_back(entry);
  }
  env.push_back("RLOCK_NAME=" + hold.name);
  env.push_back("RLOCK_TOKEN=" + hold.token);
  env.push_back("RLOCK_FENCE=" + std::to_string(hold.fence));
  held.push_back({short_id(hold.token), hold.name});
  env.push_back(std::string(k_held_variable) + "=" + format_held(held));
  if (hold.deadline_fd >= 0)
    deadlines += (deadlines.empty() ? "" : ",") + std::to_string(hold.deadline_fd);
  if (!deadlines.empty()) env.push_back(std::string(k_deadlines_variable) + "=" + deadlines);
  return env;
}

std::vector<std::string> process_environment() {
  std::vector<std::string> env;
  for (char** p = environ; p && *p; ++p) env.emplace_back(*p);
  return env;
}

}  // namespace rlock::supervise
