#include "supervise/child.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <tuple>
#include <utility>

#include "util/number.h"
#include "util/signals.h"

// Sanitizer builds start the command with a plain fork (see start_child).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RLOCK_SPAWN_BY_FORK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define RLOCK_SPAWN_BY_FORK 1
#endif
#endif

// The guardian shares rlock's memory where it can make its system calls
// itself (see sys below); elsewhere, and in the sanitizer builds, it is a
// fork.
#if !defined(RLOCK_SPAWN_BY_FORK) && (defined(__x86_64__) || defined(__aarch64__))
#define RLOCK_GUARD_SHARES_MEMORY 1
#endif

namespace rlock::supervise {

namespace {

/// What the command is sent first when rlock dies: the polite signal, like
/// the lock-loss path, so it can clean up.
constexpr int k_wrapper_death_signal = SIGTERM;

/// Exit status of a child whose parent died before it could exec: as if
/// the guardian's SIGTERM had killed it.
constexpr int k_orphan_status = 128 + k_wrapper_death_signal;

/// execvp's search path when PATH is unset (glibc's _CS_PATH).
constexpr std::string_view k_default_path = "/bin:/usr/bin";

/// How the command is run when execve says ENOEXEC (a script without a #!
/// line): by the POSIX shell, as execvp and every shell do.
constexpr const char* k_shell = "/bin/sh";

/// While terminating, the guardian checks this often whether the group is
/// gone, so that it never signals a process group id the kernel has since
/// handed to someone else (a pid is reused only after its whole group is
/// gone and reaped).
constexpr std::int64_t k_guard_poll_ns = 20'000'000;

// --- the guardian's messages -----------------------------------------------
// Fixed 8-byte messages through a pipe (a write of 8 bytes is atomic):
//   -PGID  the command's process group (written by the command itself,
//          before it execs, so it arrives even when rlock dies right after
//          fork)
//   T > 0  the command must be dead by CLOCK_BOOTTIME T nanoseconds (Clock)
//   0      dismissed: the command is over; exit without touching the group
//          (it comes before the end-of-file of rlock's close, so the
//          guardian never reads that as rlock's death)
// Both ends are non-blocking: rlock never waits on a guardian that is
// stopped (a lost deadline only makes it act sooner, never later).
using Message = std::int64_t;
constexpr Message k_dismissed = 0;

/// Clock is CLOCK_BOOTTIME (util/duration.h): its time points are
/// meaningful in the guardian, another process on the same machine (and in
/// the same time namespace: a clone cannot leave it).
Message deadline_message(Deadline d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d.time_since_epoch()).count();
}

// --- deadline pages ----------------------------------------------------------
// A run's "must be dead by" point, for the runs nested in its command: a
// sealed memfd of two words (a magic number, then the point in ns, 0 for
// none) that the command inherits, its descriptor named in RLOCK_DEADLINES
// with those of the enclosing runs. The owner writes it through a shared
// mapping; the others map it read-only (F_SEAL_FUTURE_WRITE: they cannot
// map it writable nor write() it). The point only moves later while the
// owner lives (each confirmed renewal), so a guardian that sleeps until a
// value it read wakes no later than the current one requires.
constexpr std::int64_t k_page_magic = 0x31646b636f6c72;  // "rlockd1"
constexpr long k_page_size = 2 * sizeof(std::int64_t);
constexpr int k_page_seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
/// At most this many enclosing runs are watched (the outermost ones).
constexpr std::size_t k_max_outer = 16;

std::int64_t read_point(const std::int64_t* page) {
  return __atomic_load_n(page + 1, __ATOMIC_ACQUIRE);
}

/// The earliest of `own` and the enclosing runs' points (0: none at all).
std::int64_t earliest_point(std::int64_t own, const std::int64_t* const* outer, int count) {
  std::int64_t earliest = own;
  for (int k = 0; k < count; ++k) {
    const std::int64_t point = read_point(outer[k]);
    if (point > 0 && (earliest <= 0 || point < earliest)) earliest = point;
  }
  return earliest;
}

// --- the guardian's system calls ---------------------------------------------
// The guardian runs in rlock's memory (Guardian::start), on a stack of its
// own, and with the thread-local storage of the thread that started it:
// libc's wrappers would write that thread's errno when a call fails. So the
// guardian makes its system calls itself; a failure is a negative return
// value (-errno) and nothing else, even to read the clock.
#if defined(__x86_64__)
long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  long ret = 0;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                   : "rcx", "r11", "memory");
  return ret;
}
#elif defined(__aarch64__)
long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory");
  return x0;
}
#else
// A forked guardian (RLOCK_GUARD_SHARES_MEMORY unset) has memory of its own.
long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  const long r = syscall(n, a, b, c, d, e);
  return r < 0 ? -errno : r;
}
#endif

