#pragma once
/// The lock protocol without I/O: how each operation of lock.lua is encoded
/// (its ARGV) and how its reply is decoded into a result. Backends run the
/// encoded call on whatever server is responsible for the lock; everything
/// here is table-tested without a server (tests/unit/lock/protocol_test).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lock/lock_types.h"
#include "redis/reply.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock::lock {

/// One operation of the lock script: ARGV, and whether it writes a lease
/// that must reach the replicas before it counts (acquire, renew).
struct Call {
  std::vector<std::string> args;
  /// How long to wait for replicas to acknowledge the write (WAIT's
  /// timeout); unset: the operation needs no acknowledgement.
  std::optional<Millis> replicate_within;
  /// Whether this reply wrote a lease (granted or extended one): only then
  /// is the acknowledgement waited for.
  bool (*wrote_lease)(const redis::Reply& reply) = nullptr;
  /// Under Sentinel, with --replicas all, also wait for the replicas the
  /// Sentinels know of the first master (see ServerBackend::run).
  bool known_replicas = false;
};

/// WAIT's timeout for a lease of `ttl`: a tenth of it, at most 1 s, so that
/// waiting for replicas never eats more than a small part of the lease.
Millis replication_timeout(Millis ttl);

/// `min_uptime`: a quorum member that has been up for less refuses to
/// count (see the "delayed restart" rule in combine_acquire); 0: no check.
Call acquire_call(const Request& request, const std::string& token, bool enqueue,
                  Millis min_uptime = Millis(0));
Result<Attempt> decode_attempt(const Request& request, const redis::Reply& reply);

/// Whether `request`, made by a nested `rlock run` under an enclosing run
/// that holds the lock as `held` (the lock's limit `lock_limit`), is
/// covered by that hold: an exclusive hold covers an exclusive or a shared
/// request, a shared hold a shared one, a semaphore slot a request with
/// the same limit. Otherwise the usage error (64) it gets: a request no
/// direct acquire could make either (a limit or mode the lock is not used
/// with), or one that needs more than the ancestor holds (exclusive under
/// shared: it would wait for its own ancestor, and running at once would
/// run it beside the other shared holders).
Result<void> nested_request_fits(const Request& request, const HolderView& held, int lock_limit);

/// A renewal extends the lease, never shortens it; with `may_shorten` it sets
/// the lease to `ttl` from now either way (`run` after its command ended, for
/// --min-hold: nothing runs under the lock any more).
Call renew_call(const std::string& token, Millis ttl, bool may_shorten = false);
/// The new lease; not_owner if the token no longer holds the lock.
Result<Millis> decode_renew(const std::string& name, const redis::Reply& reply);

/// What a release leaves of a waiter's place in the queue (a quorum waiter
/// giving back what it got on too few members).
enum class KeepPlace {
  no,      ///< leaves the queue: a holder releases, a waiter gives up
  queued,  ///< a place in the queue stays; a grant is given back
  /// also a grant handed over from a place in the queue goes back to that
  /// place (lock.lua's place_back): while a majority still shows the last
  /// holder, whose release has not reached every member yet
  granted,
};
Call release_call(const std::string& token, KeepPlace keep = KeepPlace::no);
/// A call whose write is waited for on the replicas like a lease's (WAIT,
/// replication_timeout of the default TTL) when `first` wrote something
/// (a release that released, a force that evicted), and always when it is
/// sent again to confirm one that was not acknowledged: a no-op on a
/// master that lost its replicas to a failover must not count either.
Call confirmed(Call call, bool first);
Result<void> decode_release(const std::string& name, const redis::Reply& reply);

Call force_call(const std::string& holder_id, const Identity& by, const std::string& acl_user);
Result<std::vector<HolderView>> decode_force(const redis::Reply& reply);

