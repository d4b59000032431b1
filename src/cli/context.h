#pragma once
/// What every command shares: the global options, the resolved settings, and
/// the helpers that turn lock options into a lock request.

#include <CLI/CLI.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/settings.h"
#include "lock/lock.h"
#include "util/error.h"

namespace rlock::cli {

struct GlobalOptions {
  config::Layer layer;  // connection settings given on the command line
  std::optional<std::string> config_file;
  bool tls = false, insecure = false;
  bool json = false;
  bool show_command = false;
  int verbose = 0;
  bool quiet = false;
};

/// Options shared by `acquire` and `run`.
struct LockOptions {
  std::string name;
  std::string ttl = "30s";
  bool nonblock = false;
  std::optional<std::string> wait;
  // Numbers stay text until plan(): the project's number parser range-checks
  // them and names the option (CLI11 would wrap or say "could not convert").
  std::optional<std::string> conflict_exit_code;
  bool shared = false;
  std::optional<std::string> limit;
  std::optional<std::string> owner;
};

/// Lock options checked and converted.
struct LockPlan {
  lock::Request request;
  std::optional<Millis> wait;  // nullopt: forever
  int conflict_exit_code = 75;
};

/// A lock taken, and a time at or before which its lease began: it lasts
/// the TTL from `confirmed` at least.
struct Taken {
  lock::Grant grant;
  Deadline confirmed;
};

class Context {
 public:
  GlobalOptions global;
  /// Words split_command_line took out of argv before CLI11 saw them:
  /// `run`'s COMMAND and its arguments, or `status`'s lock names.
  std::vector<std::string> operands;

  /// Resolves settings (flag > env > file > default), prints their warnings,
  /// and returns a client for the configured server.
  Result<lock::LockClient> client();
  /// After client(): whether full command lines may be stored in Redis
  /// (--show-command, config key show-command); else program names only.
  bool show_command() const { return m_show_command; }
  /// rlock's own passwords (known once client() has run): never stored with
  /// a command line (--show-command), even where the caller's has one.
  std::span<const std::string> secrets() const { return m_secrets; }

  /// One line on stderr, only with -v.
  void verbose(const std::string& line) const;
  /// One line on stderr, unless -q.
  void warn(const std::string& line) const;
  /// True when stderr is a terminal and -q was not given.
  bool interactive() const;

  /// Checks lock options; `command` is what status shows for the holder.
  Result<LockPlan> plan(const LockOptions& options, long pid, std::string command) const;

  /// A progress callback drawing the single updating "waiting for" line on a
  /// terminal (or one line with -v); finish_progress() clears it.
  lock::LockClient::Progress progress(const std::string& name);
  void finish_progress() const;
  /// Takes the lock as `plan` says (LockClient::acquire, with progress()),
  /// and makes sure its lease is still running. The lease began when the
  /// winning try ran on the server, which may be long before this process
  /// reads the reply: the confirmation a waiter sends ahead with its wait
  /// runs when the lock is handed over, even while the waiter is stopped
  /// or swapped out. So a grant that took more than a third of the TTL is
  /// renewed once, which gives the lease a known start; a lease that ran
  /// out meanwhile held nothing for us, and the wait goes on within what
  /// is left of it. Any other failure of that renewal gives the lock back.
  /// `interrupt_fd` readable: the error is interrupted.
  Result<Taken> take(lock::LockClient& client, const LockPlan& plan, int interrupt_fd);
  /// The line (or silence, off a terminal) for a busy lock.
  /// Looks up the holder only when the line will be shown.
  void report_busy(lock::LockClient& client, const std::string& name, const Error& error) const;