long arg(const void* p) {
  return reinterpret_cast<long>(p);
}

// The guardian's clock is rlock's (Clock: CLOCK_BOOTTIME), so that the time
// a machine spends suspended counts towards a deadline as it does on the
// server; its sleeps are on that clock too (a sleep on CLOCK_MONOTONIC, as
// poll's timeout is, would resume where it stopped).
std::int64_t clock_ns() {
  timespec ts{};
  sys(SYS_clock_gettime, CLOCK_BOOTTIME, arg(&ts));
  return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

timespec timespec_of(std::int64_t ns) {
  return {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

void sleep_ns(std::int64_t ns) {
  timespec ts = timespec_of(ns);
  while (sys(SYS_clock_nanosleep, CLOCK_BOOTTIME, 0, arg(&ts), arg(&ts)) == -EINTR) {
  }
}

[[noreturn]] void exit_guardian() {
  for (;;) sys(SYS_exit_group, 0);
}

long signal_group(pid_t pgid, int sig) {
  return sys(SYS_kill, -static_cast<long>(pgid), sig);
}

bool group_alive(pid_t pgid) {
  const long r = signal_group(pgid, 0);
  return r == 0 || r == -EPERM;
}

/// SIGTERM to the group, then SIGKILL at `kill_at` unless it is gone first.
[[noreturn]] void terminate_group(pid_t pgid, std::int64_t kill_at) {
  if (pgid <= 0) exit_guardian();
  signal_group(pgid, k_wrapper_death_signal);
  // A stopped command (Ctrl-Z) acts on the signal only once continued.
  signal_group(pgid, SIGCONT);
  for (std::int64_t now = clock_ns(); now < kill_at; now = clock_ns()) {
    if (!group_alive(pgid)) exit_guardian();
    sleep_ns(std::min(k_guard_poll_ns, kill_at - now));
  }
  signal_group(pgid, SIGKILL);
  exit_guardian();
}

/// Closes descriptors first..last (inclusive): close_range, or one by one
/// up to the descriptor limit on a kernel without it (before Linux 5.9).
void close_span(unsigned first, unsigned last) {
  if (first > last) return;
  if (sys(SYS_close_range, first, last, 0) != -ENOSYS) return;
  struct {
    std::uint64_t cur, max;
  } limit{1024, 1024};
  sys(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, arg(&limit));
  const std::uint64_t end =
      std::min<std::uint64_t>(last, std::min<std::uint64_t>(limit.cur, 1U << 20) - 1);
  for (std::uint64_t fd = first; fd <= end; ++fd) sys(SYS_close, static_cast<long>(fd));
}

/// Leaves the guardian holding nothing of rlock's but the pipe it reads
/// (returned, moved above stdio if need be): no terminal (stdio on
/// /dev/null, so that `$(rlock run …)` and a pipeline end when rlock ends),
/// no Redis connection, no signalfd. Its descriptor table is its own (no
/// CLONE_FILES): what it closes stays open for rlock. (The deadline pages
/// it watches stay mapped without their descriptors.)
int close_all_but(int keep) {
  if (keep <= STDERR_FILENO)
    keep = static_cast<int>(sys(SYS_fcntl, keep, F_DUPFD, STDERR_FILENO + 1));
  const long null = sys(SYS_openat, AT_FDCWD, arg("/dev/null"), O_RDWR);
  for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; ++fd) {
    if (null >= 0 && null != fd) {
      sys(SYS_dup3, null, fd, 0);
    } else if (null < 0) {
      sys(SYS_close, fd);
    }
  }
  const unsigned first = STDERR_FILENO + 1;
  if (static_cast<unsigned>(keep) > first) close_span(first, keep - 1);
  close_span(keep + 1, ~0U);
  return keep;
}

/// The guardian's whole life: in rlock's memory (or a forked copy of it),
/// beside rlock's threads. Only its own system calls (sys), its own stack,
/// no allocation, nothing of rlock's memory written.
/// `outer`: the enclosing runs' deadline pages (see above), `count` of them.
[[noreturn]] void guard(int pipe_read, std::int64_t kill_after_ns, std::int64_t kill_by,
                        const std::int64_t* const* outer, int count) {
  sys(SYS_prctl, PR_SET_NAME, arg("rlock-guard"));
  // A starved rlock must not starve its guardian: the end of the lease is
  // its to enforce. It inherits rlock's scheduling (`nice -n 19`, `chrt -i
  // 0`, `taskset`): back to the normal policy from SCHED_IDLE or
  // SCHED_BATCH (allowed unprivileged), the highest priority it may take
  // (nice -20 for root; others keep theirs), and every CPU it may run on
  // (the kernel keeps it within its cpuset). It sleeps until a deadline and
  // then only signals: a few microseconds of CPU. Failures change nothing.
  const sched_param normal{};
  sys(SYS_sched_setscheduler, 0, SCHED_OTHER, arg(&normal));
  sys(SYS_setpriority, PRIO_PROCESS, 0, -20);
  std::uint64_t every_cpu[16];
  for (auto& word : every_cpu) word = ~std::uint64_t{0};
  sys(SYS_sched_setaffinity, 0, sizeof every_cpu, arg(every_cpu));
  // Its own group: a Ctrl-C, a `kill -- -PGID` meant for rlock's group or a
  // SIGKILL of the command's group must not take the guardian with it, and
  // a group of the session that is not the terminal's foreground is no job
  // of the shell's. Every signal but SIGKILL/SIGSTOP is blocked (it started
  // so): its only way out is rlock's word or rlock's death.
  sys(SYS_setpgid, 0, 0);
  const std::uint64_t all = ~std::uint64_t{0};
  sys(SYS_rt_sigprocmask, SIG_SETMASK, arg(&all), 0, sizeof all);
  pipe_read = close_all_but(pipe_read);
  // It waits for the point on a timer of its clock, which fires at once on
  // a resume past it. Without one (out of descriptors), ppoll's timeout.
  const long timer = sys(SYS_timerfd_create, CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);

  pid_t pgid = 0;
  unsigned char buffer[64 * sizeof(Message)];
  size_t held = 0;
  for (;;) {
    timespec wait{};
    const timespec* timeout = nullptr;
    const std::int64_t point = earliest_point(kill_by, outer, count);
    const bool armed = point > 0 && pgid > 0;
    if (timer >= 0) {
      // Disarmed by a zero it_value: no deadline (yet), or acted on.
      const itimerspec at{{0, 0}, armed ? timespec_of(point) : timespec{0, 0}};
      sys(SYS_timerfd_settime, timer, TFD_TIMER_ABSTIME, arg(&at), 0);
    } else if (armed) {
      wait = timespec_of(std::max<std::int64_t>(point - clock_ns(), 0));
      timeout = &wait;
    }
    pollfd p[2] = {{pipe_read, POLLIN, 0}, {static_cast<int>(timer), POLLIN, 0}};
    long n = sys(SYS_ppoll, arg(p), timer >= 0 ? 2 : 1, arg(timeout), 0, 0);
    if (n > 0 && !(p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      // Only the timer: as a timeout.
      std::uint64_t expirations = 0;
      sys(SYS_read, timer, arg(&expirations), sizeof expirations);
      n = 0;
    }
    if (n == 0) {
      // rlock is alive but did not move the deadline on: it is stopped or
      // stuck, and the lease may be ending; or an enclosing run's point
      // passed (read again: it may have moved on since). The command must
      // be dead now.
      if (const std::int64_t due = earliest_point(kill_by, outer, count);
          due > 0 && clock_ns() >= due) {
        signal_group(pgid, SIGKILL);
        kill_by = 0;
        count = 0;  // acted on: no more waking for them
      }
      continue;
    }
    if (n < 0) continue;  // EINTR cannot happen with every signal blocked
    const long got = sys(SYS_read, pipe_read, arg(buffer + held), long(sizeof buffer - held));
    if (got < 0) continue;  // EAGAIN: nothing after all
    if (got == 0) {
      // rlock is gone without dismissing us: it died. Its kill-after, but
      // no later than its lease or an enclosing run's allows.
      std::int64_t kill_at = clock_ns() + kill_after_ns;
      const std::int64_t by = earliest_point(kill_by, outer, count);
      if (by > 0 && by < kill_at) kill_at = by;
      terminate_group(pgid, kill_at);
    }
    held += static_cast<size_t>(got);
    size_t used = 0;
    for (; held - used >= sizeof(Message); used += sizeof(Message)) {
      Message m;
      std::memcpy(&m, buffer + used, sizeof m);
      if (m == k_dismissed) exit_guardian();
      if (m < 0) {
        pgid = static_cast<pid_t>(-m);
      } else {
        kill_by = m;
      }
    }
    std::memmove(buffer, buffer + used, held - used);
    held -= used;
  }
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

/// Everything the forked child needs, built before fork.
struct Exec {
  const char* path;
  char* const* argv;
  char* const* sh_argv;  // k_shell, path, argv[1...]: for ENOEXEC
  char* const* envp;
  const sigset_t* mask;
  pid_t parent;
  int report_fd;
  int guardian_fd;
  int deadline_fd;  // the deadline page, to stay open across exec (-1: none)
  bool take_terminal;
  int terminal_fd;              // the descriptor of the terminal to take
  unsigned close_standard_fds;  // Launch::close_standard_fds
};

/// Runs in the new child: only async-signal-safe calls until exec. It
/// shares rlock's memory (see start_child), so it writes nothing but its
/// own stack: no allocation, no global state.
[[noreturn]] void exec_child(const Exec& e) {
  // No handler of rlock's may run in this process once the command's mask
  // lets signals in (it would run on rlock's memory): every caught signal
  // goes back to its default, as posix_spawn does. The child's
  // dispositions are its own (no CLONE_SIGHAND), and exec would reset
  // them anyway.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction action {};
    if (sigaction(sig, nullptr, &action) != 0) continue;  // glibc's own signals
    if (action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN) signal(sig, SIG_DFL);
  }
  setpgid(0, 0);
  // Tell the guardian which group to watch, before anything can go wrong.
  Message group = -static_cast<Message>(getpid());
  [[maybe_unused]] auto w = write(e.guardian_fd, &group, sizeof group);
  // SIGTTOU is still blocked (inherited), so taking the terminal from a
  // background group does not stop us.
  if (e.take_terminal) tcsetpgrp(e.terminal_fd, getpid());
  // Should rlock and its guardian die together (they share memory: the
  // OOM killer ends both), the kernel still tells the command, with the
  // SIGTERM the guardian would have sent it. Set before the check below,
  // so that no death can fall between the two.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  // The parent may have died since fork: then do not start the command at
  // all (the guardian's SIGTERM may come before or after this check).
  if (getppid() != e.parent) _exit(k_orphan_status);
  // The deadline page is the command's to inherit (for a nested run).
  if (e.deadline_fd >= 0) fcntl(e.deadline_fd, F_SETFD, 0);
  // rlock ignores SIGPIPE and SIGXFSZ for itself; an ignored disposition
  // would survive exec and break pipelines in the command (`yes | head`).
  // The command gets what rlock's caller had (SIGCHLD too).
  restore_entry_signals();
  sigprocmask(SIG_SETMASK, e.mask, nullptr);
  // Closed for rlock's caller, closed for the command: `rlock run x -- echo
  // hi >&-` fails to write, as `echo hi >&-` does, instead of writing to
  // /dev/null. (An exec failure is then reported through report_fd only.)
  for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; ++fd)
    if ((e.close_standard_fds & (1U << fd)) != 0) close(fd);
  execve(e.path, e.argv, e.envp);
  if (errno == ENOEXEC) execve(k_shell, e.sh_argv, e.envp);
  int err = errno;
  [[maybe_unused]] auto n = write(e.report_fd, &err, sizeof err);
  _exit(exec_failure_status(err));
}

#ifndef RLOCK_SPAWN_BY_FORK
/// The child's stack (start_child): ample for exec_child and the calls it
/// makes, with a page below it that faults instead of overwriting memory.
constexpr std::size_t k_child_stack = std::size_t{64} * 1024;
constexpr std::size_t k_stack_guard = 4096;
#endif

/// Starts a process that runs exec_child(exec) and returns its pid (-1 and
/// errno when it could not be started). Like posix_spawn, the process
/// shares rlock's memory until it execs or exits, and this thread waits
/// until then (CLONE_VFORK): no copy of the page tables, and none of the
/// copy-on-write faults that follow a fork, which on a virtual machine were
/// a large part of what `rlock run` costs. It starts with every signal
/// blocked, so nothing of rlock's runs on its stack before exec_child has
/// reset the handlers; the other threads keep running and never touch what
/// exec_child reads. The sanitizers cannot follow a second process in the
/// same memory, so their builds fork.
pid_t start_child(const Exec& exec) {
#ifdef RLOCK_SPAWN_BY_FORK
  pid_t pid = fork();
  if (pid == 0) exec_child(exec);
  return pid;
#else
  void* region = mmap(nullptr, k_stack_guard + k_child_stack, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (region == MAP_FAILED) return -1;
  mprotect(region, k_stack_guard, PROT_NONE);
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  auto entry = [](void* e) -> int { exec_child(*static_cast<const Exec*>(e)); };
  pid_t pid = clone(entry, static_cast<char*>(region) + k_stack_guard + k_child_stack,
                    CLONE_VM | CLONE_VFORK | SIGCHLD, const_cast<Exec*>(&exec));
  int err = errno;
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  // The child has exec'd or exited: its stack is free again.
  munmap(region, k_stack_guard + k_child_stack);
  errno = err;
  return pid;
#endif
}

std::string_view path_of(const std::vector<std::string>& env) {
  for (const auto& entry : env)
    if (entry.starts_with("PATH=")) return std::string_view(entry).substr(5);
  return k_default_path;
}

/// Best effort: a full pipe (a stopped guardian) loses the message. True
/// when it was written (8 bytes to a pipe go in whole or not at all).
bool write_message(int fd, Message m) {
  ssize_t n;
  do {
    n = write(fd, &m, sizeof m);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof m);
}

}  // namespace

int exec_failure_status(int err) {
  return err == ENOENT || err == ENOTDIR ? k_not_found_status : k_not_executable_status;
}

int exit_status_of(int wait_status) {
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return WEXITSTATUS(wait_status);
}

int owned_terminal() {
  // tcgetpgrp answers only for the controlling terminal (ENOTTY for a file,
  // a pipe or another terminal): stdin is not always it (`echo | rlock run
  // …`, `< file`) while stdout or stderr still is, and Ctrl-Z then stopped
  // rlock's group alone and left the command running.
  for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; ++fd)
    if (tcgetpgrp(fd) == getpgrp()) return fd;
  return -1;
}

std::expected<std::string, int> resolve_command(const std::string& name, std::string_view path) {
  if (name.empty()) return std::unexpected(ENOENT);
  if (name.find('/') != std::string::npos) return name;
  bool denied = false;
  for (std::string_view rest = path;;) {
    auto colon = rest.find(':');
    auto dir = rest.substr(0, colon);
    std::string candidate = dir.empty() ? name : std::string(dir) + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
      denied = true;
    }
    if (colon == std::string_view::npos) break;
    rest = rest.substr(colon + 1);
  }
  return std::unexpected(denied ? EACCES : ENOENT);
}

