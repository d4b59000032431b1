#include "lock/lock.h"

#include <fmt/format.h>
#include <poll.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>
#include <utility>

#include "lock/protocol.h"
#include "redis/connection.h"
#include "redis/server_error.h"
#include "util/token.h"

namespace rlock::lock {

namespace {

std::string current_user() {
  if (const passwd* pw = getpwuid(geteuid())) return pw->pw_name;
  return std::to_string(geteuid());
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

/// Sleeps `pause`, or less if `deadline` comes first; false if `interrupt_fd`
/// became readable meanwhile.
bool pause_before_retry(Millis pause, Deadline deadline, int interrupt_fd) {
  const auto left = std::chrono::ceil<Millis>(deadline - Clock::now());
  pollfd fd{interrupt_fd, POLLIN, 0};
  const auto wait = std::max(Millis(0), std::min(pause, left));
  return poll(&fd, interrupt_fd >= 0 ? 1 : 0, static_cast<int>(wait.count())) <= 0;
}

/// A lease too few replicas acknowledged: it could vanish in a failover, so
/// it does not count. Marked as `unreachable` (exit 69: the deployment
/// cannot give a safe lock now) with ServerError::other, so that a waiter
/// can tell it from a lost connection.
Error unacknowledged(const std::string& what, const backend::Ack& ack, Millis within) {
  // Replicas that lag may catch up (69, and a waiter retries); a ROLE the
  // ACL refuses will be refused again, so it is the ACL failure it is (77).
  if (!ack.problem.empty())
    return Error{ack.problem_is_server ? Error::Code::server : Error::Code::auth,
                 fmt::format("{}: {}", what, ack.problem), redis::ServerError::other};
  return Error{Error::Code::unreachable,
               fmt::format("{}: {} of {} replicas acknowledged it within {}", what,
                           ack.acknowledged, ack.wanted, format_duration(within)),
               redis::ServerError::other};
}

bool is_unacknowledged(const Error& error) {
  return error.code == Error::Code::unreachable && error.server == redis::ServerError::other;
}

/// A transient refusal (LOADING, BUSY, ...): the server answers, it only
/// cannot take the request now. So is CLUSTERDOWN once a Cluster backend
/// gives up on it after its own retries (only a Cluster node says it): a
/// shard without a master, whose failover a waiter rides out as it rides
/// out a master out of reach.
bool is_refusal(const Error& error) {
  return error.code == Error::Code::server &&
         (redis::is_transient(error.server) || error.server == redis::ServerError::clusterdown);
}

}  // namespace

Identity local_identity(long pid, std::string command) {
  std::string host = host_name();
  return Identity{current_user() + "@" + host, host, pid, std::move(command)};
}

LockClient::LockClient(std::unique_ptr<backend::Backend> backend) : m_backend(std::move(backend)) {}

Result<backend::Outcome> LockClient::run(const std::string& name, const Call& call,
                                         std::optional<Deadline> deadline) {
  return m_backend->run(name, call, deadline.value_or(Clock::now() + m_backend->command_timeout()));
}

Result<Attempt> LockClient::attempt(const Request& request, const std::string& token, bool enqueue,
                                    std::optional<Deadline> deadline) {
  const Call call = acquire_call(request, token, enqueue);
  return settle(request, token, call, run(request.name, call, deadline));
}

Result<Attempt> LockClient::settle(const Request& request, const std::string& token,
                                   const Call& call, Result<backend::Outcome> outcome) {
  if (!outcome) return std::unexpected(outcome.error());
  auto attempt = decode_attempt(request, outcome->reply);
  if (attempt && !attempt->acquired && outcome->ack && !outcome->ack->problem.empty()) {
    // Queued where the replicas cannot be counted (ROLE refused): it could
    // never hold. Leave the queue, and say why now.
    (void)release(request.name, token);
    return std::unexpected(unacknowledged(fmt::format("cannot wait for lock '{}'", request.name),
                                          *outcome->ack, *call.replicate_within));
  }
  if (!attempt || !attempt->acquired || !outcome->ack || outcome->ack->enough()) return attempt;
  // Granted, but too few replicas have it: a failover now could hand it to
  // someone else. Give it back (our place in the queue goes with it).
  (void)release(request.name, token);
  return std::unexpected(unacknowledged(fmt::format("lock '{}' was given back", request.name),
                                        *outcome->ack, *call.replicate_within));
}

namespace {

/// When a waiter stops riding out a transient refusal: at the end of its
/// wait, or k_outage_tolerance after the outage began.
Deadline refusals_end(const std::optional<Deadline>& outage_since, Deadline give_up_at) {
  return outage_since ? std::min(give_up_at, *outage_since + k_outage_tolerance) : give_up_at;
}

/// Decides whether a waiter rides out a failure: a transport failure only
/// once it is queued (a server that never answered is an error at once) or
/// when it is a failover (Error::failing_over: the rest of the deployment
/// answers), a transient server refusal (LOADING, BUSY, ...) whenever it
/// may wait at all; both only for k_outage_tolerance and within its own
/// --wait. A grant the replicas did not acknowledge is retried for the
/// whole of an explicit --wait, and like an outage (k_outage_tolerance)
/// without one: a replica that is gone for good must not hold a cron job
/// forever. Sleeps a little
/// before the retry, waking early on `interrupt_fd`. `tried_at`: when the
/// failed try began (a refusal began no later). An error means: give up
/// with it.
Result<void> ride_out(const Error& error, bool queued, bool blocking,
                      std::optional<Deadline>& outage_since, Deadline give_up_at, Deadline tried_at,
                      int interrupt_fd) {
  const bool lagging = blocking && is_unacknowledged(error);
  // A master failing over (the rest of its Cluster, or its Sentinels,
  // answer) is ridden out by any waiter, queued or not yet.
  const bool lost_server =
      (queued || (blocking && error.failing_over)) && error.code == Error::Code::unreachable;
  const bool transient = blocking && is_refusal(error);
  if (!lost_server && !transient && !lagging) return std::unexpected(error);
  auto now = Clock::now();
  // A refusal counts from the try that met it: the backend rode it out
  // for that whole try already.
  if (!outage_since) outage_since = transient ? tried_at : now;
  const bool whole_wait = lagging && give_up_at != Deadline::max();
  if ((!whole_wait && now - *outage_since >= k_outage_tolerance) || now >= give_up_at)
    return std::unexpected(error);
  // Reconnecting every half second is quick to notice a restarted server
  // and costs nothing while it is down. A grant the replicas do not
  // acknowledge is taken and given back at each try, which others find
  // busy: those tries space out, up to 5 s apart, as the lag goes on.
  constexpr Millis k_retry_pause{500};
  Millis pause = k_retry_pause;
  if (lagging)
    pause = std::clamp(std::chrono::duration_cast<Millis>(now - *outage_since) / 4, k_retry_pause,
                       Millis(5000));
  // A refusal is tried again only before refusals_end (the try after it
  // gets no more than that: see acquire's try_deadline), and with time for
  // an answer left after the pause: a try cut off by that end would report
  // a timeout instead of the refusal.
  constexpr Millis k_refused_try{100};
  if (transient) {
    const auto left = std::chrono::floor<Millis>(refusals_end(outage_since, give_up_at) - now);
    if (left <= k_refused_try) return std::unexpected(error);
    pause = std::min(pause, left - k_refused_try);
  }
  if (!pause_before_retry(pause, give_up_at, interrupt_fd))
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

void LockClient::leave_queue(const std::string& name, const std::string& token, Millis budget) {
  // Spend at most `budget` on leaving the queue (or releasing a grant whose
  // reply was cut off). If it fails, the waiter lease, or the lock's TTL,
  // removes us anyway. After a signal the interrupt fd is still readable,
  // so it must not apply here.
  // First behind what may still be stuck at the server (a frozen one runs
  // it when it thaws: then the release runs after it), then as a request of
  // its own, which a server that answers takes at once.
  m_backend->part(name, release_call(token));
  const int saved = m_backend->interrupt_fd();
  m_backend->set_interrupt_fd(-1);
  (void)release(name, token, Clock::now() + budget);
  m_backend->set_interrupt_fd(saved);
}

Result<Grant> LockClient::acquire(const Request& request, std::optional<Millis> wait,
                                  const Progress& progress, int interrupt_fd) {
  auto token = new_token();
  if (!token) return std::unexpected(token.error());
  // Every step from here on (connecting, EVALSHA, BLPOP, the pauses between
  // retries) can be cut short by `interrupt_fd`: a signal ends the wait at
  // once, not when a read returns.
  const int saved_interrupt_fd = m_backend->interrupt_fd();
  m_backend->set_interrupt_fd(interrupt_fd);
  const OnExit restore{
      [this, saved_interrupt_fd] { m_backend->set_interrupt_fd(saved_interrupt_fd); }};

  const bool blocking = !wait || wait->count() > 0;
  const auto start = Clock::now();
  const Deadline give_up_at = wait ? start + *wait : Deadline::max();
  // A try may take the command timeout, but with --wait never past the end
  // of the wait, retries included: a server that accepts and never answers
  // must not stretch `-w 3s` to two command timeouts. Each try still gets
  // k_min_try, so that a short wait hears a healthy server on a slow
  // network, and a waiter whose time is up can still leave the queue.
  constexpr Millis k_min_try{1000};
  // Only the first: a retry (the server out of reach, a Sentinel master or
  // a Cluster shard missing) that began near the end of the wait got a
  // whole k_min_try too, and `-w 1s` ended after 2.2 s. A retry gets what
  // is left of the wait, and k_min_retry at the least.
  constexpr Millis k_min_retry{200};
  bool tried_once = false;
  // The try after a transient refusal is the exception: the server
  // answers, and the backend's retries within the try must end with the
  // wait (or the outage tolerance), not k_min_try after it.
  bool refused = false;
  bool queued = false;
  std::optional<Deadline> outage_since;
  const auto try_deadline = [&] {
    const auto now = Clock::now();
    const Deadline by = now + m_backend->command_timeout();
    if (refused) return std::min(by, refusals_end(outage_since, give_up_at));
    const Millis least = std::exchange(tried_once, true) ? k_min_retry : k_min_try;
    return blocking && wait ? std::min(by, std::max(give_up_at, now + least)) : by;
  };
  // Gives up with `error`. An interrupted waiter leaves the queue first.
  // So does one whose try or wait went unanswered (a frozen or cut-off
  // server): what it sent may still be queued there, and would run when
  // the server answers again, granting the lock (a whole TTL) or a place in
  // the queue to a caller that has gone. The release goes out behind it
  // and undoes it; the reply is waited for only briefly.
  const auto give_up = [&](const Error& error) -> Result<Grant> {
    // So does one queued, then refused (a BLPOP the ACL does not allow, a
    // script error): the server answers, and a place left behind would be
    // granted the lock with nobody to take it (probe P).
    if (error.code == Error::Code::unreachable)
      leave_queue(request.name, *token, k_parting_budget);
    else if (error.code == Error::Code::interrupted || queued)
      leave_queue(request.name, *token, k_leave_budget);
    return std::unexpected(error);
  };
  // The try the last wait already made (pipelined behind its BLPOP).
  std::optional<Result<Attempt>> made;
  for (;;) {
    // A lost reply after the server took the lock for us is harmless: the
    // backend sends the same token again, and the script answers "held".
    const auto tried_at = Clock::now();
    auto tried = made ? std::move(*made) : attempt(request, *token, blocking, try_deadline());
    made.reset();
    refused = !tried && is_refusal(tried.error());
    if (!tried) {
      auto retry = ride_out(tried.error(), queued, blocking, outage_since, give_up_at, tried_at,
                            interrupt_fd);
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
        if (!last && (last.error().code == Error::Code::interrupted || last.error().decisive))
          return give_up(last.error());
        // Unanswered, it may still run and grant: undone as in give_up.
        if (!last && last.error().code == Error::Code::unreachable)
          leave_queue(request.name, *token, k_parting_budget);
        return fail(Error::Code::busy, fmt::format("timed out after {} waiting for lock '{}'",
                                                   format_duration(*wait), request.name));
      }
      block = std::min(block, left);
    }
    // The release (or whatever frees a place) grants the lock to the head of
    // the queue itself and pushes the grant onto its wake list. The acquire
    // sent behind the BLPOP then finds the lock held by this token and
    // confirms it for the whole TTL (the pushed grant is short: see
    // GRANT_MS in lock.lua), in the round trip of the wake-up; or, after a
    // block without news, refreshes our place, as a re-check.
    const Call again = acquire_call(request, *token, true);
    const auto woke_at = Clock::now();
    // The answer is due by the end of the wait (k_min_try after the block
    // at the least, as for a try): a server that froze while we were
    // queued must not stretch `-w 2s` to the block plus a command timeout.
    const Deadline answer_by =
        wait ? std::max(give_up_at, woke_at + block + k_min_try) : Deadline::max();
    auto woke = m_backend->wait_then_run(request.name, *token, block, answer_by, again);
    refused = !woke && is_refusal(woke.error());
    if (!woke) {
      auto retry =
          ride_out(woke.error(), queued, blocking, outage_since, give_up_at, woke_at, interrupt_fd);
      if (!retry) return give_up(retry.error());
    } else if (*woke) {
      made = settle(request, *token, again, std::move(**woke));
    }
  }
}

Result<Millis> LockClient::renew(const std::string& name, const std::string& token, Millis ttl,
                                 Deadline deadline, bool may_shorten) {
  const Call call = renew_call(token, ttl, may_shorten);
  auto outcome = run(name, call, deadline);
  if (!outcome) return std::unexpected(outcome.error());
  auto renewed = decode_renew(name, outcome->reply);
  if (renewed && outcome->ack && !outcome->ack->enough())
    return std::unexpected(
        unacknowledged(fmt::format("the renewal of lock '{}' is not confirmed", name),
                       *outcome->ack, *call.replicate_within));
  return renewed;
}

Result<void> LockClient::release(const std::string& name, const std::string& token,
                                 std::optional<Deadline> deadline) {
  auto outcome = run(name, release_call(token), deadline);
  if (!outcome) return std::unexpected(outcome.error());
  return decode_release(name, outcome->reply);
}

Result<void> LockClient::release_confirmed(const std::string& name, const std::string& token) {
  const Deadline deadline = Clock::now() + m_backend->command_timeout();
  const Call call = release_call(token);
  auto outcome = run(name, confirmed(call, true), deadline);
  if (!outcome) return std::unexpected(outcome.error());
  if (auto released = decode_release(name, outcome->reply); !released) {
    // Sent again after a try that went unanswered: that try most likely
    // released it (its reply was lost), and a repeat finds nothing. (Not
    // "no longer held": run would warn that its lock was lost, and a
    // script would take its own release for a failure.)
    if (released.error().code == Error::Code::not_owner && outcome->sent_again) return {};
    return released;
  }
  return confirm_write(name, outcome->ack, {confirmed(call, false)}, deadline,
                       fmt::format("the release of lock '{}' is not confirmed", name));
}

Result<std::vector<HolderView>> LockClient::force_release(const std::string& name,
                                                          const std::string& holder_id,
                                                          const Identity& by) {
  const Deadline deadline = Clock::now() + m_backend->command_timeout();
  auto outcome =
      run(name, confirmed(force_call(holder_id, by, m_backend->acl_user()), true), deadline);
  if (!outcome) return std::unexpected(outcome.error());
  auto evicted = decode_force(outcome->reply);
  if (!evicted) return evicted;
  // Sent again by id: a force of every holder sent again would evict
  // whoever took the lock since.
  std::vector<Call> again;
  for (const auto& holder : *evicted)
    again.push_back(confirmed(force_call(holder.id, by, m_backend->acl_user()), false));
  if (auto done =
          confirm_write(name, outcome->ack, again, deadline,
                        fmt::format("the forced release of lock '{}' is not confirmed", name));
      !done)
    return std::unexpected(done.error());
  return evicted;
}

Result<void> LockClient::confirm_write(const std::string& name, std::optional<backend::Ack> ack,
                                       const std::vector<Call>& again, Deadline deadline,
                                       const std::string& what) {
  const Millis within = again.empty() ? Millis(0) : *again.front().replicate_within;
  while (ack && !ack->enough()) {
    // ROLE refused (an ACL without +role): the replicas cannot be counted,
    // now or later, and the write itself was done. Minimum ACL says ROLE
    // is needed only to take and renew under --replicas all.
    if (!ack->problem.empty()) return {};
    if (Clock::now() + k_confirm_pause >= deadline)
      return std::unexpected(unacknowledged(
          fmt::format("{} (a failover under way? check with status)", what), *ack, within));
    if (!pause_before_retry(k_confirm_pause, deadline, m_backend->interrupt_fd()))
      return fail(Error::Code::interrupted, "interrupted while waiting for the replicas");
    // The master that took the write may be failing over: run() follows it
    // (the Sentinel backend asks the Sentinels again after an unacknowledged
    // write). Whatever the write finds there now (released, not held,
    // nobody to evict) counts once the replicas acknowledge that master.
    std::optional<backend::Ack> worst;
    for (const Call& call : again) {
      auto outcome = run(name, call, deadline);
      if (!outcome) return std::unexpected(outcome.error());
      if (outcome->ack && !outcome->ack->enough()) {
        worst = outcome->ack;
        break;
      }
    }
    ack = worst;
  }
  return {};
}

Result<std::pair<std::int64_t, std::string>> LockClient::memory_policy(const std::string& name,
                                                                       Deadline deadline) {
  auto outcome = run(name, memory_call(), deadline);
  if (!outcome) return std::unexpected(outcome.error());
  const auto& e = outcome->reply.elements;
  if (outcome->reply.type != redis::Reply::Type::array || e.size() != 2 ||
      e[0].type != redis::Reply::Type::integer)
    return fail(Error::Code::protocol, "unexpected reply to the memory operation");
  return std::pair{e[0].integer, e[1].str};
}

Result<LockView> LockClient::status(const std::string& name, Millis ttl) {
  auto outcome = run(name, status_call(ttl));
  if (!outcome) return std::unexpected(outcome.error());
  return decode_status(name, outcome->reply);
}

/// An order of (name, index) pairs is sorted,
/// then the views are put in place along its cycles: sorting the views
/// themselves moved each of them ~17 times (a fifth of a listing's
/// instructions), and a sorted copy would double their memory.
void sort_by_name(Listing& views) {
  std::vector<std::pair<std::string_view, std::size_t>> order;
  order.reserve(views.size());
  for (std::size_t k = 0; k < views.size(); ++k) order.emplace_back(views[k].name, k);
  std::sort(order.begin(), order.end());
  // Position k takes the view now at order[k].second.
  std::vector<bool> placed(views.size(), false);
  for (std::size_t start = 0; start < views.size(); ++start) {
    if (placed[start]) continue;
    LockView first = std::move(views[start]);
    std::size_t at = start;
    while (order[at].second != start) {
      views[at] = std::move(views[order[at].second]);
      placed[at] = true;
      at = order[at].second;
    }
    views[at] = std::move(first);
    placed[at] = true;
  }
  views.erase(std::unique(views.begin(), views.end(),
                          [](const LockView& a, const LockView& b) { return a.name == b.name; }),
              views.end());
}

Result<Listing> LockClient::list(const backend::GapSink& gaps, Millis ttl) {
  // Each reply becomes a view as soon as it is read: a listing of 100000
  // locks never holds all their replies, whose trees took twice the views'
  // memory (and the page faults that come with it).
  Listing views;
  auto listed = m_backend->for_every_reachable_lock(
      status_call(ttl),
      [this, &views](std::string name, const redis::Reply& reply) -> Result<void> {
        // A lock whose keys cannot be read (a foreign key at its name, a
        // malformed record) is listed as broken, and the listing goes on.
        auto view = reply.is_error() ? std::unexpected(redis::classify_server_error(reply.str))
                                     : decode_status(name, reply);
        // Only an ACL refusal still stops the listing: it is the caller's
        // configuration at fault, not one lock (exit 77, as the contract says).
        // The reply came without its server: the deployment is named.
        if (!view && view.error().code == Error::Code::auth) {
          Error refused = view.error();
          if (refused.origin.empty()) refused.origin = m_backend->describe();
          return std::unexpected(std::move(refused));
        }
        if (!view) {
          LockView broken;
          broken.name = std::move(name);
          broken.problem = view.error().message;
          views.push_back(std::move(broken));
          return {};
        }
        // A lock that expired between SCAN and the status read is not
        // listed; in a quorum, one that some member still shows held is (a
        // minority hold, given back or not yet expired), so the listing is
        // the union.
        const bool disputed =
            std::any_of(view->members.begin(), view->members.end(),
                        [](const MemberView& m) { return m.state == "disagrees"; });
        if (!view->holders.empty() || !view->waiters.empty() || disputed)
          views.push_back(std::move(*view));
        return {};
      },
      gaps);
  if (!listed) return std::unexpected(listed.error());
  sort_by_name(views);
  return views;
}

}  // namespace rlock::lock
