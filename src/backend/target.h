#pragma once
/// What a user named with one --url: one deployment, and how sure a lease
/// must be before it counts (replica acknowledgement).

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "config/replicas.h"
#include "redis/connection.h"

namespace rlock::backend {

/// One deployment.
struct Target {
  /// The server (redis://, rediss://, unix://); with Sentinel, the master's
  /// credentials, TLS settings and database, its address found by asking.
  redis::ConnectOptions server;
  /// The Sentinels to ask, in order, with their own credentials (empty: not
  /// a Sentinel deployment), and the name of the master they watch.
  std::vector<redis::ConnectOptions> sentinels;
  std::string master_name;
  /// The seed nodes of a Redis Cluster named by a host list
  /// (`redis://h1:p1,h2:p2`), each with the server's credentials and TLS
  /// settings; any one that answers is enough. Empty: not a seed list (a
  /// one-host URL still becomes a Cluster when the server says it is one).
  std::vector<redis::ConnectOptions> seeds;
  std::string prefix = "rlock:";
  /// How many replicas must acknowledge a lease (WAIT) before it counts.
  config::ReplicaPolicy replicas;
};

/// The backend for `target`. Nothing is connected until first use.
std::unique_ptr<Backend> make_backend(Target target);

}  // namespace rlock::backend
