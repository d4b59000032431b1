#include "backend/node.h"

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <span>

#include "backend/status_reads.h"
#include "lock/keys.h"
#include "lock/protocol.h"
#include "redis/multiplexer.h"
#include "redis/resp.h"

namespace rlock::lock::scripts {
extern const std::string_view k_lock_lua;
extern const std::string_view k_lock_lua_sha1;
}  // namespace rlock::lock::scripts

namespace rlock::backend {

namespace {

/// What a ROLE reply says the server is ("master", "slave", "sentinel"), or
/// "" for anything else (an error reply, a malformed one).
std::string_view role_name(const redis::Reply& role) {
  if (role.type != redis::Reply::Type::array || role.elements.empty()) return {};
  return role.elements[0].str;
}

/// How many replicas ROLE says are connected to this master.
int connected_replicas(const redis::Reply& role) {
  if (role_name(role) != "master" || role.elements.size() < 3 ||
      role.elements[2].type != redis::Reply::Type::array)
    return 0;
  return static_cast<int>(role.elements[2].elements.size());
}

/// A server that says ROLE "sentinel", named by a redis:// URL.
std::string sentinel_not_server(const std::string& where) {
  return fmt::format(
      "{} is a Sentinel, not a Redis server: a Sentinel URL is "
      "redis-sentinel://HOST:PORT/DB#MASTER",
      where);
}

/// A ROLE reply of a replica, which took the write since the script did
/// not fail with READONLY (replica-read-only no): its writes never reach
/// its master, and the next full resync wipes them. A lock there is no
/// lock (two holders at once, one through the replica's URL and one
/// through the master's): the write does not count, and an acquire gives
/// it back.
std::optional<Ack> writable_replica(const redis::Reply& role, const std::string& where) {
  if (role_name(role) != "slave") return std::nullopt;
  return Ack{0, 1,
             fmt::format("{} is a replica that takes writes (replica-read-only no): a lock "
                         "written there never reaches its master and a resync wipes it; give "
                         "the master's URL, or the Sentinels' (redis-sentinel://)",
                         where),
             true};
}

/// `error` as it is, unless it is an "unknown command" from a server that
/// answers ROLE as a Sentinel: then the URL names the wrong kind of server,
/// which no retry mends (78). An acquire learns it from the ROLE sent with
/// it; this is for the calls that send none (status, a listing).
Error sentinel_or(redis::Connection& conn, Error error) {
  if (error.code != Error::Code::server ||
      error.message.find("unknown command") == std::string::npos)
    return error;
  auto role = conn.command({"ROLE"});
  if (role && role_name(*role) == "sentinel")
    return Error{Error::Code::config, sentinel_not_server(conn.describe())};
  return error;
}

bool is_noscript(const redis::Reply& reply) {
  return reply.is_error() && redis::server_error_kind(reply.str) == redis::ServerError::noscript;
}

}  // namespace

const redis::Script& lock_script() {
  // The SHA-1 comes from the build (cmake/embed_scripts.cmake): hashing the
  // script here was a quarter of a short command's instructions.
  static const redis::Script script(lock::scripts::k_lock_lua, lock::scripts::k_lock_lua_sha1);
  return script;
}

namespace {

/// A ROLE reply of a replica whose link to its master is not up: the
/// warning that what it shows may be out of date, naming the master.
std::optional<std::string> cut_off_replica(const redis::Reply& role, const std::string& where) {
  // A replica: ["slave", master host, master port, link state, offset].
  if (role_name(role) != "slave" || role.elements.size() < 4) return std::nullopt;
  const auto& e = role.elements;
  const std::string& state = e[3].str;
  if (state == "connected") return std::nullopt;
  const std::string port =
      e[2].type == redis::Reply::Type::integer ? std::to_string(e[2].integer) : e[2].str;
  return fmt::format(
      "{} is a replica whose link to its master {}:{} is down ({}): what it shows may be out of "
      "date (a lock held on the master shown as free, or a holder that is gone); ask the master",
      where, e[1].str, port, state.empty() ? "no state" : state);
}

/// An INFO memory reply of a server with a maxmemory and a policy other
/// than noeviction (every key of a lock but its fence counter has an
/// expiry, so volatile-* policies evict held locks too): the warning.
std::optional<std::string> evicting_server(const redis::Reply& info, const std::string& where) {
  if (info.type != redis::Reply::Type::string) return std::nullopt;
  const std::string_view maxmemory = info_field(info.str, "maxmemory");
  const std::string_view policy = info_field(info.str, "maxmemory_policy");
  if (maxmemory.empty() || maxmemory == "0" || policy.empty() || policy == "noeviction")
    return std::nullopt;
  return fmt::format(
      "{} may evict the keys of its locks (maxmemory {} bytes, maxmemory-policy {}): an evicted "
      "lock lets a second holder in while the first still runs; use maxmemory-policy noeviction "
      "(see REDIS REQUIREMENTS in rlock(1))",
      where, maxmemory, policy);
}

}  // namespace

/// The value of `field` in an INFO reply ("field:value" lines), or "".
std::string_view info_field(std::string_view info, std::string_view field) {
  for (std::size_t at = 0; at < info.size();) {
    std::size_t end = info.find('\n', at);
    if (end == std::string_view::npos) end = info.size();
    std::string_view line = info.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > field.size() && line.starts_with(field) && line[field.size()] == ':')
      return line.substr(field.size() + 1);
    at = end + 1;
  }
  return {};
}

