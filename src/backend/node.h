#pragma once
/// What every backend does on one node (a master it has chosen): run the
/// lock script there, count and WAIT for that master's replicas, list the
/// locks it holds. The one-master backend (server.cpp) and the Cluster
/// backend (cluster.cpp) differ only in how they find the node.

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/target.h"
#include "redis/connection.h"

namespace rlock::backend {

/// How long Backend::part may spend writing (into a socket's buffer: at
/// once, unless the buffer is full).
inline constexpr Millis k_part_budget{100};

/// lock.lua, run by EVALSHA (EVAL when the cache lost it).
const redis::Script& lock_script();

/// Sleeps `pause`, or less if `deadline` comes first; false if `interrupt_fd`
/// became readable meanwhile.
bool pause_before_retry(Millis pause, Deadline deadline, int interrupt_fd);

/// Since when a server has kept answering one kind of transient refusal.
/// A backend keeps it across its operations, so that when one command
/// retries at both levels (the backend's backoff within one try, the
/// waiter's tries within --wait) the final error tells how long the server
/// refused, not how long the last try's retries took.
struct Refusing {
  redis::ServerError kind{};
  Clock::time_point since{};
  /// The server's last words of that kind (its error reply).
  std::string message{};
};

/// The pauses between the tries of one operation that meets a transient
/// refusal or a failover: 100 ms doubling to 1 s notices a finished load or
/// a new master quickly without hammering. The last pause is clipped so
/// that the last try ends by the deadline, never a pause after it.
class Backoff {
 public:
  /// `refusing`: the backend's record of the refusal going on (see
  /// Refusing), kept while refusals of one kind follow each other and
  /// cleared by an operation that ends otherwise.
  /// `missing_since`, when given: the backend's record of when it last
  /// began to find no usable server (a master out of reach under
  /// Sentinel, a shard without one), kept like `refusing` across the
  /// operations that give up on it, so that a waiter's last error tells
  /// how long the outage lasted, not how long its last try did.
  Backoff(Deadline deadline, int interrupt_fd, std::optional<Refusing>& refusing,
          std::optional<Clock::time_point>* missing_since = nullptr)
      : m_started(Clock::now()),
        m_tried(m_started),
        m_deadline(deadline),
        m_interrupt_fd(interrupt_fd),
        m_refusing(refusing),
        m_missing_since(missing_since) {}
  Backoff(const Backoff&) = delete;
  Backoff& operator=(const Backoff&) = delete;
  /// An operation that did not end by giving up on a refusal (it succeeded,
  /// or failed otherwise) ends the refusal; the same for missing_since.
  ~Backoff();

  /// Pauses before the next try. If the deadline leaves no time for one,
  /// `error` becomes the final one: "WHERE still answers KIND after
  /// DURATION" for a server's refusal (DURATION: since its first refusal of
  /// that kind), else "WHERE: MISSING after DURATION".
  Result<void> pause(const Error& error, const std::string& where, const std::string& missing);

 private:
  Clock::time_point m_started;
  /// When the try that just failed began (the end of the last pause).
  Clock::time_point m_tried;
  Deadline m_deadline;
  int m_interrupt_fd;
  std::optional<Refusing>& m_refusing;
  std::optional<Clock::time_point>* m_missing_since;
  Millis m_pause{100};
  /// The longest try so far: the last one is given at least a few of these.
  Millis m_slowest_try{0};
  bool m_gave_up_refused = false;
  bool m_gave_up_missing = false;
};

/// The deadline of one try on a node that may be failing over (a Cluster
/// shard's master, a Sentinel master): half of what is left before
/// `deadline`, a second at least, so that a node that hangs leaves time to
/// find its successor and try again there.
Deadline failover_try_deadline(Deadline deadline);

/// BLPOP on a waiter's wake list `key` for at most `block`: fractional
/// seconds (Redis >= 6.0); it returns early when a grant is pushed there.
std::vector<std::string> blpop_command(const std::string& key, Millis block);

/// Whether `error` is a server reply of one of `kinds`.
bool server_kind(const Error& error, std::initializer_list<redis::ServerError> kinds);

/// How many replicas a lease must reach under --replicas all: the most this
/// master has been seen with (ROLE), since the first sign of a failover is
/// the promoted replica leaving the old master, which still takes writes
/// the new master never sees. Fewer are accepted only once the master has
/// shown fewer for k_fewer_replicas_accepted without a break: a replica
/// shut down or removed for good (a failover is followed well before that:
/// the Sentinels or the Cluster name the new master), so that a waiter
/// does not wait forever for one that is gone.
struct ReplicasSeen {
  int count = 0;
  /// Since when the master has shown fewer than `count` (ROLE).
  std::optional<Clock::time_point> fewer_since;

