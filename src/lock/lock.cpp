#include "lock/lock.h"

#include <fmt/format.h>
#include <poll.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <limits>

#include "lock/keys.h"
#include "lock/record.h"
#include "util/token.h"

namespace rlock::lock {

namespace scripts {
extern const std::string_view k_lock_lua;
}

namespace {

const redis::Script& lock_script() {
  static const redis::Script script(scripts::k_lock_lua);
  return script;
}

std::string current_user() {
  if (const passwd* pw = getpwuid(geteuid())) return pw->pw_name;
  return std::to_string(geteuid());
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

Identity local_identity(long pid, std::string command) {
  std::string host = host_name();
  return Identity{current_user() + "@" + host, host, pid, std::move(command)};
}

LockClient::LockClient(redis::ConnectOptions options, std::string prefix)
    : m_options(std::move(options)),
      m_prefix(std::move(prefix)),
      m_interrupt_fd(m_options.interrupt_fd) {}

Result<redis::Connection*> LockClient::connection() {
  if (!m_connection) {
    redis::ConnectOptions options = m_options;
    options.interrupt_fd = m_interrupt_fd;
    auto connected = redis::Connection::connect(options);
    if (!connected) return std::unexpected(connected.error());
    m_connection.emplace(std::move(*connected));
  }
  m_connection->set_interrupt_fd(m_interrupt_fd);
  return &*m_connection;
}

namespace {

/// Sleeps `pause`, or less if `deadline` comes first; false if `interrupt_fd`
/// became readable meanwhile.
bool pause_before_retry(Millis pause, Deadline deadline, int interrupt_fd) {
  const auto left = std::chrono::ceil<Millis>(deadline - Clock::now());
  pollfd fd{interrupt_fd, POLLIN, 0};
  const auto wait = std::max(Millis(0), std::min(pause, left));
  return poll(&fd, interrupt_fd >= 0 ? 1 : 0, static_cast<int>(wait.count())) <= 0;
}

}  // namespace

Result<redis::Reply> LockClient::run(const std::string& name, std::vector<std::string> args,
                                     std::optional<Deadline> deadline) {
  const Deadline until = deadline.value_or(Clock::now() + m_options.command_timeout);
  const auto started = Clock::now();
  const auto keys = lock_keys(m_prefix, name);
  // Every lock operation is idempotent by token (a repeated acquire finds
  // itself holding, a repeated renew extends again, a repeated release finds
  // nothing), so sending one again is safe even when the first may have been
  // processed. Connection already replaces a connection found closed before
  // sending; this covers one closed or reset while the request was out.
  bool retried_transport = false;
  // A transient refusal (LOADING after a restart, BUSY script, ...) means
  // the request was not run: back off and send it again until the caller's
  // deadline. 100 ms doubling to 1 s notices a finished load quickly without
  // hammering a server that is busy loading.
  Millis backoff{100};
  for (;;) {
    // Only a connection that was already open can have gone stale; a fresh
    // one that fails means the server is out of reach, and trying again at
    // once would only double the wait for that answer.
    const bool reused = m_connection.has_value();
    auto conn = connection();
    Result<redis::Reply> reply =
        conn ? (*conn)->eval(lock_script(), keys, args, until) : std::unexpected(conn.error());
    if (reply) return reply;
    const Error& error = reply.error();
    // After a transport failure the connection may have a reply in flight:
    // drop it, the next call reconnects.
    if (error.code == Error::Code::unreachable || error.code == Error::Code::interrupted)
      m_connection.reset();
    if (error.code == Error::Code::unreachable && reused && !retried_transport &&
        Clock::now() < until) {
      retried_transport = true;
      continue;
    }
    if (error.code != Error::Code::server || !redis::is_transient(error.server)) return reply;
    if (Clock::now() + backoff >= until) {
      Error final = error;
      final.message = fmt::format(
          "{} still answers {} after {}: {}", m_options.url.redacted(),
          redis::server_error_word(error.server),
          format_duration(std::chrono::ceil<Millis>(Clock::now() - started)), error.message);
      return std::unexpected(final);
    }
    if (!pause_before_retry(backoff, until, m_interrupt_fd))
      return fail(Error::Code::interrupted, "interrupted while waiting for the server");
    backoff = std::min(backoff * 2, Millis(1000));
  }
}

Result<Attempt> LockClient::attempt(const Request& request, const std::string& token, bool enqueue,
                                    std::optional<Deadline> deadline) {
  auto reply =
      run(request.name,
          {"acquire", token, request.shared ? "shared" : "exclusive", std::to_string(request.limit),
           std::to_string(request.ttl.count()), identity_blob(request.who), enqueue ? "1" : "0",
           std::to_string(k_waiter_lease.count())},
          deadline);
  if (!reply) return std::unexpected(reply.error());
  const auto& e = reply->elements;
  if (reply->type != redis::Reply::Type::array || e.size() < 2)
    return fail(Error::Code::protocol, "unexpected reply from the lock script");
  auto state = integer_of(e[0]);
  auto second = integer_of(e[1]);
  if (!state || !second)
    return fail(Error::Code::protocol, "unexpected reply from the lock script");
  if (*state == -1)
    return fail(Error::Code::usage,
                fmt::format("lock '{}' is used with --limit {}, not --limit {}; every user of a "
                            "lock must give the same limit",
                            request.name, *second, request.limit));
  Attempt attempt;
  if (*state == 1) {
    attempt.acquired = true;
    attempt.fence = *second;
    return attempt;
  }
  attempt.position = small_int(*second, 0);
  if (e.size() >= 4 && !e[2].str.empty()) {
    auto record = parse_record(e[2].str);
    // The holder's age is measured against the server's clock of this reply.
    auto now = e.size() >= 5 ? integer_of(e[4]).value_or(record.since_ms) : record.since_ms;
    attempt.holder = holder_from("", record, now, integer_of(e[3]).value_or(0), request.limit);
  }
  return attempt;
}

namespace {

/// Decides whether a waiter rides out a failure: a transport failure only
/// once it is queued (a server that never answered is an error at once), a
/// transient server refusal (LOADING, BUSY, ...) whenever it may wait at
/// all; both only for k_outage_tolerance and within its own --wait. Sleeps a
/// little before the retry, waking early on `interrupt_fd`. An error means:
/// give up with it.
Result<void> ride_out(const Error& error, bool queued, bool blocking,
                      std::optional<Deadline>& outage_since, Deadline give_up_at,
                      int interrupt_fd) {
  const bool lost_server = queued && error.code == Error::Code::unreachable;
  const bool transient =
      blocking && error.code == Error::Code::server && redis::is_transient(error.server);
  if (!lost_server && !transient) return std::unexpected(error);
  auto now = Clock::now();
  if (!outage_since) outage_since = now;
  if (now - *outage_since >= k_outage_tolerance || now >= give_up_at) return std::unexpected(error);
  // Reconnecting every half second is quick to notice a restarted server
  // and costs nothing while it is down.
  constexpr Millis k_retry_pause{500};
  if (!pause_before_retry(k_retry_pause, give_up_at, interrupt_fd))
    return fail(Error::Code::interrupted, "interrupted while waiting for the server");
  return {};
}

/// Runs a function when the scope ends.
template <class F>
struct OnExit {
  F function;
  ~OnExit() { function(); }
};
// Spelled out: clang 16 (the fuzz and clang-tidy builds) does not deduce
// template arguments of aggregates yet.
template <class F>
OnExit(F) -> OnExit<F>;

}  // namespace

void LockClient::use_interrupt_fd(int fd) {
  m_interrupt_fd = fd;
  if (m_connection) m_connection->set_interrupt_fd(fd);
}

void LockClient::leave_queue(const std::string& name, const std::string& token) {
  // The user asked us to stop: spend at most this long on leaving the queue
  // (or releasing a grant whose reply the signal cut off). If it fails, the
  // waiter lease, or the lock's TTL, removes us anyway. The interrupt fd is
  // still readable, so it must not apply here.
  constexpr Millis k_leave_budget{1000};
  const int saved = m_interrupt_fd;
  use_interrupt_fd(-1);
  (void)release(name, token, Clock::now() + k_leave_budget);
  use_interrupt_fd(saved);
}

Result<Grant> LockClient::acquire(const Request& request, std::optional<Millis> wait,
                                  const Progress& progress, int interrupt_fd) {
  auto token = new_token();
  if (!token) return std::unexpected(token.error());
  // Every step from here on (connecting, EVALSHA, BLPOP, the pauses between
  // retries) can be cut short by `interrupt_fd`: a signal ends the wait at
  // once, not when a read returns.
  const int saved_interrupt_fd = m_interrupt_fd;
  use_interrupt_fd(interrupt_fd);
  const OnExit restore{[this, saved_interrupt_fd] { use_interrupt_fd(saved_interrupt_fd); }};

  const bool blocking = !wait || wait->count() > 0;
  const auto start = Clock::now();
  const Deadline give_up_at = wait ? start + *wait : Deadline::max();
  // A try may take the command timeout, but with --wait never past the end
  // of the wait, retries included: a server that accepts and never answers
  // must not stretch `-w 3s` to two command timeouts. Each try still gets
  // k_min_try, so that a short wait hears a healthy server on a slow
  // network, and a waiter whose time is up can still leave the queue.
  constexpr Millis k_min_try{1000};
  const auto try_deadline = [&] {
    const auto now = Clock::now();
    const Deadline by = now + m_options.command_timeout;
    return blocking && wait ? std::min(by, std::max(give_up_at, now + k_min_try)) : by;
  };
  // Gives up with `error`; an interrupted waiter leaves the queue first.
  const auto give_up = [&](const Error& error) -> Result<Grant> {
    if (error.code == Error::Code::interrupted) leave_queue(request.name, *token);
    return std::unexpected(error);
  };
  bool queued = false;
  std::optional<Deadline> outage_since;
  for (;;) {
    // A lost reply after the server took the lock for us is harmless: run()
    // sends the same token again, and the script answers "held".
    auto tried = attempt(request, *token, blocking, try_deadline());
    if (!tried) {
      auto retry =
          ride_out(tried.error(), queued, blocking, outage_since, give_up_at, interrupt_fd);
      if (!retry) return give_up(retry.error());
      continue;
    }
    if (tried->acquired) return Grant{*token, tried->fence};
    if (!blocking) return fail(Error::Code::busy, fmt::format("lock '{}' is busy", request.name));
    queued = true;
    outage_since.reset();

    auto waited = std::chrono::duration_cast<Millis>(Clock::now() - start);
    if (progress) progress(*tried, waited);
    auto block = k_recheck_interval;
    if (wait) {
      auto left = *wait - waited;
      if (left <= Millis(0)) {
        // Leave the queue (a non-enqueuing try removes us) so that we never
        // stall the waiters behind us; we might even get the lock now.
        auto last = attempt(request, *token, false, try_deadline());
        if (last && last->acquired) return Grant{*token, last->fence};
        if (!last && last.error().code == Error::Code::interrupted) return give_up(last.error());
        return fail(Error::Code::busy, fmt::format("timed out after {} waiting for lock '{}'",
                                                   format_duration(*wait), request.name));
      }
      block = std::min(block, left);
    }
    auto conn = connection();
    if (!conn) {
      auto retry = ride_out(conn.error(), queued, blocking, outage_since, give_up_at, interrupt_fd);
      if (!retry) return give_up(retry.error());
      continue;
    }
    // BLPOP takes fractional seconds (Redis >= 6.0); it returns early when a
    // release pushes to our wake list.
    std::vector<std::string> blpop{
        "BLPOP", wake_key(m_prefix, request.name, *token),
        fmt::format("{:.3f}", static_cast<double>(block.count()) / 1000)};
    auto woke = (*conn)->command(blpop, Clock::now() + block + m_options.command_timeout);
    if (!woke) {
      if (woke.error().code == Error::Code::unreachable ||
          woke.error().code == Error::Code::interrupted)
        m_connection.reset();
      auto retry = ride_out(woke.error(), queued, blocking, outage_since, give_up_at, interrupt_fd);
      if (!retry) return give_up(retry.error());
      continue;
    }
  }
}

Result<Millis> LockClient::renew(const std::string& name, const std::string& token, Millis ttl,
                                 Deadline deadline) {
  auto reply = run(name, {"renew", token, std::to_string(ttl.count())}, deadline);
  if (!reply) return std::unexpected(reply.error());
  auto renewed = integer_of(*reply);
  if (!renewed) return std::unexpected(renewed.error());
  if (*renewed <= 0)
    return fail(
        Error::Code::not_owner,
        fmt::format("lock '{}' is not held by this token (expired, released or taken)", name));
  return Millis(*renewed);
}

Result<void> LockClient::release(const std::string& name, const std::string& token,
                                 std::optional<Deadline> deadline) {
  auto reply = run(name, {"release", token}, deadline);
  if (!reply) return std::unexpected(reply.error());
  auto released = integer_of(*reply);
  if (!released) return std::unexpected(released.error());
  if (*released != 1)
    return fail(Error::Code::not_owner,
                fmt::format("lock '{}' is not held by this token; nothing released", name));
  return {};
}

Result<std::vector<HolderView>> LockClient::force_release(const std::string& name,
                                                          const std::string& holder_id,
                                                          const Identity& by) {
  auto reply = run(name, {"force", holder_id, identity_blob(by), acl_user()});
  if (!reply) return std::unexpected(reply.error());
  if (reply->type != redis::Reply::Type::array)
    return fail(Error::Code::protocol, "unexpected reply from the lock script");
  std::vector<HolderView> evicted;
  const auto& e = reply->elements;
  if (e.empty()) return fail(Error::Code::protocol, "unexpected reply from the lock script");
  auto now = integer_of(e[0]).value_or(0);
  for (size_t k = 1; k + 1 < e.size(); k += 2) {
    auto record = parse_record(e[k + 1].str);
    evicted.push_back(holder_from(e[k].str, record, now, 0, 1));
  }
  return evicted;
}

std::string LockClient::acl_user() const {
  // The audit record names the Redis user besides the OS user. A script may
  // not call ACL WHOAMI (it is flagged noscript), and the client needs no
  // round trip (nor +acl|whoami in the minimum ACL) to learn what it would
  // answer: the connection authenticated as --user (or the URL's user) when
  // it sent a password, and is "default" otherwise.
  const bool authenticated = m_options.password || m_options.url.password;
  if (!authenticated) return "default";
  return m_options.user.value_or(m_options.url.user.value_or("default"));
}

Result<LockView> LockClient::parse_status(const std::string& name,
                                          const redis::Reply& reply) const {
  const auto& e = reply.elements;
  if (reply.type != redis::Reply::Type::array || e.size() < 6 ||
      e[3].type != redis::Reply::Type::array || e[4].type != redis::Reply::Type::array)
    return fail(Error::Code::protocol, "unexpected status reply from the lock script");
  auto now = integer_of(e[0]).value_or(0);
  LockView view;
  view.name = name;
  view.limit = small_int(integer_of(e[1]).value_or(1), 1);
  view.last_fence = std::max<std::int64_t>(0, integer_of(e[2]).value_or(0));
  const auto& h = e[3].elements;
  for (size_t k = 0; k + 2 < h.size(); k += 3) {
    auto record = parse_record(h[k + 2].str);
    view.holders.push_back(
        holder_from(h[k].str, record, now, integer_of(h[k + 1]).value_or(0), view.limit));
  }
  const auto& w = e[4].elements;
  for (size_t k = 0; k + 2 < w.size(); k += 3) {
    auto record = parse_record(w[k + 2].str);
    // A waiter shows the mode it asked for (a semaphore's: exclusive).
    view.waiters.push_back(WaiterView{static_cast<int>(view.waiters.size()) + 1, w[k].str,
                                      record.mode, record.who, elapsed(now, record.since_ms)});
  }
  view.forced = parse_audit(e[5].str, now, view.limit);
  return view;
}

Result<LockView> LockClient::status(const std::string& name) {
  auto reply = run(name, {"status"});
  if (!reply) return std::unexpected(reply.error());
  return parse_status(name, *reply);
}

Result<std::vector<LockView>> LockClient::list() {
  auto conn = connection();
  if (!conn) return std::unexpected(conn.error());
  std::vector<std::string> names;
  std::string cursor = "0";
  const std::string pattern = meta_pattern(m_prefix);
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
                                                     m_options.url.redacted(), k_max_scan_steps));
    // COUNT 1000 keeps each SCAN step short on the server while needing few
    // round trips for large keyspaces.
    std::vector<std::string> scan{"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
    auto reply =
        (*conn)->command(scan, std::min(scan_until, Clock::now() + (*conn)->command_timeout()));
    if (!reply) return std::unexpected(reply.error());
    if (reply->elements.size() != 2 || reply->elements[1].type != redis::Reply::Type::array)
      return fail(Error::Code::protocol, "unexpected SCAN reply");
    cursor = reply->elements[0].str;
    for (const auto& key : reply->elements[1].elements)
      if (auto name = name_of_meta_key(m_prefix, key.str)) names.push_back(*name);
  } while (cursor != "0");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());