std::vector<std::string> server_warnings(redis::Connection& conn, Deadline deadline) {
  std::vector<std::string> warnings;
  // Both questions in one round trip; a refused one (an error reply in its
  // place) or no answer says nothing.
  auto replies = conn.pipeline({{"ROLE"}, {"INFO", "memory"}}, deadline);
  if (!replies || replies->size() != 2) return warnings;
  if (auto stale = cut_off_replica((*replies)[0], conn.describe()))
    warnings.push_back(std::move(*stale));
  if (auto evicting = evicting_server((*replies)[1], conn.describe()))
    warnings.push_back(std::move(*evicting));
  return warnings;
}

bool pause_before_retry(Millis pause, Deadline deadline, int interrupt_fd) {
  const auto left = std::chrono::ceil<Millis>(deadline - Clock::now());
  pollfd fd{interrupt_fd, POLLIN, 0};
  const auto wait = std::max(Millis(0), std::min(pause, left));
  return poll(&fd, interrupt_fd >= 0 ? 1 : 0, static_cast<int>(wait.count())) <= 0;
}

Backoff::~Backoff() {
  if (!m_gave_up_refused) m_refusing.reset();
  if (m_missing_since && !m_gave_up_missing) m_missing_since->reset();
}

Result<void> Backoff::pause(const Error& error, const std::string& where,
                            const std::string& missing) {
  const auto now = Clock::now();
  const bool refused = error.code == Error::Code::server;
  if (!refused) {
    m_refusing.reset();
    if (m_missing_since && !*m_missing_since) *m_missing_since = m_started;
  } else {
    if (!m_refusing || m_refusing->kind != error.server) m_refusing = Refusing{error.server, now};
    m_refusing->message = error.message;
  }
  m_slowest_try = std::max(m_slowest_try, std::chrono::ceil<Millis>(now - m_tried));
  // The last try must be over by the deadline, so it starts a little
  // before: a few of the slowest tries so far (a loaded machine: 50 ms at
  // least), but never earlier than a full pause before (as this gave up
  // before the last pause was clipped).
  const Millis reserve = std::min(m_pause, std::max(Millis(50), 4 * m_slowest_try));
  const auto left = std::chrono::floor<Millis>(m_deadline - now);
  if (left <= reserve) {
    Error last = error;
    const auto since = refused                               ? m_refusing->since
                       : m_missing_since && *m_missing_since ? **m_missing_since
                                                             : m_started;
    const auto spent = format_duration(std::chrono::ceil<Millis>(now - since));
    last.message = refused
                       ? fmt::format("{} still answers {} after {}: {}", where,
                                     redis::server_error_word(error.server), spent, error.message)
                       : fmt::format("{}: {} after {}: {}", where, missing, spent, error.message);
    m_gave_up_refused = refused;
    m_gave_up_missing = !refused;
    return std::unexpected(last);
  }
  if (!pause_before_retry(std::min(m_pause, left - reserve), m_deadline, m_interrupt_fd))
    return fail(Error::Code::interrupted, "interrupted while waiting for the server");
  m_tried = Clock::now();
  m_pause = std::min(m_pause * 2, Millis(1000));
  return {};
}

Deadline failover_try_deadline(Deadline deadline) {
  const auto now = Clock::now();
  if (deadline <= now) return deadline;
  const auto half = std::chrono::ceil<Millis>(deadline - now) / 2;
  return std::min(deadline, now + std::max(half, Millis(1000)));
}

std::vector<std::string> blpop_command(const std::string& key, Millis block) {
  return {"BLPOP", key, fmt::format("{:.3f}", static_cast<double>(block.count()) / 1000)};
}

bool server_kind(const Error& error, std::initializer_list<redis::ServerError> kinds) {
  return error.code == Error::Code::server &&
         std::find(kinds.begin(), kinds.end(), error.server) != kinds.end();
}

