#include "supervise/signals.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rlock::supervise {

namespace {

sigset_t forwarded_set(const sigset_t& ignored) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : k_forwarded_signals)
    if (!sigismember(&ignored, sig)) sigaddset(&set, sig);
  return set;
}

}  // namespace

bool is_terminating(int sig) {
  return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

bool is_job_control_stop(int sig) {
  return sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

void stop_own_job(int sig, bool whole_group) {
  sigset_t one, before;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, &before);
  // Sent to ourselves too, and taken by this thread (it does not block the
  // signal) before kill returns: the whole process stops there.
  kill(whole_group ? 0 : getpid(), sig);
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

sigset_t ignored_on_entry() {
  sigset_t ignored;
  sigemptyset(&ignored);
  for (int sig : k_forwarded_signals) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN)
      sigaddset(&ignored, sig);
  }
  return ignored;
}

void keep_ignored(const sigset_t& ignored) {
  for (int sig : k_forwarded_signals)
    if (sigismember(&ignored, sig)) std::signal(sig, SIG_IGN);
}

sigset_t block_forwarded_signals(const sigset_t& ignored) {
  sigset_t set = forwarded_set(ignored), old;
  pthread_sigmask(SIG_BLOCK, &set, &old);
  return old;
}

Result<SignalFd> SignalFd::open(const sigset_t& ignored) {
  // A blocked signal is queued even when its disposition is SIG_IGN: so the
  // ignored ones are neither blocked nor read, and stay discarded.
  sigset_t read_set = forwarded_set(ignored);
  sigaddset(&read_set, SIGCHLD);
  sigaddset(&read_set, SIGCONT);
  // A stop for rlock's own group is read too, so that the command stops
  // with it (Supervisor::on_own_stop); unless ignored, as by a shell
  // without job control.
  struct sigaction tstp {};
  if (sigaction(SIGTSTP, nullptr, &tstp) == 0 && tstp.sa_handler != SIG_IGN)
    sigaddset(&read_set, SIGTSTP);
  sigset_t block_set = read_set;
  sigaddset(&block_set, SIGTTOU);
  if (int err = pthread_sigmask(SIG_BLOCK, &block_set, nullptr); err != 0)
    return fail(Error::Code::internal, std::string("pthread_sigmask: ") + std::strerror(err));
  Fd fd(signalfd(-1, &read_set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!fd) return fail(Error::Code::internal, std::string("signalfd: ") + std::strerror(errno));
  return SignalFd(std::move(fd));
}

std::optional<int> SignalFd::next() {
  signalfd_siginfo info{};
  for (;;) {
    auto n = read(m_fd.get(), &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) return static_cast<int>(info.ssi_signo);
    if (n < 0 && errno == EINTR) continue;
    return std::nullopt;
  }
}

}  // namespace rlock::supervise