Result<Child> Child::spawn(const Launch& launch) {
  auto guardian = Guardian::start(launch.kill_after, launch.must_be_dead_by);
  if (!guardian) return std::unexpected(guardian.error());
  return spawn(launch, std::move(*guardian));
}

/// What guard() is started with (where it shares rlock's memory, written
/// at the foot of the guardian's own stack before it starts: the frame of
/// Guardian::start may be gone by the time it reads them).
struct GuardArgs {
  int pipe_read;
  std::int64_t kill_after_ns;
  std::int64_t kill_by;
  const std::int64_t* outer[k_max_outer];
  int outer_count;
};

#ifdef RLOCK_GUARD_SHARES_MEMORY
/// The guardian's stack: guard() needs well under 4 KiB of it. A page below
/// faults instead of overwriting memory.
constexpr std::size_t k_guardian_stack = std::size_t{32} * 1024;

/// Whether the guardian may share rlock's memory: not under Valgrind, which
/// runs no process that shares memory without being a thread (it stops the
/// program), and is known by the preload it puts in every process it runs.
bool shared_memory_guardian() {
  const char* preload = std::getenv("LD_PRELOAD");
  return preload == nullptr || std::strstr(preload, "/vgpreload_") == nullptr;
}

/// Starts guard(args) as a process in rlock's memory (CLONE_VM, not a
/// thread: its own pid, descriptors and signal dispositions), which lives on
/// when rlock dies: the memory stays as long as one of them uses it. A fork
/// copied rlock's page tables, and both processes then took a copy-on-write
/// fault for each page they wrote: 2.2 ms of a 10.5 ms `rlock run x -- true`
/// on a VM. It starts with every signal blocked, so that no handler of
/// rlock's runs on its stack. Returns its pid and its stack region.
Result<std::pair<pid_t, void*>> clone_guardian(const GuardArgs& args) {
  void* region = mmap(nullptr, k_stack_guard + k_guardian_stack, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (region == MAP_FAILED)
    return fail(Error::Code::internal, std::string("mmap: ") + std::strerror(errno));
  mprotect(region, k_stack_guard, PROT_NONE);
  char* base = static_cast<char*>(region) + k_stack_guard;
  auto* at_foot = new (base) GuardArgs(args);
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  auto entry = [](void* a) -> int {
    const GuardArgs& g = *static_cast<const GuardArgs*>(a);
    guard(g.pipe_read, g.kill_after_ns, g.kill_by, g.outer, g.outer_count);
  };
  const pid_t pid = clone(entry, base + k_guardian_stack, CLONE_VM | SIGCHLD, at_foot);
  const int err = errno;
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (pid < 0) {
    munmap(region, k_stack_guard + k_guardian_stack);
    return fail(Error::Code::internal, std::string("clone: ") + std::strerror(err));
  }
  return std::pair{pid, region};
}
#endif

namespace {

/// A new deadline page holding `point` (see "deadline pages"), or nothing
/// when the kernel cannot make one: the nested runs then go without it.
std::pair<Fd, std::int64_t*> make_deadline_page(std::int64_t point) {
  Fd fd(static_cast<int>(memfd_create("rlock-deadline", MFD_CLOEXEC | MFD_ALLOW_SEALING)));
  if (!fd || ftruncate(fd.get(), k_page_size) != 0) return {Fd(), nullptr};
  void* page = mmap(nullptr, k_page_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (page == MAP_FAILED) return {Fd(), nullptr};
  auto* words = static_cast<std::int64_t*>(page);
  words[0] = k_page_magic;
  __atomic_store_n(words + 1, point, __ATOMIC_RELEASE);
  // Nobody else may write it (before Linux 5.1 only the size is sealed).
  fcntl(fd.get(), F_ADD_SEALS, F_SEAL_FUTURE_WRITE);
  if (fcntl(fd.get(), F_ADD_SEALS, k_page_seals) != 0) {
    munmap(page, k_page_size);
    return {Fd(), nullptr};
  }
  return {std::move(fd), words};
}

}  // namespace

std::vector<const std::int64_t*> enclosing_deadlines() {
  std::vector<const std::int64_t*> out;
  const char* list = std::getenv("RLOCK_DEADLINES");
  for (std::string_view rest = list ? list : ""; !rest.empty() && out.size() < k_max_outer;) {
    const auto comma = rest.find(',');
    const auto number = parse_integer(rest.substr(0, comma), 0, INT32_MAX);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (!number) continue;
    const int fd = static_cast<int>(*number);
    struct stat st {};
    const int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & k_page_seals) != k_page_seals || fstat(fd, &st) != 0 ||
        st.st_size != k_page_size)
      continue;
    void* page = mmap(nullptr, k_page_size, PROT_READ, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) continue;
    const auto* words = static_cast<const std::int64_t*>(page);
    if (words[0] != k_page_magic) {
      munmap(page, k_page_size);
      continue;
    }
    out.push_back(words);
  }
  return out;
}