/// `ttl`: the TTL the lock is taken with (a quorum reads it, status_ttl;
/// the script ignores it). With `with_uptime`, the reply has the server's
/// uptime (ms, whole seconds) as a 7th element: a quorum member's word that
/// nobody holds the lock counts only once it has been up for the TTL.
Call status_call(std::optional<Millis> ttl = std::nullopt, bool with_uptime = false);
/// The TTL a status call carries (the default TTL if none).
Millis status_ttl(const Call& call);
/// The server's uptime in ms (its INFO, whole seconds): what a quorum
/// listing asks each member once.
Call uptime_call();
/// What asks the lock's server for its maxmemory and maxmemory-policy.
Call memory_call();
/// Whether `call` writes nothing (status, uptime, memory): it runs in the
/// read-only form (EVALSHA_RO), which a server whose writes are paused
/// still runs.
bool is_read_only(const Call& call);
Result<LockView> decode_status(const std::string& name, const redis::Reply& reply);

// --- A quorum of independent deployments (Redlock) ---------------------------
// The backend (backend/quorum.cpp) sends one call to every member at once
// and asks these functions, as replies come in, whether the outcome is
// decided and what it is. Nothing here does I/O.

/// Which operation of the lock script a call runs.
enum class Operation { acquire, renew, release, force, status, raise, other };
Operation operation_of(const Call& call);
/// The TTL an acquire asks for (0 for any other call).
Millis requested_ttl(const Call& call);
/// The holder limit an acquire asks for (1 for any other call).
int requested_limit(const Call& call);
/// The same acquire with the delayed-restart check (`min_uptime`) added.
Call with_min_uptime(Call call, Millis min_uptime);

/// The second step of a quorum grant: the fence counter of a member raised
/// to at least `fence`, and the record of `token`'s hold there given that
/// fence. The reply is the counter afterwards.
Call raise_call(std::int64_t fence, const std::string& token);

/// ⌊members/2⌋+1.
std::size_t majority(std::size_t members);
/// The clock drift allowed for between the members over one lease: TTL/100
/// + 2 ms, as in the published Redlock description.
Millis clock_drift(Millis ttl);
/// What is left of a lease of `ttl` after `spent` acquiring it, less the
/// drift; not positive: the grant is worthless.
Millis validity(Millis ttl, Millis spent);

/// One member's answer to a quorum call so far.
struct MemberReply {
  enum class State { pending, failed, replied };
  State state = State::pending;
  redis::Reply reply;   // replied: the script's reply
  std::string problem;  // failed: why (the member's error message)
  /// failed: by a configuration error (exit 78: a Sentinel URL naming no
  /// Sentinel, an unknown master name), which no retry or majority mends.
  bool misconfigured = false;
  /// failed: the member refused our credentials (AUTH, ACL, TLS
  /// verification): no retry mends it either, until someone fixes them.
  bool auth_refused = false;
  /// failed: the member is a read-only replica (READONLY), which cannot
  /// take a lock.
  bool read_only = false;
  /// failed: the member answered, but its replicas did not acknowledge the
  /// lease (--replicas), so it does not count.
  bool unacknowledged = false;
};

/// What to give instead of a read-only replica as a quorum member.
inline constexpr std::string_view k_read_only_fix =
    "give each deployment's master (or a redis-sentinel:// URL, which follows failovers)";

/// Whether a member is a read-only replica: it refused a write with
/// READONLY, or its status (asked with UPTIME) says role "slave". Such a
/// member never grants, so it counts as answering "not held" in status.
bool read_only_member(const MemberReply& m);

/// Whether the members' answers decide the outcome yet.
enum class Verdict { pending, yes, no };

/// The count of an acquire: granted (yes) when a majority granted; not
/// granted (no) once a majority can no longer grant and it is also known
/// whether a majority answered (the lock is busy) or cannot any more (out
/// of reach). A member that has not been up for the TTL (reply {-2,
/// uptime}) counts as refusing.
struct AcquireCount {
  std::size_t granted = 0, refused = 0, failed = 0, pending = 0;
  /// Of the refusals: members up for less than the TTL ({-2, uptime}).
  std::size_t young = 0;
  std::int64_t fence = 0;           // the highest fence a granting member returned
  std::vector<std::size_t> grants;  // the members that granted
  std::vector<std::size_t> queued;  // the members where the token is queued
  Verdict verdict = Verdict::pending;
  /// A majority answered and some of them granted, too few for a majority,
  /// but enough for one with the members that did not answer (yet, or at
  /// all): the members that answered handed the lock to different waiters
  /// (their queues disagree), and only the silent members could still
  /// decide. The backend waits for those only briefly, and a waiter whose
  /// try ends so gives back its queue places too (see QuorumBackend).
  bool split = false;
  /// A majority of the members show one live holder (the same owner, host,
  /// pid and command in its record): the lock is held, not handed to
  /// several waiters at once, so a grant from the others is no contention
  /// to back off from: that holder's release wakes the waiters queued
  /// behind it (see QuorumBackend::wait_for_wake).
  bool held_by_majority = false;
  /// The reply to give the caller when not granted: a member's -1 (limit
  /// mismatch) if any, else the busy reply with the smallest queue position.
  redis::Reply refusal;
};
AcquireCount count_acquire(const std::vector<MemberReply>& members);

