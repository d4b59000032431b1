// Redis Cluster: a slot map, one connection per node, and the redirections
// and refusals a Cluster answers with while it reshards or fails over.

#include "backend/cluster.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <map>

#include "backend/node.h"
#include "lock/keys.h"
#include "util/number.h"

namespace rlock::backend {

std::uint16_t crc16(std::string_view data) {
  // The bitwise form of the table-driven code in Redis' crc16.c
  // (polynomial 0x1021, initial value 0): a few thousand bytes a call at
  // most, so the table buys nothing here.
  std::uint16_t crc = 0;
  for (const char c : data) {
    crc ^= static_cast<std::uint16_t>(static_cast<unsigned char>(c) << 8);
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<std::uint16_t>(crc << 1);
  }
  return crc;
}

int key_slot(std::string_view key) {
  // As Redis' keyHashSlot(): only the first `{` counts, and `{}` hashes the
  // whole key.
  const auto open = key.find('{');
  if (open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1)
      key = key.substr(open + 1, close - open - 1);
  }
  return crc16(key) % k_cluster_slots;
}

std::string NodeAddress::text() const {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                             : fmt::format("{}:{}", host, port);
}

namespace {

std::optional<int> small_number(std::string_view text, int min, int max) {
  auto value = parse_integer(text, min, max);
  if (!value) return std::nullopt;
  return static_cast<int>(*value);
}

/// One node of a CLUSTER SLOTS range: [host, port, id, ...]; nullopt when
/// the node has no known endpoint.
Result<std::optional<NodeAddress>> slots_node(const redis::Reply& node,
                                              std::string_view asked_host) {
  if (node.type != redis::Reply::Type::array || node.elements.size() < 2 ||
      node.elements[1].type != redis::Reply::Type::integer)
    return fail(Error::Code::protocol, "unexpected node in the CLUSTER SLOTS reply");
  const auto& host = node.elements[0].str;
  const auto port = node.elements[1].integer;
  if (port < 1 || port > 65535)
    return fail(Error::Code::protocol, fmt::format("CLUSTER SLOTS names port {}", port));
  if (host == "?") return std::optional<NodeAddress>();
  return NodeAddress{host.empty() ? std::string(asked_host) : host, static_cast<int>(port)};
}

}  // namespace

bool migrating_slots(std::string_view cluster_nodes) {
  while (!cluster_nodes.empty()) {
    const auto end = cluster_nodes.find('\n');
    const auto line = cluster_nodes.substr(0, end);
    // The flags are the third field; the markers come after the slots.
    std::size_t field = 0, at = 0;
    std::string_view flags;
    while (at < line.size() && field < 3) {
      const auto space = line.find(' ', at);
      if (++field == 3)
        flags = line.substr(at, space == std::string_view::npos ? line.npos : space - at);
      at = space == std::string_view::npos ? line.size() : space + 1;
    }
    const bool myself = (',' + std::string(flags) + ',').find(",myself,") != std::string::npos;
    if (myself && (line.find("->-") != line.npos || line.find("-<-") != line.npos)) return true;
    cluster_nodes =
        end == std::string_view::npos ? std::string_view() : cluster_nodes.substr(end + 1);
  }
  return false;
}

Result<std::vector<SlotRange>> parse_cluster_slots(const redis::Reply& reply,
                                                   std::string_view asked_host) {
  if (reply.type != redis::Reply::Type::array)
    return fail(Error::Code::protocol, "unexpected reply to CLUSTER SLOTS");
  std::vector<SlotRange> ranges;
  for (const auto& entry : reply.elements) {
    const auto& e = entry.elements;
    if (entry.type != redis::Reply::Type::array || e.size() < 3 ||
        e[0].type != redis::Reply::Type::integer || e[1].type != redis::Reply::Type::integer ||
        e[0].integer < 0 || e[1].integer >= k_cluster_slots || e[0].integer > e[1].integer)
      return fail(Error::Code::protocol, "unexpected slot range in the CLUSTER SLOTS reply");
    SlotRange range;
    range.first = static_cast<int>(e[0].integer);
    range.last = static_cast<int>(e[1].integer);
    auto master = slots_node(e[2], asked_host);
    if (!master) return std::unexpected(master.error());
    if (!*master) continue;
    range.master = std::move(**master);
    for (size_t k = 3; k < e.size(); ++k) {
      auto replica = slots_node(e[k], asked_host);
      if (!replica) return std::unexpected(replica.error());
      if (*replica) range.replicas.push_back(std::move(**replica));
    }
    ranges.push_back(std::move(range));
  }
  return ranges;
}