void Guardian::publish(Deadline must_be_dead_by) {
  m_kill_by = deadline_message(must_be_dead_by);
  if (m_page) __atomic_store_n(m_page + 1, deadline_message(must_be_dead_by), __ATOMIC_RELEASE);
}

Result<Guardian> Guardian::start(Millis kill_after, std::optional<Deadline> must_be_dead_by,
                                 const std::vector<const std::int64_t*>& outer) {
  Guardian guardian;
  guardian.m_kill_after_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(kill_after).count();
  guardian.m_kill_by = must_be_dead_by ? deadline_message(*must_be_dead_by) : 0;
  guardian.m_outer.assign(outer.begin(), outer.begin() + static_cast<std::ptrdiff_t>(
                                                             std::min(outer.size(), k_max_outer)));
  std::tie(guardian.m_page_fd, guardian.m_page) = make_deadline_page(guardian.m_kill_by);
  if (auto launched = guardian.launch(); !launched) return std::unexpected(launched.error());
  return guardian;
}

Result<void> Guardian::launch() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    return fail(Error::Code::internal, std::string("pipe: ") + std::strerror(errno));
  Fd read_end(fds[0]), write_end(fds[1]);
  GuardArgs args{read_end.get(), m_kill_after_ns, m_kill_by, {}, 0};
  for (const std::int64_t* page : m_outer) args.outer[args.outer_count++] = page;
  pid_t pid = -1;
