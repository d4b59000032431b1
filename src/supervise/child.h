#pragma once
/// The supervised command: started in its own process group with the
/// caller's stdin/stdout/stderr, watched by a guardian process, and never
/// left behind: a Child that is destroyed while its command still runs kills
/// the whole group and reaps it.
///
/// The guardian is a small forked copy of rlock (shown as `rlock-guard`) in a
/// process group of its own, holding no terminal, no Redis connection and no
/// other descriptor than the read end of a pipe that only rlock writes to.
/// When rlock dies, even by SIGKILL, the pipe reaches end-of-file and the
/// guardian sends SIGTERM (and SIGCONT, for a stopped command) to the
/// command's whole process group, SIGKILL after
/// --kill-after (earlier if the lease would end first), and exits. It also
/// sends SIGKILL by itself when rlock is alive but stuck (stopped, say) past
/// the last deadline rlock gave it. When the command ends normally, rlock
/// dismisses it. A process that leaves the group (setsid, setpgid) escapes
/// it, as it escapes every process-group signal.
#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "supervise/fd.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock::supervise {

/// What to run and how.
struct Launch {
  std::vector<std::string> argv;  // argv[0] is looked up in the PATH of env
  std::vector<std::string> env;   // "NAME=VALUE"
  sigset_t mask{};                // the signal mask the command starts with
  /// Make the command's group the terminal's foreground group (stdin is a
  /// terminal and rlock is in the foreground), as a shell would: otherwise
  /// a command reading the terminal would be stopped by SIGTTIN.
  bool take_terminal = false;
  /// Which of the standard descriptors is that terminal (owned_terminal).
  int terminal_fd = STDIN_FILENO;
  /// Standard descriptors (bit N for descriptor N) to close before exec:
  /// those that were closed when rlock started (it held them on /dev/null
  /// meanwhile, so that no connection could become its stdout).
  unsigned close_standard_fds = 0;
  /// For the guardian: the grace between its SIGTERM and SIGKILL after
  /// rlock died, and the first point by which the command must be dead
  /// (none: the guardian acts only when rlock dies).
  Millis kill_after{5000};
  std::optional<Deadline> must_be_dead_by;
};

/// The "must be dead by" points of the enclosing runs (`rlock run A --
/// rlock run B -- CMD`: A's, seen from B), read from the deadline pages
/// whose descriptors RLOCK_DEADLINES names (see Guardian): each a
/// Clock (CLOCK_BOOTTIME) time in ns, 0 for none yet. Mapped read-only for the
/// rest of the process (and its guardian's) life; a descriptor that is not
/// such a page (closed, reused, forged) is skipped.
std::vector<const std::int64_t*> enclosing_deadlines();

/// Exit status of a command that could not be executed (as in sh(1)).
inline constexpr int k_not_found_status = 127;
inline constexpr int k_not_executable_status = 126;

/// 127 when the command does not exist, 126 when it exists but cannot be
/// executed.
int exec_failure_status(int err);

/// The exit status for a wait status: the code, or 128+N after signal N.
int exit_status_of(int wait_status);

/// The standard descriptor (0, 1 or 2, the first) that is rlock's
/// controlling terminal while rlock's group is its foreground group, or -1.
int owned_terminal();

/// What execvp would run for `name`, found before fork (execvp itself is not
/// async-signal-safe): `name` itself when it contains a slash, else the first
/// executable regular file `DIR/name` for DIR in `path` (an empty entry is
/// the current directory). The error is the errno execvp would report:
/// EACCES when only non-executable candidates exist, else ENOENT.
std::expected<std::string, int> resolve_command(const std::string& name, std::string_view path);

/// The guardian of one command (see above), started on its own so that
/// rlock can fork it early: before the heartbeat thread and its memory
/// exist, the fork and the copy-on-write faults that follow it cost about
/// a seventh of the page faults (16 against ~110 measured), which on a VM
/// were most of what a guardian cost. Dismissed (killed and reaped) when
/// destroyed.
class Guardian {
 public:
  /// Starts the guardian, a process of its own (in rlock's memory where it
  /// can be, else a fork). It sends SIGTERM to the command's group when rlock
  /// dies, SIGKILL `kill_after` later (or at the deadline rlock gave it, if
  /// sooner), and SIGKILL by itself once `must_be_dead_by` (moved on by
  /// Child::guard_until) has passed; none: it acts only when rlock dies.
  ///
  /// It also kills the group by the enclosing runs' points (`outer`, from
  /// enclosing_deadlines()): when the outer rlock dies, its guardian kills
  /// its command (this rlock) and ours then gives the command no more time
  /// than the outer lease has (a kill-after of our own would outlast it).
  /// Its own point goes on a deadline page (a sealed memfd) that the
  /// command inherits, named by RLOCK_DEADLINES (deadline_fd()), for the
  /// runs nested in it.
  static Result<Guardian> start(Millis kill_after, std::optional<Deadline> must_be_dead_by,
                                const std::vector<const std::int64_t*>& outer = {});

  Guardian() = default;
  Guardian(Guardian&& other) noexcept;
  Guardian& operator=(Guardian&& other) noexcept;
  Guardian(const Guardian&) = delete;
  ~Guardian();

  pid_t pid() const { return m_pid; }
  /// The deadline page's descriptor (close-on-exec here; the command gets
  /// it open), or -1 when none could be made.
  int deadline_fd() const { return m_page_fd.get(); }
  /// Tells it that the command is over: it exits by itself, touching
  /// nothing, while rlock goes on. Not reaped yet (dismiss does that).
  void let_go();
  /// Makes sure it is gone, and reaps it: told (let_go) if it was not, and
  /// killed if it has not exited by now. Idempotent.
  void dismiss();

