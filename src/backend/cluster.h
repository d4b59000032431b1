#pragma once
/// Redis Cluster: each lock lives in the slot of its hash tag (every key of
/// a lock, and its waiters' wake lists, are `PREFIX{ESCAPED}:...`), served
/// by that slot's master. The slot map comes from CLUSTER SLOTS; MOVED and
/// ASK are followed, TRYAGAIN and CLUSTERDOWN waited out, and a master that
/// stops answering (a shard failover) makes the backend ask any reachable
/// node for the map again. The parsing below is pure, for the unit tests.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/target.h"
#include "redis/reply.h"

namespace rlock::backend {

inline constexpr int k_cluster_slots = 16384;

/// CRC16-CCITT (XMODEM), the checksum Redis Cluster hashes keys with.
std::uint16_t crc16(std::string_view data);

/// The slot of `key`: CRC16 of its hash tag (the part between the first `{`
/// and the next `}`, when not empty), else of the whole key, mod 16384.
int key_slot(std::string_view key);

/// A node as the Cluster names it.
struct NodeAddress {
  std::string host;
  int port = 0;
  bool operator==(const NodeAddress&) const = default;
  std::string text() const;  // host:port, [v6]:port
};

/// One range of slots and the nodes serving it.
struct SlotRange {
  int first = 0;
  int last = 0;
  NodeAddress master;
  std::vector<NodeAddress> replicas;
};

/// Parses a CLUSTER SLOTS reply. A node listed with an empty host (Redis
/// says so when it does not know the address it is reached at) is on
/// `asked_host`, the host the question went to; a node whose endpoint is
/// unknown ("?") is left out (a range without a usable master, entirely).
Result<std::vector<SlotRange>> parse_cluster_slots(const redis::Reply& reply,
                                                   std::string_view asked_host);

/// Whether a CLUSTER NODES reply (its "myself" line: a node shows only its
/// own) has a slot being migrated away ("[SLOT->-ID]") or imported
/// ("[SLOT-<-ID]").
bool migrating_slots(std::string_view cluster_nodes);

/// A MOVED or ASK redirection: the slot and the node to ask.
struct Redirect {
  bool ask = false;
  int slot = 0;
  NodeAddress node;
};

/// Parses "MOVED 3999 127.0.0.1:6381" / "ASK 3999 [::1]:6381"; an empty
/// host (":6381") is `asked_host`. nullopt for anything else.
std::optional<Redirect> parse_redirect(std::string_view message, std::string_view asked_host);

/// The Cluster backend for `target`, starting from `seeds` (any one that
/// answers is enough). `hint`: a redirection already received, so the
/// first operation need not load the map; `load_map_by`: load the map now
/// (before that deadline), not at the first operation.
std::unique_ptr<Backend> make_cluster_backend(Target target,
                                              std::vector<redis::ConnectOptions> seeds,
                                              std::optional<Redirect> hint = std::nullopt,
                                              std::optional<Deadline> load_map_by = std::nullopt);

}  // namespace rlock::backend
