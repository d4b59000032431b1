#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <ctime>

#include "cli/context.h"
#include "lock/protocol.h"
#include "output/render.h"
#include "supervise/signals.h"
#include "util/process.h"
#include "util/signals.h"

namespace rlock::cli {

namespace {

enum class Writable { yes, signalled, too_late };

/// Waits until standard output can take the token without blocking (a
/// pipe whose reader drains it; a file or a terminal at once), a
/// terminating signal (blocked in `terminating`, let in only while this
/// waits, and read through `interrupt`), or `by`, the end of the lease. A
/// token is small: once a pipe has room, its write cannot block.
Writable wait_for_stdout(const SignalPipe& interrupt, const sigset_t& terminating, Deadline by) {
  sigset_t during;
  pthread_sigmask(SIG_SETMASK, nullptr, &during);
  for (int sig = 1; sig < NSIG; ++sig)
    if (sigismember(&terminating, sig) == 1) sigdelset(&during, sig);
  for (;;) {
    if (interrupt.received()) return Writable::signalled;
    // Looked at once more when the lease is over (or was when the grant
    // came): a writable stdout takes the token as it always did.
    const auto left = std::max(std::chrono::ceil<std::chrono::nanoseconds>(by - Clock::now()),
                               std::chrono::nanoseconds(0));
    const timespec wait{static_cast<time_t>(left.count() / 1'000'000'000),
                        static_cast<long>(left.count() % 1'000'000'000)};
    pollfd fds[2] = {{STDOUT_FILENO, POLLOUT, 0}, {interrupt.fd(), POLLIN, 0}};
    const int n = ppoll(fds, 2, &wait, &during);
    if (n < 0 && errno == EINTR) continue;
    // Writable, or an error (closed, a hangup) that the write reports.
    if (n < 0 || fds[0].revents != 0) return Writable::yes;
    if (n == 0 && left.count() == 0) return Writable::too_late;
  }
}

}  // namespace

Action register_acquire(CLI::App& command, Context& context, const Mentioned& mentioned) {
  auto* sub = &command;
  auto options = std::make_shared<LockOptions>();
  add_name_option(*sub, options->name);
  add_lock_options(*sub, *options, mentioned);
  return [&context, options]() -> int {
    // The holder shown by status is the script that called us: acquire
    // itself exits at once.
    pid_t caller = getppid();
    auto plan = context.plan(*options, caller, process_name(caller));
    if (!plan) return report(plan.error());
    auto client = context.client();
    if (!client) return report(client.error());
    if (context.show_command())
      plan->request.who.command = process_command(caller, context.secrets());
    // Ctrl-C or a kill while waiting leaves the queue and exits 128+N; one
    // that rlock was started with ignored (nohup, a background job of a
    // script) stays ignored, as for run.
    const sigset_t ignored = supervise::ignored_on_entry();
    SignalPipe interrupt{SIGINT, SIGTERM, SIGHUP};
    // Without it a signal would go unnoticed until the wait ended.
    if (interrupt.error()) return report(signal_pipe_failure(interrupt.error()));
    supervise::keep_ignored(ignored);
    auto taken = context.take(*client, *plan, interrupt.fd());
    context.finish_progress();
    // Decided here: from now on the signals wait (blocked, and dropped at
    // exit), so that one coming while the token is printed, or as rlock
    // exits, no longer kills it after the token went out (exit 143 with the
    // lock held for its whole TTL, and a caller's `|| exit` never released
    // it). One that came before is read just below.
    sigset_t terminating;
    sigemptyset(&terminating);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&terminating, sig);
    pthread_sigmask(SIG_BLOCK, &terminating, nullptr);
    // Whatever ended the wait, a signal that came meanwhile decides: the
    // caller is going away, so is a lock already granted (a failed take
    // holds nothing).
    if (int sig = interrupt.received()) {
      if (taken) (void)client->release(options->name, taken->grant.token);
      exit_by_signal(sig);
      return 128 + sig;
    }
    if (!taken) {
      if (taken.error().code == Error::Code::busy) {
        context.report_busy(*client, options->name, taken.error());
        return plan->conflict_exit_code;
      }
      return report(taken.error());
    }
    // A token nobody received is a lock nobody can release: if it could not
    // be written, release the lock and fail.
    // The lease as the caller can count on it: the TTL from when the grant
    // was sent, less the clock drift a quorum allows for (a quorum acquire
    // that took long, waiting for slow members, has little of it left).
    const Millis lease_left = std::max(
        Millis(0), lock::validity(plan->request.ttl,
                                  std::chrono::ceil<Millis>(Clock::now() - taken->confirmed)));
    // A standard output that takes nothing (a full pipe nobody drains) is
    // waited for while the lease lasts, a signal still ending the wait.
    // Before, rlock blocked in write: TERM and INT waited, and the token
    // came out once its lease had run out.
    switch (wait_for_stdout(interrupt, terminating, Clock::now() + lease_left)) {
      case Writable::yes:
        break;
      case Writable::signalled: {
        (void)client->release(options->name, taken->grant.token);
        const int sig = interrupt.received();
        exit_by_signal(sig);
        return 128 + sig;
      }
      case Writable::too_late:
        (void)client->release(options->name, taken->grant.token);
        return report(Error{Error::Code::internal,
                            "cannot write the token: standard output took nothing before the "
                            "lease ran out (a full pipe nobody reads?); the lock was released"});
    }
    auto printed = output::print_acquired(options->name, taken->grant, plan->request, lease_left,
                                          context.global.json);
    if (!printed) {
      (void)client->release(options->name, taken->grant.token);
      return report(printed.error());
    }
    return 0;
  };
}

}  // namespace rlock::cli
