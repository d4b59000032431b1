#include "supervise/supervisor.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>

namespace rlock::supervise {

namespace {

/// While a terminated command's leftover children are still exiting, the
/// group is checked this often: fast enough that rlock exits promptly,
/// rare enough to cost nothing.
constexpr Millis k_group_poll{20};
/// After SIGKILL, how long to wait for the group to vanish (the killed
/// processes must still be reaped by their parents) before giving up on
/// watching it: SIGKILL cannot be ignored, they are dead already.
constexpr Millis k_reap_grace{1000};

}  // namespace

Supervisor::Supervisor(Child& child, Heartbeat& heartbeat, SignalFd& signals, const Timing& timing,
                       Deadline acquired, Deadline confirmed)
    : m_child(child),
      m_heartbeat(heartbeat),
      m_signals(signals),
      m_timing(timing),
      m_max_hold_end(max_hold_end(acquired, timing)) {
  m_beat.confirmed = confirmed;
}

Outcome Supervisor::run() {
  for (;;) {
    auto now = Clock::now();
    m_heartbeat.start_if_due(now);
    auto beat = m_heartbeat.beat();
    // The guardian kills the group by itself when rlock dies or hangs past
    // the point it last heard of: move that point on with every renewal.
    if (beat.confirmed != m_beat.confirmed && !m_outcome.loss)
      m_child.guard_until(must_be_dead_by(beat.confirmed, m_timing));
    m_beat = std::move(beat);
    m_wait_status = m_child.poll_exit();
    check_lease(now);
    if (m_kill_at && !m_killed_at && now >= *m_kill_at) {
      m_child.signal_group(SIGKILL);
      m_killed_at = now;
    }
    if (finished(now)) break;

    pollfd fds[2] = {{m_signals.fd(), POLLIN, 0}, {m_heartbeat.fd(), POLLIN, 0}};
    int n = poll(fds, 2, poll_timeout(now));
    if (n < 0 && errno != EINTR) break;  // cannot happen with valid fds
    if (n > 0 && (fds[0].revents & POLLIN))
      while (auto sig = m_signals.next()) on_signal(*sig, Clock::now());
  }
  m_outcome.wait_status = m_wait_status.value_or(0);
  return m_outcome;
}

void Supervisor::on_signal(int sig, Deadline now) {
  if (sig == SIGCHLD) return;  // reaped at the top of the loop
  // Forwarded to the group, not only the command: a shell script's
  // children get it too, as they would from a terminal's Ctrl-C.
  if (!m_wait_status || m_child.group_exists()) m_child.signal_group(sig);
  if (!is_terminating(sig)) return;
  if (!m_outcome.signal) m_outcome.signal = sig;
  m_terminating = true;
  schedule_kill(now + m_timing.kill_after);
}

void Supervisor::check_lease(Deadline now) {
  if (m_outcome.loss) return;
  if (m_wait_status && !m_terminating) {
    // Done: nothing left to protect. Unless a signal ended the command
    // after the moment the lease guard had to act: then the guardian (rlock
    // was stopped or starved past that moment) or the end of the lease
    // killed it, and the run reports the loss, not 128+N.
    if (WIFSIGNALED(*m_wait_status) && now >= terminate_by(m_beat.confirmed, m_timing)) {
      auto since = std::chrono::duration_cast<Millis>(now - m_beat.confirmed);
      m_outcome.loss =
          Loss{LossCause::unreachable,
               fmt::format("no renewal confirmed for {}, so it was killed at the end of the lease",
                           format_duration(since))};
    }
    return;
  }
  if (m_beat.lost) {
    lose({LossCause::not_owner, m_beat.lost->message}, now);
  } else if (now >= terminate_by(m_beat.confirmed, m_timing)) {
    auto since = std::chrono::duration_cast<Millis>(now - m_beat.confirmed);
    std::string why = m_beat.failure ? m_beat.failure->message : "no answer in time";
    lose({LossCause::unreachable,
          fmt::format("could not renew it for {} ({})", format_duration(since), why)},
         now);
  } else if (m_max_hold_end && now >= *m_max_hold_end) {
    lose({LossCause::max_hold,
          fmt::format("held for --max-hold {}", format_duration(*m_timing.max_hold))},
         now);
  }
}

void Supervisor::lose(Loss loss, Deadline now) {
  m_outcome.loss = std::move(loss);
  m_terminating = true;
  m_child.signal_group(SIGTERM);
  // SIGKILL after --kill-after, but in any case by the time the lease may
  // end (minus the margin): terminate_by() was chosen so that both agree
  // when the loss is noticed on time.
  schedule_kill(std::min(now + m_timing.kill_after, must_be_dead_by(m_beat.confirmed, m_timing)));
}

void Supervisor::schedule_kill(Deadline at) {
  if (m_killed_at) return;
  m_kill_at = m_kill_at ? std::min(*m_kill_at, at) : at;
}

bool Supervisor::finished(Deadline now) {
  if (!m_wait_status) return false;
  if (!m_terminating) return true;
  // Being terminated: the lock is given up only once every process of the
  // command's group is gone, not just the one we started.
  if (!m_child.group_exists()) return true;
  return m_killed_at && now >= *m_killed_at + k_reap_grace;
}

int Supervisor::poll_timeout(Deadline now) const {
  std::optional<Deadline> next;
  auto consider = [&next](Deadline d) { next = next ? std::min(*next, d) : d; };
  if (!m_outcome.loss && !(m_wait_status && !m_terminating)) {
    consider(terminate_by(m_beat.confirmed, m_timing));
    if (m_max_hold_end) consider(*m_max_hold_end);
  }
  if (m_kill_at && !m_killed_at) consider(*m_kill_at);
  if (m_wait_status && m_terminating) consider(now + k_group_poll);
  if (auto start = m_heartbeat.starts_at()) consider(*start);
  if (!next) return -1;
  auto left = std::chrono::ceil<Millis>(*next - now);
  return static_cast<int>(std::max(left, Millis(0)).count());
}

}  // namespace rlock::supervise