  ReplicasSeen& operator=(int n) {
    count = n;
    fewer_since.reset();
    return *this;
  }
  operator int() const { return count; }  // NOLINT(google-explicit-constructor)
  /// ROLE said `connected` replicas at `now`.
  void observe(int connected, Clock::time_point now);
};

inline constexpr Millis k_fewer_replicas_accepted{10'000};

/// The ACL user a connection with `options` authenticates as.
std::string acl_user_of(const redis::ConnectOptions& options);

/// Asks `conn`'s server ROLE and INFO memory (one round trip) and warns of
/// what an operator reading status should know: a replica whose link to its
/// master is not up (what it shows may be out of date: a lock held on the
/// master shown as free, or an old holder), naming the master; a server
/// with a maxmemory and a policy other than noeviction, which may evict a
/// lock's keys, naming both. Nothing for a question refused or unanswered.
std::vector<std::string> server_warnings(redis::Connection& conn, Deadline deadline);

/// The value of `field` in an INFO reply (lines "field:value", CRLF or LF),
/// or "" when it has none.
std::string_view info_field(std::string_view info, std::string_view field);

/// Runs `call` once on `conn` (the master of the lock), then WAITs for the
/// replicas `replicas` asks for if the call wrote a lease. `replicas_seen`:
/// the most replicas this master has been seen with (ROLE), raised here;
/// with --replicas all a lease must reach that many even when fewer are
/// connected now (the first sign of a failover is the promoted replica
/// leaving the old master, which still takes writes the new master never
/// sees). With `asking` (a Cluster ASK redirection), ASKING goes right
/// before the script. With `first` (a waiter's BLPOP), that command goes
/// ahead of everything in the same write, and its reply is put in
/// `first_reply`: the script then runs as soon as the server has answered
/// it, without another round trip.
Result<Outcome> execute(redis::Connection& conn, const config::ReplicaPolicy& replicas,
                        ReplicasSeen& replicas_seen, const std::vector<std::string>& keys,
                        const lock::Call& call, Deadline deadline, bool asking = false,
                        const std::vector<std::string>* first = nullptr,
                        redis::Reply* first_reply = nullptr);

/// Whether `call` goes as EVAL, the script itself, from the first try: a
/// forced release, which a quorum may stop waiting for, so that a server
/// that answers later carries it out also without its script cache
/// (nobody is left to answer NOSCRIPT).
bool sent_whole(const lock::Call& call);

/// The step-wise form of execute() (no ASK): the commands that run `call`
/// on the lock's master, ROLE first when --replicas all will need it, and
/// the script by EVALSHA (EVAL with `eval`, or for sent_whole(): the cache
/// lost it).
std::vector<std::vector<std::string>> script_request(const config::ReplicaPolicy& replicas,
                                                     const std::vector<std::string>& keys,
                                                     const lock::Call& call, bool eval);

/// What the replies to script_request() mean, as execute() would say, or
/// nullopt when only execute() can settle it: replicas to WAIT for. A
/// server's error reply is an error here; the caller looks at NOSCRIPT,
/// redirections and transient refusals before.
std::optional<Result<Outcome>> script_answer(const std::string& where,
                                             const config::ReplicaPolicy& replicas,
                                             ReplicasSeen& replicas_seen, const lock::Call& call,
                                             std::vector<redis::Reply> replies,
                                             const std::string& first_key);

/// `error`, and when the ACL refused the lock's keys (NOPERM for "one of the
/// keys"), which keys they are (`first_key`, a key of the lock), so that
/// a key pattern that does not cover the prefix shows.
Error with_keys_named(Error error, const std::string& first_key);

/// The names of every lock whose meta key SCAN finds on `conn`, sorted,
/// without duplicates. Bounded in steps and time (a broken server's cursor
/// may never return to 0).
Result<std::vector<std::string>> scan_lock_names(redis::Connection& conn, const std::string& prefix,
                                                 Millis command_timeout);

/// Runs `call` on every lock SCAN finds on one node (`connect` gives its
/// connection), the lock script once per name in pipelined batches, and
/// hands each reply (error replies in place) to `sink` as
/// Backend::for_every_lock says. `status` is answered by plain reads where
/// they give the script's very reply (status_reads.h). For `status` the walk
/// and the reads overlap (the reads of what one SCAN step found go out with
/// the next step), and each batch's replies go to `sink` as soon as they
/// are read.
Result<void> scan_and_run(const std::function<Result<redis::Connection*>()>& connect,
                          const std::function<Result<void>(const std::string& name)>& load,
                          const std::string& prefix, const lock::Call& call, Millis command_timeout,
                          const LockSink& sink);

}  // namespace rlock::backend
