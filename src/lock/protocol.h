#pragma once
/// The lock protocol without I/O: how each operation of lock.lua is encoded
/// (its ARGV) and how its reply is decoded into a result. Backends run the
/// encoded call on whatever server is responsible for the lock; everything
/// here is table-tested without a server (tests/unit/lock/protocol_test).

#include <cstdint>
#include <string>
#include <vector>

#include "lock/lock_types.h"
#include "redis/reply.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock::lock {

/// One operation of the lock script: ARGV, and whether it writes a lease
/// that must reach the replicas before it counts (acquire, renew).
struct Call {
  std::vector<std::string> args;
  /// How long to wait for replicas to acknowledge the write (WAIT's
  /// timeout); unset: the operation needs no acknowledgement.
  std::optional<Millis> replicate_within;
  /// Whether this reply wrote a lease (granted or extended one): only then
  /// is the acknowledgement waited for.
  bool (*wrote_lease)(const redis::Reply& reply) = nullptr;
};

/// WAIT's timeout for a lease of `ttl`: a tenth of it, at most 1 s, so that
/// waiting for replicas never eats more than a small part of the lease.
Millis replication_timeout(Millis ttl);

Call acquire_call(const Request& request, const std::string& token, bool enqueue);
Result<Attempt> decode_attempt(const Request& request, const redis::Reply& reply);

Call renew_call(const std::string& token, Millis ttl);
/// The new lease; not_owner if the token no longer holds the lock.
Result<Millis> decode_renew(const std::string& name, const redis::Reply& reply);

Call release_call(const std::string& token);
Result<void> decode_release(const std::string& name, const redis::Reply& reply);

Call force_call(const std::string& holder_id, const Identity& by, const std::string& acl_user);
Result<std::vector<HolderView>> decode_force(const redis::Reply& reply);

Call status_call();
Result<LockView> decode_status(const std::string& name, const redis::Reply& reply);

}  // namespace rlock::lock
