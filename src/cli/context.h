#pragma once
/// What every command shares: the global options, the resolved settings, and
/// the helpers that turn lock options into a lock request.

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
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
  int conflict_exit_code = static_cast<int>(ExitStatus::busy);
  bool shared = false;
  int limit = 1;
  std::optional<std::string> owner;
};

/// Lock options checked and converted.
struct LockPlan {
  lock::Request request;
  std::optional<Millis> wait;  // nullopt: forever
  int conflict_exit_code = 75;
};

class Context {
 public:
  GlobalOptions global;

  /// Resolves settings (flag > env > file > default), prints their warnings,
  /// and returns a client for the configured server.
  Result<lock::LockClient> client();
  /// After client(): whether full command lines may be stored in Redis
  /// (--show-command, config key show-command); else program names only.
  bool show_command() const { return m_show_command; }

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
  /// The line (or silence, off a terminal) for a busy lock.
  /// Looks up the holder only when the line will be shown.
  void report_busy(lock::LockClient& client, const std::string& name, const Error& error) const;

 private:
  mutable bool m_progress_shown = false;
  bool m_show_command = false;
};

/// Adds -t -n -w -E -s -l --owner to a subcommand.
void add_lock_options(CLI::App& app, LockOptions& options);

/// The lock name positional with its validation.
void add_name_option(CLI::App& app, std::string& name);

/// Each command's entry point: registers its subcommand and returns the
/// action run when it is chosen. The action returns the exit status.
using Action = std::function<int()>;
Action register_acquire(CLI::App& app, Context& context);
Action register_renew(CLI::App& app, Context& context);
Action register_release(CLI::App& app, Context& context);
Action register_status(CLI::App& app, Context& context);
Action register_run(CLI::App& app, Context& context);

/// `rlock run NAME ls -l`: inserts `--` where the command starts (the second
/// positional after `run`), so that the command's own options are never
/// taken for rlock's (`-l` is --limit). `args` excludes argv[0]; other
/// command lines come back unchanged.
std::vector<std::string> separate_run_command(const CLI::App& app, std::vector<std::string> args);

/// Prints `rlock: error: MESSAGE` and returns the exit status for the error.
int report(const Error& error);

}  // namespace rlock::cli