#ifdef RLOCK_GUARD_SHARES_MEMORY
  if (shared_memory_guardian()) {
    auto started = clone_guardian(args);
    if (!started) return std::unexpected(started.error());
    pid = started->first;
    m_stack = started->second;
  } else
#endif
  {
    pid = fork();
    if (pid < 0) return fail(Error::Code::internal, std::string("fork: ") + std::strerror(errno));
    if (pid == 0)
      guard(args.pipe_read, args.kill_after_ns, args.kill_by, args.outer, args.outer_count);
  }
  m_pid = pid;
  m_pipe = std::move(write_end);
  return {};
}

Result<void> Guardian::replace(pid_t pgid) {
  forget();
  if (auto launched = launch(); !launched) return launched;
  // Told the group at once (the command told the first one itself).
  if (!write_message(m_pipe.get(), -static_cast<Message>(pgid)))
    return fail(Error::Code::internal, "cannot tell the new guardian the command's group");
  return {};
}

Guardian::Guardian(Guardian&& other) noexcept
    : m_pid(std::exchange(other.m_pid, -1)),
      m_pipe(std::move(other.m_pipe)),
      m_stack(std::exchange(other.m_stack, nullptr)),
      m_page_fd(std::move(other.m_page_fd)),
      m_page(std::exchange(other.m_page, nullptr)),
      m_kill_after_ns(other.m_kill_after_ns),
      m_kill_by(other.m_kill_by),
      m_outer(std::move(other.m_outer)) {}