std::string acl_user_of(const redis::ConnectOptions& o) {
  // The audit record names the Redis user besides the OS user. A script
  // may not call ACL WHOAMI (it is flagged noscript), and no round trip is
  // needed to learn what it would answer: the connection authenticated as
  // --user (or the URL's user) when it sent a password, else "default".
  const bool authenticated = o.password || o.url.password;
  if (!authenticated) return "default";
  return o.user.value_or(o.url.user.value_or("default"));
}

void ReplicasSeen::observe(int connected, Clock::time_point now) {
  if (connected < count && !fewer_since) fewer_since = now;
  // More, as many, or fewer for long enough: that is the count now.
  if (connected >= count || now - *fewer_since >= k_fewer_replicas_accepted) *this = connected;
}

namespace {

/// The script run of `call` on `keys`: EVALSHA, or EVAL with the body
/// (`eval`), each in the read-only form for a call that writes nothing (a
/// status, the uptime and memory questions), which a server whose writes
/// are paused still runs (EVALSHA waited for the pause to end).
std::vector<std::string> script_command(const std::vector<std::string>& keys,
                                        const lock::Call& call, bool eval) {
  std::vector<std::string> command{std::string(redis::script_verb(lock::is_read_only(call), eval)),
                                   eval ? std::string(lock_script().body) : lock_script().sha1,
                                   std::to_string(keys.size())};
  command.reserve(command.size() + keys.size() + call.args.size());
  command.insert(command.end(), keys.begin(), keys.end());
  command.insert(command.end(), call.args.begin(), call.args.end());
  return command;
}

/// The problem of a server without ROLE or WAIT (rename-command): the
/// replicas cannot be counted or waited for, as when the ACL refuses them,
/// but it is the server's configuration (76), and only --replicas can help.
Ack unavailable_for_replicas(std::string_view command) {
  const bool role = command == "role";
  Ack problem{0, 1,
              fmt::format("this server has no '{}' command (renamed or disabled), so the "
                          "replicas could not be {}: use --replicas {}",
                          command, role ? "counted" : "waited for",
                          role ? "N (which needs WAIT only) or 0" : "0")};
  problem.problem_is_server = true;
  return problem;
}

}  // namespace

