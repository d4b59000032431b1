#include "redis/server_error.h"

#include <array>
#include <utility>

namespace rlock::redis {
namespace {

constexpr std::array<std::pair<std::string_view, ServerError>, 13> k_words{{
    {"MOVED", ServerError::moved},
    {"ASK", ServerError::ask},
    {"READONLY", ServerError::readonly},
    {"LOADING", ServerError::loading},
    {"BUSY", ServerError::busy},
    {"TRYAGAIN", ServerError::tryagain},
    {"CLUSTERDOWN", ServerError::clusterdown},
    {"MASTERDOWN", ServerError::masterdown},
    {"NOAUTH", ServerError::noauth},
    {"NOSCRIPT", ServerError::noscript},
    {"WRONGTYPE", ServerError::wrongtype},
    {"OOM", ServerError::oom},
    {"UNBLOCKED", ServerError::unblocked},
}};

}  // namespace

ServerError server_error_kind(std::string_view message) {
  // Redis 7 refuses a long first command (our EVALSHA) from a client that
  // has not authenticated with this before it would answer NOAUTH.
  if (message.find("unauthenticated multibulk") != std::string_view::npos ||
      message.find("unauthenticated bulk") != std::string_view::npos) {
    return ServerError::noauth;
  }
  // A master demoted between a script's write and the WAIT behind it
  // refuses the WAIT in words of its own: it is a replica now, which is
  // what READONLY says of any other write (a Cluster or Sentinel backend
  // follows the failover).
  if (message.starts_with("ERR WAIT cannot be used with replica")) return ServerError::readonly;
  // Out of reach for now (see classify_server_error), and not to be taken
  // for another ERR: the replicas that did not acknowledge a write are one.
  // (A Cluster node says "ERR max number of clients + cluster connections
  // reached".)
  if (message.starts_with("ERR max number of clients")) return ServerError::maxclients;
  // The kind is the whole first word: "BUSYKEY" (RESTORE) is not "BUSY".
  const std::string_view word = message.substr(0, message.find(' '));
  for (const auto& [text, kind] : k_words)
    if (word == text) return kind;
  return ServerError::other;
}

bool is_transient(ServerError kind) {
  // CLUSTERDOWN and READONLY can also pass, but only a Cluster or failover
  // aware backend knows whether waiting helps; for one server they are
  // reported at once.
  switch (kind) {
    case ServerError::loading:
    case ServerError::busy:
    case ServerError::tryagain:
    case ServerError::masterdown:
      return true;
    default:
      return false;
  }
}

std::string_view server_error_word(ServerError kind) {
  for (const auto& [text, k] : k_words)
    if (k == kind) return text;
  return "";
}

}  // namespace rlock::redis
