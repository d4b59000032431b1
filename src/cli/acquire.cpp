#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>

#include "cli/context.h"
#include "lock/protocol.h"
#include "output/render.h"
#include "supervise/signals.h"
#include "util/process.h"
#include "util/signals.h"

namespace rlock::cli {

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
    if (context.show_command()) plan->request.who.command = process_command(caller);
    // Ctrl-C or a kill while waiting leaves the queue and exits 128+N; one
    // that rlock was started with ignored (nohup, a background job of a
    // script) stays ignored, as for run.
    const sigset_t ignored = supervise::ignored_on_entry();
    SignalPipe interrupt{SIGINT, SIGTERM, SIGHUP};
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
