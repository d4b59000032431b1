// One master: a fixed server (redis://, rediss://, unix://), or the master a
// group of Sentinels names, found again after a failover. A server that
// answers as a Cluster node hands over to the Cluster backend.

#include <fmt/format.h>

#include <algorithm>

#include "backend/cluster.h"
#include "backend/node.h"
#include "backend/sentinel.h"
#include "backend/target.h"
#include "lock/keys.h"

namespace rlock::backend {

namespace {

/// A write refused by a plain URL's server as a read-only replica (or a
/// master since demoted): Redis' words say what it refused, not what to
/// give instead. (Under Sentinel such a refusal is a failover to follow.)
Error with_replica_hint(Error error) {
  if (!server_kind(error, {redis::ServerError::readonly})) return error;
  std::string_view said = without_script_location(error.message);
  if (said.ends_with('.')) said.remove_suffix(1);
  error.message = fmt::format(
      "{}: this server is a read-only replica; give the master's URL, or the Sentinels' "
      "(redis-sentinel://), which follow failovers",
      said);
  return error;
}

class ServerBackend final : public Backend {
 public:
  explicit ServerBackend(Target target)
      : m_target(std::move(target)), m_interrupt_fd(m_target.server.interrupt_fd) {}

  Result<Outcome> run(const std::string& name, const lock::Call& call, Deadline deadline) override;
  Result<void> wait_for_wake(const std::string& name, const std::string& token, Millis block,
                             Deadline by) override;
  Result<std::optional<Outcome>> wait_then_run(const std::string& name, const std::string& token,
                                               Millis block, Deadline by,
                                               const lock::Call& then) override;
  Result<void> for_every_lock(const lock::Call& call, const LockSink& sink) override;
  Result<void> for_every_reachable_lock(const lock::Call& call, const LockSink& sink,
                                        const GapSink& gaps) override;

  redis::Connection* start(const std::string& name, const lock::Call& call) override;
  redis::Connection* start_wake(const std::string& name, const std::string& token,
                                Millis block) override;
  Stepped finish(const std::string& name, const lock::Call& call,
                 Result<std::vector<redis::Reply>> answer) override;

  void part(const std::string& name, const lock::Call& call) override {
    if (m_cluster) return m_cluster->part(name, call);
    const auto request =
        script_request(m_target.replicas, lock::lock_keys(m_target.prefix, name), call, false);
    if (m_connection) (void)m_connection->part(request, k_part_budget);
    if (m_dropped) (void)m_dropped->part(request, k_part_budget);
  }

  std::vector<std::string> server_warnings() override {
    if (m_cluster || !m_connection) return {};
    return backend::server_warnings(*m_connection, Clock::now() + command_timeout());
  }

  void set_interrupt_fd(int fd) override {
    m_interrupt_fd = fd;
    if (m_connection) m_connection->set_interrupt_fd(fd);
    if (m_cluster) m_cluster->set_interrupt_fd(fd);
  }
  int interrupt_fd() const override { return m_interrupt_fd; }
  Millis command_timeout() const override { return m_target.server.command_timeout; }

  std::string server_of(const std::string& name) const override {
    if (m_cluster) return m_cluster->server_of(name);
    return sentinel() ? m_master : m_target.server.url.redacted();
  }

  std::string describe() const override {
    if (m_cluster) return m_cluster->describe();
    if (!sentinel()) return m_target.server.url.redacted();
    std::vector<std::string> hosts;
    hosts.reserve(m_target.sentinels.size());
    for (const auto& s : m_target.sentinels) hosts.push_back(s.url.redacted());
    return fmt::format("master '{}' of Sentinels {}", m_target.master_name, fmt::join(hosts, ", "));
  }

  std::string acl_user() const override { return acl_user_of(m_target.server); }

