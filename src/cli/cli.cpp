#include "cli/cli.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <openssl/opensslv.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <exception>

#include "cli/context.h"
#include "output/render.h"

namespace rlock::cli {

namespace {

std::string version_text() {
  return fmt::format("rlock {} (commit {})\nhiredis {}.{}.{}, {}\n", RLOCK_VERSION,
                     RLOCK_GIT_COMMIT, HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH,
                     OPENSSL_VERSION_TEXT);
}

void add_global_options(CLI::App& app, GlobalOptions& g) {
  const char* group = "Global options (before or after the command)";
  app.add_option("-u,--url", g.layer.urls,
                 "Redis URL: redis://[user@]host[:port][/db], rediss://..., "
                 "unix:///path.sock[?db=N] (env RLOCK_URL, REDIS_URL)")
      ->group(group);
  app.add_option("--prefix", g.layer.prefix, "Key namespace (default rlock:; env RLOCK_PREFIX)")
      ->group(group);
  app.add_option("--user", g.layer.user, "ACL user name")->group(group);
  app.add_option("--password-file", g.layer.password_file,
                 "Read the password from this file (env RLOCK_PASSWORD, REDISCLI_AUTH)")
      ->group(group);
  app.add_flag("--tls", g.tls, "Use TLS (implied by rediss://)")->group(group);
  app.add_option("--cacert", g.layer.cacert, "CA certificate file to verify the server")
      ->group(group);
  app.add_option("--cacertdir", g.layer.cacertdir, "Directory of CA certificates")->group(group);
  app.add_option("--cert", g.layer.cert, "Client certificate (PEM)")->group(group);
  app.add_option("--key", g.layer.key, "Client private key (PEM)")->group(group);
  app.add_option("--sni", g.layer.sni, "TLS server name (default: the URL's host)")->group(group);
  app.add_flag("--insecure", g.insecure, "Do not verify the server's certificate")->group(group);
  app.add_option("--connect-timeout", g.layer.connect_timeout,
                 "Per connection attempt (default 2s; env RLOCK_CONNECT_TIMEOUT)")
      ->group(group);
  app.add_option("--config", g.config_file,
                 "Config file (env RLOCK_CONFIG; default /etc/rlock.conf, "
                 "~/.config/rlock/rlock.conf)")
      ->group(group);
  app.add_flag("--json", g.json, "Machine-readable output: one JSON document on stdout")
      ->group(group);
  app.add_flag("-v,--verbose", g.verbose, "More on stderr")->group(group);
  app.add_flag("-q,--quiet", g.quiet, "Less on stderr")->group(group);
}

/// CLI11 describes parse errors in several lines; the contract wants one.
int usage_error(const CLI::Error& e) {
  std::string what = e.what();
  if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
  fmt::print(stderr, "rlock: error: {} (see 'rlock --help')\n", what);
  return static_cast<int>(ExitStatus::usage);
}

int run_main(int argc, char** argv) {
  CLI::App app{"rlock: a distributed lock on Redis for shell scripts, cron jobs and CI.", "rlock"};
  app.footer(
      "Exit status: 0 ok, 1 refused/free, 64 usage, 69 unreachable, 70 internal,\n"
      "75 busy or timed out, 76 Redis error, 77 auth/TLS, 78 config file, 79 lock lost.\n"
      "See rlock(1).");
  app.require_subcommand(0, 1);
  Context context;
  add_global_options(app, context.global);
  bool show_version = false;
  app.add_flag("-V,--version", show_version, "Print version information and exit");

  std::vector<std::pair<CLI::App*, Action>> commands;
  auto add = [&](Action (*registrar)(CLI::App&, Context&)) {
    auto action = registrar(app, context);
    commands.emplace_back(app.get_subcommands({}).back(), std::move(action));
  };
  add(register_run);
  add(register_acquire);
  add(register_renew);
  add(register_release);
  add(register_status);
  for (auto& [sub, action] : commands) sub->fallthrough();

  // CLI11 takes the arguments in reverse order.
  auto args = separate_run_command(app, std::vector<std::string>(argv + 1, argv + argc));
  std::reverse(args.begin(), args.end());
  try {
    app.parse(std::move(args));
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    return usage_error(e);
  }
  if (show_version) {
    fmt::print("{}", version_text());
    return 0;
  }
  for (auto& [sub, action] : commands)
    if (sub->parsed()) return action();
  fmt::print(stderr,
             "rlock: error: a command is required: run, acquire, renew, release or status "
             "(see 'rlock --help')\n");
  return static_cast<int>(ExitStatus::usage);
}

}  // namespace

int main(int argc, char** argv) {
  // A write to a closed stdout (rlock status | head) must not kill us with
  // SIGPIPE halfway through releasing a lock; EPIPE is handled instead.
  std::signal(SIGPIPE, SIG_IGN);
  output::claim_standard_fds();
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "rlock: error: internal error: {}\n", e.what());
  } catch (...) {
    fmt::print(stderr, "rlock: error: internal error\n");
  }
  return static_cast<int>(ExitStatus::internal);
}

}  // namespace rlock::cli
