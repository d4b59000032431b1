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

 private:
  int m_fds[2] = {-1, -1};
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

}  // namespace rlock
