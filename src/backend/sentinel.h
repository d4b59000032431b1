#pragma once
/// Finding the master of a Sentinel deployment: ask each Sentinel in turn
/// for the master's address (SENTINEL GET-MASTER-ADDR-BY-NAME), connect,
/// and use it only once it confirms with ROLE that it is the master.

#include <cstddef>
#include <optional>

#include "backend/target.h"
#include "redis/connection.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock::backend {

struct Discovery {
  /// Which Sentinel to ask first: the one that answered last time.
  std::size_t first = 0;
  /// Set when no Sentinel could be reached at all (as opposed to a master
  /// that could not be reached, or was not one yet: a failover in progress).
  bool no_sentinel = false;
  /// The replicas the Sentinel that named the master last knows of it and
  /// does not think down (-1: unknown). See ServerBackend::connection.
  int replicas = -1;
  /// Set once the Sentinels named a master: a name they stop knowing
  /// afterwards (SENTINEL REMOVE, then MONITOR again) is an outage, not a
  /// configuration error.
  bool found = false;
};

/// The replicas in a SENTINEL REPLICAS reply that the Sentinel neither
/// thinks down (s_down) nor cannot reach (disconnected), and the one a
/// failover under way has just promoted (the leading Sentinel shows it
/// "slave,disconnected,promoted" for a moment): it still counts as the old
/// master's, whose writes it no longer receives. -1 for a reply that is
/// not a list.
int live_replicas(const redis::Reply& reply);

/// A connection to the current master of `target` before `deadline`.
/// `current`, a connection to the master the Sentinels named before, is
/// used again when they name the same address and it still says it is the
/// master (no new TCP connection, TLS handshake or AUTH for every renewal).
/// `kept`, when given, holds the connection to the Sentinel that named the
/// master (discovery.first), kept for the next question, and is used for
/// it.
/// Errors: config when every Sentinel that answered knows no master of that
/// name; unreachable when no Sentinel answered or none named a reachable
/// master; auth when credentials were refused.
Result<redis::Connection> connect_master(const Target& target, int interrupt_fd, Deadline deadline,
                                         Discovery& discovery,
                                         std::optional<redis::Connection> current = std::nullopt,
                                         std::optional<redis::Connection>* kept = nullptr);

}  // namespace rlock::backend
