#pragma once
/// The heartbeat: a thread with its own connection that renews the lease
/// every TTL/3 while the command runs, retrying transient failures with
/// backoff. It only reports; the main thread decides (from the send time of
/// the last confirmed renewal) when the lock must be given up.

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "backend/backend.h"
#include "lock/lock.h"
#include "supervise/fd.h"
#include "supervise/timing.h"
#include "util/error.h"

namespace rlock::supervise {

/// What the heartbeat has to say.
struct Beat {
  /// Send time of the last renewal the server confirmed (or of the acquire).
  Deadline confirmed;
  /// Set when the server says the token no longer holds the lock.
  std::optional<Error> lost;
  /// The most recent transient failure since the last confirmed renewal.
  std::optional<Error> failure;
  /// Set when the heartbeat's thread could not start: no renewal will ever
  /// be sent, so the lock cannot be kept (the command is stopped at once,
  /// not when the lease runs out).
  std::optional<Error> unkeepable;
};

/// Where and what to renew.
struct HeartbeatTarget {
  /// The heartbeat's own backend (its own connections, for its thread).
  std::unique_ptr<backend::Backend> backend;
  std::string name;
  std::string token;
  /// Says a warning on stderr (unless -q): once, when the lock's server may
  /// evict the lock's keys (see Heartbeat::loop). None: not asked.
  std::function<void(const std::string&)> warn;
  /// The owner's client (the connection the lock was taken on), idle while
  /// the command runs: the heartbeat renews through it when its own
  /// connection cannot be had at all (the server's maxclients, taken by the
  /// queue the lock came from). The owner must not use it until stop().
  lock::LockClient* spare = nullptr;
};

class Heartbeat {
 public:
  /// Prepares the heartbeat; its thread starts at starts_at(), when the
  /// owner calls start_if_due() (the supervisor's loop): 100 ms into the
  /// command, or at the first renewal if sooner. A command that ends sooner
  /// (`rlock run x -- true`, a quick cron job) never costs a thread or a
  /// second connection, and its start does not wait for either.
  static Result<std::unique_ptr<Heartbeat>> create(HeartbeatTarget target, const Timing& timing,
                                                   Deadline confirmed);
  /// When the thread is due to start; nullopt once it has (or could not).
  std::optional<Deadline> starts_at() const {
    return m_started ? std::nullopt : std::optional<Deadline>(m_starts_at);
  }
  /// Starts the thread if `now` is past starts_at(). Signals must be
  /// blocked in the caller, so that the thread inherits the mask and never
  /// takes one. A thread that cannot be started is reported as a failure
  /// (Beat::failure): renewals then stop, and the lease runs out as if the
  /// server could not be reached.
  void start_if_due(Deadline now);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  /// Stops and joins the thread; an in-flight renewal is interrupted. After
  /// this returns no renewal can reach the server from us any more, except
  /// one already sent, which the lock script refuses once the lock is
  /// released (it never re-creates a lock).
  void stop();

  /// After stop(): the client the heartbeat renewed with (the spare, once
  /// it took over, or when its own never renewed), or nullptr when its
  /// thread never ran (a command shorter than k_start_after). Its
  /// backend has followed the lock through whatever happened while the
  /// command ran (a failover, a redirection, a reconnection), which the
  /// owner's, unused since the grant, has not: a release sent through the
  /// owner's could wait out a frozen old master first.
  lock::LockClient* client_after_stop();

  /// Readable when there is news (a confirmed renewal, a failure, a loss).
  int fd() const { return m_news.get(); }
  /// The current state; also consumes the news on fd().
  Beat beat();

 private:
  Heartbeat(HeartbeatTarget target, const Timing& timing, Deadline confirmed, Fd stop, Fd news);
  /// Warns (m_target.warn) when the lock's server may evict its keys.
  void warn_of_eviction(lock::LockClient& client, Deadline due);
  void loop();
  /// Sleeps until `until`; false when stop() was called meanwhile.
  bool sleep_until(Deadline until) const;
  /// Waits until `until` on this holder's wake list, where a forced release
  /// pushes, and returns true early when something was pushed (the renewal
  /// then sent at once finds the lock gone); sleeps instead where the
  /// backend cannot wait (a quorum) or the wait failed. False when stop()
  /// was called meanwhile.
  bool wait_until(lock::LockClient& client, Deadline until);
  void publish(const std::function<void(Beat&)>& change);

  HeartbeatTarget m_target;
  /// The thread's client, over m_target's backend (client_after_stop()).
  std::optional<lock::LockClient> m_client;
  /// The client renewals go through: &*m_client, or m_target.spare once it
  /// took over; written by the thread only, read after it is joined.
  lock::LockClient* m_active = nullptr;
  /// The spare's interrupt fd before the thread lent it the stop eventfd.
  int m_spare_interrupt_fd = -1;
  /// Whether a renewal went through the thread's own client (written by
  /// the thread, read after it is joined).
  bool m_own_renewed = false;
  Timing m_timing;
  Deadline m_starts_at;
  bool m_started = false;
  /// When wait_until last returned early (the thread's only).
  std::optional<Deadline> m_woken_early;
  /// Whether stop() cut a wait short, closing the thread's connection
  /// (written by the thread, read after it is joined).
  bool m_wait_cut = false;
  Fd m_stop;  // eventfd: readable once stop() was called
  Fd m_news;  // eventfd: readable when m_beat changed
  std::mutex m_mutex;
  Beat m_beat;
  std::thread m_thread;
};

}  // namespace rlock::supervise
