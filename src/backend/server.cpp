// One master: a fixed server (redis://, rediss://, unix://), or the master a
// group of Sentinels names, found again after a failover.

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>

#include "backend/sentinel.h"
#include "backend/target.h"
#include "lock/keys.h"

namespace rlock::lock::scripts {
extern const std::string_view k_lock_lua;
}

namespace rlock::backend {

namespace {

const redis::Script& lock_script() {
  static const redis::Script script(lock::scripts::k_lock_lua);
  return script;
}

/// Sleeps `pause`, or less if `deadline` comes first; false if `interrupt_fd`
/// became readable meanwhile.
bool pause_before_retry(Millis pause, Deadline deadline, int interrupt_fd) {
  const auto left = std::chrono::ceil<Millis>(deadline - Clock::now());
  pollfd fd{interrupt_fd, POLLIN, 0};
  const auto wait = std::max(Millis(0), std::min(pause, left));
  return poll(&fd, interrupt_fd >= 0 ? 1 : 0, static_cast<int>(wait.count())) <= 0;
}

bool server_kind(const Error& error, std::initializer_list<redis::ServerError> kinds) {
  return error.code == Error::Code::server &&
         std::find(kinds.begin(), kinds.end(), error.server) != kinds.end();
}

/// How many replicas ROLE says are connected to this master.
int connected_replicas(const redis::Reply& role) {
  if (role.type != redis::Reply::Type::array || role.elements.size() < 3 ||
      role.elements[0].str != "master" || role.elements[2].type != redis::Reply::Type::array)
    return 0;
  return static_cast<int>(role.elements[2].elements.size());
}

class ServerBackend final : public Backend {
 public:
  explicit ServerBackend(Target target)
      : m_target(std::move(target)), m_interrupt_fd(m_target.server.interrupt_fd) {}

  Result<Outcome> run(const std::string& name, const lock::Call& call, Deadline deadline) override;
  Result<void> wait_for_wake(const std::string& name, const std::string& token,
                             Millis block) override;
  Result<std::vector<NamedReply>> run_on_every_lock(const lock::Call& call) override;

  void set_interrupt_fd(int fd) override {
    m_interrupt_fd = fd;
    if (m_connection) m_connection->set_interrupt_fd(fd);
  }
  int interrupt_fd() const override { return m_interrupt_fd; }
  Millis command_timeout() const override { return m_target.server.command_timeout; }

  std::string describe() const override {
    if (!sentinel()) return m_target.server.url.redacted();
    std::vector<std::string> hosts;
    for (const auto& s : m_target.sentinels) hosts.push_back(s.url.redacted());
    return fmt::format("master '{}' of Sentinels {}", m_target.master_name, fmt::join(hosts, ", "));
  }

  std::string acl_user() const override {
    // The audit record names the Redis user besides the OS user. A script
    // may not call ACL WHOAMI (it is flagged noscript), and no round trip is
    // needed to learn what it would answer: the connection authenticated as
    // --user (or the URL's user) when it sent a password, else "default".
    const auto& o = m_target.server;
    const bool authenticated = o.password || o.url.password;
    if (!authenticated) return "default";
    return o.user.value_or(o.url.user.value_or("default"));
  }

  std::unique_ptr<Backend> clone() const override {
    auto copy = std::make_unique<ServerBackend>(m_target);
    copy->m_discovery = m_discovery;
    copy->m_master = m_master;
    copy->m_replicas_seen = m_replicas_seen;
    return copy;
  }

 private:
  bool sentinel() const { return !m_target.sentinels.empty(); }
  Result<redis::Connection*> connection(Deadline deadline);
  /// Runs the script once on `conn`, then WAITs for the replicas if the
  /// call wrote a lease that needs them.
  Result<Outcome> execute(redis::Connection& conn, const std::vector<std::string>& keys,
                          const lock::Call& call, Deadline deadline);
  /// Whether a failure means the master may have moved: ask the Sentinels
  /// again (connection lost, READONLY from a demoted master, LOADING from a
  /// restarted one, MASTERDOWN).
  bool follow_failover(const Error& error) const {
    if (!sentinel()) return false;
    if (error.code == Error::Code::unreachable) return true;
    return server_kind(error, {redis::ServerError::readonly, redis::ServerError::loading,
                               redis::ServerError::masterdown, redis::ServerError::unblocked});
  }

