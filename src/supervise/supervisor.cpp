#include "supervise/supervisor.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <utility>

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
    if (beat.confirmed != m_beat.confirmed && !m_outcome.loss) {
      m_child.guard_until(must_be_dead_by(beat.confirmed, m_timing));
      m_job_resumed = false;
    }
    m_beat = std::move(beat);
    m_wait_status = m_child.poll_exit();
    if (auto unguarded = m_child.take_guardian_failure();
        unguarded && !m_outcome.loss && !m_wait_status)
      lose({LossCause::unkeepable,
            fmt::format("its guardian was killed and could not be replaced ({})",
                        unguarded->message)},
           now);
    if (int stop = m_child.take_stop()) on_stop(stop);
    check_lease(now);
    resume_when_safe(now);
    if (m_kill_at && !m_killed_at && now >= *m_kill_at) {
      m_child.signal_group(SIGKILL);
      m_killed_at = now;
      m_outcome.killed = true;
    }
    // Once the group is killed, what of the command had left it and came
    // to rlock when its parent died (a nested rlock's command) goes too.
    // Deeper nesting (A -> B -> C -> CMD) hands them over one level at a
    // time: each killed one's children come when it has exited.
    if (m_killed_at) m_adopted_left = m_child.kill_adopted();
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

bool Outcome::died_of_ours() const {
  if (!WIFSIGNALED(wait_status)) return false;
  const int sig = WTERMSIG(wait_status);
  return (sig == SIGKILL && killed) || (sig < 64 && (passed_on >> sig & 1) != 0);
}

void Supervisor::on_signal(int sig, Deadline now) {
  if (sig == SIGCHLD) return;  // reaped (and stops noted) at the top of the loop
  if (sig == SIGCONT) {
    // Our job was continued: the command follows once the lease is safe.
    if (std::exchange(m_job_stopped, false)) {
      m_resume_pending = m_job_resumed = true;
      return;
    }
    // A SIGCONT for rlock alone: passed on, so that it continues a command
    // stopped otherwise (SIGSTOP, a stop with no terminal: cron, CI), whose
    // lease was renewed all along, as the man page says. Before, only the
    // command's own group could continue it. A running one takes no notice.
    // Not past the point where the lease guard acts (rlock itself was
    // stopped): check_lease ends the command instead.
    if (!m_wait_status && !m_terminating && now < terminate_by(m_beat.confirmed, m_timing))
      m_child.signal_group(SIGCONT);
    return;
  }
  if (sig == SIGTSTP) return on_own_stop();
  // Forwarded to the group, not only the command: a shell script's
  // children get it too, as they would from a terminal's Ctrl-C.
  const bool group_left = !m_wait_status || m_child.group_exists();
  if (group_left) m_child.signal_group(sig);
  if (!is_terminating(sig)) return;
  if (group_left) m_outcome.passed_on |= std::uint64_t{1} << sig;
  // A stopped command acts on it only once continued.
  if (group_left) m_child.signal_group(SIGCONT);
  if (!m_outcome.signal) m_outcome.signal = sig;
  m_terminating = true;
  schedule_kill(now + m_timing.kill_after);
}

void Supervisor::on_stop(int sig) {
  // Only a stop meant for the terminal's job, while there is a terminal
  // and a job to stop; a command stopped otherwise (SIGSTOP, cron) stays
  // stopped while rlock keeps the lock, as a stopped process keeps a file
  // lock. A command being terminated has been sent SIGCONT already.
  if (!is_job_control_stop(sig) || m_wait_status || m_terminating) return;
  if (m_child.controlling_terminal() < 0) return;
  m_child.reclaim_terminal();
  stop_own_job(sig);
  // Continued (its SIGCONT is pending), or the kernel would not stop us (an
  // orphaned group): then the command stays stopped, as above, until a
  // SIGCONT to rlock.
  m_job_stopped = true;
}

void Supervisor::on_own_stop() {
  // A SIGTSTP for rlock itself: a Ctrl-Z while the terminal is its group's
  // (the command did not get it: the shell gives a pipeline's group the
  // terminal in its own time, and rlock may have looked before), or a kill
  // -TSTP. Before, rlock stopped alone and the command ran on, unrenewed.
  // A command with the terminal gets the stop, and on_stop stops rlock's
  // job once it has stopped; one without is stopped here with rlock's job,
  // and continued with it (resume). One gone or being terminated is left
  // alone.
  // rlock alone: its group may be a script's that nobody stopped (the
  // shell's job, where a Ctrl-Z reached it, is stopped already).
  if (m_wait_status || m_terminating) return stop_own_job(SIGTSTP, false);
  m_child.signal_group(SIGTSTP);
  if (m_child.controlling_terminal() >= 0) return;
  stop_own_job(SIGTSTP, false);
  m_job_stopped = true;
}

void Supervisor::resume_when_safe(Deadline now) {
  if (!m_resume_pending) return;
  // While rlock was stopped nothing renewed the lease: a renewal that fell
  // due meanwhile goes first (the heartbeat sends it at once), so that the
  // command never runs on the last stretch of an old lease. If it cannot
  // be had in time, check_lease terminates the command instead (and it is
  // continued then, to act on its SIGTERM).
  if (!m_terminating && !m_wait_status && now >= next_renewal(m_beat.confirmed, m_timing)) return;
  resume();
}

void Supervisor::resume() {
  m_resume_pending = false;
  if (m_wait_status && !m_child.group_exists()) return;
  m_child.hand_terminal_if_foreground();
  m_child.signal_group(SIGCONT);
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
               fmt::format("no renewal confirmed for {}, so it was killed before the lease "
                           "could run out",
                           format_duration(since))};
    }
    return;
  }
  if (m_beat.lost) {
    lose({LossCause::not_owner, m_beat.lost->message}, now);
  } else if (m_beat.unkeepable) {
    // Before: the command ran on until the lease's end, then was reported
    // as a lock lost to an outage.
    lose({LossCause::unkeepable,
          fmt::format("{}, so it could not be kept", m_beat.unkeepable->message)},
         now);
  } else if (now >= terminate_by(m_beat.confirmed, m_timing)) {
    auto since = std::chrono::duration_cast<Millis>(now - m_beat.confirmed);
    // The last renewal's own failure, which may have timed out after a
    // fraction of that time (each try has the time left, not the lease).
    std::string why = m_beat.failure  ? "the last try: " + m_beat.failure->message
                      : m_job_resumed ? "rlock's job was stopped meanwhile"
                                      : "no answer in time";
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
  // A stopped command acts on it only once continued.
  m_child.signal_group(SIGCONT);
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
  // command's group is gone, not just the one we started, and every
  // descendant that came to us once its parent was killed.
  if (!m_child.group_exists() && !m_adopted_left) return true;
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
