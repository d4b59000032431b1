#pragma once
/// The main loop of `rlock run`: waits for the command to end while passing
/// signals on, and terminates it (SIGTERM, then SIGKILL after --kill-after)
/// when rlock is told to stop or the lock is lost, so that the command is
/// dead before the lease can expire. One thread, one poll(): the signalfd,
/// the heartbeat's eventfd, and a timeout for the next deadline.
///
/// Job control: rlock and its command are one job of the shell's. When the
/// command is stopped by SIGTSTP, SIGTTIN or SIGTTOU (Ctrl-Z, a read or
/// write of the terminal from the background) while rlock has a
/// controlling terminal, rlock takes the terminal back and stops its own
/// job with the same signal, so the shell says "Stopped" and gives its
/// prompt back. When continued (fg, bg) it resumes the command, after a
/// renewal if one fell due meanwhile, and hands it the terminal if rlock is
/// in the foreground; if the lease could not be kept meanwhile (no renewal
/// is possible while stopped), the lock is lost as it is when Redis cannot
/// be reached: SIGTERM (with SIGCONT), exit 79. Any other stop (SIGSTOP,
/// or no terminal) leaves rlock running and renewing, as before.

#include <cstdint>
#include <optional>
#include <string>

#include "supervise/child.h"
#include "supervise/heartbeat.h"
#include "supervise/signals.h"
#include "supervise/timing.h"

namespace rlock::supervise {

/// Why the lock was given up while the command ran.
enum class LossCause {
  not_owner,    // the server says we no longer hold it: nothing left to release
  unreachable,  // no renewal confirmed in time: the lease is running out
  max_hold,     // --max-hold reached: we still hold it, release it
  unkeepable,   // it cannot be renewed (no heartbeat thread): we still hold it, release it
};

struct Loss {
  LossCause cause;
  std::string reason;  // for "lost lock 'NAME': REASON"
};

/// How the run ended.
struct Outcome {
  int wait_status = 0;       // of the command
  std::optional<Loss> loss;  // set: exit 79
  int signal = 0;            // the first terminating signal rlock got, or 0
  /// The terminating signals rlock passed on to the command (bit N for
  /// signal N), and whether it sent SIGKILL after --kill-after: a command
  /// that dies of a signal from anywhere else (the OOM killer, a kill
  /// from outside) is not reported as the one rlock was told to stop by.
  std::uint64_t passed_on = 0;
  bool killed = false;
  /// True when the command died of a signal rlock passed on, or of its
  /// SIGKILL.
  bool died_of_ours() const;
};

class Supervisor {
 public:
  /// `confirmed`: the send time of the acquire or renewal the command
  /// starts under (the child's guardian was given its deadline already).
  Supervisor(Child& child, Heartbeat& heartbeat, SignalFd& signals, const Timing& timing,
             Deadline acquired, Deadline confirmed);
  /// Returns once the command has exited and, when it was being terminated,
  /// its whole process group is gone (or was SIGKILLed).
  Outcome run();

 private:
  void on_signal(int sig, Deadline now);
  void on_stop(int sig);
  void on_own_stop();
  void resume_when_safe(Deadline now);
  void resume();
  void check_lease(Deadline now);
  void lose(Loss loss, Deadline now);
  void schedule_kill(Deadline at);
  bool finished(Deadline now);
  int poll_timeout(Deadline now) const;

  Child& m_child;
  Heartbeat& m_heartbeat;
  SignalFd& m_signals;
  Timing m_timing;
  std::optional<Deadline> m_max_hold_end;
  Beat m_beat;
  Outcome m_outcome;
  std::optional<int> m_wait_status;
  bool m_terminating = false;
  /// rlock stopped its job after the command's job-control stop, and waits
  /// for its SIGCONT.
  bool m_job_stopped = false;
  /// rlock's job was continued: the command is to be continued too, once
  /// that is safe (resume_when_safe).
  bool m_resume_pending = false;
  /// rlock's job was stopped and continued, and nothing was renewed since:
  /// why the lease may have run out.
  bool m_job_resumed = false;
  std::optional<Deadline> m_kill_at;    // when SIGKILL goes to the group
  std::optional<Deadline> m_killed_at;  // when it went
  /// Processes that came to rlock as subreaper were found (and killed)
  /// after that: not finished until none is left.
  bool m_adopted_left = false;
};

}  // namespace rlock::supervise