  std::unique_ptr<Backend> clone() const override {
    if (m_cluster) return m_cluster->clone();
    auto copy = std::make_unique<ServerBackend>(m_target);
    copy->m_discovery = m_discovery;
    copy->m_master = m_master;
    copy->m_replicas_seen = m_replicas_seen;
    // The clone serves a long run (the heartbeat): prepare() asks, while
    // the node answers, whether it is a Cluster node (and if so loads the
    // slot map), so that it can follow a failover of this very node later
    // even though no MOVED ever told it this is a Cluster. Not here: a
    // clone does no I/O (a quorum clones its members up front).
    copy->m_probe_cluster = may_be_cluster() && !m_not_cluster;
    return copy;
  }

  void prepare(Deadline deadline) override {
    if (m_cluster) return m_cluster->prepare(deadline);
    if (m_probe_cluster) (void)probe_cluster(deadline);  // else asked at the first call
  }

 private:
  bool sentinel() const { return !m_target.sentinels.empty(); }
  Result<redis::Connection*> connection(Deadline deadline);
  /// A new connection to the server the URL names (not under Sentinel).
  Result<redis::Connection> connect_server(Deadline deadline) const;
  /// The connection for the step-wise path, unopened until its first
  /// request; null when this deployment needs run() (Sentinel, Cluster, a
  /// Cluster probe still to make).
  redis::Connection* stepwise_connection();
  /// Whether a failure means the master may have moved: ask the Sentinels
  /// again (connection lost, READONLY from a demoted master, LOADING from a
  /// restarted one, MASTERDOWN).
  bool follow_failover(const Error& error) const {
    if (!sentinel()) return false;
    if (error.code == Error::Code::unreachable) return true;
    return server_kind(error, {redis::ServerError::readonly, redis::ServerError::loading,
                               redis::ServerError::masterdown, redis::ServerError::unblocked});
  }

  /// Whether the server may be a Cluster node: a TCP server named by URL
  /// (Sentinel never manages one; a Cluster node has no unix socket to
  /// announce).
  bool may_be_cluster() const {
    return !sentinel() && m_target.server.url.scheme != redis::Url::Scheme::unix_socket;
  }
  /// Forgets the connection; one whose requests were given up on is kept
  /// aside for part() (a frozen server may still run them).
  void drop_connection() {
    if (m_connection && m_connection->has_stale()) m_dropped.emplace(std::move(*m_connection));
    m_connection.reset();
  }
  /// Hands every further operation to a Cluster backend seeded from this
  /// server (with the redirection that revealed it, if any).
  void become_cluster(std::optional<Redirect> hint,
                      std::optional<Deadline> load_map_by = std::nullopt) {
    m_cluster = make_cluster_backend(m_target, {m_target.server}, std::move(hint), load_map_by);
    m_cluster->set_interrupt_fd(m_interrupt_fd);
    drop_connection();
  }
  /// Asks the server (INFO cluster) whether it is a Cluster node, once, and
  /// becomes a Cluster backend if it is. A server that refuses INFO (an
  /// ACL without +info) is taken for a plain server.
  Result<void> probe_cluster(Deadline deadline);
  /// What a failed BLPOP means for the wait (see wait_for_wake): nothing
  /// (ask again) or an error.
  Result<void> wait_failed(const Error& error);