Result<Outcome> execute(redis::Connection& conn, const config::ReplicaPolicy& replicas,
                        ReplicasSeen& replicas_seen, const std::vector<std::string>& keys,
                        const lock::Call& call, Deadline deadline, bool asking,
                        const std::vector<std::string>* first, redis::Reply* first_reply) {
  const bool acknowledge = call.replicate_within && (replicas.all() || *replicas.count > 0);
  // With --replicas all, ROLE travels with the script (one round trip) and
  // says how many replicas are connected at this moment (never fewer than
  // this master was seen with: see replicas_seen). ROLE goes first:
  // a server that wants a password answers a short command with NOAUTH but
  // closes the connection after refusing a long one, and both answers are
  // needed to report the refusal as what it is.
  const bool ask_role = acknowledge && replicas.all();
  const bool whole = asking || sent_whole(call);
  // In the read-only form where it writes nothing (see script_command).
  const bool read_only = lock::is_read_only(call);
  Result<redis::Reply> reply = std::unexpected(Error{});
  std::optional<redis::Reply> role;
  if (!ask_role && !whole && !first) {
    reply = conn.eval(lock_script(), keys, call.args, deadline, read_only);
  } else {
    // After ASKING the node runs only the very next command for the
    // migrating slot, so that command is the script itself, as EVAL: a
    // NOSCRIPT answer could not be followed by EVAL without asking again.
    std::vector<std::vector<std::string>> commands;
    if (first) commands.push_back(*first);
    if (ask_role) commands.push_back({"ROLE"});
    if (asking) commands.push_back({"ASKING"});
    commands.push_back(script_command(keys, call, whole));
    auto replies = conn.pipeline(commands, deadline);
    if (!replies) return std::unexpected(replies.error());
    if (first && first_reply) *first_reply = std::move(replies->front());
    if (ask_role) role = std::move((*replies)[first ? 1 : 0]);
    // A Sentinel answers ROLE but runs no script: the URL names the wrong
    // kind of server, which no retry will change.
    if (role && role_name(*role) == "sentinel")
      return fail(Error::Code::config, sentinel_not_server(conn.describe()));
    auto& last = replies->back();
    if (is_noscript(last) || redis::refuses_read_only(last)) {
      // Loads it again; or runs it in the plain form (without ASKING: a
      // redirection that comes back is the caller's to follow again).
      reply = conn.eval(lock_script(), keys, call.args, deadline, read_only);
    } else if (last.is_error()) {
      reply = std::unexpected(redis::server_failure(conn.describe(), last.str));
    } else {
      reply = std::move(last);
    }
  }
  if (!reply)
    return std::unexpected(
        with_keys_named(sentinel_or(conn, reply.error()), keys.empty() ? "" : keys.front()));
  if (role && !role->is_error()) replicas_seen.observe(connected_replicas(*role), Clock::now());
  if (!acknowledge) return Outcome{std::move(*reply), std::nullopt};
  if (auto replica = role ? writable_replica(*role, conn.describe()) : std::nullopt)
    return Outcome{std::move(*reply), std::move(*replica)};
  if (role && role->is_error()) {
    // The replicas cannot be counted (an ACL without +role): a lease
    // written must not count, and the caller gives it back. So, when no
    // lease was written, does a waiter just queued: it could never hold,
    // and learns it now rather than when its turn comes.
    // A server without ROLE (rename-command) is no ACL's doing.
    if (role->str.find("unknown command") != std::string::npos)
      return Outcome{std::move(*reply), unavailable_for_replicas("role")};
    Ack refused{0, 1,
                fmt::format("ROLE was refused, so the replicas could not be counted: {} "
                            "(allow +role and +wait, or use --replicas N or 0)",
                            role->str)};
    return Outcome{std::move(*reply), std::move(refused)};
  }
  if (call.wrote_lease && !call.wrote_lease(*reply))
    return Outcome{std::move(*reply), std::nullopt};
  Ack ack;
  ack.wanted = replicas.all() ? replicas_seen : *replicas.count;
  if (ack.wanted == 0) return Outcome{std::move(*reply), ack};
  // WAIT's own timeout ends it; the deadline only guards against a server
  // that does not answer at all.
  const auto timeout = *call.replicate_within;
  const std::vector<std::string> wait{"WAIT", std::to_string(ack.wanted),
                                      std::to_string(timeout.count())};
  auto waited = conn.command(wait, std::max(deadline, Clock::now() + timeout + Millis(1000)));
  if (!waited && waited.error().code == Error::Code::server &&
      waited.error().message.find("unknown command") != std::string::npos)
    return Outcome{std::move(*reply), unavailable_for_replicas("wait")};
  if (!waited &&
      (waited.error().code == Error::Code::auth || waited.error().code == Error::Code::server) &&
      waited.error().server == redis::ServerError::other) {
    // WAIT refused (an ACL without +wait, a renamed command): as for a
    // refused ROLE, the write was done but cannot be confirmed, now or
    // later: an acquire gives its lease back, a release stands. (As an
    // error it left an acquire's grant in place for the whole TTL, with no
    // token printed to release it, and a release that was done said 77.)
    ack.problem = fmt::format(
        "WAIT was refused, so the replicas could not acknowledge: {} (allow +wait, or "
        "use --replicas 0)",
        waited.error().message);
    return Outcome{std::move(*reply), std::move(ack)};
  }
  if (!waited) return std::unexpected(waited.error());
  if (waited->type != redis::Reply::Type::integer)
    return fail(Error::Code::protocol,
                fmt::format("{}: unexpected reply to WAIT", conn.describe()));
  ack.acknowledged = static_cast<int>(std::clamp<std::int64_t>(waited->integer, 0, 1'000'000));
  return Outcome{std::move(*reply), ack};
}

bool sent_whole(const lock::Call& call) {
  return lock::operation_of(call) == lock::Operation::force;
}

std::vector<std::vector<std::string>> script_request(const config::ReplicaPolicy& replicas,
                                                     const std::vector<std::string>& keys,
                                                     const lock::Call& call, bool eval) {
  eval = eval || sent_whole(call);
  std::vector<std::vector<std::string>> commands;
  // As in execute(): with --replicas all, ROLE travels with the script.
  if (call.replicate_within && replicas.all()) commands.push_back({"ROLE"});
  commands.push_back(script_command(keys, call, eval));
  return commands;
}

Error with_keys_named(Error error, const std::string& first_key) {
  if (error.code != Error::Code::auth || first_key.empty() ||
      error.message.find("NOPERM") == std::string::npos ||
      // Redis 7 says "... access one of the keys used as arguments",
      // Valkey 8 "No permissions to access a key".
      (error.message.find("one of the keys") == std::string::npos &&
       error.message.find("access a key") == std::string::npos))
    return error;
  // A lock's keys are its base and one letter (lock::lock_keys).
  error.message += fmt::format(
      " (this lock's keys are {}*: the user's ACL must allow them, for writing too "
      "(~PATTERN), and --prefix names them)",
      std::string_view(first_key).substr(0, first_key.size() - 1));
  return error;
}

