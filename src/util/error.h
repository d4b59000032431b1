#pragma once
/// Errors travel as values: every fallible call across a module boundary
/// returns `Result<T>`; `Error::Code` tells normal answers ("busy", "not the
/// owner") from failures, and exit_status() is the one place that maps them to
/// the exit codes of the command-line contract.

#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace rlock {

namespace redis {
// Defined in redis/server_error.h; declared here so that every Error can say
// which server error it came from without util depending on redis.
enum class ServerError : unsigned char;
}  // namespace redis

/// Process exit statuses (see the EXIT STATUS table of rlock(1)).
enum class ExitStatus : int {
  success = 0,
  refused = 1,  // not the owner / lock free (status)
  usage = 64,
  unavailable = 69,
  internal = 70,
  busy = 75,
  server = 76,
  auth = 77,
  config = 78,
  lost = 79,
};

struct Error {
  enum class Code {
    usage,        // bad option, duration, URL, name
    config,       // configuration file
    unreachable,  // connect refused, DNS, timeout, connection lost
    auth,         // AUTH/ACL failure, TLS verification failure
    server,       // the server answered with an error (WRONGTYPE, OOM, ...)
    protocol,     // malformed or unexpected reply
    busy,         // the lock is held by someone else / wait timed out
    not_owner,    // release/renew with a token that does not hold the lock
    interrupted,  // a signal asked us to stop waiting
    internal,
  };
  Code code;
  std::string message;
  /// For code server (and auth from NOAUTH): the kind of error reply, so that
  /// callers decide by kind (retry LOADING, follow MOVED) rather than by text.
  /// Zero (ServerError::none) for errors that are not a server's reply.
  redis::ServerError server{};
  /// For a server's error reply: which server answered (its redacted URL),
  /// unless the message already names it; the report puts it in front.
  std::string origin{};
  /// For code unreachable: the node out of reach is part of a deployment
  /// that answers (a Cluster shard's master, the master the Sentinels
  /// name), so a failover is likely under way: a waiter rides it out as it
  /// rides out a server lost once queued. Likewise a quorum that lacks a
  /// majority because members did not answer in time (frozen, slow), as
  /// one server that does not answer is waited for within -w.
  bool failing_over = false;
  /// For the last try of a wait (-w): this error is the answer, not "timed
  /// out waiting" (a quorum whose members are too young to count: the lock
  /// may well be free).
  bool decisive = false;
};

template <class T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> fail(Error::Code code, std::string message) {
  return std::unexpected(Error{code, std::move(message)});
}

/// The exit status for an error code; `busy` maps to the conflict exit code
/// chosen by the user (-E), so it is passed in.
ExitStatus exit_status(Error::Code code);

/// `message` without the location Redis 7 appends to an error raised inside
/// a script (" script: SHA1, on @user_script:LINE."): it names rlock's
/// script, which tells an operator nothing about what to fix.
std::string_view without_script_location(std::string_view message);

/// Whether `err` (an errno) is this process's or the system's limit on open
/// descriptors (EMFILE, ENFILE): no retry or server mends it.
bool out_of_descriptors(int err);
/// What a message adds to such an errno: " (a local limit: ulimit -n)", or
/// nothing for any other.
const char* descriptor_limit_hint(int err);

}  // namespace rlock
