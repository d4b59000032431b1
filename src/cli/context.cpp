#include "cli/context.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "backend/quorum.h"
#include "backend/target.h"
#include "lock/keys.h"
#include "output/columns.h"
#include "output/render.h"
#include "output/text.h"
#include "supervise/timing.h"
#include "util/number.h"
#include "util/process.h"

namespace rlock::cli {

namespace {
// Messages quote what the server said (key names, holders): sanitised, so a
// forged record cannot drive the terminal.
void stderr_line(const std::string& line) {
  to_stderr(fmt::format("rlock: {}\n", output::printable(line)));
}
}  // namespace

int report(const Error& error) {
  std::string_view message = error.message;
  std::string line;
  if (!error.origin.empty() && message.find(error.origin) == std::string_view::npos)
    line = fmt::format("{}: {}", error.origin, without_script_location(message));
  else
    line = message;
  to_stderr(fmt::format("rlock: error: {}\n", output::printable(line)));
  return static_cast<int>(exit_status(error.code));
}

namespace {

/// The backend target of one deployment the settings name.
backend::Target target_of(const config::Settings& settings, const redis::ConnectOptions& server) {
  backend::Target target;
  target.server = server;
  target.prefix = settings.prefix;
  target.replicas = settings.replicas;
  const redis::Url& url = target.server.url;
  if (url.sentinel) {
    // Each Sentinel: the URL's scheme and TLS settings, its own address and
    // credentials (the URL's user and password are the master's).
    for (const auto& host : url.hosts) {
      redis::ConnectOptions sentinel = target.server;
      sentinel.url = redis::Url{};
      sentinel.url.scheme = url.scheme;
      sentinel.url.host = host.host;
      sentinel.url.port = host.port;
      sentinel.url.hosts = {host};
      sentinel.user = settings.sentinel_user;
      sentinel.password = settings.sentinel_password;
      target.sentinels.push_back(std::move(sentinel));
    }
    target.master_name = url.master_name;
  }
  if (url.cluster_seeds()) {
    // Each seed: the URL's credentials, TLS settings and database, its own
    // address.
    for (const auto& host : url.hosts) {
      redis::ConnectOptions seed = target.server;
      seed.url.host = host.host;
      seed.url.port = host.port;
      seed.url.hosts = {host};
      target.seeds.push_back(std::move(seed));
    }
  }
  return target;
}

}  // namespace

Result<lock::LockClient> Context::client() {
  auto env = config::Environment::from_process();
  bool explicit_file = false;
  config::Layer file;
  if (auto path = config::config_path(global.config_file, env, explicit_file)) {
    auto read = config::read_config_file(*path);
    if (!read) return std::unexpected(read.error());
    file = *read;
  }
  config::Layer cli = global.layer;
  if (global.tls) cli.tls = true;
  if (global.insecure) cli.insecure = true;
  if (global.show_command) cli.show_command = true;
  auto settings = config::resolve(cli, env, file);
  if (!settings) return std::unexpected(settings.error());
  for (const auto& w : settings->warnings) warn("warning: " + w);
  m_show_command = settings->show_command;
  m_secrets.clear();
  if (settings->sentinel_password) m_secrets.push_back(*settings->sentinel_password);
  for (const auto& server : settings->servers)
    for (const auto& secret : {server.password, server.url.password})
      if (secret) m_secrets.push_back(*secret);
  if (settings->servers.size() == 1)
    return lock::LockClient(backend::make_backend(target_of(*settings, settings->servers.front())));
  // Several deployments: a quorum (Redlock) of one backend each.
  std::vector<std::unique_ptr<backend::Backend>> members;
  for (const auto& server : settings->servers)
    members.push_back(backend::make_backend(target_of(*settings, server)));
  return lock::LockClient(backend::make_quorum_backend(
      std::move(members), [this](const std::string& line) { warn("warning: " + line); }));
}

void Context::verbose(const std::string& line) const {
  if (global.verbose > 0 && !global.quiet) stderr_line(line);
}

void Context::warn(const std::string& line) const {
  if (!global.quiet) stderr_line(line);
}

bool Context::interactive() const {
  return !global.quiet && isatty(STDERR_FILENO);
}

Result<LockPlan> Context::plan(const LockOptions& o, long pid, std::string command) const {
  LockPlan plan;
  if (auto ok = lock::validate_name(o.name); !ok) return std::unexpected(ok.error());
  auto ttl = parse_duration(o.ttl);
  if (!ttl) return fail(Error::Code::usage, "--ttl: " + ttl.error().message);
  // Below 100 ms a lease cannot survive even one renewal round trip on a busy
  // network; above a week it is a mistake.
  if (*ttl < Millis(100)) return fail(Error::Code::usage, "--ttl must be at least 100ms");
  // A million holders is far beyond any real semaphore and keeps the limit a
  // small integer for the Lua script.
  auto limit = parse_integer(o.limit.value_or("1"), 1, 1'000'000);
  if (!limit) return fail(Error::Code::usage, "--limit: " + limit.error().message);
  if (o.shared && *limit > 1)
    return fail(Error::Code::usage, "--shared and --limit cannot be combined");
  // An exit status is one byte.
  auto conflict = parse_integer(o.conflict_exit_code.value_or("75"), 0, 255);
  if (!conflict)
    return fail(Error::Code::usage, "--conflict-exit-code: " + conflict.error().message);
  if (o.nonblock && o.wait)
    return fail(Error::Code::usage, "--nonblock and --wait cannot be combined");
  if (o.nonblock) plan.wait = Millis(0);
  if (o.wait) {
    auto wait = parse_duration(*o.wait);
    if (!wait) return fail(Error::Code::usage, "--wait: " + wait.error().message);
    plan.wait = *wait;
  }
  // Stored with the lock and sent with every status of it: bounded like a
  // name (512 bytes) and a shown command (256).
  constexpr std::size_t k_max_owner = 256;
  if (o.owner && o.owner->size() > k_max_owner)
    return fail(Error::Code::usage, fmt::format("--owner is {} bytes long; at most {} are allowed",
                                                o.owner->size(), k_max_owner));
  plan.conflict_exit_code = static_cast<int>(*conflict);
  plan.request.name = o.name;
  plan.request.ttl = *ttl;
  plan.request.shared = o.shared;
  plan.request.limit = static_cast<int>(*limit);
  plan.request.who = lock::local_identity(pid, std::move(command));
  if (o.owner) plan.request.who.owner = *o.owner;
  return plan;
}

namespace {

/// Columns of the terminal on standard error, read afresh at each call so a
/// resized window is honoured; 0 when unknown.
std::size_t terminal_columns() {
  winsize size{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

/// `shown` (printable() text) cut to at most `columns` display columns, the
/// last one a '~' when it was cut, as status cuts its cells; never splits a
/// UTF-8 sequence and counts East Asian wide characters as two.
std::string fit_columns(const std::string& shown, std::size_t columns) {
  if (output::shown_width(shown) <= columns) return shown;
  if (columns == 0) return {};
  // The longest prefix of whole code points that leaves a column for '~'.
  std::string_view text = shown;
  size_t keep = 0;
  char32_t cp = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t n = output::utf8_sequence(text, i, cp);
    const size_t next = i + (n ? n : 1);
    if (output::shown_width(text.substr(0, next)) > columns - 1) break;
    keep = i = next;
  }
  return std::string(text.substr(0, keep)) + "~";
}

}  // namespace

lock::LockClient::Progress Context::progress(const std::string& name) {
  return [this, name](const lock::Attempt& attempt, Millis waited) {
    std::string line = fmt::format("waiting {} for lock '{}'", format_duration(waited), name);
    // No holder to name: the lock may be free and yet not grantable (a
    // quorum whose restarted members have not been up for the TTL, a grant
    // on its way to the waiter ahead).
    if (attempt.holder)
      line += fmt::format(" held by {} since {} ago", output::describe_holder(*attempt.holder),
                          format_duration(attempt.holder->age));
    if (attempt.position > 1) line += fmt::format(", {} ahead in queue", attempt.position - 1);
    if (interactive()) {
      // One updating line: carriage return, clear to end of line. That
      // clears only the cursor's row, so the line must not wrap: cut to one
      // column less than the terminal (the last column would leave the
      // cursor pending a wrap); width unknown, left whole.
      std::string shown = "rlock: " + output::printable(line);
      if (const std::size_t columns = terminal_columns(); columns > 0)
        shown = fit_columns(shown, columns - 1);
      to_stderr(fmt::format("\r\x1b[K{}", shown));
      std::fflush(stderr);
      m_progress_shown = true;
    } else if (global.verbose > 0 && !m_progress_shown) {
      verbose(line);
      m_progress_shown = true;
    }
  };
}

void Context::finish_progress() const {
  if (m_progress_shown && interactive()) to_stderr("\r\x1b[K");
}

Result<Taken> Context::take(lock::LockClient& client, const LockPlan& plan, int interrupt_fd) {
  const auto& name = plan.request.name;
  const Deadline start = Clock::now();
  for (;;) {
    std::optional<Millis> wait = plan.wait;
    if (wait)
      wait = std::max(*wait - std::chrono::duration_cast<Millis>(Clock::now() - start), Millis(0));
    const Deadline before = Clock::now();
    auto grant = client.acquire(plan.request, wait, progress(name), interrupt_fd);
    if (!grant) return std::unexpected(grant.error());
    if (Clock::now() - before <= supervise::renew_interval(plan.request.ttl))
      return Taken{*grant, before};
    const Deadline sent = Clock::now();
    // As open to a signal as the wait was.
    const int saved_interrupt_fd = client.backend().interrupt_fd();
    client.backend().set_interrupt_fd(interrupt_fd);
    auto renewed = client.renew(name, grant->token, plan.request.ttl,
                                sent + client.backend().command_timeout());
    client.backend().set_interrupt_fd(saved_interrupt_fd);
    if (renewed) return Taken{*grant, sent};
    if (renewed.error().code != Error::Code::not_owner) {
      // Given back within a second, as a waiter leaves its queue: the
      // server that did not answer the renewal may not answer this either.
      (void)client.release(name, grant->token, Clock::now() + lock::k_leave_budget);
      return std::unexpected(renewed.error());
    }
    verbose(fmt::format(
        "lock '{}' was lost before it was used (its lease ran out right after the grant); "
        "waiting for it again",
        name));
  }
}

void Context::report_busy(lock::LockClient& client, const std::string& name,
                          const Error& error) const {
  // Cron mails whatever a job prints: a skipped run is silent off a terminal.
  if (!interactive() && global.verbose == 0) return;
  if (global.quiet) return;
  std::string line = error.message;
  if (auto view = client.status(name); view && !view->holders.empty()) {
    const auto& holder = view->holders[0];
    line += "; held by " + output::describe_holder(holder);
    if (!holder.who.host.empty()) line += " on " + holder.who.host;
    if (holder.recorded) line += " for " + format_duration(holder.age);
  }
  stderr_line(line);
}

Error signal_pipe_failure(int err) {
  return Error{Error::Code::internal,
               fmt::format("pipe: {}{}", std::strerror(err), descriptor_limit_hint(err))};
}

void add_name_option(CLI::App& app, std::string& name) {
  app.add_option("name", name, "Lock name (any string up to 512 bytes)")->required();
}

Result<std::optional<std::string>> TokenOptions::read(const Context& context) const {
  if (token && *token == "-") {
    auto line = config::read_secret_stdin("token");
    if (!line) return std::unexpected(line.error());
    return std::optional<std::string>(*line);
  }
  if (token && token->empty()) return fail(Error::Code::usage, "--token: the token is empty");
  if (token) return token;
  if (!file) return std::optional<std::string>();
  std::vector<std::string> warnings;
  auto line = config::read_secret_file(*file, "--token-file", Error::Code::usage, warnings);
  for (const auto& w : warnings) context.warn("warning: " + w);
  if (!line) return std::unexpected(line.error());
  return std::optional<std::string>(*line);
}

std::pair<CLI::Option*, CLI::Option*> add_token_options(CLI::App& app, TokenOptions& o) {
  auto* token = app.add_option("--token", o.token, "The token printed by acquire (- reads stdin)");
  auto* file = app.add_option("--token-file", o.file, "Read the token from this file");
  token->excludes(file);
  return {token, file};
}

Mentioned::Mentioned(const std::vector<std::string>& words) {
  for (const std::string& word : words) {
    if (word.size() < 2 || word[0] != '-') continue;
    if (word[1] == '-') {
      m_long.push_back(std::string_view(word).substr(0, word.find('=')));
      if (m_long.back() == "--help") m_all = true;
    } else {
      m_short.append(word, 1);
      if (word.find('h') != std::string::npos) m_all = true;
    }
  }
}

Mentioned Mentioned::every() {
  Mentioned all;
  all.m_all = true;
  return all;
}

bool Mentioned::operator()(std::string_view names) const {
  if (m_all) return true;
  while (!names.empty()) {
    const size_t comma = names.find(',');
    const std::string_view name = names.substr(0, comma);
    if (name.starts_with("--")) {
      if (std::find(m_long.begin(), m_long.end(), name) != m_long.end()) return true;
    } else if (name.size() == 2 && m_short.find(name[1]) != std::string::npos) {
      return true;
    }
    names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
  }
  return false;
}

void add_lock_options(CLI::App& app, LockOptions& o, const Mentioned& mentioned) {
  const auto option = [&](const char* names, auto& variable, const char* description) {
    return mentioned(names) ? app.add_option(names, variable, description) : nullptr;
  };
  const auto flag = [&](const char* names, bool& variable, const char* description) {
    if (mentioned(names)) app.add_flag(names, variable, description);
  };
  option("-t,--ttl", o.ttl, "Lease length (default 30s)");
  flag("-n,--nonblock", o.nonblock, "Fail at once if the lock is busy");
  option("-w,--wait,--timeout", o.wait, "Give up waiting after DURATION (-w 0 = -n)");
  if (auto* exit_code = option("-E,--conflict-exit-code", o.conflict_exit_code,
                               "Exit code when busy or timed out (default 75)"))
    exit_code->type_name("INT");
  flag("-s,--shared", o.shared, "Shared (read) lock: many shared holders at once");
  if (auto* limit = option("-l,--limit", o.limit, "Counting semaphore: up to N holders"))
    limit->type_name("INT");
  option("--owner", o.owner, "Free text shown by status, at most 256 bytes (default user@host)");
}

}  // namespace rlock::cli
