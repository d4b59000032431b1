#include "supervise/child.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "supervise/fd.h"

namespace rlock::supervise {

namespace {

/// The signal the command gets when rlock dies (even by SIGKILL): the
/// polite one, like the lock-loss path, so it can clean up; its lock then
/// expires by its TTL.
constexpr int k_parent_death_signal = SIGTERM;

/// Exit status of a child whose parent died before it could ask for the
/// parent-death signal: as if that signal had killed it.
constexpr int k_orphan_status = 128 + k_parent_death_signal;

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

/// Runs in the forked child: only async-signal-safe calls until exec.
[[noreturn]] void exec_child(const Launch& launch, char* const* argv, char* const* envp,
                             pid_t parent, int report_fd, bool take_terminal) {
  setpgid(0, 0);
  // SIGTTOU is still blocked (inherited), so taking the terminal from a
  // background group does not stop us.
  if (take_terminal) tcsetpgrp(STDIN_FILENO, getpid());
  prctl(PR_SET_PDEATHSIG, k_parent_death_signal);
  // The parent may have died between fork and prctl: then no signal will
  // ever come, so do not start the command at all.
  if (getppid() != parent) _exit(k_orphan_status);
  // rlock ignores SIGPIPE for itself; an ignored disposition would survive
  // exec and break pipelines in the command (`yes | head`).
  signal(SIGPIPE, SIG_DFL);
  sigprocmask(SIG_SETMASK, &launch.mask, nullptr);
  execvpe(argv[0], argv, envp);
  int err = errno;
  [[maybe_unused]] auto n = write(report_fd, &err, sizeof err);
  _exit(exec_failure_status(err));
}

}  // namespace

int exec_failure_status(int err) {
  return err == ENOENT || err == ENOTDIR ? k_not_found_status : k_not_executable_status;
}

int exit_status_of(int wait_status) {
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return WEXITSTATUS(wait_status);
}

bool owns_terminal() {
  return isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
}

Result<Child> Child::spawn(const Launch& launch) {
  if (launch.argv.empty()) return fail(Error::Code::usage, "no command to run");
  // Everything the child needs is built before fork: after it, in a
  // threaded process, only async-signal-safe calls are allowed.
  auto argv = c_strings(launch.argv);
  auto envp = c_strings(launch.env);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return fail(Error::Code::internal, std::string("pipe: ") + std::strerror(errno));
  Fd report_read(fds[0]), report_write(fds[1]);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return fail(Error::Code::internal, std::string("fork: ") + std::strerror(errno));
  if (pid == 0)
    exec_child(launch, argv.data(), envp.data(), parent, report_write.get(), launch.take_terminal);
  // Also set in the parent, so that signal_group() works even before the
  // child has run (a shell does the same); EACCES after its exec is fine.
  setpgid(pid, pid);
  report_write.reset();
  Child child(pid, launch.take_terminal);
  int err = 0;
  ssize_t n;
  do {
    n = read(report_read.get(), &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof err)) {
    child.m_exec_errno = err;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    child.m_wait_status = status;
    child.restore_terminal();
  }
  return child;
}

Child::Child(Child&& other) noexcept
    : m_pid(std::exchange(other.m_pid, -1)),
      m_took_terminal(std::exchange(other.m_took_terminal, false)),
      m_exec_errno(other.m_exec_errno),
      m_wait_status(other.m_wait_status) {}

Child::~Child() {
  if (m_pid <= 0 || m_wait_status) return;
  // Only reached on an unexpected path (an exception): never leave the
  // command running without its lock.
  signal_group(SIGKILL);
  int status = 0;
  while (waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
  }
  restore_terminal();
}

std::optional<int> Child::poll_exit() {
  if (m_pid <= 0) return m_wait_status;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(-1, &status, WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (r == m_pid) {
      m_wait_status = status;
      restore_terminal();
    }
  }
  return m_wait_status;
}

void Child::signal_group(int sig) const {
  if (m_pid > 0) killpg(m_pid, sig);
}

bool Child::group_exists() const {
  return m_pid > 0 && (killpg(m_pid, 0) == 0 || errno == EPERM);
}

void Child::restore_terminal() {
  if (!m_took_terminal) return;
  m_took_terminal = false;
  tcsetpgrp(STDIN_FILENO, getpgrp());
}

}  // namespace rlock::supervise
