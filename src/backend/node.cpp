#include "backend/node.h"

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <optional>
#include <span>

#include "backend/status_reads.h"
#include "lock/keys.h"
#include "lock/protocol.h"

namespace rlock::lock::scripts {
extern const std::string_view k_lock_lua;
extern const std::string_view k_lock_lua_sha1;
}  // namespace rlock::lock::scripts

namespace rlock::backend {

namespace {

/// How many replicas ROLE says are connected to this master.
int connected_replicas(const redis::Reply& role) {
  if (role.type != redis::Reply::Type::array || role.elements.size() < 3 ||
      role.elements[0].str != "master" || role.elements[2].type != redis::Reply::Type::array)
    return 0;
  return static_cast<int>(role.elements[2].elements.size());
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

bool pause_before_retry(Millis pause, Deadline deadline, int interrupt_fd) {
  const auto left = std::chrono::ceil<Millis>(deadline - Clock::now());
  pollfd fd{interrupt_fd, POLLIN, 0};
  const auto wait = std::max(Millis(0), std::min(pause, left));
  return poll(&fd, interrupt_fd >= 0 ? 1 : 0, static_cast<int>(wait.count())) <= 0;
}

Result<void> Backoff::pause(const Error& error, const std::string& where,
                            const std::string& missing) {
  if (Clock::now() + m_pause >= m_deadline) {
    Error last = error;
    const auto spent = format_duration(std::chrono::ceil<Millis>(Clock::now() - m_started));
    last.message = error.code == Error::Code::server
                       ? fmt::format("{} still answers {} after {}: {}", where,
                                     redis::server_error_word(error.server), spent, error.message)
                       : fmt::format("{}: {} after {}: {}", where, missing, spent, error.message);
    return std::unexpected(last);
  }
  if (!pause_before_retry(m_pause, m_deadline, m_interrupt_fd))
    return fail(Error::Code::interrupted, "interrupted while waiting for the server");
  m_pause = std::min(m_pause * 2, Millis(1000));
  return {};
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

Result<Outcome> execute(redis::Connection& conn, const config::ReplicaPolicy& replicas,
                        int& replicas_seen, const std::vector<std::string>& keys,
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
  Result<redis::Reply> reply = std::unexpected(Error{});
  std::optional<redis::Reply> role;
  if (!ask_role && !asking && !first) {
    reply = conn.eval(lock_script(), keys, call.args, deadline);
  } else {
    // After ASKING the node runs only the very next command for the
    // migrating slot, so that command is the script itself, as EVAL: a
    // NOSCRIPT answer could not be followed by EVAL without asking again.
    std::vector<std::string> script{asking ? "EVAL" : "EVALSHA",
                                    asking ? std::string(lock_script().body) : lock_script().sha1,
                                    std::to_string(keys.size())};
    script.insert(script.end(), keys.begin(), keys.end());
    script.insert(script.end(), call.args.begin(), call.args.end());
    std::vector<std::vector<std::string>> commands;
    if (first) commands.push_back(*first);
    if (ask_role) commands.push_back({"ROLE"});
    if (asking) commands.push_back({"ASKING"});
    commands.push_back(std::move(script));
    auto replies = conn.pipeline(commands, deadline);
    if (!replies) return std::unexpected(replies.error());
    if (first && first_reply) *first_reply = std::move(replies->front());
    if (ask_role) role = std::move((*replies)[first ? 1 : 0]);
    auto& last = replies->back();
    if (is_noscript(last)) {
      reply = conn.eval(lock_script(), keys, call.args, deadline);  // loads it again
    } else if (last.is_error()) {
      reply = std::unexpected(redis::server_failure(conn.describe(), last.str));
    } else {
      reply = std::move(last);
    }
  }
  if (!reply) return std::unexpected(reply.error());
  if (role && !role->is_error()) replicas_seen = std::max(replicas_seen, connected_replicas(*role));
  if (!acknowledge || (call.wrote_lease && !call.wrote_lease(*reply)))
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
  ack.wanted = replicas.all() ? replicas_seen : *replicas.count;
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
  return Outcome{std::move(*reply), ack};
}

std::vector<std::vector<std::string>> script_request(const config::ReplicaPolicy& replicas,
                                                     const std::vector<std::string>& keys,
                                                     const lock::Call& call, bool eval) {
  std::vector<std::vector<std::string>> commands;
  // As in execute(): with --replicas all, ROLE travels with the script.
  if (call.replicate_within && replicas.all()) commands.push_back({"ROLE"});
  std::vector<std::string> script{eval ? "EVAL" : "EVALSHA",
                                  eval ? std::string(lock_script().body) : lock_script().sha1,
                                  std::to_string(keys.size())};
  script.insert(script.end(), keys.begin(), keys.end());
  script.insert(script.end(), call.args.begin(), call.args.end());
  commands.push_back(std::move(script));
  return commands;
}

std::optional<Result<Outcome>> script_answer(const std::string& where,
                                             const config::ReplicaPolicy& replicas,
                                             int& replicas_seen, const lock::Call& call,
                                             std::vector<redis::Reply> replies) {
  const bool acknowledge = call.replicate_within && (replicas.all() || *replicas.count > 0);
  redis::Reply& reply = replies.back();
  if (reply.is_error())
    return Result<Outcome>(std::unexpected(redis::server_failure(where, reply.str)));
  const redis::Reply* role = replies.size() > 1 ? &replies.front() : nullptr;
  if (role && !role->is_error()) replicas_seen = std::max(replicas_seen, connected_replicas(*role));
  if (!acknowledge || (call.wrote_lease && !call.wrote_lease(reply)))
    return Result<Outcome>(Outcome{std::move(reply), std::nullopt});
  // A refused ROLE, or replicas to wait for: execute() words and does that.
  if (!role || role->is_error()) return std::nullopt;
  Ack ack;
  ack.wanted = replicas.all() ? replicas_seen : *replicas.count;
  if (ack.wanted > 0) return std::nullopt;
  return Result<Outcome>(Outcome{std::move(reply), ack});
}

Result<std::vector<std::string>> scan_lock_names(redis::Connection& conn, const std::string& prefix,
                                                 Millis command_timeout) {
  std::vector<std::string> names;
  std::string cursor = "0";
  const std::string pattern = lock::meta_pattern(prefix);
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
                                                     conn.describe(), k_max_scan_steps));
    // COUNT 1000 keeps each SCAN step short on the server while needing few
    // round trips for large keyspaces.
    const std::vector<std::string> scan{"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
    auto reply = conn.command(scan, std::min(scan_until, Clock::now() + command_timeout));
    if (!reply) return std::unexpected(reply.error());
    if (reply->elements.size() != 2 || reply->elements[1].type != redis::Reply::Type::array)
      return fail(Error::Code::protocol, "unexpected SCAN reply");
    cursor = reply->elements[0].str;
    for (const auto& key : reply->elements[1].elements)
      if (auto name = lock::name_of_meta_key(prefix, key.str)) names.push_back(*name);
  } while (cursor != "0");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

namespace {

/// run_batched for any operation: the lock script once per name.
Result<std::vector<redis::Reply>> run_scripts(
    const std::function<Result<redis::Connection*>()>& connect,
    const std::function<Result<void>(const std::string& name)>& load, const std::string& prefix,
    const std::vector<std::string>& names, const lock::Call& call, Millis command_timeout) {
  std::vector<redis::Reply> replies;
  replies.reserve(names.size());
  // Pipelined in batches: one round trip per batch instead of per lock.
  constexpr size_t k_batch = 500;
  const auto& script = lock_script();
  for (size_t first = 0; first < names.size(); first += k_batch) {
    std::vector<std::vector<std::string>> commands;
    const size_t last = std::min(names.size(), first + k_batch);
    for (size_t k = first; k < last; ++k) {
      std::vector<std::string> cmd{"EVALSHA", script.sha1, "9"};
      for (auto& key : lock::lock_keys(prefix, names[k])) cmd.push_back(std::move(key));
      cmd.insert(cmd.end(), call.args.begin(), call.args.end());
      commands.push_back(std::move(cmd));
    }
    auto conn = connect();
    if (!conn) return std::unexpected(conn.error());
    auto batch = (*conn)->pipeline(commands, Clock::now() + command_timeout);
    if (!batch) return std::unexpected(batch.error());
    if (std::any_of(batch->begin(), batch->end(), is_noscript)) {
      // The script cache was emptied (restart, failover, SCRIPT FLUSH): one
      // call through the EVAL fallback loads it, then the batch is redone.
      if (auto loaded = load(names[first]); !loaded) return std::unexpected(loaded.error());
      conn = connect();
      if (!conn) return std::unexpected(conn.error());
      batch = (*conn)->pipeline(commands, Clock::now() + command_timeout);
      if (!batch) return std::unexpected(batch.error());
    }
    for (auto& reply : *batch) replies.push_back(std::move(reply));
  }
  return replies;
}

/// Whether a reply says the ACL refuses the command.
bool refused_by_acl(const redis::Reply& reply) {
  return reply.is_error() && reply.str.starts_with("NOPERM");
}

/// run_batched for `status`: plain reads (backend/status_reads.h), two
/// pipelined round trips per batch; the locks they cannot answer for exactly
/// (broken, foreign, redirected, unusual values) go to the script after.
Result<std::vector<redis::Reply>> read_statuses(
    const std::function<Result<redis::Connection*>()>& connect,
    const std::function<Result<void>(const std::string& name)>& load, const std::string& prefix,
    const std::vector<std::string>& names, const lock::Call& call, Millis command_timeout) {
  namespace reads = status_reads;
  std::vector<redis::Reply> replies(names.size());
  std::vector<std::size_t> for_script;
  // A user whose ACL lacks the reads (an older, script-only ACL) is served by
  // the script from the first refusal on, rather than asked twice per lock.
  bool refused = false;
  // 1000 locks: ~7000 small commands a round trip; a batch's replies stay a
  // few hundred kilobytes.
  constexpr std::size_t k_batch = 1000;
  for (std::size_t first = 0; first < names.size(); first += k_batch) {
    const std::size_t count = std::min(names.size() - first, k_batch);
    if (refused) {
      for (std::size_t k = 0; k < count; ++k) for_script.push_back(first + k);
      continue;
    }
    std::vector<std::vector<std::string>> keys;
    keys.reserve(count);
    reads::Commands commands{{"TIME"}};
    commands.reserve(1 + count * reads::k_first_round);
    for (std::size_t k = 0; k < count; ++k) {
      keys.push_back(lock::lock_keys(prefix, names[first + k]));
      reads::first_round(keys.back(), commands);
    }
    auto conn = connect();
    if (!conn) return std::unexpected(conn.error());
    auto got = (*conn)->pipeline(commands, Clock::now() + command_timeout);
    if (!got) return std::unexpected(got.error());
    refused = std::any_of(got->begin(), got->end(), refused_by_acl);
    const auto now = reads::now_of(got->front());
    std::vector<std::optional<reads::Pending>> pending(count);
    std::vector<std::size_t> second_counts(count, 0);
    reads::Commands second;
    for (std::size_t k = 0; k < count; ++k) {
      const auto own = std::span(*got).subspan(1 + k * reads::k_first_round, reads::k_first_round);
      if (now) pending[k] = reads::read_first(own, *now);
      if (pending[k]) {
        second_counts[k] = reads::second_round(*pending[k], keys[k], second);
      } else {
        for_script.push_back(first + k);
      }
    }
    std::vector<redis::Reply> second_replies;
    if (!second.empty()) {
      auto answered = (*conn)->pipeline(second, Clock::now() + command_timeout);
      if (!answered) return std::unexpected(answered.error());
      second_replies = std::move(*answered);
    }
    std::size_t next = 0;
    for (std::size_t k = 0; k < count; ++k) {
      if (!pending[k]) continue;
      const auto own = std::span(second_replies).subspan(next, second_counts[k]);
      next += second_counts[k];
      if (auto reply = reads::finish(*pending[k], own)) {
        replies[first + k] = std::move(*reply);
      } else {
        for_script.push_back(first + k);
      }
    }
  }
  if (for_script.empty()) return replies;
  std::sort(for_script.begin(), for_script.end());
  std::vector<std::string> script_names;
  script_names.reserve(for_script.size());
  for (const std::size_t k : for_script) script_names.push_back(names[k]);
  auto scripted = run_scripts(connect, load, prefix, script_names, call, command_timeout);
  if (!scripted) return std::unexpected(scripted.error());
  for (std::size_t k = 0; k < for_script.size(); ++k)
    replies[for_script[k]] = std::move((*scripted)[k]);
  return replies;
}

}  // namespace

Result<std::vector<redis::Reply>> run_batched(
    const std::function<Result<redis::Connection*>()>& connect,
    const std::function<Result<void>(const std::string& name)>& load, const std::string& prefix,
    const std::vector<std::string>& names, const lock::Call& call, Millis command_timeout) {
  if (lock::operation_of(call) == lock::Operation::status)
    return read_statuses(connect, load, prefix, names, call, command_timeout);
  return run_scripts(connect, load, prefix, names, call, command_timeout);
}

}  // namespace rlock::backend