/// The count of a renewal: confirmed (yes) when a majority extended the
/// lease, no when that can no longer happen. `lost` when so many members
/// said the token holds nothing that no majority can be confirmed again:
/// the lock is gone, not merely out of reach.
struct RenewCount {
  std::size_t renewed = 0, not_owner = 0, failed = 0, pending = 0;
  Millis ttl{0};  // the shortest lease a renewing member confirmed
  Verdict verdict = Verdict::pending;
  bool lost = false;
};
RenewCount count_renew(const std::vector<MemberReply>& members);

/// A release (or forced release) goes to every member; it is decided when
/// all have answered, when a majority has and one of them released, or
/// when a majority says the token holds nothing.
/// `released`: some member released (reply 1).
struct ReleaseCount {
  std::size_t released = 0, not_owner = 0, failed = 0, pending = 0;
  bool decided = false;
};
ReleaseCount count_release(const std::vector<MemberReply>& members);

/// Evicted holders of every member, each once (the reply of one `force`).
redis::Reply combine_force(const std::vector<MemberReply>& members);

/// One status reply for the lock from the members' status replies (absent
/// from a member that has no keys for it: an empty status): holders held by
/// a majority, waiters in the order the first member that knows them lists
/// them, the highest fence, and a 7th element with every member's view
/// (named by `names`): {name, state, {holder ids}, fence, problem} with
/// state ok, disagrees (its holders differ) or unreachable.
redis::Reply combine_status(const std::vector<std::string>& names,
                            const std::vector<MemberReply>& members);
/// Two members whose acquire replies name the same server (its run_id, the
/// last element of a quorum acquire's reply): one server reached through
/// two URLs, which would vote twice. The first such pair, in member order.
std::optional<std::pair<std::size_t, std::size_t>> same_server(
    const std::vector<MemberReply>& members);

/// A member's problem as said next to the member's name: without the name
/// again in front, when the message starts with it ("URL: timed out"), or
/// after "cannot connect to" ("cannot connect: Connection refused").
std::string without_member_name(std::string_view problem, std::string_view name);

/// A status reply for a lock a member has no keys for.
redis::Reply empty_status();

/// How long a member must have been up before its word that the lock has
/// no holder counts, as for a grant (the delayed restart: it may have lost
/// the holder with its data): the longest TTL that any member's record of
/// the lock asks for, and `at_least` (the default TTL).
Millis status_min_uptime(const std::vector<MemberReply>& members, Millis at_least);

/// Whether the members' status replies (status_call(true)) cannot tell
/// whether the lock is held, and why: a holder named by fewer than a
/// majority that the members out of reach, or younger than `min_uptime`
/// and not naming it, could make a majority holder; or no holder named by
/// a majority while fewer than a majority are old enough to say free; or
/// (`contested`) no holder named by a majority while fewer than a majority
/// show no holder at all: holders of a minority each (a lock left on some
/// members) keep anyone from a majority's grant, so it is not free either.
struct InDoubt {
  std::string holder;     ///< its id; empty: the members are too young to tell
  std::size_t on = 0;     ///< members that answered and name it
  std::size_t young = 0;  ///< members up for less than min_uptime (that do not name it)
  std::size_t old = 0;    ///< members that answered and are old enough
  bool contested = false;
  std::size_t free = 0;  ///< contested: members that could grant it (no holder, old enough)
  std::string holders;   ///< contested: "ID on N, ..."
};
std::optional<InDoubt> holder_in_doubt(const std::vector<MemberReply>& members, Millis min_uptime);

}  // namespace rlock::lock
