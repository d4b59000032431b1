#pragma once
/// The lock itself: acquire (with a FIFO wait woken by notification), renew,
/// release, forced release and status, each one atomic script on the server.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "redis/connection.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock::lock {

/// Who holds or waits: shown by status, never used for decisions.
struct Identity {
  std::string owner;  // --owner, default user@host
  std::string host;
  long pid = 0;
  std::string command;
};

struct Request {
  std::string name;
  Millis ttl{30'000};
  bool shared = false;
  int limit = 1;  // semaphore size; every user of a lock must agree
  Identity who;
};

struct Grant {
  std::string token;
  std::int64_t fence = 0;
};

struct HolderView {
  std::string id;    // short id, never the token
  std::string mode;  // exclusive, shared or semaphore
  std::int64_t fence = 0;
  Identity who;
  Millis age{0};
  Millis ttl_left{0};
};

struct WaiterView {
  int position = 0;  // 1 = next
  std::string id;
  std::string mode;
  Identity who;
  Millis waiting{0};
};

/// One forced release. `by` and `acl_user` are what the forcing client
/// reported: whoever may write a lock's keys may also write this record.
struct AuditView {
  Millis ago{0};
  Identity by;
  std::string acl_user;  // the Redis ACL user the client was connected as
  std::vector<HolderView> evicted;
};

struct LockView {
  std::string name;
  int limit = 1;
  std::int64_t last_fence = 0;
  std::vector<HolderView> holders;
  std::vector<WaiterView> waiters;
  std::vector<AuditView> forced;  // the last forced releases, newest first
  /// Set when the lock's keys could not be read as a lock (a foreign key at
  /// its name, a malformed reply): the server's message. Only list() returns
  /// such views, so that one broken lock does not hide the others.
  std::string problem;
};

/// The answer to one try: held, or busy with our place in the queue.
struct Attempt {
  bool acquired = false;
  std::int64_t fence = 0;
  int position = 0;  // in the queue; 0 = not queued
  std::optional<HolderView> holder;
};

/// How long a waiter's place in the queue lasts without a refresh: a killed
/// waiter stops blocking the ones behind it after at most this long.
inline constexpr Millis k_waiter_lease{3000};
/// A waiter re-checks (and refreshes its lease) this often even without a
/// notification, so a lost wake-up or a crashed holder never hangs it.
inline constexpr Millis k_recheck_interval{1000};
/// A queued waiter rides out a Redis restart or failover this long (a
/// Sentinel failover takes well under 30 s) before giving up as unreachable.
/// It keeps its token, so it keeps its place, or rejoins at the end if the
/// server lost the queue.
inline constexpr Millis k_outage_tolerance{30'000};

class LockClient {
 public:
  LockClient(redis::ConnectOptions options, std::string prefix);

  /// One try: takes the lock if it is free and nobody is queued ahead;
  /// otherwise joins (or refreshes its place in) the queue when `enqueue`,
  /// or leaves it when not. Default deadline: the command timeout.
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
  /// and returns the new lease; not_owner if the token lost it.
  Result<Millis> renew(const std::string& name, const std::string& token, Millis ttl,
                       Deadline deadline);
  /// Releases (or leaves the queue); not_owner if the token held nothing.
  /// Default deadline: the command timeout.
  Result<void> release(const std::string& name, const std::string& token,
                       std::optional<Deadline> deadline = std::nullopt);
  /// Evicts every holder, or the one with this short id; returns them.
  Result<std::vector<HolderView>> force_release(const std::string& name,
                                                const std::string& holder_id, const Identity& by);

  Result<LockView> status(const std::string& name);
  /// Every live lock under the prefix, sorted by name (SCAN + pipelining).
  Result<std::vector<LockView>> list();

  /// The connection, opened on first use and again after a failure; the
  /// current interrupt fd applies to it.
  Result<redis::Connection*> connection();
  const std::string& prefix() const { return m_prefix; }
  const redis::ConnectOptions& options() const { return m_options; }

 private:
  /// Runs one operation of the lock script before `deadline` (default: the
  /// command timeout from now). This is where every lock operation gets its
  /// retries, so that no caller needs its own: once more on a connection
  /// lost mid-request (the operations are idempotent by token), and with
  /// backoff on a transient refusal (LOADING, BUSY, TRYAGAIN, MASTERDOWN),
  /// never past the deadline. The interrupt fd cuts both short.
  Result<redis::Reply> run(const std::string& name, std::vector<std::string> args,
                           std::optional<Deadline> deadline = std::nullopt);
  /// Makes `fd` the interrupt fd of every step from now on (-1: none).
  void use_interrupt_fd(int fd);
  /// An interrupted waiter leaves the queue, briefly and without the
  /// interrupt fd.
  void leave_queue(const std::string& name, const std::string& token);
  Result<LockView> parse_status(const std::string& name, const redis::Reply& reply) const;
  /// The Redis ACL user of this connection, for the audit record.
  std::string acl_user() const;

  redis::ConnectOptions m_options;
  std::string m_prefix;
  std::optional<redis::Connection> m_connection;
  /// Interrupts connecting, commands and retry pauses when readable: the
  /// options' one, replaced by acquire's for the time of the wait.
  int m_interrupt_fd = -1;
};

/// The identity of this process (user@host, host, pid, command line).
Identity local_identity(long pid, std::string command);

}  // namespace rlock::lock
