#include "supervise/heartbeat.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <system_error>

#include "lock/lock.h"
#include "util/process.h"

namespace rlock::supervise {

namespace {

Result<Fd> new_eventfd() {
  Fd fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!fd) return fail(Error::Code::internal, std::string("eventfd: ") + std::strerror(errno));
  return fd;
}

void signal_eventfd(int fd) {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = write(fd, &one, sizeof one);
}

/// How long into the command the heartbeat thread starts and connects, if
/// no renewal is due sooner (see Heartbeat::create).
constexpr Millis k_start_after{100};
/// At most this long for the question of warn_of_eviction.
constexpr Millis k_eviction_question{1000};

void drain_eventfd(int fd) {
  std::uint64_t count = 0;
  [[maybe_unused]] auto n = read(fd, &count, sizeof count);
}

}  // namespace

Result<std::unique_ptr<Heartbeat>> Heartbeat::create(HeartbeatTarget target, const Timing& timing,
                                                     Deadline confirmed) {
  auto stop = new_eventfd();
  if (!stop) return std::unexpected(stop.error());
  auto news = new_eventfd();
  if (!news) return std::unexpected(news.error());
  std::unique_ptr<Heartbeat> heartbeat(
      new Heartbeat(std::move(target), timing, confirmed, std::move(*stop), std::move(*news)));
  heartbeat->m_starts_at = std::min(next_renewal(confirmed, timing), Clock::now() + k_start_after);
  return heartbeat;
}

void Heartbeat::start_if_due(Deadline now) {
  if (m_started || now < m_starts_at) return;
  m_started = true;
  try {
    m_thread = std::thread([this] { loop(); });
  } catch (const std::system_error& e) {
    Error error{Error::Code::internal,
                fmt::format("cannot start the heartbeat thread: {}", e.code().message())};
    publish([&error](Beat& b) { b.unkeepable = error; });
  }
}

Heartbeat::Heartbeat(HeartbeatTarget target, const Timing& timing, Deadline confirmed, Fd stop,
                     Fd news)
    : m_target(std::move(target)),
      m_timing(timing),
      m_stop(std::move(stop)),
      m_news(std::move(news)) {
  m_beat.confirmed = confirmed;
  // The stop eventfd also interrupts a connect or a command in flight, so
  // stop() never waits for a slow or frozen server.
  m_target.backend->set_interrupt_fd(m_stop.get());
}

Heartbeat::~Heartbeat() {
  stop();
}

void Heartbeat::stop() {
  if (!m_thread.joinable()) return;
  signal_eventfd(m_stop.get());
  m_thread.join();
  // What it warned of reaches stderr before the messages after it, unless
  // nobody reads stderr.
  constexpr int k_flush_ms = 200;
  flush_stderr_writer(k_flush_ms);
}

lock::LockClient* Heartbeat::client_after_stop() {
  if (m_thread.joinable() || !m_client) return nullptr;
  // Its interrupt fd is the stop eventfd, readable for good now.
  m_client->backend().set_interrupt_fd(-1);
  if (m_active && m_active == m_target.spare) {
    m_active->backend().set_interrupt_fd(m_spare_interrupt_fd);
    return m_active;
  }
  // Its own connection never renewed (the command ended before the first
  // renewal, or it could not be had): it followed nothing, and may not even
  // be open; the owner's is (a release through a new connection to a
  // server at its maxclients would fail).
  if (!m_own_renewed && m_target.spare) return m_target.spare;
  // One whose wait for a forced release's word stop() cut short was closed
  // with the BLPOP on it: the owner's, idle and open, sends the release
  // instead of a new connection, unless the heartbeat's followed the lock
  // to another server (a failover) that the owner's has not learned of.
  if (m_wait_cut && m_target.spare) {
    const auto here = m_client->backend().server_of(m_target.name);
    if (!here.empty() && here == m_target.spare->backend().server_of(m_target.name))
      return m_target.spare;
  }
  return &*m_client;
}

Beat Heartbeat::beat() {
  drain_eventfd(m_news.get());
  std::lock_guard lock(m_mutex);
  return m_beat;
}

void Heartbeat::publish(const std::function<void(Beat&)>& change) {
  {
    std::lock_guard lock(m_mutex);
    change(m_beat);
  }
  signal_eventfd(m_news.get());
}

bool Heartbeat::sleep_until(Deadline until) const {
  for (;;) {
    auto left = std::chrono::ceil<Millis>(until - Clock::now());
    pollfd p{m_stop.get(), POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(std::max(left, Millis(0)).count()));
    if (n > 0) return false;
    if (n == 0 && Clock::now() >= until) return true;
  }
}

