#pragma once
/// `--replicas N|all` (config key `replicas`): how many replicas must
/// acknowledge (WAIT) an acquire or renewal before it counts.

#include <optional>
#include <string_view>

#include "util/error.h"

namespace rlock::config {

struct ReplicaPolicy {
  /// nullopt: all the replicas the master reports connected at that moment
  /// (the default); 0: do not wait at all.
  std::optional<int> count;

  bool all() const { return !count; }
  bool operator==(const ReplicaPolicy&) const = default;
};

/// The most replicas one can ask for: far more than any real master has.
inline constexpr int k_max_replicas = 1000;

/// "all" or a whole number from 0 to k_max_replicas. The usage error says
/// what is wrong; the caller prefixes the option or `file:line`.
Result<ReplicaPolicy> parse_replicas(std::string_view text);

}  // namespace rlock::config
