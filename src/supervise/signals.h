#pragma once
/// The signals `rlock run` handles, read synchronously in the main thread
/// from a signalfd (no handlers, nothing async-signal-unsafe to worry about).

#include <csignal>
#include <optional>

#include "supervise/fd.h"
#include "util/error.h"

namespace rlock::supervise {

/// Passed on to the command's process group: the ones a user, a CI runner or
/// a service manager sends to stop or poke a job.
inline constexpr int k_forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

/// True for the forwarded signals that mean "stop": after them the command
/// gets --kill-after to exit before SIGKILL. SIGUSR1/2 only pass through.
bool is_terminating(int sig);

/// The forwarded signals that rlock was started with ignored (nohup, a
/// background job of a non-interactive shell): they stay ignored, by rlock
/// and by the command, as the caller asked.
sigset_t ignored_on_entry();

/// Sets the signals of `ignored` back to SIG_IGN (after a SignalPipe for
/// the wait installed handlers for all forwarded signals).
void keep_ignored(const sigset_t& ignored);

/// True for the signals that stop a job for the terminal's sake (Ctrl-Z,
/// a background read or write): the ones a shell treats as "Stopped".
/// SIGSTOP is not one of them: nobody's terminal sends it.
bool is_job_control_stop(int sig);

/// Stops rlock's own process group, the job of the shell rlock belongs to,
/// with `sig`, as the terminal would have had that job been in the
/// foreground: rlock stops with it, even when `sig` is blocked for the
/// signalfd (SIGTTOU), since it is unblocked in this thread while it is
/// sent. Returns once rlock is continued (its SIGCONT is then pending on
/// the SignalFd), or at once when the kernel discarded the stop (an
/// orphaned process group, or the signal ignored since rlock started).
/// With `whole_group` false, rlock alone is stopped (a stop that reached
/// rlock, whose group may be a script's that was not stopped).
void stop_own_job(int sig, bool whole_group = true);

/// Blocks the forwarded signals (except `ignored`), SIGCHLD and SIGCONT in
/// the calling thread (and so in every thread started from it afterwards)
/// and reads them from a signalfd: SIGCONT says rlock's job was continued
/// (it continues the process whether blocked or not). SIGTTOU is blocked
/// too, so that handing the terminal back after a foreground command never
/// stops rlock.
///
/// The mask is deliberately not restored on destruction: rlock exits right
/// after, and a signal arriving while the lock is being released must not
/// kill it halfway.
class SignalFd {
 public:
  static Result<SignalFd> open(const sigset_t& ignored);

  int fd() const { return m_fd.get(); }
  /// The next pending signal, or nullopt when none is.
  std::optional<int> next();

 private:
  explicit SignalFd(Fd fd) : m_fd(std::move(fd)) {}
  Fd m_fd;
};

/// Blocks the forwarded signals (except `ignored`) in the calling thread and returns the
/// previous mask (the one the command must start with). Called before the
/// SignalPipe of the wait is torn down, so that no signal falls into the gap
/// before the SignalFd exists.
sigset_t block_forwarded_signals(const sigset_t& ignored);

}  // namespace rlock::supervise
