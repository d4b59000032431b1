#pragma once
/// Turns termination signals into a readable file descriptor, so a blocked
/// Redis call can be interrupted (Ctrl-C while waiting for a lock).

#include <csignal>
#include <initializer_list>
#include <vector>

namespace rlock {

class SignalPipe {
 public:
  explicit SignalPipe(std::initializer_list<int> signals);
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  /// Readable once one of the signals arrived.
  int fd() const { return m_fds[0]; }
  /// The first signal received, or 0.
  int received() const;
  /// Why the pipe could not be made (errno: out of descriptors), or 0. A
  /// signal would then go unnoticed until the wait ends: the caller fails.
  int error() const { return m_error; }

 private:
  int m_fds[2] = {-1, -1};
  int m_error = 0;
  std::vector<std::pair<int, struct sigaction>> m_saved;
};

/// rlock was stopped by signal `sig` (Ctrl-C, a kill) and has cleaned up:
/// it is to end by that signal rather than exit 128+sig, when `sig` is one
/// that a calling shell must see it die of (see die_as_told).
void exit_by_signal(int sig);

/// As exit_by_signal(), for a Ctrl-C or Ctrl-\ that only the command got:
/// rlock had given it the terminal, so the terminal's signal reached the
/// command's group alone, and not rlock's group, where a calling script's
/// shell waits. die_as_told() then sends `sig` to rlock's whole group
/// (itself included), as the terminal would have without the handover:
/// `bash -c 'rlock run x -- step1; step2'` must stop there, as a shell
/// stops only when it got the signal too.
void exit_by_signal_of_terminal(int sig);

/// Ends the process by the signal exit_by_signal() recorded, if it is
/// SIGINT or SIGQUIT; returns otherwise. A shell that gets Ctrl-C while it
/// waits for a command goes on with its script when that command *exits*
/// (it takes the signal as handled) and stops only when the command died of
/// it: `rlock run x -- step1; step2` must not run step2 after a Ctrl-C, as
/// it would not after flock(1). The exit status the shell reports is the
/// same 128+N either way.
void die_as_told();

/// The dispositions rlock sets for itself at the start of main, each taken
/// from what it was on entry, which the command of `run` gets back
/// (restore_entry_signals, in the child before exec):
/// - SIGPIPE and SIGXFSZ ignored: a write to a pipe nobody reads, or past
///   `ulimit -f`, is an error to report (and a lock to release), not death
///   with the lock taken;
/// - SIGCHLD at its default: a caller that ignores it (a daemon's
///   `signal(SIGCHLD, SIG_IGN)`, inherited across exec) would have the
///   kernel reap the command, and `run` would never see it end.
void claim_process_signals();

/// In a child about to exec the command: each signal claim_process_signals
/// changed goes back to ignored if it was ignored on entry, else to its
/// default. Async-signal-safe (reads what claim_process_signals wrote
/// before any thread or child existed).
void restore_entry_signals();

}  // namespace rlock