  std::vector<LockView> views;
  // Pipelined in batches: one round trip per batch instead of per lock.
  constexpr size_t k_batch = 500;
  const auto& script = lock_script();
  for (size_t first = 0; first < names.size(); first += k_batch) {
    std::vector<std::vector<std::string>> commands;
    size_t last = std::min(names.size(), first + k_batch);
    for (size_t k = first; k < last; ++k) {
      std::vector<std::string> cmd{"EVALSHA", script.sha1, "9"};
      for (auto& key : lock_keys(m_prefix, names[k])) cmd.push_back(std::move(key));
      cmd.push_back("status");
      commands.push_back(std::move(cmd));
    }
    auto replies = (*conn)->pipeline(commands, Clock::now() + (*conn)->command_timeout());
    if (!replies) return std::unexpected(replies.error());
    auto noscript = [](const redis::Reply& r) {
      return r.is_error() && r.str.starts_with("NOSCRIPT");
    };
    if (std::any_of(replies->begin(), replies->end(), noscript)) {
      // The script cache was emptied (restart, failover, SCRIPT FLUSH): one
      // status through the EVAL fallback loads it, then the batch is redone.
      if (auto loaded = status(names[first]); !loaded) return std::unexpected(loaded.error());
      replies = (*conn)->pipeline(commands, Clock::now() + (*conn)->command_timeout());
      if (!replies) return std::unexpected(replies.error());
    }
    for (size_t k = first; k < last; ++k) {
      const auto& reply = (*replies)[k - first];
      // A lock whose keys cannot be read (a foreign key at its name, a
      // malformed record) is listed as broken, and the listing goes on.
      auto view = reply.is_error() ? std::unexpected(redis::classify_server_error(reply.str))
                                   : parse_status(names[k], reply);
      // Only an ACL refusal still stops the listing: it is the caller's
      // configuration at fault, not one lock (exit 77, as the contract says).
      if (!view && view.error().code == Error::Code::auth) return std::unexpected(view.error());
      if (!view) {
        LockView broken;
        broken.name = names[k];
        broken.problem = view.error().message;
        views.push_back(std::move(broken));
        continue;
      }
      // A lock that expired between SCAN and the status read is not listed.
      if (!view->holders.empty() || !view->waiters.empty()) views.push_back(std::move(*view));
    }
  }
  return views;
}

}  // namespace rlock::lock
