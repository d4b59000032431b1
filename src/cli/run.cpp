/// `rlock run NAME [options] [--] COMMAND...`: takes the lock, runs the
/// command under supervision (see src/supervise), releases the lock when the
/// command ends, and exits with the command's status.

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "cli/context.h"
#include "output/render.h"
#include "supervise/child.h"
#include "supervise/environment.h"
#include "supervise/heartbeat.h"
#include "supervise/signals.h"
#include "supervise/supervisor.h"
#include "supervise/timing.h"
#include "util/process.h"
#include "util/signals.h"
#include "util/token.h"

namespace rlock::cli {

namespace {

using supervise::Timing;

struct RunOptions {
  LockOptions lock;
  std::vector<std::string> command;
  std::optional<std::string> shell_command;  // -c
  std::optional<std::string> kill_after, min_hold, max_hold;
};

/// `-c` runs its text with the POSIX shell, as cron and make do.
constexpr const char* k_shell = "/bin/sh";
/// status shows the start of a long command line (as for acquire's caller).
constexpr size_t k_max_command_shown = 256;
/// Ancestors walked when checking a nested run: far more than any real
/// process tree is deep, and a bound in case /proc answers nonsense.
constexpr int k_max_ancestors = 1024;

// --- parsing -----------------------------------------------------------------

Result<std::vector<std::string>> command_argv(const RunOptions& o) {
  if (o.shell_command && !o.command.empty())
    return fail(Error::Code::usage, "run: give either -c 'SHELL COMMAND' or COMMAND, not both");
  // An empty one (-c "$UNSET") is a mistake, not a command that does nothing.
  if (o.shell_command && o.shell_command->find_first_not_of(" \t\n") == std::string::npos)
    return fail(Error::Code::usage, "run: -c needs a shell command ('-c' was given none)");
  if (o.shell_command) return std::vector<std::string>{k_shell, "-c", *o.shell_command};
  if (o.command.empty())
    return fail(Error::Code::usage, "run: a command is required (run NAME -- COMMAND [ARG...])");
  return o.command;
}

/// The command as status shows it by default: the program's name alone, as
/// its arguments may hold secrets (`mysql -phunter2`) and every lock user
/// can read what is stored; for -c, the shell.
std::string program_shown(const std::vector<std::string>& argv) {
  return program_name(argv.front());
}

/// The command as status shows it with --show-command, without rlock's own
/// `secrets`.
std::string command_line(const RunOptions& o, std::span<const std::string> secrets) {
  std::string line;
  if (o.shell_command) {
    line = without_secrets(without_url_passwords(*o.shell_command), secrets);
  } else {
    for (const auto& arg : o.command)
      line += (line.empty() ? "" : " ") + without_secrets(without_url_passwords(arg), secrets);
  }
  if (line.size() > k_max_command_shown) line.resize(k_max_command_shown);
  return line;
}

Result<std::optional<Millis>> optional_duration(const std::optional<std::string>& text,
                                                const char* option) {
  if (!text) return std::optional<Millis>();
  auto d = parse_duration(*text);
  if (!d) return fail(Error::Code::usage, fmt::format("{}: {}", option, d.error().message));
  return std::optional<Millis>(*d);
}

Result<Timing> timing_of(const RunOptions& o, Millis ttl) {
  supervise::TimingOptions t;
  t.ttl = ttl;
  auto kill_after = optional_duration(o.kill_after, "--kill-after");
  if (!kill_after) return std::unexpected(kill_after.error());
  auto min_hold = optional_duration(o.min_hold, "--min-hold");
  if (!min_hold) return std::unexpected(min_hold.error());
  auto max_hold = optional_duration(o.max_hold, "--max-hold");
  if (!max_hold) return std::unexpected(max_hold.error());
  t.kill_after = *kill_after;
  t.min_hold = *min_hold;
  t.max_hold = *max_hold;
  return supervise::plan_timing(t);
}

// --- nested runs ---------------------------------------------------------------

bool is_ancestor(pid_t pid) {
  pid_t p = getppid();
  for (int k = 0; k < k_max_ancestors && p > 1; ++k, p = parent_of(p))
    if (p == pid) return true;
  return false;
}

/// True when process `pid` looks like an `rlock run` of lock `name`: the
/// same program as ours, or one whose arguments hold `run` and `name` (a
/// renamed copy, an older version under another name).
bool runs_lock(pid_t pid, const std::string& name) {
  if (process_name(pid) == process_name(getpid())) return true;
  const auto args = process_args(pid);
  return std::ranges::find(args, "run") != args.end() &&
         std::ranges::find(args, name) != args.end();
}

/// True when `holder` of lock `name` is an enclosing `rlock run` of this
/// process: on this host, one of our ancestors, and an rlock run of that
/// lock. The id, host and pid of every holder are public (status), and pids
/// repeat across hosts and containers, so an ancestor with the holder's pid
/// alone proves nothing: `RLOCK_HELD=ID:NAME` copied into another host's
/// environment, or another pid namespace's, would skip the lock there.
bool is_enclosing_run(const lock::Identity& holder, const std::string& name) {
  if (holder.host != lock::local_identity(0, "").host) return false;
  // The /proc we read must be our pid namespace's: in a namespace of its
  // own without its own /proc mounted, the pids we see there (ours, our
  // parents') name other processes in /proc.
  if (std::error_code ec;
      std::filesystem::read_symlink("/proc/self", ec).string() != std::to_string(getpid()))
    return false;
  const auto pid = static_cast<pid_t>(holder.pid);
  return is_ancestor(pid) && runs_lock(pid, name);
}

/// The holds of the enclosing runs that are for `name`: from RLOCK_HELD (every
/// enclosing run, outermost first) and RLOCK_NAME/RLOCK_TOKEN (the innermost).
std::vector<supervise::HeldLock> enclosing_holds_of(const std::string& name) {
  std::vector<supervise::HeldLock> holds;
  if (const char* held = std::getenv("RLOCK_HELD"))
    for (auto& h : supervise::parse_held(held))
      if (h.name == name) holds.push_back(std::move(h));
  const char* env_name = std::getenv("RLOCK_NAME");
  const char* env_token = std::getenv("RLOCK_TOKEN");
  if (env_name && env_token && *env_token && name == env_name)
    holds.push_back({short_id(env_token), name});
  return holds;
}

/// An enclosing run's hold of the lock: how it holds it, and the lock's limit.
struct EnclosingHold {
  lock::HolderView holder;
  int limit = 1;
};

/// The hold of an enclosing `rlock run` of this process tree on `name`, at
/// any depth (A -> B -> A), if there is one: RLOCK_HELD or
/// RLOCK_NAME/RLOCK_TOKEN say so, and the server confirms that the holder
/// with that id is an `rlock` among our ancestors on this host (a stale
/// environment, say inherited by a daemon that outlived its run, does not
/// count).
Result<std::optional<EnclosingHold>> held_by_enclosing_run(lock::LockClient& client,
                                                           const std::string& name) {
  const auto holds = enclosing_holds_of(name);
  if (holds.empty()) return std::nullopt;
  auto view = client.status(name);
  if (!view) return std::unexpected(view.error());
  for (const auto& holder : view->holders)
    for (const auto& h : holds)
      if (holder.id == h.id && is_enclosing_run(holder.who, name))
        return EnclosingHold{holder, view->limit};
  return std::nullopt;
}

/// Replaces rlock with the command: the enclosing run supervises it.
int exec_in_place(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  restore_entry_signals();  // SIGPIPE ignored by rlock must not leak into the command
  execvp(args[0], args.data());
  int err = errno;
  to_stderr(fmt::format("rlock: error: cannot run '{}': {}\n", argv[0], std::strerror(err)));
  return supervise::exec_failure_status(err);
}

// --- the run itself --------------------------------------------------------------

/// A held lock, and the local moments that bound its lease.
struct Hold {
  lock::Grant grant;
  Deadline acquired;   // after the grant: --min-hold and --max-hold count from here
  Deadline confirmed;  // before the grant was sent: the lease lasts TTL from here
};

/// What ends a run before the command starts: an exit status.
using Early = int;

/// Takes the lock; Ctrl-C or a kill while waiting leaves the queue and
/// exits 128+N. Returns with the forwarded signals blocked, so that none is
/// lost (or kills us) before the supervisor reads them.
std::expected<Hold, Early> take_lock(Context& context, lock::LockClient& client,
                                     const LockPlan& plan, const sigset_t& ignored,
                                     sigset_t& original_mask) {
  const auto& name = plan.request.name;
  SignalPipe interrupt{SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  if (interrupt.error()) return std::unexpected(report(signal_pipe_failure(interrupt.error())));
  supervise::keep_ignored(ignored);
  std::optional<Hold> hold;
  std::optional<Error> failure;
  if (auto taken = context.take(client, plan, interrupt.fd()))
    hold = Hold{taken->grant, Clock::now(), taken->confirmed};
  else
    failure = taken.error();
  original_mask = supervise::block_forwarded_signals(ignored);
  context.finish_progress();
  if (int sig = interrupt.received()) {
    if (hold) (void)client.release(name, hold->grant.token);
    exit_by_signal(sig);
    return std::unexpected(128 + sig);
  }
  if (failure) {
    if (failure->code == Error::Code::busy) {
      context.report_busy(client, name, *failure);
      return std::unexpected(plan.conflict_exit_code);
    }
    return std::unexpected(report(*failure));
  }
  return *hold;
}

/// After the command: --min-hold keeps the lock (it expires by itself at
/// acquisition + DUR); otherwise it is released. True when it was released.
bool give_back(Context& context, lock::LockClient& client, const std::string& name,
               const Hold& hold, const Timing& timing, Deadline confirmed) {
  auto left = supervise::min_hold_left(hold.acquired, Clock::now(), timing);
  if (left > Millis(0)) {
    // The command has ended: the lease may end sooner than the TTL.
    auto kept = client.renew(name, hold.grant.token, left,
                             Clock::now() + client.backend().command_timeout(), true);
    if (kept) {
      context.verbose(
          fmt::format("keeping lock '{}' for {} more (--min-hold)", name, format_duration(left)));
      return false;
    }
    context.warn(fmt::format("warning: could not keep lock '{}' for --min-hold: {}", name,
                             kept.error().message));
    return false;
  }
  auto released = client.release_confirmed(name, hold.grant.token);
  if (released) {
    context.verbose(fmt::format("released lock '{}'", name));
    return true;
  }
  if (released.error().code == Error::Code::not_owner) {
    // Past the lease its last confirmed renewal gave (rlock itself stopped
    // or starved after the command ended): it ran out before the release.
    if (Clock::now() >= confirmed + timing.ttl)
      context.warn(fmt::format(
          "warning: lock '{}' ran out before it could be released (rlock was held up past "
          "its lease)",
          name));
    else
      context.warn(
          fmt::format("warning: lock '{}' was no longer held when the command ended", name));
  } else {
    // Not confirmed may still have been done (a release the replicas did
    // not acknowledge): the warning says what is known.
    context.warn(fmt::format(
        "warning: could not release lock '{}' for certain ({}); if it is still held, it "
        "expires within {}",
        name, released.error().message, format_duration(timing.ttl)));
  }
  return false;
}

/// --json: run's document, once the command has ended. The command's exit
/// status stays rlock's: a document that cannot be written is reported,
/// and only that.
void print_summary(const Context& context, const std::string& name, const output::RunSummary& run) {
  if (!context.global.json) return;
  if (auto printed = output::print_ran(name, run); !printed) (void)report(printed.error());
}

int lost(const std::string& name, const supervise::Loss& loss) {
  to_stderr(fmt::format("rlock: error: lost lock '{}': {}; the command was terminated\n", name,
                        loss.reason));
  return static_cast<int>(ExitStatus::lost);
}

/// The command's status, except when rlock was told to stop and the
/// command died of a signal N rlock passed on to it: then 128+N, as if
/// rlock itself had been killed by N; of rlock's SIGKILL after
/// --kill-after: the same for the signal that started the stop. A death by
/// a signal from elsewhere (the OOM killer) is reported as that signal.
/// With the terminal given
/// to the command, a Ctrl-C or Ctrl-\ reaches the command alone: when it
/// dies of it, rlock's group gets it too and rlock dies of it
/// (exit_by_signal_of_terminal), as they would have beside the command in
/// one foreground group, so that a calling shell stops there.
int exit_status(const supervise::Outcome& outcome, bool gave_terminal) {
  if (outcome.signal && outcome.died_of_ours()) {
    const int died_of = WTERMSIG(outcome.wait_status);
    const int as = died_of == SIGKILL && outcome.killed ? outcome.signal : died_of;
    exit_by_signal(as);
    return 128 + as;
  }
  if (gave_terminal && WIFSIGNALED(outcome.wait_status))
    exit_by_signal_of_terminal(WTERMSIG(outcome.wait_status));
  return supervise::exit_status_of(outcome.wait_status);
}

int supervise_command(Context& context, lock::LockClient& client, const std::string& name,
                      const Hold& hold, const Timing& timing, std::vector<std::string> argv,
                      const sigset_t& ignored, const sigset_t& original_mask) {
  auto release_now = [&] { (void)client.release(name, hold.grant.token); };
  // From here to the release, nothing rlock writes to stderr (-v's lines,
  // a message) may stop it: a pipe nobody reads blocked it before the
  // command was watched or the heartbeat started, and the lock was held
  // until it expired (probe N). Written by the writer thread instead, and
  // waited for after the release, a few seconds at most.
  struct StderrHandOff {
    StderrHandOff() { stderr_never_blocks_this_thread(); }
    ~StderrHandOff() {
      constexpr int k_final_flush_ms = 3000;
      flush_stderr_writer(k_final_flush_ms);
      stderr_never_blocks_this_thread(false);
    }
  } stderr_hand_off;
  // The guardian first, while rlock is one thread with little memory: a
  // fork after the heartbeat thread and the signalfd existed cost about
  // seven times the page faults (their pages are copied on write).
  auto guardian = supervise::Guardian::start(timing.kill_after,
                                             supervise::must_be_dead_by(hold.confirmed, timing),
                                             supervise::enclosing_deadlines());
  if (!guardian) {
    release_now();
    return report(guardian.error());
  }
  auto signals = supervise::SignalFd::open(ignored);
  if (!signals) {
    release_now();
    return report(signals.error());
  }
  auto heartbeat = supervise::Heartbeat::create(
      {client.backend().clone(), name, hold.grant.token,
       [&context](const std::string& line) { context.warn(line); }, &client},
      timing, hold.confirmed);
  if (!heartbeat) {
    release_now();
    return report(heartbeat.error());
  }
  supervise::Launch launch;
  launch.argv = std::move(argv);
  launch.env = supervise::child_environment(
      supervise::process_environment(),
      {name, hold.grant.token, hold.grant.fence, guardian->deadline_fd()});
  launch.mask = original_mask;
  launch.terminal_fd = supervise::owned_terminal();
  launch.take_terminal = launch.terminal_fd >= 0;
  launch.close_standard_fds = output::claimed_standard_fds();
  auto child = supervise::Child::spawn(launch, std::move(*guardian));
  if (!child || child->exec_errno()) {
    (*heartbeat)->stop();
    release_now();
    if (!child) return report(child.error());
    to_stderr(fmt::format("rlock: error: cannot run '{}': {}\n", launch.argv[0],
                          std::strerror(child->exec_errno())));
    return supervise::exec_failure_status(child->exec_errno());
  }
  context.verbose(fmt::format("acquired lock '{}' (fence {}); running pid {}", name,
                              hold.grant.fence, child->pid()));

  supervise::Supervisor supervisor(*child, **heartbeat, *signals, timing, hold.acquired,
                                   hold.confirmed);
  auto outcome = supervisor.run();
  const Millis held = std::chrono::duration_cast<Millis>(Clock::now() - hold.acquired);
  // The command is over: what is left of its group from here on (a job it
  // left in the background) is not the guardian's to kill. It exits while
  // the lock is released, and is reaped when `child` goes.
  child->let_guardian_go();
  // Joined before any release: no renewal of ours can follow it.
  (*heartbeat)->stop();
  // The release goes through the heartbeat's client when its last renewal
  // went through: that one has followed the lock through a failover while
  // the command ran, where ours, unused since the grant, may still lead to
  // a frozen old master and wait out its silence first. After renewals
  // that failed, ours is the connection more likely still open (see the
  // unreachable case below).
  lock::LockClient* followed = (*heartbeat)->client_after_stop();
  lock::LockClient& parting = followed && !(*heartbeat)->beat().failure ? *followed : client;
  if (outcome.loss) {
    bool released = false;
    switch (outcome.loss->cause) {
      case supervise::LossCause::max_hold:
      case supervise::LossCause::unkeepable:
        released = parting.release(name, hold.grant.token).has_value();
        break;
      case supervise::LossCause::unreachable:
        // The lease is at its end, but a renewal the heartbeat sent may
        // still sit in a frozen or cut-off server's socket: run when the
        // server thaws, it would keep the lock a whole TTL for a command
        // that is dead. A release sent now frees it in either order (the
        // renewal finds it gone, or the release follows it); its reply is
        // waited for only briefly, the server may still be out of reach.
        (void)client.release(name, hold.grant.token, Clock::now() + lock::k_parting_budget);
        break;
      case supervise::LossCause::not_owner:
        break;  // nothing of ours is left to release
    }
    // The command ran: --json says how it ended, and why the lock went.
    print_summary(context, name,
                  {hold.grant, outcome.wait_status, held, released, &outcome.loss->reason});
    return lost(name, *outcome.loss);
  }
  const bool released =
      give_back(context, parting, name, hold, timing, (*heartbeat)->beat().confirmed);
  print_summary(context, name, {hold.grant, outcome.wait_status, held, released});
  return exit_status(outcome, launch.take_terminal);
}

int run_command(Context& context, const RunOptions& o) {
  auto argv = command_argv(o);
  if (!argv) return report(argv.error());
  // status shows rlock itself as the holder: it is the process that keeps
  // the lock alive, and the program (or command line) says what it runs.
  auto plan = context.plan(o.lock, getpid(), program_shown(*argv));
  if (!plan) return report(plan.error());
  auto timing = timing_of(o, plan->request.ttl);
  if (!timing) return report(timing.error());
  auto client = context.client();
  if (!client) return report(client.error());
  if (context.show_command()) plan->request.who.command = command_line(o, context.secrets());

  auto nested = held_by_enclosing_run(*client, o.lock.name);
  if (!nested) return report(nested.error());
  if (*nested) {
    // Only what the ancestor's hold covers runs at once: before, an
    // exclusive run under a shared one ran beside the other shared
    // holders, and a --limit nobody else could use went unnoticed (probe E).
    if (auto fits = lock::nested_request_fits(plan->request, (*nested)->holder, (*nested)->limit);
        !fits)
      return report(fits.error());
    context.verbose(
        fmt::format("lock '{}' is held by an enclosing run: running the command", o.lock.name));
    // It becomes the command: with --json too, the enclosing run's
    // document is the one that reports it.
    return exec_in_place(*argv);
  }

  const sigset_t ignored = supervise::ignored_on_entry();
  sigset_t original_mask;
  auto hold = take_lock(context, *client, *plan, ignored, original_mask);
  if (!hold) return hold.error();
  return supervise_command(context, *client, o.lock.name, *hold, *timing, std::move(*argv), ignored,
                           original_mask);
}

}  // namespace

Action register_run(CLI::App& command, Context& context, const Mentioned& mentioned) {
  auto* sub = &command;
  sub->footer(
      "Usage: rlock [GLOBAL] run NAME [LOCK] [RUN] [--] COMMAND [ARG...]\n"
      "       rlock [GLOBAL] run NAME [LOCK] [RUN] -c 'SHELL COMMAND'\n"
      "Exit status: the command's (128+N after signal N), 75 busy, 79 lock lost,\n"
      "126/127 command not executable / not found.");
  auto o = std::make_shared<RunOptions>();
  add_name_option(*sub, o->lock.name);
  add_lock_options(*sub, o->lock, mentioned);
  const auto option = [&](const char* names, auto& variable, const char* description) {
    return mentioned(names) ? sub->add_option(names, variable, description)->group("Run options")
                            : nullptr;
  };
  if (auto* shell = option("-c", o->shell_command, "Run this with /bin/sh -c instead of COMMAND"))
    shell->expected(1);
  option("--kill-after", o->kill_after,
         "Grace between SIGTERM and SIGKILL (default 5s, or TTL/4 if shorter)");
  option("--min-hold", o->min_hold,
         "Keep the lock at least this long after acquiring, even if the command ends");
  option("--max-hold", o->max_hold,
         "Terminate the command (exit 79) after holding the lock this long");
  sub->add_option("command", o->command, "The command and its arguments");
  // CLI11 never sees the command's words (it would take `[1,2]` apart):
  // split_command_line took them out of argv.
  return [&context, o]() -> int {
    o->command = context.operands;
    return run_command(context, *o);
  };
}

}  // namespace rlock::cli