 private:
  mutable bool m_progress_shown = false;
  bool m_show_command = false;
  std::vector<std::string> m_secrets;
};

/// The token of renew and release: `--token TOKEN`, `--token -` (a line on
/// stdin) or `--token-file F`, since `ps` shows argv to every user.
struct TokenOptions {
  std::optional<std::string> token, file;
  /// The token; nullopt when none of the options was given.
  Result<std::optional<std::string>> read(const Context& context) const;
};

/// Adds --token and --token-file (which exclude each other); returns them.
std::pair<CLI::Option*, CLI::Option*> add_token_options(CLI::App& app, TokenOptions& options);

/// The options a command line can use: those it names, or every one when it
/// asks for help (which lists them all). CLI11 compares each option it adds
/// with every one added before, so registering all 22 global options was a
/// third of `rlock --version`'s instructions, and run's own a fifth of
/// `rlock run x -- true`'s; an option the line does not name is never
/// parsed, and its variable keeps its default either way.
/// Over-approximate on purpose: a single-dash word counts for every letter
/// in it (a cluster such as -nv, or -t5s), and the words after `--` count
/// too; only an option named nowhere is left out.
class Mentioned {
 public:
  /// The option words of `words`, which must outlive this.
  explicit Mentioned(const std::vector<std::string>& words);
  /// Every option (for the help text, and for "did you mean").
  static Mentioned every();

  /// Whether an option named `names` ("-u,--url") is needed.
  bool operator()(std::string_view names) const;
  /// Whether the line asks for help (-h, --help): every option is needed.
  bool help() const { return m_all; }

 private:
  Mentioned() = default;
  bool m_all = false;
  std::vector<std::string_view> m_long;  // views into the words
  std::string m_short;
};

/// Adds -t -n -w -E -s -l --owner to a subcommand: those `mentioned`.
void add_lock_options(CLI::App& app, LockOptions& options, const Mentioned& mentioned);

/// The error of a SignalPipe that could not be made (SignalPipe::error):
/// a local limit (70), said so when it is the descriptors.
Error signal_pipe_failure(int err);

/// The lock name positional with its validation.
void add_name_option(CLI::App& app, std::string& name);

/// Each command's entry point: adds its options to its subcommand and
/// returns the action run when it is chosen. The action returns the exit
/// status.
using Action = std::function<int()>;
/// acquire and run add only the options `mentioned`; the other commands,
/// with few options, all of theirs.
Action register_acquire(CLI::App& command, Context& context, const Mentioned& mentioned);
Action register_renew(CLI::App& command, Context& context, const Mentioned& mentioned);
Action register_release(CLI::App& command, Context& context, const Mentioned& mentioned);
Action register_status(CLI::App& command, Context& context, const Mentioned& mentioned);
Action register_run(CLI::App& command, Context& context, const Mentioned& mentioned);

/// Adds the commands to `app` (name and description), and the options of
/// `only` (the command word of the command line; nullopt: of every command)
/// that are `mentioned`, with their actions. Building CLI11's option tree
/// was a fifth of a short command's instructions, so a process builds only
/// the one it runs: when `only` is a command and the line does not ask for
/// help, that command alone is added; otherwise every one is, the others
/// for `rlock --help` and "did you mean". Returns each subcommand with its
/// action (empty when its options were not added).
std::vector<std::pair<CLI::App*, Action>> register_commands(
    CLI::App& app, Context& context, std::optional<std::string_view> only,
    const Mentioned& mentioned = Mentioned::every());

/// The command word of `args` (the first word that is not a global option
/// or its value), as split_command_line finds it; nullopt when the line has
/// none, or something unusual comes before it. `app` has the global options.
std::optional<std::string> command_word(const CLI::App& app, const std::vector<std::string>& args);

/// argv as CLI11 gets it, and the words it must not get.
struct CommandLine {
  std::vector<std::string> args;      // for CLI11 (without argv[0])
  std::vector<std::string> operands;  // run: COMMAND [ARG...]; status: NAME...
};

/// Takes the operands out of argv (without argv[0]) before CLI11 parses it,
/// because CLI11 rewrites positionals: `[a,b]` becomes a list, `[]` vanishes,
/// `++` ends a subcommand, a command word like `acquire` is taken for a
/// subcommand. `run NAME ls -l`: the second positional after `run` (or the
/// first after `--` once NAME is known) starts the command, so that its
/// options are never taken for rlock's (`-l` is --limit). Any other NAME is
/// put after a `--` at the end, where CLI11 takes it verbatim. An unknown
/// command word is a usage error that suggests the closest command.
Result<CommandLine> split_command_line(const CLI::App& app, std::vector<std::string> args);

/// Prints `rlock: error: MESSAGE` and returns the exit status for the error.
int report(const Error& error);

}  // namespace rlock::cli