std::optional<Result<Outcome>> script_answer(const std::string& where,
                                             const config::ReplicaPolicy& replicas,
                                             ReplicasSeen& replicas_seen, const lock::Call& call,
                                             std::vector<redis::Reply> replies,
                                             const std::string& first_key) {
  const bool acknowledge = call.replicate_within && (replicas.all() || *replicas.count > 0);
  redis::Reply& reply = replies.back();
  if (reply.is_error())
    return Result<Outcome>(
        std::unexpected(with_keys_named(redis::server_failure(where, reply.str), first_key)));
  const redis::Reply* role = replies.size() > 1 ? &replies.front() : nullptr;
  if (role && !role->is_error()) replicas_seen.observe(connected_replicas(*role), Clock::now());
  if (!acknowledge) return Result<Outcome>(Outcome{std::move(reply), std::nullopt});
  if (auto replica = role ? writable_replica(*role, where) : std::nullopt)
    return Result<Outcome>(Outcome{std::move(reply), std::move(*replica)});
  // A refused ROLE, or replicas to wait for: execute() words and does that.
  if (!role || role->is_error()) return std::nullopt;
  if (call.wrote_lease && !call.wrote_lease(reply))
    return Result<Outcome>(Outcome{std::move(reply), std::nullopt});
  Ack ack;
  ack.wanted = replicas.all() ? replicas_seen : *replicas.count;
  if (ack.wanted > 0) return std::nullopt;
  return Result<Outcome>(Outcome{std::move(reply), ack});
}