  Target m_target;
  std::optional<redis::Connection> m_connection;
  int m_interrupt_fd = -1;
  Discovery m_discovery;
  /// The master of the current connection (its redacted URL), and the most
  /// replicas it has been seen with (ROLE). With --replicas all, a lease
  /// must reach that many even when fewer are connected now: the first
  /// sign of a failover is the promoted replica leaving the old master,
  /// which still takes writes that the new master will never see.
  std::string m_master;
  int m_replicas_seen = 0;
  Deadline m_last_used{};
};

Result<redis::Connection*> ServerBackend::connection(Deadline deadline) {
  // Under Sentinel a connection that sat idle may lead to a master that has
  // since been replaced but does not know it yet (it still takes writes the
  // new master never sees): after an idle second, ask the Sentinels again.
  // That costs a few round trips per renewal and per release, which run
  // seconds apart.
  constexpr Millis k_sentinel_recheck{1000};
  if (sentinel() && m_connection && Clock::now() - m_last_used >= k_sentinel_recheck)
    m_connection.reset();
  m_last_used = Clock::now();
  if (!m_connection) {
    Result<redis::Connection> connected =
        sentinel() ? connect_master(m_target, m_interrupt_fd, deadline, m_discovery) : [&] {
          redis::ConnectOptions options = m_target.server;
          options.interrupt_fd = m_interrupt_fd;
          return redis::Connection::connect(options);
        }();
    if (!connected) return std::unexpected(connected.error());
    // Another master (a failover): one of the replicas seen is now the
    // master, so one fewer is expected of it until it shows more.
    if (!m_master.empty() && connected->describe() != m_master)
      m_replicas_seen = std::max(0, m_replicas_seen - 1);
    m_master = connected->describe();
    m_connection.emplace(std::move(*connected));
  }
  m_connection->set_interrupt_fd(m_interrupt_fd);
  return &*m_connection;
}

Result<Outcome> ServerBackend::execute(redis::Connection& conn,
                                       const std::vector<std::string>& keys, const lock::Call& call,
                                       Deadline deadline) {
  const auto& replicas = m_target.replicas;
  const bool acknowledge = call.replicate_within && (replicas.all() || *replicas.count > 0);
  if (!acknowledge) {
    auto reply = conn.eval(lock_script(), keys, call.args, deadline);
    if (!reply) return std::unexpected(reply.error());
    return Outcome{std::move(*reply), std::nullopt};
  }
  // With --replicas all, ROLE travels with the script (one round trip) and
  // says how many replicas are connected at this moment (never fewer than
  // this master was seen with: see m_replicas_seen). ROLE goes first:
  // a server that wants a password answers a short command with NOAUTH but
  // closes the connection after refusing a long one, and both answers are
  // needed to report the refusal as what it is.
  Result<redis::Reply> reply = std::unexpected(Error{});
  std::optional<redis::Reply> role;
  if (replicas.all()) {
    std::vector<std::string> evalsha{"EVALSHA", lock_script().sha1, std::to_string(keys.size())};
    evalsha.insert(evalsha.end(), keys.begin(), keys.end());
    evalsha.insert(evalsha.end(), call.args.begin(), call.args.end());
    auto replies = conn.pipeline({{"ROLE"}, evalsha}, deadline);
    if (!replies) return std::unexpected(replies.error());
    role = std::move((*replies)[0]);
    auto& first = (*replies)[1];
    if (first.is_error() && redis::server_error_kind(first.str) == redis::ServerError::noscript) {
      reply = conn.eval(lock_script(), keys, call.args, deadline);  // loads it again
    } else if (first.is_error()) {
      reply = std::unexpected(redis::server_failure(conn.describe(), first.str));
    } else {
      reply = std::move(first);
    }
  } else {
    reply = conn.eval(lock_script(), keys, call.args, deadline);
  }
  if (!reply) return std::unexpected(reply.error());
  if (role && !role->is_error())
    m_replicas_seen = std::max(m_replicas_seen, connected_replicas(*role));
  if (call.wrote_lease && !call.wrote_lease(*reply))
    return Outcome{std::move(*reply), std::nullopt};
  if (role && role->is_error()) {
    // The lease is written but the replicas cannot be counted (an ACL
    // without +role): it must not count, and the caller gives it back.
    Ack refused{0, 1,
                fmt::format("ROLE was refused, so the replicas could not be counted: {} "
                            "(allow +role and +wait, or use --replicas N or 0)",
                            role->str)};
    return Outcome{std::move(*reply), std::move(refused)};
  }
  Ack ack;
  ack.wanted = replicas.all() ? m_replicas_seen : *replicas.count;
  if (ack.wanted == 0) return Outcome{std::move(*reply), ack};
  // WAIT's own timeout ends it; the deadline only guards against a server
  // that does not answer at all.
  const auto timeout = *call.replicate_within;
  const std::vector<std::string> wait{"WAIT", std::to_string(ack.wanted),
                                      std::to_string(timeout.count())};
  auto waited = conn.command(wait, std::max(deadline, Clock::now() + timeout + Millis(1000)));
  if (!waited) return std::unexpected(waited.error());
  if (waited->type != redis::Reply::Type::integer)
    return fail(Error::Code::protocol,
                fmt::format("{}: unexpected reply to WAIT", conn.describe()));
  ack.acknowledged = static_cast<int>(std::clamp<std::int64_t>(waited->integer, 0, 1'000'000));
  // Fewer acknowledgements than replicas seen may be a failover in
  // progress: the next try asks the Sentinels where the master is now.
  if (!ack.enough() && sentinel()) m_connection.reset();
  return Outcome{std::move(*reply), ack};
}

Result<Outcome> ServerBackend::run(const std::string& name, const lock::Call& call,
                                   Deadline deadline) {
  const auto started = Clock::now();
  const auto keys = lock::lock_keys(m_target.prefix, name);
  // Every lock operation is idempotent by token (a repeated acquire finds
  // itself holding, a repeated renew extends again, a repeated release finds
  // nothing), so sending one again is safe even when the first may have been
  // processed. Connection already replaces a connection found closed before
  // sending; this covers one closed or reset while the request was out.
  bool retried_transport = false;
  // A transient refusal (LOADING after a restart, BUSY script, ...) means
  // the request was not run, and a failover means the master moved: back
  // off and try again until the caller's deadline. 100 ms doubling to 1 s
  // notices a finished load or a new master quickly without hammering.
  Millis backoff{100};
  for (;;) {
    // Only a connection that was already open can have gone stale; a fresh
    // one that fails means the server is out of reach, and trying again at
    // once would only double the wait for that answer.
    const bool reused = m_connection.has_value();
    auto conn = connection(deadline);
    Result<Outcome> outcome =
        conn ? execute(**conn, keys, call, deadline) : std::unexpected(conn.error());
    if (outcome) return outcome;
    const Error& error = outcome.error();
    // After a transport failure the connection may have a reply in flight:
    // drop it, the next call reconnects.
    if (error.code == Error::Code::unreachable || error.code == Error::Code::interrupted)
      m_connection.reset();
    if (error.code == Error::Code::interrupted) return outcome;
    if (error.code == Error::Code::unreachable && reused && !retried_transport &&
        Clock::now() < deadline) {
      retried_transport = true;
      continue;
    }
    // Under Sentinel, a master that cannot be reached or refuses as a
    // replica is a failover to follow; no Sentinel at all is not.
    const bool follow = follow_failover(error) && !m_discovery.no_sentinel;
    if (follow) m_connection.reset();
    const bool transient = error.code == Error::Code::server && redis::is_transient(error.server);
    if (!follow && !transient) return outcome;
    if (Clock::now() + backoff >= deadline) {
      Error last = error;
      const auto spent = format_duration(std::chrono::ceil<Millis>(Clock::now() - started));
      last.message =
          error.code == Error::Code::server
              ? fmt::format("{} still answers {} after {}: {}", describe(),
                            redis::server_error_word(error.server), spent, error.message)
              : fmt::format("{}: no usable master after {}: {}", describe(), spent, error.message);
      return std::unexpected(last);
    }
    if (!pause_before_retry(backoff, deadline, m_interrupt_fd))
      return fail(Error::Code::interrupted, "interrupted while waiting for the server");
    backoff = std::min(backoff * 2, Millis(1000));
  }
}

Result<void> ServerBackend::wait_for_wake(const std::string& name, const std::string& token,
                                          Millis block) {
  const Deadline deadline = Clock::now() + block + command_timeout();
  auto conn = connection(deadline);
  if (!conn) return std::unexpected(conn.error());
  // BLPOP takes fractional seconds (Redis >= 6.0); it returns early when a
  // release pushes to our wake list.
  const std::vector<std::string> blpop{
      "BLPOP", lock::wake_key(m_target.prefix, name, token),
      fmt::format("{:.3f}", static_cast<double>(block.count()) / 1000)};
  auto woke = (*conn)->command(blpop, deadline);
  if (woke) return {};
  const Error& error = woke.error();
  if (error.code == Error::Code::unreachable || error.code == Error::Code::interrupted)
    m_connection.reset();
  // A master turned replica unblocks its clients (UNBLOCKED) or refuses
  // (READONLY): not an error of the wait, only a reason to ask again, and
  // the next operation finds the master.
  if (server_kind(error, {redis::ServerError::readonly, redis::ServerError::unblocked})) {
    m_connection.reset();
    return {};
  }
  return std::unexpected(error);
}

Result<std::vector<NamedReply>> ServerBackend::run_on_every_lock(const lock::Call& call) {
  const Deadline connect_by = Clock::now() + command_timeout();
  auto conn = connection(connect_by);
  if (!conn) return std::unexpected(conn.error());
  std::vector<std::string> names;
  std::string cursor = "0";
  const std::string pattern = lock::meta_pattern(m_target.prefix);
  // A real SCAN ends; a broken or hostile server's cursor may never return
  // to 0. Bounded twice: by steps (with COUNT 1000, 100000 steps walk a
  // hash table of 100 million slots, more than any one server holds) and by
  // time (a minute: a healthy server scans millions of keys a second).
  constexpr int k_max_scan_steps = 100'000;
  constexpr Millis k_scan_budget{60'000};
  const Deadline scan_until = Clock::now() + k_scan_budget;
  int steps = 0;
  do {
    if (++steps > k_max_scan_steps)
      return fail(Error::Code::protocol, fmt::format("{}: SCAN did not finish after {} steps",
                                                     describe(), k_max_scan_steps));
    // COUNT 1000 keeps each SCAN step short on the server while needing few
    // round trips for large keyspaces.
    const std::vector<std::string> scan{"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
    auto reply = (*conn)->command(scan, std::min(scan_until, Clock::now() + command_timeout()));
    if (!reply) return std::unexpected(reply.error());
    if (reply->elements.size() != 2 || reply->elements[1].type != redis::Reply::Type::array)
      return fail(Error::Code::protocol, "unexpected SCAN reply");
    cursor = reply->elements[0].str;
    for (const auto& key : reply->elements[1].elements)
      if (auto name = lock::name_of_meta_key(m_target.prefix, key.str)) names.push_back(*name);
  } while (cursor != "0");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());

  std::vector<NamedReply> replies;
  replies.reserve(names.size());
  // Pipelined in batches: one round trip per batch instead of per lock.
  constexpr size_t k_batch = 500;
  const auto& script = lock_script();
  for (size_t first = 0; first < names.size(); first += k_batch) {
    std::vector<std::vector<std::string>> commands;
    const size_t last = std::min(names.size(), first + k_batch);
    for (size_t k = first; k < last; ++k) {
      std::vector<std::string> cmd{"EVALSHA", script.sha1, "9"};
      for (auto& key : lock::lock_keys(m_target.prefix, names[k])) cmd.push_back(std::move(key));
      cmd.insert(cmd.end(), call.args.begin(), call.args.end());
      commands.push_back(std::move(cmd));
    }
    auto batch = (*conn)->pipeline(commands, Clock::now() + command_timeout());
    if (!batch) return std::unexpected(batch.error());
    auto noscript = [](const redis::Reply& r) {
      return r.is_error() && redis::server_error_kind(r.str) == redis::ServerError::noscript;
    };
    if (std::any_of(batch->begin(), batch->end(), noscript)) {
      // The script cache was emptied (restart, failover, SCRIPT FLUSH): one
      // call through the EVAL fallback loads it, then the batch is redone.
      if (auto loaded = run(names[first], call, Clock::now() + command_timeout()); !loaded)
        return std::unexpected(loaded.error());
      conn = connection(Clock::now() + command_timeout());
      if (!conn) return std::unexpected(conn.error());
      batch = (*conn)->pipeline(commands, Clock::now() + command_timeout());
      if (!batch) return std::unexpected(batch.error());
    }
    for (size_t k = first; k < last; ++k)
      replies.emplace_back(names[k], std::move((*batch)[k - first]));
  }
  return replies;
}

}  // namespace

std::unique_ptr<Backend> make_backend(Target target) {
  return std::make_unique<ServerBackend>(std::move(target));
}

}  // namespace rlock::backend