bool Heartbeat::wait_until(lock::LockClient& client, Deadline until) {
  // The BLPOP ends this much before `until`, so that its answer (nil) is
  // read before the wait's own deadline; otherwise the connection, given up
  // on too soon, would be dropped and opened again every renewal. An idle
  // Redis answers a blocking timeout at its next cron tick (hz 10: up to
  // 100 ms late), so 50 ms did not do (e2e 420 counted the reconnections).
  constexpr Millis k_margin{250};
  // Shorter than this, the wait is not worth a BLPOP.
  constexpr Millis k_least_wait{2 * k_margin};
  const auto stopped = [this] {
    pollfd p{m_stop.get(), POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  };
  // One early renewal a second at most: whoever may write the lock's keys
  // could push to the list again and again.
  constexpr Millis k_early_every{1000};
  // Not on the owner's connection (the spare), which the release needs
  // open (the server refused us another one); nor where a wait ends with
  // connections (a quorum).
  if (&client == m_target.spare || !client.backend().holder_waits()) return sleep_until(until);
  if (m_woken_early && Clock::now() - *m_woken_early < k_early_every) return sleep_until(until);
  const auto left = std::chrono::floor<Millis>(until - Clock::now());
  if (left < k_least_wait) return sleep_until(until);
  const Millis block = left - k_margin;
  const Deadline blocked_until = Clock::now() + block;
  // Answered by `until` at the latest: a server that froze meanwhile
  // cannot hold the renewal up.
  auto woke = client.backend().wait_for_wake(m_target.name, m_target.token, block, until);
  if (stopped()) {
    // Cut short, its connection was closed with the BLPOP still on it.
    m_wait_cut = true;
    return false;
  }
  // A wait that failed (the server went away, a foreign key at the list)
  // is the renewal's business: it is due at `until` as before.
  if (!woke) return sleep_until(until);
  // The BLPOP's own end: the renewal is due at `until`, as always.
  constexpr Millis k_slack{10};
  if (Clock::now() + k_slack >= blocked_until) return sleep_until(until);
  // Woken before its time: a forced release (or a leftover of the grant
  // that woke this holder as a waiter, which costs one early renewal).
  m_woken_early = Clock::now();
  return true;
}

void Heartbeat::warn_of_eviction(lock::LockClient& client, Deadline due) {
  if (!m_target.warn) return;
  // Asked once, on the heartbeat's own connection while the command runs
  // (nothing waits for it), and never past the first renewal's time: a
  // server that does not answer (or a quorum, which has no single server
  // to ask) only goes without the warning.
  auto memory =
      client.memory_policy(m_target.name, std::min(due, Clock::now() + k_eviction_question));
  if (!memory || memory->first <= 0 || memory->second == "noeviction") return;
  m_target.warn(fmt::format(
      "warning: the Redis of lock '{}' may evict its keys (maxmemory {} bytes, "
      "maxmemory-policy {}): evicted, the lock lets a second holder in while this one runs; "
      "use maxmemory-policy noeviction (see REDIS REQUIREMENTS in rlock(1))",
      m_target.name, memory->first, memory->second));
}

void Heartbeat::loop() {
  // Its warnings (and a quorum's, from its members) never hold up a renewal.
  stderr_never_blocks_this_thread();
  lock::LockClient& client = m_client.emplace(std::move(m_target.backend));
  Deadline confirmed = m_beat.confirmed;  // only this thread writes it
  Deadline due = next_renewal(confirmed, m_timing);
  // The heartbeat's own connection (and a Cluster probe, see
  // Backend::prepare) is opened while the command runs, not before: nothing
  // waits for it (the thread itself starts k_start_after into the command).
  client.backend().prepare(due);
  warn_of_eviction(client, due);
  int failures = 0;
  m_active = &client;
  // Between renewals the thread waits on the holder's wake list: a forced
  // release pushes there, and the renewal sent at once learns the lock is
  // gone, so the command is stopped within a round trip instead of at the
  // next renewal (up to a third of the TTL later, while the next holder
  // already ran).
  while (wait_until(*m_active, due)) {
    const auto sent = Clock::now();
    // Past this point the main thread is already terminating the command:
    // a renewal could not change that any more.
    if (sent >= terminate_by(confirmed, m_timing)) return;
    const Deadline attempt_by = attempt_deadline(sent, confirmed, m_timing);
    auto renewed = m_active->renew(m_target.name, m_target.token, m_timing.ttl, attempt_by);
    if (renewed && m_active == &client) m_own_renewed = true;
    // Its own connection never had: the server may be refusing new
    // clients (maxclients, every place taken by the queue this lock came
    // from), while the connection the lock was taken on is open and idle.
    // The renewal goes through that one from then on.
    if (!renewed && !m_own_renewed && m_active == &client && m_target.spare &&
        renewed.error().code != Error::Code::interrupted &&
        renewed.error().code != Error::Code::not_owner) {
      m_spare_interrupt_fd = m_target.spare->backend().interrupt_fd();
      m_target.spare->backend().set_interrupt_fd(m_stop.get());
      auto spared = m_target.spare->renew(m_target.name, m_target.token, m_timing.ttl, attempt_by);
      if (spared || spared.error().code == Error::Code::not_owner) {
        m_active = m_target.spare;
        renewed = std::move(spared);
      } else {
        m_target.spare->backend().set_interrupt_fd(m_spare_interrupt_fd);
      }
    }
    if (renewed) {
      confirmed = sent;
      failures = 0;
      publish([sent](Beat& b) {
        b.confirmed = sent;
        b.failure.reset();
      });
      due = next_renewal(sent, m_timing);
      continue;
    }
    const Error& error = renewed.error();
    if (error.code == Error::Code::interrupted) return;  // stop()
    if (error.code == Error::Code::not_owner) {
      publish([&error](Beat& b) { b.lost = error; });
      return;
    }
    // Unreachable, timed out, or a server error (READONLY during a
    // failover, LOADING after a restart): retry while the lease lasts.
    ++failures;
    publish([&error](Beat& b) { b.failure = error; });
    due = Clock::now() + retry_delay(failures);
  }
}

}  // namespace rlock::supervise