Guardian& Guardian::operator=(Guardian&& other) noexcept {
  if (this != &other) {
    dismiss();
    unmap_page();
    m_pid = std::exchange(other.m_pid, -1);
    m_pipe = std::move(other.m_pipe);
    m_stack = std::exchange(other.m_stack, nullptr);
    m_page_fd = std::move(other.m_page_fd);
    m_page = std::exchange(other.m_page, nullptr);
    m_kill_after_ns = other.m_kill_after_ns;
    m_kill_by = other.m_kill_by;
    m_outer = std::move(other.m_outer);
  }
  return *this;
}

Guardian::~Guardian() {
  dismiss();
  unmap_page();
}

void Guardian::unmap_page() {
  if (m_page) munmap(std::exchange(m_page, nullptr), k_page_size);
  m_page_fd.reset();
}

void Guardian::let_go() {
  if (m_pid <= 0 || !m_pipe) return;
  // Told through the pipe, it exits while rlock goes on (releasing the
  // lock); if the message cannot be written (a pipe a stopped guardian let
  // fill up), dismiss() kills it.
  if (write_message(m_pipe.get(), k_dismissed)) m_pipe.reset();
}

void Guardian::dismiss() {
  if (m_pid <= 0) return;
  let_go();
  int status = 0;
  pid_t r = 0;
  if (!m_pipe) {
    // Told: it exits by itself, and most often already has.
    do {
      r = waitpid(m_pid, &status, WNOHANG);
    } while (r < 0 && errno == EINTR);
  }
  if (r == 0) {
    // Not told (its pipe is full), or told but not gone yet (stopped, or on
    // its way out): SIGKILL, which also ends a stopped one, so waitpid
    // cannot hang. One never told is dead before its pipe closes, which it
    // would read as rlock's death.
    kill(m_pid, SIGKILL);
    while (waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  // Reaped here or elsewhere (ECHILD): it is gone.
  m_pipe.reset();
  m_pid = -1;
  free_stack();
}

void Guardian::forget() {
  m_pid = -1;
  m_pipe.reset();
  free_stack();
}

void Guardian::free_stack() {
#ifdef RLOCK_GUARD_SHARES_MEMORY
  if (m_stack != nullptr) munmap(m_stack, k_stack_guard + k_guardian_stack);
#endif
  m_stack = nullptr;
}

Result<Child> Child::spawn(const Launch& launch, Guardian guardian) {
  if (launch.argv.empty()) return fail(Error::Code::usage, "no command to run");
  auto path = resolve_command(launch.argv[0], path_of(launch.env));
  if (!path) {
    Child child(-1, false);
    child.m_exec_errno = path.error();
    child.m_wait_status = exec_failure_status(path.error()) << 8;
    return child;
  }
  // Everything the child needs is built before it starts: it shares our
  // memory, and in a threaded process only async-signal-safe calls are
  // allowed in it until exec.
  auto argv = c_strings(launch.argv);
  std::vector<std::string> sh_args = launch.argv;
  sh_args.insert(sh_args.begin(), k_shell);
  sh_args[1] = *path;
  auto sh_argv = c_strings(sh_args);
  auto envp = c_strings(launch.env);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t parent = getpid();

  // A failure before the command started: the unstarted Child owns the
  // guardian, so its destructor dismisses it.
  auto abandon = [&](const char* what) -> Result<Child> {
    int err = errno;
    Child unstarted(-1, false);
    unstarted.m_guardian = std::move(guardian);
    unstarted.m_wait_status = 0;
    return fail(Error::Code::internal, std::string(what) + ": " + std::strerror(err));
  };
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return abandon("pipe");
  }
  Fd report_read(fds[0]), report_write(fds[1]);
  const Exec exec{path->c_str(),        argv.data(),           sh_argv.data(),
                  envp.data(),          &launch.mask,          parent,
                  report_write.get(),   guardian.m_pipe.get(), guardian.deadline_fd(),
                  launch.take_terminal, launch.terminal_fd,    launch.close_standard_fds};
  pid_t pid = start_child(exec);
  if (pid < 0) {
    return abandon("clone");
  }
  // Also set in the parent, so that signal_group() works even before the
  // child has run (a shell does the same); EACCES after its exec is fine.
  setpgid(pid, pid);
  report_write.reset();
  Child child(pid, launch.take_terminal, launch.terminal_fd);
  child.m_guardian = std::move(guardian);
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
    child.dismiss_guardian();
  }
  return child;
}