  Target m_target;
  std::optional<redis::Connection> m_connection;
  std::optional<redis::Connection> m_dropped;  // see drop_connection()
  int m_interrupt_fd = -1;
  Discovery m_discovery;
  /// The connection to the Sentinel that named the master (see
  /// connect_master).
  std::optional<redis::Connection> m_sentinel;
  /// The master of the current connection (its redacted URL), and the most
  /// replicas it has been seen with (ROLE). With --replicas all, a lease
  /// must reach that many even when fewer are connected now: the first
  /// sign of a failover is the promoted replica leaving the old master,
  /// which still takes writes that the new master will never see.
  std::string m_master;
  ReplicasSeen m_replicas_seen;
  /// The replicas the Sentinel that named this process's first master knew
  /// of it (-1: unknown, or a later master); see run().
  int m_known_replicas = -1;
  /// The refusal the server has kept answering, across operations (Backoff).
  std::optional<Refusing> m_refusing;
  /// Since when no usable master has been found, across operations (Backoff).
  std::optional<Clock::time_point> m_missing_since;
  /// When the Sentinels were last asked where the master is (a connection
  /// made to it under Sentinel).
  Deadline m_asked_at{};
  /// Set once the server turned out to be a Cluster node.
  std::unique_ptr<Backend> m_cluster;
  bool m_probe_cluster = false;
  bool m_not_cluster = false;  // INFO cluster said so
};

Result<void> ServerBackend::probe_cluster(Deadline deadline) {
  auto conn = connection(deadline);
  if (!conn) return std::unexpected(conn.error());
  m_probe_cluster = false;
  const std::vector<std::string> info{"INFO", "cluster"};
  auto reply = (*conn)->command(info, deadline);
  if (!reply) {
    const Error& error = reply.error();
    if (error.code == Error::Code::unreachable || error.code == Error::Code::interrupted) {
      drop_connection();
      return std::unexpected(error);
    }
    m_not_cluster = true;
    return {};
  }
  if (reply->str.find("cluster_enabled:1") == std::string::npos) {
    m_not_cluster = true;
    return {};
  }
  // The map now, from this node: it may be gone when it is needed.
  become_cluster(std::nullopt, deadline);
  return {};
}

Result<redis::Connection> ServerBackend::connect_server(Deadline deadline) const {
  redis::ConnectOptions options = m_target.server;
  options.interrupt_fd = m_interrupt_fd;
  // Within the caller's deadline too (as under Sentinel): a renewal's is
  // shorter than the time left on the lock, and a waiter leaving its queue
  // after a signal has a second for it.
  options.connect_timeout = std::clamp(std::chrono::ceil<Millis>(deadline - Clock::now()),
                                       Millis(1), options.connect_timeout);
  return redis::Connection::connect(options);
}

Result<redis::Connection*> ServerBackend::connection(Deadline deadline) {
  // Under Sentinel a connection may lead to a master that has since been
  // replaced but does not know it yet (it still takes writes the new master
  // never sees): a second after the Sentinels were last asked, they are
  // asked again before the connection is used. That costs a few round
  // trips per renewal and per release. (Counted from the last use before,
  // a run with a TTL under 3 s, whose renewals come more often than once a
  // second, never asked again, and renewed on an abandoned master for the
  // whole run while a second holder had the lock on the new one.)
  constexpr Millis k_sentinel_recheck{1000};
  // The connection is offered back: when the Sentinels name the same
  // master and it still says it is one, it is kept (one ROLE instead of a
  // new connection, and its TLS handshake, each time). One with a request
  // given up on is not: it is kept aside for part().
  std::optional<redis::Connection> current;
  if (sentinel() && m_connection && Clock::now() - m_asked_at >= k_sentinel_recheck) {
    if (!m_connection->has_stale() && m_connection->in_flight() == 0) {
      current.emplace(std::move(*m_connection));
      m_connection.reset();
    } else {
      drop_connection();
    }
  }
  if (!m_connection) {
    Result<redis::Connection> connected =
        sentinel() ? connect_master(m_target, m_interrupt_fd, deadline, m_discovery,
                                    std::move(current), &m_sentinel)
                   : connect_server(deadline);
    if (!connected) return std::unexpected(connected.error());
    // Another master (a failover): one of the replicas seen is now the
    // master, so one fewer is expected of it until it shows more.
    if (!m_master.empty() && connected->describe() != m_master)
      m_replicas_seen = std::max(0, m_replicas_seen.count - 1);
    // A process's first master: the replicas the Sentinel that named it
    // knows of (see run()). Any later master is one a failover made, whose
    // replicas are still being moved to it. The first master named again
    // (asked again after too few acknowledgements) is still the first one:
    // its count is the Sentinels' answer of now. (It was reset to none,
    // and a retry then wanted only the replicas ROLE still lists.)
    const bool first_again = connected->describe() == m_master && m_known_replicas >= 0;
    if (m_master.empty() || first_again)
      m_known_replicas = sentinel() ? m_discovery.replicas : -1;
    else
      m_known_replicas = -1;
    m_master = connected->describe();
    m_connection.emplace(std::move(*connected));
    m_asked_at = Clock::now();
  }
  m_connection->set_interrupt_fd(m_interrupt_fd);
  return &*m_connection;
}

redis::Connection* ServerBackend::stepwise_connection() {
  if (m_cluster || sentinel()) return nullptr;
  if (!m_connection) {
    redis::ConnectOptions options = m_target.server;
    options.interrupt_fd = m_interrupt_fd;
    m_connection.emplace(redis::Connection::unopened(options));
  }
  return &*m_connection;
}

redis::Connection* ServerBackend::start(const std::string& name, const lock::Call& call) {
  // WAIT for a fixed number of replicas always blocks: run() does it. So
  // does a forced release that waits for replicas at all: finish() would
  // hand the WAIT to run(), which runs the script again, and a second
  // eviction finds nobody, so whom the first evicted was lost ("not held").
  if (call.replicate_within && !m_target.replicas.all() && *m_target.replicas.count > 0)
    return nullptr;
  if (call.replicate_within && lock::operation_of(call) == lock::Operation::force &&
      (m_target.replicas.all() || *m_target.replicas.count > 0))
    return nullptr;
  redis::Connection* conn = stepwise_connection();
  if (!conn) return nullptr;
  // (A forced release goes as EVAL: see sent_whole.)
  auto commands =
      script_request(m_target.replicas, lock::lock_keys(m_target.prefix, name), call, false);
  // The question probe_cluster() asks travels ahead of the script (finish()
  // reads its answer), so that a heartbeat's clone needs no round trip of
  // its own.
  if (m_probe_cluster) commands.insert(commands.begin(), {"INFO", "cluster"});
  // A request that cannot even be queued (an unresolvable host) fails
  // again, and is worded, in run().
  if (!conn->begin(commands)) return nullptr;
  return conn;
}

redis::Connection* ServerBackend::start_wake(const std::string& name, const std::string& token,
                                             Millis block) {
  redis::Connection* conn = stepwise_connection();
  if (!conn) return nullptr;
  if (!conn->begin({blpop_command(lock::wake_key(m_target.prefix, name, token), block)}))
    return nullptr;
  return conn;
}

Backend::Stepped ServerBackend::finish(const std::string& name, const lock::Call& call,
                                       Result<std::vector<redis::Reply>> answer) {
  if (!answer) {
    // A connection lost: run() connects again and tries once more, as it
    // does for a connection that went stale. One never made is the answer:
    // run() does not try a fresh connection twice either, and a host out
    // of reach (a lookup that hangs, a dropped SYN) would cost twice the
    // connect timeout more.
    if (answer.error().code == Error::Code::unreachable && !m_connection->failed_connecting())
      return {};
    return {Result<Outcome>(std::unexpected(answer.error())), false};
  }
  // The answer to a pipelined INFO cluster (see start()), when there is one.
  const std::size_t script_replies = call.replicate_within && m_target.replicas.all() ? 2 : 1;
  if (answer->size() == script_replies + 1) {
    const redis::Reply info = std::move(answer->front());
    answer->erase(answer->begin());
    // A Cluster node after all: run() probes again and hands over to the
    // Cluster backend (a refusal of INFO means a plain server, as there).
    if (!info.is_error() && info.str.find("cluster_enabled:1") != std::string::npos) return {};
    m_probe_cluster = false;
    m_not_cluster = true;
  }
  if (const redis::Reply& last = answer->back(); last.is_error()) {
    const Error error = redis::classify_server_error(last.str);
    // The script cache is empty (restart, SCRIPT FLUSH): EVAL loads it
    // again. A status refused in its read-only form: in the plain one.
    const bool noscript = error.server == redis::ServerError::noscript;
    if ((noscript || redis::refuses_read_only(last)) &&
        m_connection->begin(script_request(m_target.replicas,
                                           lock::lock_keys(m_target.prefix, name), call, noscript)))
      return {std::nullopt, true};
    // A Cluster node, or a refusal to ride out: run() knows what to do.
    if (server_kind(error, {redis::ServerError::moved, redis::ServerError::ask,
                            redis::ServerError::clusterdown}) ||
        (error.code == Error::Code::server && redis::is_transient(error.server)))
      return {};
  }
  auto outcome = script_answer(describe(), m_target.replicas, m_replicas_seen, call,
                               std::move(*answer), lock::lock_keys(m_target.prefix, name).front());
  if (!outcome) return {};  // replicas to WAIT for
  if (!*outcome) *outcome = std::unexpected(with_replica_hint(outcome->error()));
  return {std::move(*outcome), false};
}

Result<Outcome> ServerBackend::run(const std::string& name, const lock::Call& call,
                                   Deadline deadline) {
  if (m_probe_cluster) (void)probe_cluster(deadline);  // a failure shows below
  if (m_cluster) return m_cluster->run(name, call, deadline);
  const auto keys = lock::lock_keys(m_target.prefix, name);
  // Every lock operation is idempotent by token (a repeated acquire finds
  // itself holding, a repeated renew extends again, a repeated release finds
  // nothing), so sending one again is safe even when the first may have been
  // processed. Connection already replaces a connection found closed before
  // sending; this covers one closed or reset while the request was out.
  bool retried_transport = false;
  // A transient refusal (LOADING after a restart, BUSY script, ...) means
  // the request was not run, and a failover means the master moved: back
  // off and try again until the caller's deadline.
  Backoff backoff(deadline, m_interrupt_fd, m_refusing, &m_missing_since);
  for (;;) {
    // Only a connection that was already open can have gone stale; a fresh
    // one that fails means the server is out of reach, and trying again at
    // once would only double the wait for that answer.
    const bool reused = m_connection.has_value();
    auto conn = connection(deadline);
    // A release or force that must last (Call::known_replicas) on a
    // process's first master also waits for the replicas the Sentinels
    // know of: during a failover the old master still answers as the
    // master with the replicas not yet moved, while the one promoted has
    // left it, and a write only those acknowledge is lost when it is
    // demoted. A process that has used the master before counts the one
    // promoted already (replicas_seen); a new one learns it only from the
    // Sentinel. Not for grants: right after a failover the Sentinels list
    // replicas still syncing, and every acquire would wait for them.
    ReplicasSeen seen = m_replicas_seen;
    if (call.known_replicas) seen.count = std::max(seen.count, m_known_replicas);
    // Under Sentinel, half of what is left at most (see
    // failover_try_deadline): a master that hangs is failing over.
    Result<Outcome> outcome = conn
                                  ? execute(**conn, m_target.replicas, seen, keys, call,
                                            sentinel() ? failover_try_deadline(deadline) : deadline)
                                  : std::unexpected(conn.error());
    if (!call.known_replicas) m_replicas_seen = seen;
    // Fewer acknowledgements than replicas seen may be a failover in
    // progress: the next try asks the Sentinels where the master is now.
    // The connection is offered back, not dropped: when the master stays,
    // the next try's WAIT goes out where the write did and so covers it.
    // On a new connection, a try that writes nothing (a release finding the
    // lock already gone) would have a WAIT that covers nothing on Redis 7.2
    // and Valkey, which count a client's own writes only, and it would
    // confirm a write the frozen replica never got (e2e 420 on Valkey).
    if (outcome && outcome->ack && outcome->ack->problem.empty() && !outcome->ack->enough() &&
        sentinel())
      m_asked_at = {};
    if (outcome) {
      // Sent again on a new connection after the one it went out on was
      // lost: the first may have been carried out (a failover followed is
      // not counted: the lock may really have been lost in it).
      outcome->sent_again = retried_transport;
      return outcome;
    }
    const Error& error = outcome.error();
    // A redirection or CLUSTERDOWN: the server is a Cluster node, and the
    // Cluster backend takes over from here (with the slot's master already
    // known from MOVED).
    if (may_be_cluster() && server_kind(error, {redis::ServerError::moved, redis::ServerError::ask,
                                                redis::ServerError::clusterdown})) {
      auto hint = parse_redirect(error.message, m_target.server.url.host);
      become_cluster(hint);
      return m_cluster->run(name, call, deadline);
    }
    // After a transport failure the connection may have a reply in flight:
    // drop it, the next call reconnects.
    if (error.code == Error::Code::unreachable || error.code == Error::Code::interrupted)
      drop_connection();
    if (error.code == Error::Code::interrupted) return outcome;
    if (error.code == Error::Code::unreachable && reused && !retried_transport &&
        Clock::now() < deadline) {
      retried_transport = true;
      continue;
    }
    // Under Sentinel, a master that cannot be reached or refuses as a
    // replica is a failover to follow; no Sentinel at all is not.
    const bool follow = follow_failover(error) && !m_discovery.no_sentinel;
    if (follow) drop_connection();
    const bool transient = error.code == Error::Code::server && redis::is_transient(error.server);
    // A server that kept refusing (in this operation or the ones before:
    // m_refusing) and then did not answer the last try before the deadline
    // (a BUSY server slow to say so on a loaded machine, or one that
    // stopped): what it said last is the answer, not "timed out after the
    // few milliseconds that were left".
    if (!follow && m_refusing && error.code == Error::Code::unreachable &&
        Clock::now() >= deadline) {
      const Error refused{Error::Code::server, m_refusing->message, m_refusing->kind};
      if (auto paused = backoff.pause(refused, describe(), "no usable master"); !paused) {
        Error last = paused.error();
        last.message += fmt::format(" (the last try: {})", error.message);
        return std::unexpected(last);
      }
    }
    if (!follow && !transient)
      return sentinel() ? outcome : std::unexpected(with_replica_hint(error));
    if (auto paused = backoff.pause(error, describe(), "no usable master"); !paused) {
      Error last = paused.error();
      // The Sentinels answered and named a master out of reach.
      last.failing_over = last.code == Error::Code::unreachable && follow;
      return std::unexpected(sentinel() ? last : with_replica_hint(last));
    }
  }
}

Result<void> ServerBackend::wait_for_wake(const std::string& name, const std::string& token,
                                          Millis block, Deadline by) {
  if (m_cluster) return m_cluster->wait_for_wake(name, token, block, by);
  const Deadline deadline = std::min(by, Clock::now() + block + command_timeout());
  auto conn = connection(deadline);
  if (!conn) return std::unexpected(conn.error());
  auto woke = (*conn)->command(blpop_command(lock::wake_key(m_target.prefix, name, token), block),
                               deadline);
  if (woke) return {};
  return wait_failed(woke.error());
}

Result<void> ServerBackend::wait_failed(const Error& error) {
  if (error.code == Error::Code::unreachable || error.code == Error::Code::interrupted)
    drop_connection();
  // A master turned replica unblocks its clients (UNBLOCKED) or refuses
  // (READONLY): not an error of the wait, only a reason to ask again, and
  // the next operation finds the master.
  if (server_kind(error, {redis::ServerError::readonly, redis::ServerError::unblocked})) {
    drop_connection();
    return {};
  }
  // The wake list is on another Cluster node: from now on, ask the Cluster.
  if (may_be_cluster() && server_kind(error, {redis::ServerError::moved})) {
    become_cluster(parse_redirect(error.message, m_target.server.url.host));
    return {};
  }
  return std::unexpected(error);
}

Result<std::optional<Outcome>> ServerBackend::wait_then_run(const std::string& name,
                                                            const std::string& token, Millis block,
                                                            Deadline by, const lock::Call& then) {
  if (m_probe_cluster) (void)probe_cluster(std::min(by, Clock::now() + command_timeout()));
  if (m_cluster) return m_cluster->wait_then_run(name, token, block, by, then);
  const Deadline deadline = std::min(by, Clock::now() + block + command_timeout());
  auto conn = connection(deadline);
  if (!conn) return std::unexpected(conn.error());
  const auto keys = lock::lock_keys(m_target.prefix, name);
  const auto blpop = blpop_command(lock::wake_key(m_target.prefix, name, token), block);
  redis::Reply woke;
  const std::string where = (*conn)->describe();
  auto outcome = execute(**conn, m_target.replicas, m_replicas_seen, keys, then, deadline, false,
                         &blpop, &woke);
  // A refused BLPOP (the master turned replica, the list is on another
  // Cluster node) explains the script's refusal too; otherwise a failed
  // script is handled as a failed wait: ask again through run(), which
  // follows failovers and redirections.
  if (woke.is_error() || !outcome) {
    const Error error = woke.is_error() ? redis::server_failure(where, woke.str) : outcome.error();
    if (auto failed = wait_failed(error); !failed) return std::unexpected(failed.error());
    return std::nullopt;
  }
  // As in run(): fewer acknowledgements than replicas seen may be a
  // failover in progress; the Sentinels are asked again, the connection
  // kept if they name the same master.
  if (outcome->ack && outcome->ack->problem.empty() && !outcome->ack->enough() && sentinel())
    m_asked_at = {};
  return std::optional<Outcome>(std::move(*outcome));
}

Result<void> ServerBackend::for_every_lock(const lock::Call& call, const LockSink& sink) {
  const Deadline connect_by = Clock::now() + command_timeout();
  // SCAN on one Cluster node would see only that node's locks.
  if (may_be_cluster() && !m_cluster && !m_not_cluster) {
    if (auto probed = probe_cluster(connect_by); !probed) return std::unexpected(probed.error());
  }
  if (m_cluster) return m_cluster->for_every_lock(call, sink);
  auto connect = [this]() { return connection(Clock::now() + command_timeout()); };
  auto load = [&](const std::string& name) -> Result<void> {
    auto loaded = run(name, call, Clock::now() + command_timeout());
    if (!loaded) return std::unexpected(loaded.error());
    return {};
  };
  // A transient refusal (LOADING after a restart, BUSY script) is ridden
  // out as run() does for one lock, but only while nothing is delivered
  // yet: a listing is never shown twice.
  bool delivered = false;
  const LockSink once = [&](std::string name, redis::Reply reply) {
    delivered = true;
    return sink(std::move(name), std::move(reply));
  };
  Backoff backoff(connect_by, m_interrupt_fd, m_refusing);
  for (;;) {
    auto conn = connection(connect_by);
    auto listed = conn ? scan_and_run(connect, load, m_target.prefix, call, command_timeout(), once)
                       : Result<void>(std::unexpected(conn.error()));
    if (listed || delivered) return listed;
    const Error& error = listed.error();
    if (error.code != Error::Code::server || !redis::is_transient(error.server)) return listed;
    if (auto paused = backoff.pause(error, describe(), "no usable master"); !paused)
      return std::unexpected(paused.error());
  }
}

Result<void> ServerBackend::for_every_reachable_lock(const lock::Call& call, const LockSink& sink,
                                                     const GapSink& gaps) {
  // Only a Cluster has parts to leave out (the node named is one of them).
  if (may_be_cluster() && !m_cluster && !m_not_cluster) {
    if (auto probed = probe_cluster(Clock::now() + command_timeout()); !probed)
      return std::unexpected(probed.error());
  }
  if (m_cluster) return m_cluster->for_every_reachable_lock(call, sink, gaps);
  return for_every_lock(call, sink);
}

}  // namespace

std::unique_ptr<Backend> make_backend(Target target) {
  if (!target.seeds.empty()) {
    auto seeds = target.seeds;
    return make_cluster_backend(std::move(target), std::move(seeds));
  }
  return std::make_unique<ServerBackend>(std::move(target));
}

}  // namespace rlock::backend
