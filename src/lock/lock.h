#pragma once
/// The lock itself: acquire (with a FIFO wait woken by notification), renew,
/// release, forced release and status, each one atomic script on the server.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "lock/lock_types.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock::lock {

/// A waiter re-checks (and refreshes its lease) this often even without a
/// notification, so a lost grant or a crashed holder never hangs it.
inline constexpr Millis k_recheck_interval{1000};
/// A queued waiter rides out a Redis restart or failover this long (a
/// Sentinel failover takes well under 30 s) before giving up as unreachable.
/// It keeps its token, so it keeps its place, or rejoins at the end if the
/// server lost the queue.
inline constexpr Millis k_outage_tolerance{30'000};
/// How long an interrupted waiter spends on leaving the queue.
inline constexpr Millis k_leave_budget{1000};
/// How long a caller that gives up because the server did not answer waits
/// for the reply to its parting release (sent at once; the server may still
/// be frozen).
inline constexpr Millis k_parting_budget{250};
/// Between two sends of a release (or force) the replicas did not
/// acknowledge: time for the Sentinels to name the new master.
inline constexpr Millis k_confirm_pause{200};

/// The views of a listing. A deque: it grows without moving what it holds
/// or touching twice its size (a vector doubling to 100000 views faulted in
/// 35 MB for the 17 MB it kept).
using Listing = std::deque<LockView>;

/// The lock operations on one backend: the protocol (lock/protocol.h) plus
/// what a client decides between calls (the FIFO wait, giving back a lease
/// the replicas did not acknowledge).
class LockClient {
 public:
  explicit LockClient(std::unique_ptr<backend::Backend> backend);

  /// One try: takes the lock if it is free and nobody is queued ahead;
  /// otherwise joins (or refreshes its place in) the queue when `enqueue`,
  /// or leaves it when not. Default deadline: the command timeout. A grant
  /// too few replicas acknowledged is given back at once and reported as
  /// unreachable, naming how many did.
  Result<Attempt> attempt(const Request& request, const std::string& token, bool enqueue,
                          std::optional<Deadline> deadline = std::nullopt);

  using Progress = std::function<void(const Attempt&, Millis waited)>;
  /// Takes the lock, waiting up to `wait` (nullopt: forever; 0: not at all);
  /// the wait also bounds every try, retries included. Busy →
  /// Error::Code::busy; `interrupt_fd` readable during any step → the queue
  /// is left and the error is interrupted.
  Result<Grant> acquire(const Request& request, std::optional<Millis> wait,
                        const Progress& progress = {}, int interrupt_fd = -1);

  /// Extends the lease to `ttl` from now (0: the TTL it was acquired with)
  /// and returns the lease left (more than `ttl` when more was left: a
  /// renewal never shortens a lease, unless `may_shorten`, see renew_call);
  /// not_owner if the token lost it. A renewal too few replicas
  /// acknowledged is not confirmed (unreachable).
  Result<Millis> renew(const std::string& name, const std::string& token, Millis ttl,
                       Deadline deadline, bool may_shorten = false);
  /// The lock's server's maxmemory (bytes, 0 for none) and
  /// maxmemory-policy, from its INFO (a server that may evict the lock's
  /// keys: see REDIS REQUIREMENTS in rlock(1)).
  Result<std::pair<std::int64_t, std::string>> memory_policy(const std::string& name,
                                                             Deadline deadline);
  /// Releases (or leaves the queue); not_owner if the token held nothing.
  /// Default deadline: the command timeout.
  Result<void> release(const std::string& name, const std::string& token,
                       std::optional<Deadline> deadline = std::nullopt);
  /// A release that must be known to last (the `release` command, `run`'s
  /// when the command ended): one that too few replicas acknowledged (a
  /// failover under way: the master that took it may be about to become a
  /// replica and lose it) is sent again, following the master, until they
  /// acknowledge it within the command timeout; else unreachable.
  Result<void> release_confirmed(const std::string& name, const std::string& token);
  /// Evicts every holder, or the one with this short id; returns them.
  /// Confirmed on the replicas as release_confirmed (sent again for each
  /// holder evicted, by its id: never for whoever holds it by then).
  Result<std::vector<HolderView>> force_release(const std::string& name,
                                                const std::string& holder_id, const Identity& by);

  /// `ttl`: the TTL the lock is taken with, which a quorum member must have
  /// been up for before its word that nobody holds it counts (the longest
  /// TTL a member's record asks for counts too).
  Result<LockView> status(const std::string& name, Millis ttl = Request{}.ttl);
  /// Every live lock under the prefix, sorted by name. With `gaps`, a part
  /// of the deployment that stays out of reach (a Cluster shard) is handed
  /// to it and the listing holds what the rest holds
  /// (Backend::for_every_reachable_lock); without, it is an error.
  Result<Listing> list(const backend::GapSink& gaps = {}, Millis ttl = Request{}.ttl);

  backend::Backend& backend() { return *m_backend; }

 private:
  /// Runs `call` on the backend before `deadline` (default: the command
  /// timeout from now).
  Result<backend::Outcome> run(const std::string& name, const Call& call,
                               std::optional<Deadline> deadline = std::nullopt);
  /// The attempt an acquire's `outcome` makes: a grant too few replicas
  /// acknowledged is given back and reported as unreachable.
  Result<Attempt> settle(const Request& request, const std::string& token, const Call& call,
                         Result<backend::Outcome> outcome);
  /// Sends `again` (each call in turn) while `ack` says too few replicas
  /// acknowledged a write, pausing k_confirm_pause between rounds, until
  /// they do (then the write counts) or `deadline` (unreachable, "`what`:
  /// n of m replicas acknowledged ..."). A write whose replicas cannot be
  /// counted (ROLE refused) counts as it is.
  Result<void> confirm_write(const std::string& name, std::optional<backend::Ack> ack,
                             const std::vector<Call>& again, Deadline deadline,
                             const std::string& what);
  /// A waiter that gives up leaves the queue (or gives back a grant whose
  /// reply it missed), within `budget` and without the interrupt fd.
  void leave_queue(const std::string& name, const std::string& token, Millis budget);

  std::unique_ptr<backend::Backend> m_backend;
};

/// Sorts a listing's views by name, each name once: the first one read (a
/// backend may read a lock twice: SCAN returned its key twice, or its
/// Cluster slot moved during the listing).
void sort_by_name(Listing& views);

/// The identity of this process (user@host, host, pid, command line).
Identity local_identity(long pid, std::string command);

}  // namespace rlock::lock