Child::Child(Child&& other) noexcept
    : m_pid(std::exchange(other.m_pid, -1)),
      m_took_terminal(std::exchange(other.m_took_terminal, false)),
      m_terminal_fd(other.m_terminal_fd),
      m_stop_signal(other.m_stop_signal),
      m_tty(std::move(other.m_tty)),
      m_exec_errno(other.m_exec_errno),
      m_wait_status(other.m_wait_status),
      m_guardian(std::move(other.m_guardian)),
      m_guardian_failure(std::move(other.m_guardian_failure)) {}

Child::~Child() {
  if (m_pid > 0 && !m_wait_status) {
    // Only reached on an unexpected path (an exception): never leave the
    // command running without its lock.
    signal_group(SIGKILL);
    int status = 0;
    while (waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
    }
    restore_terminal();
  }
  dismiss_guardian();
}

std::optional<int> Child::poll_exit() {
  if (m_pid <= 0) return m_wait_status;
  for (;;) {
    int status = 0;
    // WUNTRACED: a stop is reported once, and only the command's matters.
    pid_t r = waitpid(-1, &status, WNOHANG | WUNTRACED);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (WIFSTOPPED(status)) {
      if (r == m_pid) m_stop_signal = WSTOPSIG(status);
    } else if (r == m_pid) {
      m_wait_status = status;
      restore_terminal();
    } else if (r == m_guardian.pid()) {
      // Killed by someone (SIGKILL: it blocks every other signal; `pkill
      // -9 rlock` matches rlock-guard too): its pid must not be waited for
      // again (it may be reused). While the command's group lives, a new
      // one takes its place: without one, a command whose rlock died next
      // would run on unguarded after the lease ran out.
      m_guardian.forget();
      if (group_exists())
        if (auto replaced = m_guardian.replace(m_pid); !replaced)
          m_guardian_failure = replaced.error();
    }
  }
  return m_wait_status;
}