namespace {

// A real SCAN ends; a broken or hostile server's cursor may never return to
// 0. Bounded twice: by steps (with COUNT 1000, 100000 steps walk a hash
// table of 100 million slots, more than any one server holds) and by time (a
// minute: a healthy server scans millions of keys a second).
constexpr int k_max_scan_steps = 100'000;
constexpr Millis k_scan_budget{60'000};

/// One step of the walk for meta keys: COUNT 1000 keeps each step short on
/// the server while needing few round trips for large keyspaces.
std::vector<std::string> scan_command(const std::string& cursor, const std::string& pattern) {
  return {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
}

/// Reads a SCAN reply: appends the names of the meta keys found to `names`
/// (a vector or a deque) and returns the next cursor.
template <typename Names>
Result<std::string> scan_step(const redis::Reply& reply, const std::string& prefix, Names& names) {
  if (reply.elements.size() != 2 || reply.elements[1].type != redis::Reply::Type::array)
    return fail(Error::Code::protocol, "unexpected SCAN reply");
  for (const auto& key : reply.elements[1].elements)
    if (auto name = lock::name_of_meta_key(prefix, key.str)) names.push_back(std::move(*name));
  return reply.elements[0].str;
}

Result<void> too_many_steps(const redis::Connection& conn) {
  return fail(Error::Code::protocol, fmt::format("{}: SCAN did not finish after {} steps",
                                                 conn.describe(), k_max_scan_steps));
}

}  // namespace

Result<std::vector<std::string>> scan_lock_names(redis::Connection& conn, const std::string& prefix,
                                                 Millis command_timeout) {
  std::vector<std::string> names;
  std::string cursor = "0";
  const std::string pattern = lock::meta_pattern(prefix);
  const Deadline scan_until = Clock::now() + k_scan_budget;
  int steps = 0;
  do {
    if (++steps > k_max_scan_steps) return std::unexpected(too_many_steps(conn).error());
    auto reply = conn.command(scan_command(cursor, pattern),
                              std::min(scan_until, Clock::now() + command_timeout));
    if (!reply) return std::unexpected(sentinel_or(conn, reply.error()));
    auto next = scan_step(*reply, prefix, names);
    if (!next) return std::unexpected(next.error());
    cursor = std::move(*next);
  } while (cursor != "0");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

namespace {

/// Runs `call` on each of `names` (all on one node), pipelined in batches;
/// the replies (error replies in place) in the order of `names`. `connect`
/// gives the node's connection. When the script cache was emptied, `load`
/// runs the call for one name with every retry (the EVAL fallback loads the
/// script again) and the batch is sent once more.
Result<std::vector<redis::Reply>> run_scripts(
    const std::function<Result<redis::Connection*>()>& connect,
    const std::function<Result<void>(const std::string& name)>& load, const std::string& prefix,
    const std::vector<std::string>& names, const lock::Call& call, Millis command_timeout) {
  std::vector<redis::Reply> replies;
  replies.reserve(names.size());
  // Pipelined in batches: one round trip per batch instead of per lock.
  constexpr size_t k_batch = 500;
  for (size_t first = 0; first < names.size(); first += k_batch) {
    std::vector<std::vector<std::string>> commands;
    const size_t last = std::min(names.size(), first + k_batch);
    for (size_t k = first; k < last; ++k)
      commands.push_back(script_command(lock::lock_keys(prefix, names[k]), call, false));
    auto conn = connect();
    if (!conn) return std::unexpected(conn.error());
    auto batch = (*conn)->pipeline(commands, Clock::now() + command_timeout);
    if (!batch) return std::unexpected(batch.error());
    if (std::any_of(batch->begin(), batch->end(),
                    [](const redis::Reply& reply) { return redis::refuses_read_only(reply); })) {
      // The read-only form refused: the batch again in the plain one.
      for (auto& cmd : commands) cmd[0] = redis::script_verb(false);
      batch = (*conn)->pipeline(commands, Clock::now() + command_timeout);
      if (!batch) return std::unexpected(batch.error());
    }
    if (std::any_of(batch->begin(), batch->end(), is_noscript)) {
      // The script cache was emptied (restart, failover, SCRIPT FLUSH): one
      // call through the EVAL fallback loads it, then the batch is redone.
      // The script ran, and so is cached, even where that lock's answer is
      // an error (a broken lock, code server): only an error that kept it
      // from running ends the listing (before, one broken lock first in a
      // batch failed the whole listing after every flush).
      auto loaded = load(names[first]);
      if (!loaded && loaded.error().code != Error::Code::server)
        return std::unexpected(loaded.error());
      conn = connect();
      if (!conn) return std::unexpected(conn.error());
      batch = (*conn)->pipeline(commands, Clock::now() + command_timeout);
      if (!batch) return std::unexpected(batch.error());
      // Still not cached (an EVAL the server refuses): that refusal.
      if (!loaded && std::any_of(batch->begin(), batch->end(), is_noscript))
        return std::unexpected(loaded.error());
    }
    for (auto& reply : *batch) replies.push_back(std::move(reply));
  }
  return replies;
}

/// Whether a reply says the ACL refuses the command.
bool refused_by_acl(const redis::Reply& reply) {
  return reply.is_error() && reply.str.starts_with("NOPERM");
}

/// The replies of the oldest request queued on `conn` (Connection::begin),
/// waiting `timeout` at most. (No interrupt fd: only `status` waits here,
/// which nothing interrupts but its deadlines, as before.)
Result<std::vector<redis::Reply>> next_answer(redis::Connection& conn, Millis timeout) {
  std::optional<Result<std::vector<redis::Reply>>> answer;
  redis::Connection* connections[] = {&conn};
  auto waited = redis::wait_for_answers(connections, Clock::now() + timeout, -1,
                                        [&](std::size_t, Result<std::vector<redis::Reply>> got) {
                                          answer = std::move(got);
                                          return redis::Then::stop;
                                        });
  if (!waited) return std::unexpected(waited.error());
  if (answer) return std::move(*answer);
  conn.abandon();  // a reply may still be in flight
  return fail(Error::Code::unreachable,
              fmt::format("{}: timed out after {}", conn.describe(), format_duration(timeout)));
}

/// `status` of many locks on one node: plain reads (backend/status_reads.h)
/// in pipelined batches, the next batch in flight while one is decoded (the
/// server reads while the client works), and each batch's second round
/// queued behind what is in flight, never waited for on its own. The names
/// are given, or found by SCAN on the same connection, whose steps go out
/// between the batches: the walk and the reads overlap instead of taking
/// turns. The locks the reads cannot answer for exactly (broken, foreign,
/// redirected, unusual values) go to the script after.
class StatusListing {
 public:
  /// Takes the reply for m_names[index] as soon as it is read; an error
  /// stops the listing.
  using Deliver = std::function<Result<void>(std::size_t index, redis::Reply reply)>;

  StatusListing(const std::function<Result<redis::Connection*>()>& connect,
                const std::function<Result<void>(const std::string& name)>& load,
                const std::string& prefix, const lock::Call& call, Millis command_timeout,
                Deliver deliver)
      : m_connect(connect),
        m_load(load),
        m_prefix(prefix),
        m_call(call),
        m_timeout(command_timeout),
        m_deliver(std::move(deliver)) {}

  /// Walks the keyspace (SCAN, the names into m_names) and reads every
  /// lock it finds, each reply delivered as soon as it is read: a batch's replies are
  /// gone before the next batch is decoded, so a listing never holds more
  /// than a few batches of replies.
  Result<void> run();

  /// A deque: a walk of 100000 locks grows it without copying it.
  std::deque<std::string> m_names;

 private:
  // 1000 locks: ~7000 small commands a round trip; a batch's replies stay a
  // few hundred kilobytes. Two batches in flight keep the server busy while
  // the client decodes, and bound what waits in the socket.
  static constexpr std::size_t k_batch = 1000;
  static constexpr std::size_t k_in_flight = 2;

  /// A request in flight, answered in the order sent.
  struct Sent {
    enum class Kind { scan, first, second } kind = Kind::scan;
    /// first: the reads of `count` names from `first` on.
    std::size_t first = 0;
    std::size_t count = 0;
    /// second: the locks it reads for, and how many replies each.
    std::vector<std::pair<std::size_t, status_reads::Pending>> locks;
    std::vector<std::size_t> replies;
  };

  Result<void> send_first(std::size_t count);
  Result<void> read_first(const Sent& batch, std::vector<redis::Reply>& got);
  Result<void> read_second(Sent& batch, std::vector<redis::Reply>& got);
  Result<void> run_scripts_for_the_rest();

  const std::function<Result<redis::Connection*>()>& m_connect;
  const std::function<Result<void>(const std::string& name)>& m_load;
  const std::string& m_prefix;
  const lock::Call& m_call;
  Millis m_timeout;
  Deliver m_deliver;
  redis::Connection* m_conn = nullptr;
  std::deque<Sent> m_sent;
  std::size_t m_firsts = 0;  // first rounds in flight
  std::size_t m_next = 0;    // the first name not sent yet
  std::vector<std::size_t> m_for_script;
  // A user whose ACL lacks the reads (an older, script-only ACL) is served by
  // the script from the first refusal on, rather than asked twice per lock.
  bool m_refused = false;
};

Result<void> StatusListing::send_first(std::size_t count) {
  namespace reads = status_reads;
  // ~60 bytes a command: one buffer, grown a few times at most.
  std::string request;
  request.reserve(count * reads::k_first_round * 64);
  redis::append_command(request, {"TIME"});
  for (std::size_t k = m_next; k < m_next + count; ++k)
    reads::first_round(lock::base_key(m_prefix, m_names[k]), request);
  if (auto begun = m_conn->begin(request, 1 + count * reads::k_first_round); !begun)
    return std::unexpected(begun.error());
  Sent sent;
  sent.kind = Sent::Kind::first;
  sent.first = m_next;
  sent.count = count;
  m_sent.push_back(std::move(sent));
  ++m_firsts;
  m_next += count;
  return {};
}

Result<void> StatusListing::read_first(const Sent& batch, std::vector<redis::Reply>& got) {
  namespace reads = status_reads;
  m_refused = m_refused || std::any_of(got.begin(), got.end(), refused_by_acl);
  const auto now = reads::now_of(got.front());
  Sent second;
  second.kind = Sent::Kind::second;
  second.locks.reserve(batch.count);
  second.replies.reserve(batch.count);
  // An HGET of a record takes ~90 bytes: a held lock's second round, grown
  // a few times at most (grown from nothing, it was copied at every
  // doubling: ~6% of a listing's CPU samples, mostly in page faults).
  std::string request;
  request.reserve(batch.count * 128);
  for (std::size_t k = 0; k < batch.count; ++k) {
    const std::size_t index = batch.first + k;
    const auto own = std::span(got).subspan(1 + k * reads::k_first_round, reads::k_first_round);
    auto pending = now ? reads::read_first(own, *now) : std::nullopt;
    if (!pending) {
      m_for_script.push_back(index);
      continue;
    }
    const std::size_t count =
        reads::second_round(*pending, lock::base_key(m_prefix, m_names[index]), request);
    if (count > 0) {
      second.locks.emplace_back(index, std::move(*pending));
      second.replies.push_back(count);
    } else if (auto reply = reads::finish(std::move(*pending), {})) {
      if (auto taken = m_deliver(index, std::move(*reply)); !taken) return taken;
    } else {
      m_for_script.push_back(index);
    }
  }
  if (second.locks.empty()) return {};
  std::size_t commands = 0;
  for (const std::size_t count : second.replies) commands += count;
  if (auto begun = m_conn->begin(request, commands); !begun) return std::unexpected(begun.error());
  m_sent.push_back(std::move(second));
  return {};
}

Result<void> StatusListing::read_second(Sent& batch, std::vector<redis::Reply>& got) {
  std::size_t next = 0;
  for (std::size_t k = 0; k < batch.locks.size(); ++k) {
    auto& [index, pending] = batch.locks[k];
    const auto own = std::span(got).subspan(next, batch.replies[k]);
    next += batch.replies[k];
    if (auto reply = status_reads::finish(std::move(pending), own)) {
      if (auto taken = m_deliver(index, std::move(*reply)); !taken) return taken;
    } else {
      m_for_script.push_back(index);
    }
  }
  return {};
}

Result<void> StatusListing::run() {
  auto conn = m_connect();
  if (!conn) return std::unexpected(conn.error());
  m_conn = *conn;
  const std::string pattern = lock::meta_pattern(m_prefix);
  const Deadline scan_until = Clock::now() + k_scan_budget;
  std::string cursor = "0";
  int steps = 0;
  // Whether the walk goes on (until SCAN's cursor is back at 0), and
  // whether its next step is out.
  bool scan = true, scan_sent = false;
  for (;;) {
    if (scan && !scan_sent) {
      if (++steps > k_max_scan_steps) return too_many_steps(*m_conn);
      // The reads travel with the walk, so its budget grows with the locks
      // found: a millisecond each (they take microseconds), on top of the
      // walk's own minute.
      if (Clock::now() >= scan_until + Millis(static_cast<Millis::rep>(m_names.size())))
        return fail(Error::Code::unreachable,
                    fmt::format("{}: SCAN did not finish within {}", m_conn->describe(),
                                format_duration(k_scan_budget)));
      if (auto begun = m_conn->begin({scan_command(cursor, pattern)}); !begun)
        return std::unexpected(begun.error());
      m_sent.push_back(Sent{});
      scan_sent = true;
    }
    // A full batch, or what is left once the walk is over.
    while (!m_refused && m_firsts < k_in_flight &&
           (m_names.size() - m_next >= k_batch || (!scan && m_next < m_names.size())))
      if (auto sent = send_first(std::min(m_names.size() - m_next, k_batch)); !sent)
        return std::unexpected(sent.error());
    if (m_sent.empty()) break;
    auto got = next_answer(*m_conn, m_timeout);
    if (!got) return std::unexpected(got.error());
    Sent answered = std::move(m_sent.front());
    m_sent.pop_front();
    if (answered.kind == Sent::Kind::first) {
      --m_firsts;
      if (auto read = read_first(answered, *got); !read) return read;
      continue;
    }
    if (answered.kind == Sent::Kind::second) {
      if (auto read = read_second(answered, *got); !read) return read;
      continue;
    }
    // As Connection::command would: the server's refusal is an error.
    if (got->front().is_error()) {
      Error refused = redis::server_failure(m_conn->describe(), got->front().str);
      // Nothing else in flight (the first step): ROLE may say what it is.
      if (m_sent.empty()) refused = sentinel_or(*m_conn, std::move(refused));
      return std::unexpected(std::move(refused));
    }
    auto next = scan_step(got->front(), m_prefix, m_names);
    if (!next) return std::unexpected(next.error());
    cursor = std::move(*next);
    scan_sent = false;
    scan = cursor != "0";
  }
  // Refused: the rest is the script's.
  for (; m_next < m_names.size(); ++m_next) m_for_script.push_back(m_next);
  return run_scripts_for_the_rest();
}

Result<void> StatusListing::run_scripts_for_the_rest() {
  if (m_for_script.empty()) return {};
  std::sort(m_for_script.begin(), m_for_script.end());
  std::vector<std::string> names;
  names.reserve(m_for_script.size());
  for (const std::size_t k : m_for_script) names.push_back(m_names[k]);
  auto scripted = run_scripts(m_connect, m_load, m_prefix, names, m_call, m_timeout);
  if (!scripted) return std::unexpected(scripted.error());
  for (std::size_t k = 0; k < m_for_script.size(); ++k)
    if (auto taken = m_deliver(m_for_script[k], std::move((*scripted)[k])); !taken) return taken;
  return {};
}

}  // namespace

Result<void> scan_and_run(const std::function<Result<redis::Connection*>()>& connect,
                          const std::function<Result<void>(const std::string& name)>& load,
                          const std::string& prefix, const lock::Call& call, Millis command_timeout,
                          const LockSink& sink) {
  if (lock::operation_of(call) != lock::Operation::status) {
    auto conn = connect();
    if (!conn) return std::unexpected(conn.error());
    auto names = scan_lock_names(**conn, prefix, command_timeout);
    if (!names) return std::unexpected(names.error());
    auto batch = run_scripts(connect, load, prefix, *names, call, command_timeout);
    if (!batch) return std::unexpected(batch.error());
    for (std::size_t k = 0; k < names->size(); ++k)
      if (auto taken = sink(std::move((*names)[k]), std::move((*batch)[k])); !taken) return taken;
    return {};
  }
  std::deque<std::string>* names = nullptr;
  // A name is delivered once (a name SCAN returned twice is read twice and
  // delivered twice, under each of its indices), so it is moved out.
  StatusListing listing(connect, load, prefix, call, command_timeout,
                        [&names, &sink](std::size_t index, redis::Reply reply) {
                          return sink(std::move((*names)[index]), std::move(reply));
                        });
  names = &listing.m_names;
  return listing.run();
}

Result<std::vector<NamedReply>> Backend::run_on_every_lock(const lock::Call& call) {
  std::vector<NamedReply> replies;
  auto listed = for_every_lock(call, [&replies](std::string name, redis::Reply reply) {
    replies.emplace_back(std::move(name), std::move(reply));
    return Result<void>{};
  });
  if (!listed) return std::unexpected(listed.error());
  // Sorted, each name once: the first reply read for it.
  std::stable_sort(replies.begin(), replies.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  replies.erase(std::unique(replies.begin(), replies.end(),
                            [](const auto& a, const auto& b) { return a.first == b.first; }),
                replies.end());
  return replies;
}

}  // namespace rlock::backend