 private:
  friend class Child;
  /// It was reaped elsewhere: nothing to dismiss any more.
  void forget();
  /// Starts its process (start, replace): guard() on a new pipe.
  Result<void> launch();
  /// After its process was killed and reaped (forget): a new one in its
  /// place, with the same deadline page, kill-after and point, told the
  /// command's group `pgid`.
  Result<void> replace(pid_t pgid);
  /// Unmaps its stack (a guardian in rlock's memory) once it is gone.
  void free_stack();
  /// Writes `must_be_dead_by` on the deadline page.
  void publish(Deadline must_be_dead_by);
  /// Unmaps and closes the deadline page.
  void unmap_page();
  pid_t m_pid = -1;
  Fd m_pipe;                // write end; the guardian holds the only read end
  void* m_stack = nullptr;  // its stack region, when it shares rlock's memory
  Fd m_page_fd;             // the deadline page (see start)
  std::int64_t* m_page = nullptr;
  // What a new process is started with (launch): see start.
  std::int64_t m_kill_after_ns = 0;
  std::int64_t m_kill_by = 0;  // the point last published (ns; 0: none)
  std::vector<const std::int64_t*> m_outer;
};

class Child {
 public:
  /// Makes rlock the subreaper of the command's descendants (a grandchild
  /// whose parent exits is reparented to us, not to init, and reaped by
  /// poll_exit), so that a terminated group really is empty once they are
  /// dead, even under an init that never reaps (a container's pid 1).
  /// Then starts the guardian, starts the command and execs. The exec's errno travels
  /// back through a close-on-exec pipe: a failed exec (or a command not
  /// found in PATH) gives a Child that has already exited with exec_errno()
  /// set.
  static Result<Child> spawn(const Launch& launch);
  /// The same with a guardian started already (Guardian::start); the
  /// Launch's kill_after and must_be_dead_by are then the guardian's.
  static Result<Child> spawn(const Launch& launch, Guardian guardian);

  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  Child(const Child&) = delete;
  ~Child();

  pid_t pid() const { return m_pid; }
  /// errno of the failed exec, 0 when the command started.
  int exec_errno() const { return m_exec_errno; }

  /// Reaps the command if it has exited; its wait status once it has. Also
  /// reaps any orphaned descendant handed to us as subreaper (see spawn),
  /// and notes the command stopping (see take_stop).
  std::optional<int> poll_exit();
  /// The signal that stopped the command since the last call (0: none).
  int take_stop();
  /// Sends a signal to the command's whole process group (its children too).
  void signal_group(int sig) const;
  /// SIGKILLs every process handed to rlock as subreaper (a descendant of
  /// the command whose parent died) and its process group: after the
  /// command's group was killed for the lease's sake, whatever of it had
  /// left the group must not run on either. The case that matters: `rlock
  /// run A -- rlock run B -- CMD`, where CMD is in B's group, not in A's;
  /// when A kills its group at A's deadline, B dies and CMD comes to A.
  /// True when it found any (alive, or dead and not reaped yet): a killed
  /// one's own children come to rlock only once it has exited, so the
  /// caller looks again until none is left.
  bool kill_adopted() const;
  /// True while any process of the group is left.
  bool group_exists() const;
  /// Gives the terminal back to rlock's group if the command had it.
  void restore_terminal();
  /// rlock's controlling terminal (/dev/tty, opened on first use), or -1
  /// when it has none (cron, systemd, setsid).
  int controlling_terminal();
  /// The command stopped for the terminal's sake: takes the terminal back
  /// for rlock's group if the command's group has it, so that rlock's job
  /// can stop as a whole and its shell find the terminal where it left it.
  void reclaim_terminal();
  /// rlock's job was continued: gives the terminal to the command's group
  /// if rlock's group has it (`fg`; after `bg` it does not).
  void hand_terminal_if_foreground();

  /// Tells the guardian the new point by which the command must be dead
  /// (after a confirmed renewal): it SIGKILLs the group then if rlock has
  /// not moved the point on by then.
  void guard_until(Deadline must_be_dead_by);
  /// Why a guardian that was killed could not be replaced (poll_exit), once:
  /// the command would then outlive rlock's death unguarded, and is stopped.
  std::optional<Error> take_guardian_failure();
  /// The command is over: the guardian is told to exit without touching
  /// the group (it does so while rlock goes on). Reaped by
  /// dismiss_guardian() or on destruction.
  void let_guardian_go() { m_guardian.let_go(); }
  /// The command is over: the guardian exits without touching the group,
  /// and is reaped. Idempotent; also done on destruction.
  void dismiss_guardian();
  /// The guardian's pid while it runs (-1 once dismissed or gone).
  pid_t guardian_pid() const { return m_guardian.pid(); }

 private:
  Child(pid_t pid, bool took_terminal, int terminal_fd = STDIN_FILENO)
      : m_pid(pid), m_took_terminal(took_terminal), m_terminal_fd(terminal_fd) {}
  pid_t m_pid = -1;
  bool m_took_terminal = false;
  int m_terminal_fd = STDIN_FILENO;
  int m_stop_signal = 0;
  std::optional<Fd> m_tty;  // controlling_terminal(), once looked for
  int m_exec_errno = 0;
  std::optional<int> m_wait_status;
  Guardian m_guardian;
  std::optional<Error> m_guardian_failure;  // see take_guardian_failure
};

}  // namespace rlock::supervise
