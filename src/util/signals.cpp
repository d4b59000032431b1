#include "util/signals.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace rlock {

namespace {
std::atomic<int> g_write_fd{-1};

/// claim_process_signals' signals, what rlock sets each to, and whether it
/// was ignored on entry.
struct Claimed {
  int sig;
  void (*own)(int);
  bool ignored_on_entry;
};
Claimed g_claimed[] = {
    {SIGPIPE, SIG_IGN, false}, {SIGXFSZ, SIG_IGN, false}, {SIGCHLD, SIG_DFL, false}};
std::atomic<int> g_first_signal{0};

void on_signal(int sig) {
  // The interrupted code may be about to read errno: write(2) below must
  // not change it under its feet.
  const int saved_errno = errno;
  int expected = 0;
  g_first_signal.compare_exchange_strong(expected, sig);
  int fd = g_write_fd.load();
  if (fd >= 0) {
    char byte = static_cast<char>(sig);
    // Async-signal-safe; a full pipe already says "interrupted".
    [[maybe_unused]] auto n = write(fd, &byte, 1);
  }
  errno = saved_errno;
}
}  // namespace

SignalPipe::SignalPipe(std::initializer_list<int> signals) {
  if (pipe2(m_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    m_error = errno;
    m_fds[0] = m_fds[1] = -1;
  }
  g_first_signal = 0;
  g_write_fd = m_fds[1];
  for (int sig : signals) {
    struct sigaction action {
    }, old{};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(sig, &action, &old);
    m_saved.emplace_back(sig, old);
  }
}

SignalPipe::~SignalPipe() {
  for (auto& [sig, old] : m_saved) sigaction(sig, &old, nullptr);
  g_write_fd = -1;
  for (int fd : m_fds)
    if (fd >= 0) close(fd);
}

int SignalPipe::received() const {
  return g_first_signal.load();
}

namespace {
int g_exit_signal = 0;
bool g_exit_group = false;
}  // namespace

void claim_process_signals() {
  for (auto& claimed : g_claimed) {
    struct sigaction before {};
    claimed.ignored_on_entry =
        sigaction(claimed.sig, nullptr, &before) == 0 && before.sa_handler == SIG_IGN;
    signal(claimed.sig, claimed.own);
  }
}

void restore_entry_signals() {
  for (const auto& claimed : g_claimed)
    signal(claimed.sig, claimed.ignored_on_entry ? SIG_IGN : SIG_DFL);
}

void exit_by_signal(int sig) {
  g_exit_signal = sig;
  g_exit_group = false;
}

void exit_by_signal_of_terminal(int sig) {
  g_exit_signal = sig;
  g_exit_group = true;
}

void die_as_told() {
  const int sig = g_exit_signal;
  if (sig != SIGINT && sig != SIGQUIT) return;
  // No core file for SIGQUIT: rlock is not the one that misbehaved.
  struct rlimit no_core {};
  setrlimit(RLIMIT_CORE, &no_core);
  signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  // The group gets it as from the terminal: rlock (unblocked, by default)
  // dies of it on the way out of kill().
  if (g_exit_group && kill(0, sig) == 0) return;
  raise(sig);
}

}  // namespace rlock
