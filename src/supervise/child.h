#pragma once
/// The supervised command: started in its own process group with the
/// caller's stdin/stdout/stderr, killed with the wrapper (parent-death
/// signal), and never left behind: a Child that is destroyed while its
/// command still runs kills the whole group and reaps it.

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "util/error.h"

namespace rlock::supervise {

/// What to run and how.
struct Launch {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  std::vector<std::string> env;   // "NAME=VALUE"
  sigset_t mask{};                // the signal mask the command starts with
  /// Make the command's group the terminal's foreground group (stdin is a
  /// terminal and rlock is in the foreground), as a shell would: otherwise
  /// a command reading the terminal would be stopped by SIGTTIN.
  bool take_terminal = false;
};

/// Exit status of a command that could not be executed (as in sh(1)).
inline constexpr int k_not_found_status = 127;
inline constexpr int k_not_executable_status = 126;

/// 127 when the command does not exist, 126 when it exists but cannot be
/// executed.
int exec_failure_status(int err);

/// The exit status for a wait status: the code, or 128+N after signal N.
int exit_status_of(int wait_status);

/// True when stdin is a terminal whose foreground group is ours.
bool owns_terminal();

class Child {
 public:
  /// Makes rlock the subreaper of the command's descendants (a grandchild
  /// whose parent exits is reparented to us, not to init, and reaped by
  /// poll_exit), so that a terminated group really is empty once they are
  /// dead, even under an init that never reaps (a container's pid 1).
  /// Then forks and execs. The exec's errno travels back through a close-on-exec
  /// pipe: a failed exec gives a Child that has already exited with
  /// exec_errno() set.
  static Result<Child> spawn(const Launch& launch);

  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  Child(const Child&) = delete;
  ~Child();

  pid_t pid() const { return m_pid; }
  /// errno of the failed exec, 0 when the command started.
  int exec_errno() const { return m_exec_errno; }

  /// Reaps the command if it has exited; its wait status once it has. Also
  /// reaps any orphaned descendant handed to us as subreaper (see spawn).
  std::optional<int> poll_exit();
  /// Sends a signal to the command's whole process group (its children too).
  void signal_group(int sig) const;
  /// True while any process of the group is left.
  bool group_exists() const;
  /// Gives the terminal back to rlock's group if the command had it.
  void restore_terminal();

 private:
  Child(pid_t pid, bool took_terminal) : m_pid(pid), m_took_terminal(took_terminal) {}
  pid_t m_pid = -1;
  bool m_took_terminal = false;
  int m_exec_errno = 0;
  std::optional<int> m_wait_status;
};

}  // namespace rlock::supervise