int Child::take_stop() {
  return std::exchange(m_stop_signal, 0);
}

void Child::signal_group(int sig) const {
  if (m_pid > 0) killpg(m_pid, sig);
}

bool Child::kill_adopted() const {
  const pid_t self = getpid();
  DIR* proc = opendir("/proc");
  if (!proc) return false;
  bool found = false;
  while (const dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == m_pid || pid == m_guardian.pid()) continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE* stat = std::fopen(path, "re");
    if (!stat) continue;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses,
    // so the fields start after the last ')'.
    char line[512];
    const bool read = std::fgets(line, sizeof line, stat) != nullptr;
    std::fclose(stat);
    const char* close = read ? std::strrchr(line, ')') : nullptr;
    // ") S PPID": the state is one letter.
    if (!close || close[1] != ' ' || close[2] == '\0' || close[3] != ' ') continue;
    char* ppid_end = nullptr;
    const long ppid = std::strtol(close + 4, &ppid_end, 10);
    if (ppid_end == close + 4 || ppid != self) continue;
    const pid_t group = getpgid(static_cast<pid_t>(pid));
    // Never rlock's own group (a process it started that stayed there).
    if (group > 0 && group != getpgrp()) killpg(group, SIGKILL);
    kill(static_cast<pid_t>(pid), SIGKILL);
    found = true;
  }
  closedir(proc);
  return found;
}

bool Child::group_exists() const {
  return m_pid > 0 && (killpg(m_pid, 0) == 0 || errno == EPERM);
}

void Child::restore_terminal() {
  if (!m_took_terminal) return;
  m_took_terminal = false;
  tcsetpgrp(m_tty && *m_tty ? m_tty->get() : m_terminal_fd, getpgrp());
}

int Child::controlling_terminal() {
  if (!m_tty) m_tty.emplace(open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC));
  return m_tty->get();
}

void Child::reclaim_terminal() {
  int tty = controlling_terminal();
  if (m_pid <= 0 || tty < 0 || tcgetpgrp(tty) != m_pid) return;
  // SIGTTOU is blocked (SignalFd): taking it from a group that is not ours
  // does not stop rlock.
  tcsetpgrp(tty, getpgrp());
  m_took_terminal = false;
}

void Child::hand_terminal_if_foreground() {
  int tty = controlling_terminal();
  if (m_pid <= 0 || tty < 0 || tcgetpgrp(tty) != getpgrp()) return;
  if (tcsetpgrp(tty, m_pid) == 0) m_took_terminal = true;
}

void Child::guard_until(Deadline must_be_dead_by) {
  if (m_guardian.m_pipe) write_message(m_guardian.m_pipe.get(), deadline_message(must_be_dead_by));
  m_guardian.publish(must_be_dead_by);
}

std::optional<Error> Child::take_guardian_failure() {
  return std::exchange(m_guardian_failure, std::nullopt);
}

void Child::dismiss_guardian() {
  m_guardian.dismiss();
}

}  // namespace rlock::supervise
