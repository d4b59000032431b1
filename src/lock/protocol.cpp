#include "lock/protocol.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "lock/record.h"
#include "redis/server_error.h"

namespace rlock::lock {

namespace {

Error unexpected_reply(std::string_view what = "") {
  return Error{Error::Code::protocol, fmt::format("unexpected {}reply from the lock script", what),
               redis::ServerError::none};
}

bool granted(const redis::Reply& reply) {
  return reply.type == redis::Reply::Type::array && !reply.elements.empty() &&
         integer_of(reply.elements[0]).value_or(0) == 1;
}

bool extended(const redis::Reply& reply) {
  return integer_of(reply).value_or(0) > 0;
}

/// A release that released (1), or a force that evicted someone (an array
/// longer than its `now`).
bool changed(const redis::Reply& reply) {
  if (reply.type == redis::Reply::Type::array) return reply.elements.size() > 1;
  return integer_of(reply).value_or(0) == 1;
}

}  // namespace

Millis replication_timeout(Millis ttl) {
  return std::clamp(ttl / 10, Millis(1), Millis(1000));
}

Call acquire_call(const Request& request, const std::string& token, bool enqueue,
                  Millis min_uptime) {
  Call call{
      {"acquire", token, request.shared ? "shared" : "exclusive", std::to_string(request.limit),
       std::to_string(request.ttl.count()), identity_blob(request.who), enqueue ? "1" : "0",
       std::to_string(k_waiter_lease.count())},
      replication_timeout(request.ttl),
      granted};
  return min_uptime.count() > 0 ? with_min_uptime(std::move(call), min_uptime) : call;
}

Result<void> nested_request_fits(const Request& request, const HolderView& held, int lock_limit) {
  const auto how_held = [&]() -> std::string {
    if (lock_limit > 1) return fmt::format("as a semaphore (--limit {})", lock_limit);
    if (held.mode == "shared" || held.mode == "exclusive") return held.mode;
    return "in a way status cannot tell (its record is gone)";
  };
  // An exclusive hold covers an exclusive or a shared request.
  const bool fits =
      held.recorded && (lock_limit > 1             ? !request.shared && request.limit == lock_limit
                        : held.mode == "exclusive" ? request.limit == 1
                                                   : held.mode == "shared" && request.shared);
  if (fits) return {};
  const std::string wanted = request.shared      ? "--shared"
                             : request.limit > 1 ? fmt::format("with --limit {}", request.limit)
                                                 : std::string("exclusively");
  return fail(Error::Code::usage,
              fmt::format("lock '{}' is held {} by an enclosing rlock run, which does not "
                          "cover taking it {}: a nested run would wait for its own ancestor, "
                          "or run beside the other holders",
                          request.name, how_held(), wanted));
}

Result<Attempt> decode_attempt(const Request& request, const redis::Reply& reply) {
  const auto& e = reply.elements;
  if (reply.type != redis::Reply::Type::array || e.size() < 2)
    return std::unexpected(unexpected_reply());
  auto state = integer_of(e[0]);
  auto second = integer_of(e[1]);
  if (!state || !second) return std::unexpected(unexpected_reply());
  if (*state == -1) {
    // 1 is what a lock gets without --limit (a shared one too).
    const auto limit = [](long long n) {
      return fmt::format("--limit {}{}", n, n == 1 ? " (the default)" : "");
    };
    // A shared lock has no limit of its own: the conflict is its mode.
    if (request.shared)
      return fail(Error::Code::usage,
                  fmt::format("lock '{}' is a semaphore (--limit {}), which cannot be taken "
                              "--shared; every user of a lock must take it the same way",
                              request.name, *second));
    return fail(Error::Code::usage,
                fmt::format("lock '{}' is used with {}, not {}; every user of a lock must give "
                            "the same limit",
                            request.name, limit(*second), limit(request.limit)));
  }
  Attempt attempt;
  if (*state == 1) {
    // A fence is an integer from 1 to 2^53 - 1 (see the man page); anything
    // else is not the script's answer, and never reaches RLOCK_FENCE.
    constexpr std::int64_t k_fence_limit = std::int64_t{1} << 53;
    if (*second < 1 || *second >= k_fence_limit) return std::unexpected(unexpected_reply());
    attempt.acquired = true;
    attempt.fence = *second;
    return attempt;
  }
  // 0: busy or queued. Any other state is no answer of the script's, which
  // must not read as "busy" (75, or a wait on it until -w ends).
  if (*state != 0) return std::unexpected(unexpected_reply());
  attempt.position = small_int(*second, 0);
  if (e.size() >= 4 && !e[2].str.empty()) {
    auto record = parse_record(e[2].str);
    // The holder's age is measured against the server's clock of this reply.
    auto now = e.size() >= 5 ? integer_of(e[4]).value_or(record.since_ms) : record.since_ms;
    attempt.holder = holder_from("", record, now, integer_of(e[3]).value_or(0), request.limit);
  }
  return attempt;
}

Call renew_call(const std::string& token, Millis ttl, bool may_shorten) {
  // A renewal with ttl 0 keeps the lease it was acquired with; WAIT's
  // timeout then follows the default TTL's tenth, capped the same way.
  std::vector<std::string> args{"renew", token, std::to_string(ttl.count())};
  if (may_shorten) args.emplace_back("exact");
  return Call{std::move(args), replication_timeout(ttl.count() > 0 ? ttl : Millis(10'000)),
              extended};
}

Result<Millis> decode_renew(const std::string& name, const redis::Reply& reply) {
  auto renewed = integer_of(reply);
  if (!renewed) return std::unexpected(renewed.error());
  if (*renewed <= 0)
    return fail(
        Error::Code::not_owner,
        fmt::format("lock '{}' is not held by this token (expired, released or taken)", name));
  return Millis(*renewed);
}

Call release_call(const std::string& token, KeepPlace keep) {
  switch (keep) {
    case KeepPlace::queued:
      return Call{{"release", token, "1"}, std::nullopt};
    case KeepPlace::granted:
      return Call{{"release", token, "2"}, std::nullopt};
    case KeepPlace::no:
      break;
  }
  return Call{{"release", token}, std::nullopt};
}

Call confirmed(Call call, bool first) {
  call.replicate_within = replication_timeout(Millis(10'000));
  call.wrote_lease = first ? changed : nullptr;
  call.known_replicas = true;
  return call;
}

Result<void> decode_release(const std::string& name, const redis::Reply& reply) {
  auto released = integer_of(reply);
  if (!released) return std::unexpected(released.error());
  if (*released != 1)
    return fail(Error::Code::not_owner,
                fmt::format("lock '{}' is not held by this token; nothing released", name));
  return {};
}

Call force_call(const std::string& holder_id, const Identity& by, const std::string& acl_user) {
  return Call{{"force", holder_id, identity_blob(by), acl_user}, std::nullopt};
}

Result<std::vector<HolderView>> decode_force(const redis::Reply& reply) {
  const auto& e = reply.elements;
  if (reply.type != redis::Reply::Type::array || e.empty())
    return std::unexpected(unexpected_reply());
  std::vector<HolderView> evicted;
  auto now = integer_of(e[0]).value_or(0);
  for (size_t k = 1; k + 1 < e.size(); k += 2) {
    auto record = parse_record(e[k + 1].str);
    evicted.push_back(holder_from(e[k].str, record, now, 0, 1));
  }
  return evicted;
}

Call status_call(std::optional<Millis> ttl, bool with_uptime) {
  // ARGV: op [uptime ('1' or '0') [ttl_ms]]
  if (!ttl && !with_uptime) return Call{{"status"}, std::nullopt};
  return Call{
      {"status", with_uptime ? "1" : "0", std::to_string(ttl.value_or(Request{}.ttl).count())},
      std::nullopt};
}

Millis status_ttl(const Call& call) {
  if (operation_of(call) != Operation::status || call.args.size() < 3) return Request{}.ttl;
  const auto ms = std::strtoll(call.args[2].c_str(), nullptr, 10);
  return ms > 0 ? Millis(ms) : Request{}.ttl;
}

Call uptime_call() {
  return Call{{"uptime"}, std::nullopt};
}

Call memory_call() {
  return Call{{"memory"}, std::nullopt};
}

bool is_read_only(const Call& call) {
  return operation_of(call) == Operation::status ||
         (!call.args.empty() && (call.args[0] == "uptime" || call.args[0] == "memory"));
}

Result<LockView> decode_status(const std::string& name, const redis::Reply& reply) {
  const auto& e = reply.elements;
  if (reply.type != redis::Reply::Type::array || e.size() < 6 ||
      e[3].type != redis::Reply::Type::array || e[4].type != redis::Reply::Type::array)
    return std::unexpected(unexpected_reply("status "));
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
    // A waiter shows the mode it asked for, as a holder would hold it: an
    // exclusive one of a lock whose limit is above 1 waits for a semaphore
    // place (a different limit is refused).
    view.waiters.push_back(WaiterView{
        static_cast<int>(view.waiters.size()) + 1, w[k].str, mode_shown(record.mode, view.limit),
        record.who, record.parsed ? elapsed(now, record.since_ms) : Millis(0), record.parsed});
  }
  view.forced = parse_audit(e[5].str, now, view.limit);
  // A quorum's combined reply (combine_status) adds every member's view.
  if (e.size() >= 7 && e[6].type == redis::Reply::Type::array) {
    for (const auto& m : e[6].elements) {
      if (m.type != redis::Reply::Type::array || m.elements.size() < 5)
        return std::unexpected(unexpected_reply("status "));
      MemberView member{m.elements[0].str, m.elements[1].str, {}, 0, m.elements[4].str};
      for (const auto& id : m.elements[2].elements) member.holders.push_back(id.str);
      member.last_fence = std::max<std::int64_t>(0, integer_of(m.elements[3]).value_or(0));
      view.members.push_back(std::move(member));
    }
  }
  return view;
}

// --- quorum -------------------------------------------------------------------

namespace {

/// An acquire reply's state: 1 granted, 0 busy or queued, -1 limit
/// mismatch, -2 member too young; nullopt: not an acquire reply (any other
/// state too: a member that says so has failed, it did not refuse).
std::optional<std::int64_t> acquire_state(const redis::Reply& reply) {
  if (reply.type != redis::Reply::Type::array || reply.elements.size() < 2) return std::nullopt;
  auto state = integer_of(reply.elements[0]);
  if (!state || !integer_of(reply.elements[1]) || *state < -2 || *state > 1) return std::nullopt;
  return *state;
}

}  // namespace

Operation operation_of(const Call& call) {
  if (call.args.empty()) return Operation::other;
  const std::string& op = call.args[0];
  if (op == "acquire") return Operation::acquire;
  if (op == "renew") return Operation::renew;
  if (op == "release") return Operation::release;
  if (op == "force") return Operation::force;
  if (op == "status") return Operation::status;
  if (op == "raise") return Operation::raise;
  return Operation::other;
}

Millis requested_ttl(const Call& call) {
  if (operation_of(call) != Operation::acquire || call.args.size() < 5) return Millis(0);
  return Millis(std::strtoll(call.args[4].c_str(), nullptr, 10));
}

int requested_limit(const Call& call) {
  if (operation_of(call) != Operation::acquire || call.args.size() < 4) return 1;
  return static_cast<int>(std::strtol(call.args[3].c_str(), nullptr, 10));
}

Call with_min_uptime(Call call, Millis min_uptime) {
  // ARGV: op token mode limit ttl blob enqueue lease [min_uptime]
  call.args.resize(8);
  call.args.push_back(std::to_string(min_uptime.count()));
  return call;
}

Call raise_call(std::int64_t fence, const std::string& token) {
  return Call{{"raise", std::to_string(fence), token}, std::nullopt};
}

std::size_t majority(std::size_t members) {
  return members / 2 + 1;
}

Millis clock_drift(Millis ttl) {
  return ttl / 100 + Millis(2);
}

Millis validity(Millis ttl, Millis spent) {
  return ttl - spent - clock_drift(ttl);
}

namespace {

/// A quorum acquire reply's run_id of the member, its last element ("" when
/// the reply has none).
std::string_view acquire_run_id(const redis::Reply& reply) {
  const auto& e = reply.elements;
  if (reply.type != redis::Reply::Type::array || e.size() < 3 ||
      e.back().type != redis::Reply::Type::string || e.back().str.size() != 40)
    return {};
  return e.back().str;
}

/// A quorum acquire reply's uptime of the member (ms), the element before
/// its run_id; nullopt when the reply has none.
std::optional<std::int64_t> acquire_uptime(const redis::Reply& reply) {
  if (reply.elements.size() < 4 || acquire_run_id(reply).empty()) return std::nullopt;
  const auto uptime = integer_of(reply.elements[reply.elements.size() - 2]);
  if (!uptime) return std::nullopt;
  return *uptime;
}

/// How long the oldest live holder that a busy acquire reply shows has held
/// the lock on that member (ms), or nullopt.
std::optional<std::int64_t> shown_holder_age(const MemberReply& m) {
  const auto& e = m.reply.elements;
  if (m.state != MemberReply::State::replied || m.reply.type != redis::Reply::Type::array ||
      e.size() < 5 || integer_of(e[0]).value_or(-9) != 0 || e[2].str.empty() ||
      integer_of(e[3]).value_or(0) <= 0)
    return std::nullopt;
  const auto now = integer_of(e[4]);
  if (!now) return std::nullopt;
  return elapsed(*now, parse_record(e[2].str).since_ms).count();
}

/// Who the live holder a busy acquire reply shows is (its record's
/// identity, without the fence and since, which differ between members),
/// or nullopt.
std::optional<std::string_view> shown_holder(const MemberReply& m) {
  if (!shown_holder_age(m)) return std::nullopt;
  std::string_view record = m.reply.elements[2].str;
  for (int field = 0; field < 4; ++field) {
    const auto end = record.find('\n');
    if (end == std::string_view::npos) return std::nullopt;
    record.remove_prefix(end + 1);
  }
  if (record.empty()) return std::nullopt;
  return record;
}

}  // namespace

AcquireCount count_acquire(const std::vector<MemberReply>& members) {
  AcquireCount count;
  std::optional<std::int64_t> best_position;
  // A member that grants while another shows a live holder older than the
  // member's uptime may have forgotten that holder in a restart (the
  // delayed restart, by the holder's age rather than by the TTL: a lease
  // lengthened by renew --ttl outlives the TTL): its grant does not count.
  std::optional<std::int64_t> oldest_holder;
  for (const MemberReply& m : members)
    if (auto age = shown_holder_age(m)) oldest_holder = std::max(oldest_holder.value_or(0), *age);
  for (std::size_t k = 0; k < members.size(); ++k) {
    const MemberReply& m = members[k];
    if (m.state == MemberReply::State::pending) {
      ++count.pending;
      continue;
    }
    const auto state = m.state == MemberReply::State::replied ? acquire_state(m.reply)
                                                              : std::optional<std::int64_t>();
    if (!state) {
      ++count.failed;
      continue;
    }
    if (*state == 1 && oldest_holder) {
      const auto uptime = acquire_uptime(m.reply);
      if (uptime && *uptime < *oldest_holder) {
        ++count.refused;
        continue;
      }
    }
    if (*state == 1) {
      ++count.granted;
      count.grants.push_back(k);
      count.fence = std::max(count.fence, integer_of(m.reply.elements[1]).value_or(0));
      continue;
    }
    ++count.refused;
    if (*state == -1) {
      count.refusal = m.reply;
      best_position = -1;
      continue;
    }
    if (*state != 0) {  // -2: restarted too recently to count
      ++count.young;
      continue;
    }
    const std::int64_t position = integer_of(m.reply.elements[1]).value_or(0);
    if (position > 0) count.queued.push_back(k);
    if (best_position == -1) continue;
    // The nearest place in any queue (0, not queued, only when queued
    // nowhere) is what a waiter is shown.
    if (!best_position || (position > 0 && (*best_position == 0 || position < *best_position))) {
      best_position = position;
      count.refusal = m.reply;
    }
  }
  const std::size_t need = majority(members.size());
  // Members that count: those that answered, less those too young to.
  const std::size_t counted = count.granted + count.refused - count.young;
  // Not granted is decided only once it is also known whether a majority
  // that counts answered (the lock is busy) or cannot any more (out of
  // reach, or too young): three refusals of five say "busy", but two
  // refusals and a dead or young member say nothing yet while two members
  // have still to answer.
  if (count.granted >= need)
    count.verdict = Verdict::yes;
  else if (count.granted + count.pending < need &&
           (counted >= need || counted + count.pending < need))
    count.verdict = Verdict::no;
  count.split = count.granted > 0 && count.granted < need &&
                count.granted + count.refused >= need &&
                count.granted + count.pending + count.failed >= need;
  std::map<std::string_view, std::size_t> holders;
  for (const MemberReply& m : members)
    if (auto who = shown_holder(m); who && ++holders[*who] >= need) count.held_by_majority = true;
  if (count.refusal.type != redis::Reply::Type::array)
    count.refusal =
        redis::Reply::of_array({redis::Reply::of_integer(0), redis::Reply::of_integer(0)});
  return count;
}

RenewCount count_renew(const std::vector<MemberReply>& members) {
  RenewCount count;
  for (const MemberReply& m : members) {
    if (m.state == MemberReply::State::pending) {
      ++count.pending;
      continue;
    }
    auto ttl = m.state == MemberReply::State::replied
                   ? integer_of(m.reply)
                   : Result<std::int64_t>(std::unexpected(Error{}));
    if (!ttl) {
      ++count.failed;
    } else if (*ttl <= 0) {
      ++count.not_owner;
    } else {
      ++count.renewed;
      count.ttl = count.ttl.count() == 0 ? Millis(*ttl) : std::min(count.ttl, Millis(*ttl));
    }
  }
  const std::size_t need = majority(members.size());
  if (count.renewed >= need)
    count.verdict = Verdict::yes;
  else if (count.renewed + count.pending < need)
    count.verdict = Verdict::no;
  count.lost = members.size() - count.not_owner < need;
  return count;
}

ReleaseCount count_release(const std::vector<MemberReply>& members) {
  ReleaseCount count;
  for (const MemberReply& m : members) {
    if (m.state == MemberReply::State::pending) {
      ++count.pending;
      continue;
    }
    auto released = m.state == MemberReply::State::replied
                        ? integer_of(m.reply)
                        : Result<std::int64_t>(std::unexpected(Error{}));
    if (!released)
      ++count.failed;
    else if (*released == 1)
      ++count.released;
    else
      ++count.not_owner;
  }
  const std::size_t answered = members.size() - count.pending;
  count.decided = count.pending == 0 ||
                  (answered >= majority(members.size()) && count.released > 0) ||
                  count.not_owner >= majority(members.size());
  return count;
}

redis::Reply combine_force(const std::vector<MemberReply>& members) {
  redis::Reply combined = redis::Reply::of_array();
  std::vector<std::string> seen;
  for (const MemberReply& m : members) {
    if (m.state != MemberReply::State::replied || m.reply.type != redis::Reply::Type::array ||
        m.reply.elements.empty())
      continue;
    const auto& e = m.reply.elements;
    if (combined.elements.empty()) combined.elements.push_back(e[0]);
    for (std::size_t k = 1; k + 1 < e.size(); k += 2) {
      if (std::find(seen.begin(), seen.end(), e[k].str) != seen.end()) continue;
      seen.push_back(e[k].str);
      combined.elements.push_back(e[k]);
      combined.elements.push_back(e[k + 1]);
    }
  }
  if (combined.elements.empty()) combined.elements.push_back(redis::Reply::of_integer(0));
  return combined;
}

redis::Reply empty_status() {
  return redis::Reply::of_array({redis::Reply::of_integer(0), redis::Reply::of_integer(1),
                                 redis::Reply::of_integer(0), redis::Reply::of_array(),
                                 redis::Reply::of_array(), redis::Reply::of_string("")});
}

namespace {

bool usable_status(const MemberReply& m) {
  const auto& e = m.reply.elements;
  return m.state == MemberReply::State::replied && m.reply.type == redis::Reply::Type::array &&
         e.size() >= 6 && e[3].type == redis::Reply::Type::array &&
         e[4].type == redis::Reply::Type::array;
}

bool read_only_status(const MemberReply& m) {
  // {now, limit, fence, holders, waiters, audit, uptime, role, run_id}
  return usable_status(m) && m.reply.elements.size() >= 9 && m.reply.elements[7].str == "slave";
}

/// Holder ids of each member (sorted), and how many members name each
/// holder, in the order first seen. A read-only replica names none: it
/// shows its master's holders, but cannot have granted them.
struct Votes {
  std::vector<std::vector<std::string>> holders;
  std::vector<std::pair<std::string, std::size_t>> counts;
  std::size_t unusable = 0;
};

Votes count_holders(const std::vector<MemberReply>& members) {
  Votes v;
  v.holders.resize(members.size());
  for (std::size_t k = 0; k < members.size(); ++k) {
    if (!usable_status(members[k])) {
      ++v.unusable;
      continue;
    }
    if (read_only_status(members[k])) continue;
    const auto& h = members[k].reply.elements[3].elements;
    for (std::size_t j = 0; j + 2 < h.size(); j += 3) {
      v.holders[k].push_back(h[j].str);
      auto it = std::find_if(v.counts.begin(), v.counts.end(),
                             [&](const auto& c) { return c.first == h[j].str; });
      if (it == v.counts.end())
        v.counts.emplace_back(h[j].str, 1);
      else
        ++it->second;
    }
    std::sort(v.holders[k].begin(), v.holders[k].end());
  }
  return v;
}

}  // namespace

bool read_only_member(const MemberReply& m) {
  return m.read_only || read_only_status(m);
}

Millis status_min_uptime(const std::vector<MemberReply>& members, Millis at_least) {
  Millis longest = at_least;
  for (const auto& m : members) {
    if (!usable_status(m) || read_only_status(m)) continue;
    const auto& h = m.reply.elements[3].elements;
    for (std::size_t j = 0; j + 2 < h.size(); j += 3)
      longest = std::max(longest, Millis(parse_record(h[j + 2].str).ttl_ms));
  }
  return longest;
}

std::optional<InDoubt> holder_in_doubt(const std::vector<MemberReply>& members, Millis min_uptime) {
  const Votes v = count_holders(members);
  const std::size_t need = majority(members.size());
  // Each member's uptime (none when not asked for: it counts as old),
  // whether it is younger than `min_uptime`, and how long each holder has
  // held the lock (the oldest record of it any member has).
  std::vector<std::optional<std::int64_t>> uptime(members.size());
  std::vector<bool> young(members.size(), false);
  std::size_t n_young = 0;
  std::map<std::string, std::int64_t> age;
  for (std::size_t k = 0; k < members.size(); ++k) {
    // A read-only replica is old enough to say "not held" (it cannot grant).
    if (!usable_status(members[k]) || read_only_status(members[k])) continue;
    const auto& e = members[k].reply.elements;
    if (e.size() >= 7)
      if (const auto up = integer_of(e[6])) uptime[k] = *up;
    if (uptime[k] && *uptime[k] < min_uptime.count()) {
      young[k] = true;
      ++n_young;
    }
    const auto now = integer_of(e[0]).value_or(0);
    const auto& h = e[3].elements;
    for (std::size_t j = 0; j + 2 < h.size(); j += 3) {
      auto& oldest = age[h[j].str];
      oldest = std::max(oldest, elapsed(now, parse_record(h[j + 2].str).since_ms).count());
    }
  }
  const std::size_t old = members.size() - v.unusable - n_young;
  bool agreed = false;
  for (const auto& [id, n] : v.counts) {
    if (n >= need) {
      agreed = true;
      continue;
    }
    // A member that does not name it may have lost it in a restart: one up
    // for less than the TTL, or for less than the holder has held it (a
    // lease lengthened by renew --ttl outlives the TTL).
    std::size_t silent_young = 0;
    for (std::size_t k = 0; k < members.size(); ++k)
      if ((young[k] || (uptime[k] && *uptime[k] < age[id])) &&
          !std::binary_search(v.holders[k].begin(), v.holders[k].end(), id))
        ++silent_young;
    if (n + v.unusable + silent_young >= need)
      return InDoubt{id, n, silent_young, old, false, 0, ""};
  }
  if (!agreed && old < need) return InDoubt{"", 0, n_young, old, false, 0, ""};
  if (!agreed && !v.counts.empty()) {
    std::size_t free = 0;
    for (std::size_t k = 0; k < members.size(); ++k)
      if (usable_status(members[k]) && !read_only_status(members[k]) && !young[k] &&
          v.holders[k].empty())
        ++free;
    if (free < need) {
      InDoubt contested{"", 0, n_young, old, true, free, ""};
      for (const auto& [id, n] : v.counts)
        contested.holders +=
            fmt::format("{}{} on {}", contested.holders.empty() ? "" : ", ", id, n);
      return contested;
    }
  }
  return std::nullopt;
}

std::optional<std::pair<std::size_t, std::size_t>> same_server(
    const std::vector<MemberReply>& members) {
  const auto run_id = [](const MemberReply& m) -> std::string_view {
    return m.state == MemberReply::State::replied ? acquire_run_id(m.reply) : std::string_view();
  };
  for (std::size_t a = 0; a < members.size(); ++a) {
    const auto id = run_id(members[a]);
    if (id.empty()) continue;
    for (std::size_t b = a + 1; b < members.size(); ++b)
      if (run_id(members[b]) == id) return std::pair{a, b};
  }
  return std::nullopt;
}

std::string without_member_name(std::string_view problem, std::string_view name) {
  const auto named_at = [&](std::size_t at) {
    return !name.empty() && problem.substr(at).starts_with(name) &&
           problem.substr(at + name.size()).starts_with(": ");
  };
  if (named_at(0)) return std::string(problem.substr(name.size() + 2));
  constexpr std::string_view k_connect = "cannot connect to ";
  if (problem.starts_with(k_connect) && named_at(k_connect.size()))
    return fmt::format("cannot connect: {}", problem.substr(k_connect.size() + name.size() + 2));
  return std::string(problem);
}

redis::Reply combine_status(const std::vector<std::string>& names,
                            const std::vector<MemberReply>& members) {
  const Votes v = count_holders(members);
  const auto& holders = v.holders;
  const auto& votes = v.counts;
  const std::size_t need = majority(members.size());
  std::vector<std::string> agreed;
  for (const auto& [id, n] : votes)
    if (n >= need) agreed.push_back(id);
  std::sort(agreed.begin(), agreed.end());

  // Each agreed holder's record as most members have it (the fence that
  // most of them show; the lowest of those tied): a member that lost the
  // lock and had it taken again by a renewal has a record of its own, with
  // its own fence and age, which is not the one the holder was given.
  std::map<std::string, std::int64_t> shown_fence;
  for (const auto& id : agreed) {
    std::map<std::int64_t, std::size_t> fences;
    for (std::size_t k = 0; k < members.size(); ++k) {
      if (!usable_status(members[k])) continue;
      const auto& h = members[k].reply.elements[3].elements;
      for (std::size_t j = 0; j + 2 < h.size(); j += 3)
        if (h[j].str == id) ++fences[parse_record(h[j + 2].str).fence];
    }
    std::int64_t best = 0;
    std::size_t most = 0;
    for (const auto& [fence, n] : fences)
      if (n > most) best = fence, most = n;
    shown_fence[id] = best;
  }

  redis::Reply combined = empty_status();
  auto& c = combined.elements;
  bool first = true;
  // The forced releases: of the member that saw the latest (by its own
  // clock), the most of them on a tie. A member that was down or restarted
  // during a release --force has none (or fewer); taking the first
  // member's audit showed no forced release whenever that one had missed it.
  std::optional<std::pair<Millis, std::size_t>> audit_seen;
  for (const MemberReply& m : members) {
    if (!usable_status(m) || read_only_status(m)) continue;
    const auto& e = m.reply.elements;
    const auto forced =
        parse_audit(e[5].str, integer_of(e[0]).value_or(0), integer_of(e[1]).value_or(1));
    if (forced.empty()) continue;
    const std::pair<Millis, std::size_t> seen{forced.front().ago, forced.size()};
    if (!audit_seen || seen.first < audit_seen->first ||
        (seen.first == audit_seen->first && seen.second > audit_seen->second)) {
      audit_seen = seen;
      c[5] = e[5];
    }
  }
  std::vector<std::string> listed_holders, listed_waiters;
  redis::Reply views = redis::Reply::of_array();
  for (std::size_t k = 0; k < members.size(); ++k) {
    const MemberReply& m = members[k];
    const std::string name = k < names.size() ? names[k] : std::to_string(k + 1);
    if (!usable_status(m)) {
      std::string problem = m.state == MemberReply::State::failed ? m.problem
                            : m.reply.is_error()                  ? m.reply.str
                            : m.state == MemberReply::State::pending
                                ? std::string("no answer in time")
                                : std::string("unexpected reply from the lock script");
      problem = without_member_name(problem, name);
      views.elements.push_back(redis::Reply::of_array(
          {redis::Reply::of_string(name), redis::Reply::of_string("unreachable"),
           redis::Reply::of_array(), redis::Reply::of_integer(0),
           redis::Reply::of_string(std::move(problem))}));
      continue;
    }
    const auto& e = m.reply.elements;
    if (read_only_status(m)) {
      redis::Reply ids = redis::Reply::of_array();
      for (std::size_t j = 0; j + 2 < e[3].elements.size(); j += 3)
        ids.elements.push_back(e[3].elements[j]);
      views.elements.push_back(redis::Reply::of_array(
          {redis::Reply::of_string(name), redis::Reply::of_string("read-only"), std::move(ids),
           redis::Reply::of_integer(integer_of(e[2]).value_or(0)),
           redis::Reply::of_string(fmt::format(
               "a read-only replica: it cannot take a lock, so the quorum runs on the other "
               "members; {}",
               k_read_only_fix))}));
      continue;
    }
    if (first) {
      c[0] = e[0], c[1] = e[1];
      first = false;
    }
    const std::int64_t fence = integer_of(e[2]).value_or(0);
    c[2].integer = std::max(c[2].integer, fence);
    for (std::size_t j = 0; j + 2 < e[3].elements.size(); j += 3) {
      const std::string& id = e[3].elements[j].str;
      if (!std::binary_search(agreed.begin(), agreed.end(), id) ||
          std::find(listed_holders.begin(), listed_holders.end(), id) != listed_holders.end() ||
          parse_record(e[3].elements[j + 2].str).fence != shown_fence[id])
        continue;
      listed_holders.push_back(id);
      for (std::size_t f = 0; f < 3; ++f) c[3].elements.push_back(e[3].elements[j + f]);
    }
    for (std::size_t j = 0; j + 2 < e[4].elements.size(); j += 3) {
      const std::string& id = e[4].elements[j].str;
      if (std::find(listed_waiters.begin(), listed_waiters.end(), id) != listed_waiters.end())
        continue;
      listed_waiters.push_back(id);
      for (std::size_t f = 0; f < 3; ++f) c[4].elements.push_back(e[4].elements[j + f]);
    }
    redis::Reply ids = redis::Reply::of_array();
    for (const auto& id : holders[k]) ids.elements.push_back(redis::Reply::of_string(id));
    views.elements.push_back(redis::Reply::of_array(
        {redis::Reply::of_string(name),
         redis::Reply::of_string(holders[k] == agreed ? "ok" : "disagrees"), std::move(ids),
         redis::Reply::of_integer(fence), redis::Reply::of_string("")}));
  }
  c.push_back(std::move(views));
  return combined;
}

}  // namespace rlock::lock