std::optional<Redirect> parse_redirect(std::string_view message, std::string_view asked_host) {
  Redirect redirect;
  if (message.starts_with("MOVED ")) {
    message.remove_prefix(6);
  } else if (message.starts_with("ASK ")) {
    redirect.ask = true;
    message.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const auto space = message.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto slot = small_number(message.substr(0, space), 0, k_cluster_slots - 1);
  std::string_view address = message.substr(space + 1);
  address = address.substr(0, address.find(' '));
  const auto colon = address.rfind(':');
  if (!slot || colon == std::string_view::npos) return std::nullopt;
  const auto port = small_number(address.substr(colon + 1), 1, 65535);
  if (!port) return std::nullopt;
  std::string_view host = address.substr(0, colon);
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  redirect.slot = *slot;
  redirect.node = NodeAddress{std::string(host.empty() ? asked_host : host), *port};
  return redirect;
}

namespace {

class ClusterBackend final : public Backend {
 public:
  ClusterBackend(Target target, std::vector<redis::ConnectOptions> seeds)
      : m_target(std::move(target)),
        m_seeds(std::move(seeds)),
        m_owner(k_cluster_slots, -1),
        m_interrupt_fd(m_target.server.interrupt_fd) {}

  void take_hint(const Redirect& hint) {
    if (!hint.ask) set_owner(hint.slot, hint.node);
  }
  /// Loads the map now; a failure leaves it to the first operation.
  void load_map(Deadline deadline) { (void)refresh(deadline); }

  Result<Outcome> run(const std::string& name, const lock::Call& call, Deadline deadline) override;
  Result<void> wait_for_wake(const std::string& name, const std::string& token, Millis block,
                             Deadline by) override;
  Result<std::optional<Outcome>> wait_then_run(const std::string& name, const std::string& token,
                                               Millis block, Deadline by,
                                               const lock::Call& then) override;
  Result<void> for_every_lock(const lock::Call& call, const LockSink& sink) override;
  Result<void> for_every_reachable_lock(const lock::Call& call, const LockSink& sink,
                                        const GapSink& gaps) override;

  void part(const std::string& name, const lock::Call& call) override {
    const auto request = script_request(config::ReplicaPolicy{},
                                        lock::lock_keys(m_target.prefix, name), call, false);
    for (auto& [_, conn] : m_connections) (void)conn.part(request, k_part_budget);
    if (m_dropped) (void)m_dropped->part(request, k_part_budget);
  }

  void set_interrupt_fd(int fd) override {
    m_interrupt_fd = fd;
    for (auto& [_, conn] : m_connections) conn.set_interrupt_fd(fd);
  }
  int interrupt_fd() const override { return m_interrupt_fd; }
  Millis command_timeout() const override { return m_target.server.command_timeout; }

  std::string describe() const override {
    std::vector<std::string> seeds;
    seeds.reserve(m_seeds.size());
    for (const auto& s : m_seeds) seeds.push_back(s.url.redacted());
    return fmt::format("Redis Cluster (seed {})", fmt::join(seeds, ", "));
  }
  std::string acl_user() const override { return acl_user_of(m_target.server); }

  std::unique_ptr<Backend> clone() const override {
    auto copy = std::make_unique<ClusterBackend>(m_target, m_seeds);
    copy->m_owner = m_owner;
    copy->m_masters = m_masters;
    copy->m_replicas = m_replicas;
    copy->m_stale = m_stale;
    copy->m_replicas_seen = m_replicas_seen;
    copy->m_slot_master = m_slot_master;
    return copy;
  }

  std::string server_of(const std::string& name) const override {
    const auto node = owner(key_slot(lock::base_key(m_target.prefix, name)));
    return node ? node->text() : std::string();
  }

 private:
  std::optional<NodeAddress> owner(int slot) const {
    const int index = m_owner[static_cast<size_t>(slot)];
    if (index < 0) return std::nullopt;
    return m_masters[static_cast<size_t>(index)];
  }
  void set_owner(int slot, const NodeAddress& node);
  /// Loads the slot map from the first node that answers CLUSTER SLOTS:
  /// the masters and replicas of the last map, then the seeds.
  Result<void> refresh(Deadline deadline);
  /// The connection to `node`, opened (within `deadline`) if needed.
  Result<redis::Connection*> connection(const NodeAddress& node, Deadline deadline);
  /// Forgets the connection to `node`; the last one dropped is kept aside
  /// for part() (what it was sent may still run when the node thaws).
  void drop(const NodeAddress& node) {
    auto it = m_connections.find(node.text());
    if (it == m_connections.end()) return;
    if (it->second.has_stale()) m_dropped.emplace(std::move(it->second));
    m_connections.erase(it);
  }
  /// What a failed BLPOP on `node` means for the wait (see wait_for_wake):
  /// nothing (ask again) or an error.
  Result<void> wait_failed(const Error& error, const NodeAddress& node, Deadline deadline);
  /// The master of `slot`, loading the map first when it is stale or does
  /// not know the slot.
  Result<NodeAddress> route(int slot, Deadline deadline);
  /// The masters serving at least one slot, in map order.
  std::vector<NodeAddress> serving_masters() const;
  /// The master of every slot, as the map says now.
  std::vector<std::optional<NodeAddress>> slot_owners() const;
  /// Whether a slot is being migrated now (a master's CLUSTER NODES says
  /// so), or moved since `owners_before` (the map loaded again).
  bool slots_moving(const std::vector<std::optional<NodeAddress>>& owners_before);
  /// Runs `call` on every lock of the master `node` (for_every_lock's
  /// listing of one shard); a failure leaves it without a connection.
  Result<void> list_master(const NodeAddress& node, const lock::Call& call, const LockSink& sink);

  Target m_target;  // the options every node is reached with (host and port aside)
  std::vector<redis::ConnectOptions> m_seeds;
  std::vector<int> m_owner;  // slot -> index into m_masters, -1: unknown
  std::vector<NodeAddress> m_masters;
  std::vector<NodeAddress> m_replicas;  // only asked for the map
  /// Set when a redirection or a failure says the map may be out of date.
  bool m_stale = false;
  std::map<std::string, redis::Connection> m_connections;
  std::optional<redis::Connection> m_dropped;  // see drop()
  /// The replicas the master `node` of `slot` must acknowledge a lease to
  /// (see execute()): the most it has been seen with, per master, except
  /// after a failover: when the slot's master is not the one this slot was
  /// last served by, the new one is asked for no more than the old one was
  /// seen with less one (one of those replicas is now the master, as
  /// Sentinel's). A master that comes back after its successor died keeps
  /// no high-water mark from before, when that successor was its replica.
  ReplicasSeen& replicas_seen(int slot, const NodeAddress& node);

  /// Per master (host:port): the most replicas it has been seen with (see
  /// execute()).
  std::map<std::string, ReplicasSeen> m_replicas_seen;
  /// Per slot used: the master it was last served by (replicas_seen()).
  std::map<int, std::string> m_slot_master;
  /// The refusal the Cluster has kept answering, across operations (Backoff).
  std::optional<Refusing> m_refusing;
  /// Since when no usable master has been found, across operations (Backoff).
  std::optional<Clock::time_point> m_missing_since;
  int m_interrupt_fd = -1;
};

ReplicasSeen& ClusterBackend::replicas_seen(int slot, const NodeAddress& node) {
  std::string id = node.text();
  ReplicasSeen& seen = m_replicas_seen[id];
  auto [last, first] = m_slot_master.try_emplace(slot, id);
  if (!first && last->second != id) {
    seen = std::min(seen.count, std::max(0, m_replicas_seen[last->second].count - 1));
    last->second = std::move(id);
  }
  return seen;
}

void ClusterBackend::set_owner(int slot, const NodeAddress& node) {
  auto found = std::find(m_masters.begin(), m_masters.end(), node);
  if (found == m_masters.end()) found = m_masters.insert(m_masters.end(), node);
  m_owner[static_cast<size_t>(slot)] = static_cast<int>(found - m_masters.begin());
}

std::vector<NodeAddress> ClusterBackend::serving_masters() const {
  std::vector<bool> serving(m_masters.size());
  for (const int index : m_owner)
    if (index >= 0) serving[static_cast<size_t>(index)] = true;
  std::vector<NodeAddress> masters;
  for (size_t k = 0; k < m_masters.size(); ++k)
    if (serving[k]) masters.push_back(m_masters[k]);
  return masters;
}

Result<redis::Connection*> ClusterBackend::connection(const NodeAddress& node, Deadline deadline) {
  const auto key = node.text();
  if (auto found = m_connections.find(key); found != m_connections.end()) {
    found->second.set_interrupt_fd(m_interrupt_fd);
    return &found->second;
  }
  // Every node takes the credentials, TLS settings and timeouts of the
  // URL; the Cluster says where it is.
  redis::ConnectOptions options = m_target.server;
  if (options.url.scheme == redis::Url::Scheme::unix_socket)
    options.url.scheme = redis::Url::Scheme::tcp;
  options.url.host = node.host;
  options.url.port = node.port;
  options.url.hosts = {redis::Endpoint{node.host, node.port}};
  options.interrupt_fd = m_interrupt_fd;
  const auto left = std::chrono::ceil<Millis>(deadline - Clock::now());
  options.connect_timeout = std::clamp(left, Millis(1), options.connect_timeout);
  auto connected = redis::Connection::connect(options);
  if (!connected) return std::unexpected(connected.error());
  return &m_connections.emplace(key, std::move(*connected)).first->second;
}

Result<void> ClusterBackend::refresh(Deadline deadline) {
  std::vector<NodeAddress> candidates = m_masters;
  candidates.insert(candidates.end(), m_replicas.begin(), m_replicas.end());
  for (const auto& seed : m_seeds) candidates.push_back({seed.url.host, seed.url.port});
  std::vector<NodeAddress> unique;
  for (const auto& node : candidates)
    if (std::find(unique.begin(), unique.end(), node) == unique.end()) unique.push_back(node);
  std::vector<std::string> problems;
  std::optional<Error> auth_error;
  // Nodes that answered that they are no Cluster's (a plain server named
  // among the seeds): only all of them is the user's configuration to fix.
  std::vector<std::string> not_cluster;
  // Nodes that refused the URL's database (a Cluster has only 0): the same
  // configuration error as with a single node's URL (76), not an outage.
  std::optional<Error> select_refused;
  std::size_t refused_select = 0;
  for (std::size_t k = 0; k < unique.size(); ++k) {
    const NodeAddress& node = unique[k];
    if (Clock::now() >= deadline) break;
    // Each node gets its share of what is left, so that one that accepts
    // connections and never answers (hung, frozen) cannot take the time
    // of the others: the map is loaded from the first that answers.
    const Deadline by = Clock::now() + (deadline - Clock::now()) / (unique.size() - k);
    auto conn = connection(node, by);
    Result<redis::Reply> reply =
        conn ? (*conn)->command(std::vector<std::string>{"CLUSTER", "SLOTS"}, by)
             : std::unexpected(conn.error());
    Result<std::vector<SlotRange>> ranges =
        reply ? parse_cluster_slots(*reply, node.host) : std::unexpected(reply.error());
    if (ranges && ranges->empty())
      ranges = fail(Error::Code::unreachable,
                    fmt::format("{}: no slot is assigned to a reachable master", node.text()));
    if (!ranges) {
      const Error& error = ranges.error();
      if (error.code == Error::Code::interrupted) return std::unexpected(error);
      if (error.code == Error::Code::unreachable) drop(node);
      if (error.code == Error::Code::auth) auth_error = error;
      if (error.code == Error::Code::server &&
          error.message.find("cluster support disabled") != std::string::npos)
        not_cluster.push_back(node.text());
      if (error.code == Error::Code::config &&
          error.message.find("a Redis Cluster has only database 0") != std::string::npos) {
        ++refused_select;
        if (!select_refused) select_refused = error;
      }
      problems.push_back(error.message);
      continue;
    }
    std::fill(m_owner.begin(), m_owner.end(), -1);
    m_masters.clear();
    m_replicas.clear();
    for (const auto& range : *ranges) {
      for (int slot = range.first; slot <= range.last; ++slot) set_owner(slot, range.master);
      for (const auto& replica : range.replicas)
        if (std::find(m_replicas.begin(), m_replicas.end(), replica) == m_replicas.end())
          m_replicas.push_back(replica);
    }
    m_stale = false;
    return {};
  }
  if (auth_error && problems.size() == 1) return std::unexpected(*auth_error);
  if (select_refused && refused_select == problems.size()) return std::unexpected(*select_refused);
  if (!not_cluster.empty() && not_cluster.size() == problems.size())
    return fail(
        Error::Code::config,
        fmt::format("{} {} (cluster support disabled): a redis:// URL "
                    "with several hosts lists a Cluster's seed nodes; give a plain server "
                    "one host, and each server of a quorum a URL of its own",
                    fmt::join(not_cluster, ", "),
                    not_cluster.size() == 1 ? "is not a Cluster node" : "are not Cluster nodes"));
  const std::string why = problems.empty() ? std::string("no time left to ask")
                                           : fmt::format("{}", fmt::join(problems, "; "));
  Error error{Error::Code::unreachable, fmt::format("no node of the Cluster answered: {}", why)};
  if (auth_error) error = *auth_error;
  return std::unexpected(error);
}

Result<NodeAddress> ClusterBackend::route(int slot, Deadline deadline) {
  if (m_stale || !owner(slot)) {
    auto refreshed = refresh(deadline);
    // A map that could not be loaded again still names a master to try.
    if (!refreshed && !owner(slot)) return std::unexpected(refreshed.error());
  }
  if (auto node = owner(slot)) return *node;
  return std::unexpected(Error{Error::Code::server,
                               fmt::format("CLUSTERDOWN slot {} is not served", slot),
                               redis::ServerError::clusterdown});
}

Result<Outcome> ClusterBackend::run(const std::string& name, const lock::Call& call,
                                    Deadline deadline) {
  const auto keys = lock::lock_keys(m_target.prefix, name);
  // Every key of a lock has its hash tag: one slot for all of them.
  const int slot = key_slot(keys.front());
  // Operations are idempotent by token (see server.cpp): a request whose
  // reply was lost may be sent again, to the same node or the next master.
  bool retried_transport = false;
  // A redirection is followed at once; a Cluster that keeps redirecting
  // (a map changing under us) is given the backoff below after these.
  constexpr int k_redirects_before_backoff = 3;
  int redirects = 0;
  // The last refusal that was not a redirection: what the user is told
  // when time runs out (ASK, then TRYAGAIN from the destination while a
  // slot migrates, says more as TRYAGAIN).
  std::optional<Error> refusal;
  std::optional<NodeAddress> asking;
  Backoff backoff(deadline, m_interrupt_fd, m_refusing, &m_missing_since);
  for (;;) {
    Result<NodeAddress> node = asking ? Result<NodeAddress>(*asking) : route(slot, deadline);
    const bool ask = asking.has_value();
    asking.reset();
    bool reused = false;
    Result<Outcome> outcome = std::unexpected(Error{});
    if (!node) {
      outcome = std::unexpected(node.error());
    } else {
      reused = m_connections.contains(node->text());
      auto conn = connection(*node, deadline);
      // Replicas are seen per master. An ASK sends one command to a slot's
      // next master while the slot is still the other's.
      ReplicasSeen& seen = ask ? m_replicas_seen[node->text()] : replicas_seen(slot, *node);
      // Half of what is left at most (see failover_try_deadline): a master
      // that hangs is how a shard most often starts failing over.
      outcome = conn ? execute(**conn, m_target.replicas, seen, keys, call,
                               failover_try_deadline(deadline), ask)
                     : std::unexpected(conn.error());
    }
    if (outcome) {
      // Sent again on a new connection after the one it went out on was
      // lost: the first may have been carried out (a failover followed is
      // not counted: the lock may really have been lost in it).
      outcome->sent_again = retried_transport;
      return outcome;
    }
    const Error& error = outcome.error();
    // No node answered and none ever did: the Cluster is out of reach (as a
    // single server that refuses a fresh connection), not failing over.
    if (!node && error.code == Error::Code::unreachable && m_masters.empty()) return outcome;
    if (node && (error.code == Error::Code::unreachable || error.code == Error::Code::interrupted))
      drop(*node);
    if (error.code == Error::Code::interrupted) return outcome;
    if (node && server_kind(error, {redis::ServerError::moved, redis::ServerError::ask})) {
      auto redirect = parse_redirect(error.message, node->host);
      if (!redirect) return outcome;
      if (redirect->ask) {
        // Only this command goes there: the slot is still this node's.
        asking = redirect->node;
      } else {
        set_owner(redirect->slot, redirect->node);
        m_stale = true;  // the next route() loads the whole map again
      }
      if (++redirects <= k_redirects_before_backoff) continue;
    } else if (node && error.code == Error::Code::unreachable && reused && !retried_transport &&
               Clock::now() < deadline) {
      retried_transport = true;
      continue;
    } else {
      // A master out of reach or turned replica (READONLY, UNBLOCKED) is a
      // shard failing over: load the map again from any node that answers.
      // CLUSTERDOWN and TRYAGAIN pass once the Cluster has settled.
      const bool follow =
          error.code == Error::Code::unreachable ||
          server_kind(error, {redis::ServerError::readonly, redis::ServerError::unblocked,
                              redis::ServerError::clusterdown});
      const bool transient = error.code == Error::Code::server && redis::is_transient(error.server);
      if (!follow && !transient) return outcome;
      if (follow) m_stale = true;
    }
    const auto missing = fmt::format("no usable master for lock '{}' (slot {})", name, slot);
    const bool redirected =
        server_kind(error, {redis::ServerError::moved, redis::ServerError::ask});
    if (!redirected) refusal = error;
    if (auto paused = backoff.pause(redirected && refusal ? *refusal : error, describe(), missing);
        !paused) {
      Error last = paused.error();
      // The Cluster answered (its map was loaded): a shard failing over.
      last.failing_over = last.code == Error::Code::unreachable && !m_masters.empty();
      return std::unexpected(last);
    }
  }
}

Result<void> ClusterBackend::wait_for_wake(const std::string& name, const std::string& token,
                                           Millis block, Deadline by) {
  const Deadline deadline = std::min(by, Clock::now() + block + command_timeout());
  const std::string key = lock::wake_key(m_target.prefix, name, token);
  // The wake list has the lock's hash tag: the node of the lock.
  auto node = route(key_slot(key), std::min(by, Clock::now() + command_timeout()));
  if (!node) return std::unexpected(node.error());
  auto conn = connection(*node, std::min(by, Clock::now() + command_timeout()));
  if (!conn) return std::unexpected(conn.error());
  auto woke = (*conn)->command(blpop_command(key, block), deadline);
  if (woke) return {};
  return wait_failed(woke.error(), *node, deadline);
}

Result<void> ClusterBackend::wait_failed(const Error& error, const NodeAddress& node,
                                         Deadline deadline) {
  if (error.code == Error::Code::unreachable || error.code == Error::Code::interrupted) {
    drop(node);
    m_stale = true;
  }
  // The slot moved, the master turned replica, the Cluster is settling:
  // not an error of the wait, only a reason to ask again (the next
  // operation finds the master). A short pause keeps a waiter from
  // spinning while a slot migrates.
  if (server_kind(error, {redis::ServerError::moved, redis::ServerError::ask,
                          redis::ServerError::readonly, redis::ServerError::unblocked,
                          redis::ServerError::clusterdown, redis::ServerError::tryagain})) {
    if (auto redirect = parse_redirect(error.message, node.host); redirect && !redirect->ask)
      set_owner(redirect->slot, redirect->node);
    m_stale = true;
    (void)pause_before_retry(Millis(100), deadline, m_interrupt_fd);
    return {};
  }
  return std::unexpected(error);
}

Result<std::optional<Outcome>> ClusterBackend::wait_then_run(const std::string& name,
                                                             const std::string& token, Millis block,
                                                             Deadline by, const lock::Call& then) {
  const Deadline deadline = std::min(by, Clock::now() + block + command_timeout());
  const auto keys = lock::lock_keys(m_target.prefix, name);
  const std::string key = lock::wake_key(m_target.prefix, name, token);
  // The wake list and the lock's keys share its hash tag: one node for the
  // BLPOP and the script behind it.
  auto node = route(key_slot(key), std::min(by, Clock::now() + command_timeout()));
  if (!node) return std::unexpected(node.error());
  auto conn = connection(*node, std::min(by, Clock::now() + command_timeout()));
  if (!conn) return std::unexpected(conn.error());
  const auto blpop = blpop_command(key, block);
  redis::Reply woke;
  const std::string where = (*conn)->describe();
  auto outcome = execute(**conn, m_target.replicas, replicas_seen(key_slot(key), *node), keys, then,
                         deadline, false, &blpop, &woke);
  // A refused BLPOP (MOVED, READONLY, ...) explains the script's refusal
  // too; otherwise a failed script is handled as a failed wait: ask again
  // through run(), which follows redirections and failovers.
  if (woke.is_error() || !outcome) {
    const Error error = woke.is_error() ? redis::server_failure(where, woke.str) : outcome.error();
    if (auto failed = wait_failed(error, *node, deadline); !failed)
      return std::unexpected(failed.error());
    return std::nullopt;
  }
  return std::optional<Outcome>(std::move(*outcome));
}

Result<void> ClusterBackend::list_master(const NodeAddress& node, const lock::Call& call,
                                         const LockSink& sink) {
  const Millis timeout = command_timeout();
  auto connect = [&]() { return connection(node, Clock::now() + timeout); };
  auto load = [&](const std::string& name) -> Result<void> {
    auto loaded = run(name, call, Clock::now() + timeout);
    if (!loaded) return std::unexpected(loaded.error());
    return {};
  };
  // A lock whose slot moved since SCAN (resharding, failover), or is
  // moving, is asked where it is now, once this master's listing is over
  // (its reads may still be in flight on the connection run() would use).
  std::vector<std::string> moved;
  auto listed =
      scan_and_run(connect, load, m_target.prefix, call, timeout,
                   [&](std::string name, redis::Reply reply) -> Result<void> {
                     const auto kind = reply.is_error() ? redis::server_error_kind(reply.str)
                                                        : redis::ServerError::none;
                     // TRYAGAIN: the lock's keys are split between the two
                     // nodes of a migrating slot; run() waits it out.
                     if (kind == redis::ServerError::moved || kind == redis::ServerError::ask ||
                         kind == redis::ServerError::tryagain) {
                       moved.push_back(std::move(name));
                       return {};
                     }
                     // While a shard has no master (cluster-require-full-coverage, the
                     // default), every master refuses keys: not a broken lock but a
                     // shard failing over, so this master is listed again later.
                     if (kind == redis::ServerError::clusterdown)
                       return std::unexpected(redis::server_failure(node.text(), reply.str));
                     return sink(std::move(name), std::move(reply));
                   });
  if (!listed) {
    // Replies may still be in flight on the connection.
    drop(node);
    return listed;
  }
  for (auto& name : moved) {
    auto again = run(name, call, Clock::now() + timeout);
    if (!again && again.error().code != Error::Code::server) return std::unexpected(again.error());
    // Still refused once the retries are over (a slot left half migrated
    // answers TRYAGAIN until an operator fixes it): that lock is shown as
    // broken, with the refusal; the rest of the master's locks are listed.
    redis::Reply reply;
    if (again) {
      reply = std::move(again->reply);
    } else {
      reply.type = redis::Reply::Type::error;
      reply.str = again.error().message;
    }
    if (auto taken = sink(std::move(name), std::move(reply)); !taken) return taken;
  }
  return {};
}

Result<void> ClusterBackend::for_every_lock(const lock::Call& call, const LockSink& sink) {
  return for_every_reachable_lock(call, sink, {});
}

std::vector<std::optional<NodeAddress>> ClusterBackend::slot_owners() const {
  std::vector<std::optional<NodeAddress>> all(k_cluster_slots);
  for (int slot = 0; slot < k_cluster_slots; ++slot) all[static_cast<size_t>(slot)] = owner(slot);
  return all;
}

bool ClusterBackend::slots_moving(const std::vector<std::optional<NodeAddress>>& owners_before) {
  const Millis timeout = command_timeout();
  for (const auto& node : serving_masters()) {
    auto conn = connection(node, Clock::now() + timeout);
    if (!conn) continue;
    auto reply =
        (*conn)->command(std::vector<std::string>{"CLUSTER", "NODES"}, Clock::now() + timeout);
    if (!reply) {
      drop(node);
      continue;
    }
    if (!reply->is_error() && migrating_slots(reply->str)) return true;
  }
  if (auto refreshed = refresh(Clock::now() + timeout); !refreshed) return false;
  return slot_owners() != owners_before;
}

Result<void> ClusterBackend::for_every_reachable_lock(const lock::Call& call, const LockSink& sink,
                                                      const GapSink& gaps) {
  const Millis timeout = command_timeout();
  // The whole map, freshly: a listing must see every master there is now.
  if (auto refreshed = refresh(Clock::now() + timeout); !refreshed)
    return std::unexpected(refreshed.error());
  // One master after another: a status listing is not latency-critical, and
  // each master's locks go in pipelined batches. A lock seen on two masters
  // (its slot migrated, or its shard failed over, during the listing)
  // reaches `sink` twice: the caller lists it once.
  //
  // A master that fails (out of reach, or refusing while a shard fails
  // over) is a shard failing over, as for run(): its slots are asked for
  // again, of the master a fresh map names for them, until each slot was
  // listed or the retries run out: the command timeout from the first
  // failed try, as long as any one operation rides out a failover.
  std::vector<bool> listed(k_cluster_slots, false);
  std::optional<Clock::time_point> first_failure;
  std::optional<Backoff> backoff;
  const auto owners_before = slot_owners();
  bool second_pass = false;
  // A master that refuses our credentials is left out at once (no retry
  // mends that), and the others are listed; only all of them refusing is
  // the listing's error (77). Without a GapSink the refusal is the error.
  std::vector<std::pair<NodeAddress, Error>> refused;
  // Whether a master was listed, or left out for being out of reach (an
  // outage, which waiting may mend): either way not every master refused.
  bool any_listed = false, any_unreachable = false;
  const auto report_refused = [&]() -> Result<void> {
    if (refused.empty()) return {};
    if (!any_listed && !any_unreachable) return std::unexpected(refused.front().second);
    for (auto& [node, error] : refused) {
      error.message = fmt::format(
          "listing incomplete: Cluster master {} left out (it refused "
          "our credentials): {}",
          node.text(), error.message);
      // Incomplete, as for a master out of reach: 69 with the rest listed;
      // the line names the master, without the server's URL in front.
      error.code = Error::Code::unreachable;
      error.origin.clear();
      gaps(std::move(error));
    }
    return {};
  };
  for (;;) {
    std::vector<std::pair<NodeAddress, Error>> failed;
    for (const auto& node : serving_masters()) {
      const auto serves = [&](int slot) {
        const auto o = owner(slot);
        return o && *o == node;
      };
      bool pending = false;
      for (int slot = 0; slot < k_cluster_slots && !pending; ++slot)
        pending = !listed[static_cast<size_t>(slot)] && serves(slot);
      if (!pending) continue;
      if (std::any_of(refused.begin(), refused.end(),
                      [&](const auto& r) { return r.first == node; }))
        continue;
      auto done = list_master(node, call, sink);
      if (!done) {
        const Error& error = done.error();
        if (error.code == Error::Code::auth && gaps) {
          refused.emplace_back(node, error);
          continue;
        }
        // A transient refusal (LOADING after a restart, a BUSY script) is
        // waited out the same way.
        const bool transient =
            error.code == Error::Code::server && redis::is_transient(error.server);
        if (error.code != Error::Code::unreachable && !transient &&
            !server_kind(error, {redis::ServerError::clusterdown, redis::ServerError::readonly,
                                 redis::ServerError::tryagain}))
          return done;
        failed.emplace_back(node, error);
        // The budget counts from when the failure was seen: a master that
        // hangs shows it only when its reads time out, and its shard is
        // then failing over (as in run()): the new master is looked for
        // for another timeout. A refusal or a refused connection is seen
        // at once, so its budget is the same as from the try's start.
        if (!first_failure) first_failure = Clock::now();
        continue;
      }
      any_listed = true;
      for (int slot = 0; slot < k_cluster_slots; ++slot)
        if (serves(slot)) listed[static_cast<size_t>(slot)] = true;
    }
    if (failed.empty()) {
      // A slot migrating while the masters are listed one after another
      // can hide a lock: listed on its destination before the lock's keys
      // arrived, on its source after they left. Keys move one way, so a
      // second listing of every master after the first finds each lock
      // that moved during it (a name seen twice is the caller's to merge).
      // Only when a migration is under way or ended meanwhile: a master
      // shows its migrating and importing slots in CLUSTER NODES (a user
      // whose ACL lacks it gets no second look), an ended one moved a slot.
      if (second_pass || !slots_moving(owners_before)) return report_refused();
      second_pass = true;
      std::fill(listed.begin(), listed.end(), false);
      continue;
    }
    if (!backoff) backoff.emplace(*first_failure + timeout, m_interrupt_fd, m_refusing);
    if (auto paused = backoff->pause(failed.front().second, describe(), "listing"); !paused) {
      if (paused.error().code == Error::Code::interrupted) return std::unexpected(paused.error());
      // Out of time: the caller shows what the others hold, and these (a
      // caller without a GapSink, such as a quorum, takes the first as the
      // listing's error: the member failed).
      const auto spent = format_duration(std::chrono::ceil<Millis>(Clock::now() - *first_failure));
      for (auto& [node, error] : failed) {
        error.message = fmt::format(
            "listing incomplete: Cluster master {} left out ({} after {}): {}", node.text(),
            error.code == Error::Code::unreachable ? "still out of reach" : "still refusing", spent,
            error.message);
        if (!gaps) return std::unexpected(std::move(error));
        gaps(std::move(error));
        any_unreachable = true;
      }
      return report_refused();
    }
    m_stale = true;
    // A map that cannot be loaded now still names masters to try again.
    (void)refresh(*first_failure + timeout);
  }
}

}  // namespace

std::unique_ptr<Backend> make_cluster_backend(Target target,
                                              std::vector<redis::ConnectOptions> seeds,
                                              std::optional<Redirect> hint,
                                              std::optional<Deadline> load_map_by) {
  auto backend = std::make_unique<ClusterBackend>(std::move(target), std::move(seeds));
  if (hint) backend->take_hint(*hint);
  if (load_map_by) backend->load_map(*load_map_by);
  return backend;
}

}  // namespace rlock::backend
