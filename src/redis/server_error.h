#pragma once
/// What kind of error a Redis server answered, from the first word of its
/// error reply. Callers decide by kind, never by matching message text: a
/// transient kind is worth retrying, a redirection (MOVED, ASK) is for a
/// Cluster backend to follow.

#include <string_view>

namespace rlock::redis {

// The underlying type is fixed so that util/error.h can declare this enum
// and carry it in every Error without depending on src/redis.
enum class ServerError : unsigned char {
  none = 0,     // not a server error reply
  moved,        // Cluster: the slot lives on another node
  ask,          // Cluster: the slot is migrating; ask the other node once
  readonly,     // a replica (failover in progress, or the wrong node)
  loading,      // the server is loading its dataset after a restart
  busy,         // a script or module command is running past its time limit
  tryagain,     // Cluster: a multi-key command during resharding
  clusterdown,  // Cluster: some slot is not served
  masterdown,   // a replica that lost its master (replica-serve-stale-data no)
  noauth,       // the server needs a password and got none
  noscript,     // EVALSHA of a script the cache does not hold
  wrongtype,    // a key holds another type
  oom,          // maxmemory reached
  unblocked,    // a blocked command ended because the server became a replica
  maxclients,   // a new connection refused: the server has all the clients it takes
  other,        // any other error reply (ERR, script errors, NOPERM, ...)
};

/// The kind of an error reply, by its first word ("LOADING Redis is ...").
ServerError server_error_kind(std::string_view message);

/// True for kinds that go away by themselves within seconds, so that the
/// same request may succeed if sent again: LOADING, BUSY, TRYAGAIN and
/// MASTERDOWN. The refused command was not run, so a retry cannot apply an
/// operation twice.
bool is_transient(ServerError kind);

/// The kind's word as Redis spells it ("LOADING"), or "" for none/other.
std::string_view server_error_word(ServerError kind);

}  // namespace rlock::redis
