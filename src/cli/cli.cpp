#include "cli/cli.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <openssl/opensslv.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>

#include "cli/context.h"
#include "output/render.h"
#include "util/number.h"
#include "util/process.h"
#include "util/signals.h"

namespace rlock::cli {

namespace {

/// `status` once what --help or --version printed is out; a full disk or a
/// closed stdout is an error (70), as for every other output; a reader that
/// stopped reading ends rlock quietly (end_quietly_on_broken_pipe).
int flushed(int status) {
  output::end_quietly_on_broken_pipe();
  if (auto done = output::flush_stdout(); !done) return report(done.error());
  return status;
}

std::string version_text() {
  return fmt::format("rlock {} (commit {})\nhiredis {}.{}.{}, {}\n", RLOCK_VERSION,
                     RLOCK_GIT_COMMIT, HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH,
                     OPENSSL_VERSION_TEXT);
}

void add_global_options(CLI::App& app, GlobalOptions& g, const Mentioned& mentioned) {
  const char* group = "Global options (before or after the command)";
  // Each one only when the line names it (Mentioned); nullptr otherwise.
  const auto option = [&](const char* names, auto& variable, const char* description) {
    return mentioned(names) ? app.add_option(names, variable, description)->group(group) : nullptr;
  };
  const auto flag = [&](const char* names, auto& variable, const char* description) {
    if (mentioned(names)) app.add_flag(names, variable, description)->group(group);
  };
  // One value per -u, taken verbatim: CLI11 would otherwise let -u swallow
  // the following words (`status -u URL a b`) and split `[..]` into a list.
  if (auto* url =
          option("-u,--url", g.layer.urls,
                 "Redis URL: redis://[user@]host[:port][/db], rediss://..., "
                 "unix:///path.sock[?db=N], redis-sentinel://[user@]s1[:port],s2.../db#MASTER "
                 "; repeated: a quorum of independent deployments (env RLOCK_URL, "
                 "REDIS_URL)"))
    url->allow_extra_args(false);
  option("--prefix", g.layer.prefix, "Key namespace (default rlock:; env RLOCK_PREFIX)");
  option("--user", g.layer.user, "ACL user name");
  option("--password-file", g.layer.password_file,
         "Read the password from this file (env RLOCK_PASSWORD, REDISCLI_AUTH)");
  option("--sentinel-user", g.layer.sentinel_user,
         "ACL user name for the Sentinels (the URL's user is the master's)");
  option("--sentinel-password-file", g.layer.sentinel_password_file,
         "Read the Sentinels' password from this file (env RLOCK_SENTINEL_PASSWORD)");
  if (auto* replicas = option("--replicas", g.layer.replicas,
                              "Replicas that must acknowledge each acquire and renewal: N, or all "
                              "(default: all connected; 0: do not wait)"))
    replicas->type_name("N|all");
  flag("--tls", g.tls, "Use TLS (implied by rediss://)");
  option("--cacert", g.layer.cacert, "CA certificate file to verify the server");
  option("--cacertdir", g.layer.cacertdir, "Directory of CA certificates");
  option("--cert", g.layer.cert, "Client certificate (PEM)");
  option("--key", g.layer.key, "Client private key (PEM)");
  option("--sni", g.layer.sni, "TLS server name (default: the URL's host)");
  flag("--insecure", g.insecure, "Do not verify the server's certificate");
  option("--connect-timeout", g.layer.connect_timeout,
         "Per connection attempt (default 2s; env RLOCK_CONNECT_TIMEOUT)");
  option("--config", g.config_file,
         "Config file (env RLOCK_CONFIG; default /etc/rlock.conf, ~/.config/rlock/rlock.conf)");
  flag("--show-command", g.show_command,
       "Store full command lines in Redis for status (default: program names only)");
  flag("--json", g.json, "Machine-readable output: one JSON document on stdout");
  flag("-v,--verbose", g.verbose, "More on stderr");
  flag("-q,--quiet", g.quiet, "Less on stderr");
}

/// `--password` and `--sentinel-password` do not exist, on purpose: every
/// user of the host sees argv in ps, and neither does redis-cli's `-a`.
/// Asking for one (the option word `word`, or a short option's letter
/// `letter`) gets the way to do it instead, and never the value echoed
/// back.
std::optional<Error> refused_secret(std::string_view word, char letter = 0) {
  static constexpr std::pair<std::string_view, std::string_view> k_secrets[] = {
      {"--password", "--password-file or RLOCK_PASSWORD"},
      {"--sentinel-password", "--sentinel-password-file or RLOCK_SENTINEL_PASSWORD"},
      {"-a", "--password-file or RLOCK_PASSWORD"}};
  const std::string_view name = letter == 'a' ? "-a" : word.substr(0, word.find('='));
  for (const auto& [option, instead] : k_secrets)
    if (name == option)
      return fail(Error::Code::usage,
                  fmt::format("there is no {} option: a password on the command line is "
                              "visible to every user in ps; use {}",
                              option, instead))
          .error();
  return std::nullopt;
}

/// `run --help` spells out its two forms in its footer (`Usage: ...`
/// lines); they replace CLI11's generated usage line, at the top.
class Formatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    auto [usage, rest] = split_footer(app);
    return usage.empty() ? CLI::Formatter::make_usage(app, std::move(name)) : usage + "\n";
  }
  std::string make_footer(const CLI::App* app) const override {
    auto [usage, rest] = split_footer(app);
    return rest.empty() ? std::string() : rest + "\n";
  }

 private:
  static std::pair<std::string, std::string> split_footer(const CLI::App* app) {
    std::string footer = app->get_footer();
    if (!footer.starts_with("Usage:")) return {"", footer};
    // The usage block: the "Usage:" line and the indented lines after it.
    size_t end = 0;
    while (end < footer.size()) {
      size_t nl = footer.find('\n', end);
      if (nl == std::string::npos) nl = footer.size();
      if (end > 0 && footer[end] != ' ') break;
      end = nl + 1;
    }
    if (end > footer.size()) end = footer.size();
    std::string usage = footer.substr(0, end);
    while (usage.ends_with('\n')) usage.pop_back();
    return {usage, footer.substr(end)};
  }
};

/// Like CLI11: a word starting with '-' is an option, except `-` alone and
/// a negative number that is no option's name.
bool is_option_word(const CLI::App& root, const CLI::App* sub, const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-') return false;
  if (arg[1] >= '0' && arg[1] <= '9') {
    std::string name = arg.substr(0, 2);
    return (sub && sub->get_option_no_throw(name)) || root.get_option_no_throw(name);
  }
  return true;
}

/// The option `token` names ("-t", "--ttl"), in `sub` or, since options
/// fall through, in the root.
const CLI::Option* find_option(const CLI::App& root, const CLI::App* sub,
                               const std::string& token) {
  const CLI::Option* opt = sub ? sub->get_option_no_throw(token) : nullptr;
  return opt ? opt : root.get_option_no_throw(token);
}

bool takes_value(const CLI::Option* opt) {
  return opt && opt->get_items_expected_min() > 0;
}

/// True when the option word `token` is known (in its first letter, for a
/// cluster of short options).
bool known_option(const CLI::App& root, const CLI::App* sub, const std::string& token) {
  if (token.starts_with("--")) return find_option(root, sub, token.substr(0, token.find('=')));
  return find_option(root, sub, token.substr(0, 2));
}

/// True when the option word `token` consumes the next argument.
bool consumes_next(const CLI::App& root, const CLI::App* sub, const std::string& token) {
  if (token.starts_with("--")) {
    if (token.find('=') != std::string::npos) return false;
    return takes_value(find_option(root, sub, token));
  }
  // A cluster of short options (-nv, -t5s): a value-taking letter takes the
  // rest of the word, or the next argument when it is the last letter.
  for (size_t k = 1; k < token.size(); ++k) {
    const CLI::Option* opt = find_option(root, sub, std::string("-") + token[k]);
    if (!opt) return false;  // unknown: CLI11 reports it
    if (takes_value(opt)) return k + 1 == token.size();
  }
  return false;
}

/// Edits (insert, delete, substitute, swap two neighbours) from a to b.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

Result<CommandLine> unknown_command(const CLI::App& app, const std::string& word) {
  std::string best;
  // Two edits catch the usual typos (stauts, relase, aquire) without
  // suggesting unrelated words.
  size_t best_distance = 3;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    size_t d = edit_distance(word, sub->get_name());
    if (d < best_distance) best = sub->get_name(), best_distance = d;
  }
  std::string hint = best.empty() ? "" : fmt::format("; did you mean '{}'?", best);
  return fail(Error::Code::usage, fmt::format("unknown command {}{} (see 'rlock --help')",
                                              quote_input(without_url_passwords(word)), hint));
}

}  // namespace

namespace {

/// The index of the command word in `args`, or args.size() when there is
/// none, or something unusual comes before it (CLI11 then says what).
size_t command_index(const CLI::App& app, const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") return args.size();
    if (!is_option_word(app, nullptr, args[i])) return i;
    if (!known_option(app, nullptr, args[i])) return args.size();
    if (consumes_next(app, nullptr, args[i])) ++i;
  }
  return args.size();
}

/// Every command: its name, its one-line description, and its registrar.
struct CommandEntry {
  const char* name;
  const char* description;
  Action (*add_options)(CLI::App&, Context&, const Mentioned&);
};
constexpr CommandEntry k_commands[] = {
    {"run", "Run a command while holding a lock", register_run},
    {"acquire", "Take a lock and print its token", register_acquire},
    {"renew", "Extend a lock held with TOKEN", register_renew},
    {"release", "Release a lock (with its token, or --force)", register_release},
    {"status", "Show holders and waiters of locks", register_status},
};

/// Every option of every command and every global one: a command line's
/// own App has only those it names (Mentioned, register_commands).
struct EveryOption {
  CLI::App app;
  GlobalOptions globals;
  Context context;
  std::vector<std::pair<CLI::App*, Action>> commands;
  EveryOption() {
    add_global_options(app, globals, Mentioned::every());
    commands = register_commands(app, context, std::nullopt, Mentioned::every());
  }
};

/// The long names ("--ttl") of an App's options, and with `shorts` their
/// short ones ("-t") too.
void add_long_names(const CLI::App& app, std::vector<std::string>& names, bool shorts = false) {
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& name : opt->get_lnames()) names.push_back("--" + name);
    if (shorts)
      for (const std::string& name : opt->get_snames()) names.push_back("-" + name);
  }
}

/// An option `shown` ("--tll", "-Z") that neither the command `sub` nor the
/// root knows, said back without any value, with what it likely meant: the
/// commands it belongs to if it is another command's, the long options it
/// begins if any (three at most), else the closest one by a typo or two.
/// CLI11 would take the word as an extra and the next one as a positional:
/// the lock's name.
Error unknown_option(const CLI::App* sub, const std::string& shown) {
  const EveryOption every;
  const CLI::App& all = every.app;
  const auto& commands = every.commands;
  // The command's own options first: a tie goes to them (--tll: --ttl,
  // not the global --tls).
  std::vector<std::string> mine;
  std::vector<std::string> elsewhere;  // the other commands that have it
  for (const auto& [command, action] : commands) {
    std::vector<std::string> names;
    add_long_names(*command, names, true);
    if (sub && command->get_name() == sub->get_name())
      mine.insert(mine.end(), names.begin(), names.end());
    else if (std::find(names.begin(), names.end(), shown) != names.end())
      elsewhere.push_back(command->get_name());
  }
  add_long_names(all, mine);
  // `shown` is a long option ("--tll") or one letter ("-Z"):
  // check_option_word names a long one written with one dash itself.
  std::string hint;
  // 'a', 'b' or 'c' (quoted), or a, b and c.
  const auto listed = [](const std::vector<std::string>& names, bool quoted) {
    std::string list;
    for (std::size_t k = 0; k < names.size(); ++k) {
      list += k == 0 ? "" : k + 1 == names.size() ? (quoted ? " or " : " and ") : ", ";
      list += quoted ? "'" + names[k] + "'" : names[k];
    }
    return list;
  };
  const auto one_of = [&](const std::vector<std::string>& names) { return listed(names, true); };
  if (!elsewhere.empty() && sub) {
    hint = fmt::format("; it is an option of {}, not of {}", listed(elsewhere, false),
                       sub->get_name());
  } else if (!elsewhere.empty()) {
    hint = fmt::format("; it is an option of {}: give it after the command word",
                       listed(elsewhere, false));
  } else if (shown.starts_with("--") && shown.size() > 2) {
    std::vector<std::string> begun;
    for (const auto& name : mine)
      if (name.starts_with(shown) && std::find(begun.begin(), begun.end(), name) == begun.end())
        begun.push_back(name);
    std::sort(begun.begin(), begun.end());
    // A typo that also begins another: --tl begins --tls, and is one edit
    // from --ttl (acquire's own first).
    std::vector<std::string> typo;
    for (const auto& name : mine)
      if (!begun.empty() && std::find(begun.begin(), begun.end(), name) == begun.end() &&
          std::find(typo.begin(), typo.end(), name) == typo.end() &&
          edit_distance(shown.substr(2), std::string_view(name).substr(2)) == 1)
        typo.push_back(name);
    typo.insert(typo.end(), begun.begin(), begun.end());
    if (!begun.empty() && typo.size() <= 3) {
      hint = fmt::format("; did you mean {}?", one_of(typo));
    } else if (!begun.empty() && begun.size() <= 3) {
      hint = fmt::format("; did you mean {}?", one_of(begun));
    } else if (begun.empty()) {
      // One edit for a short name (--tll), two for a longer one: beyond
      // that, unrelated names come out closest.
      std::string best;
      std::size_t best_distance = shown.size() - 2 <= 4 ? 2 : 3;
      for (const auto& name : mine) {
        const std::size_t d = edit_distance(shown.substr(2), std::string_view(name).substr(2));
        if (d < best_distance) best = name, best_distance = d;
      }
      if (!best.empty()) hint = fmt::format("; did you mean '{}'?", best);
    }
  }
  return fail(Error::Code::usage,
              fmt::format("unknown option {}{} (see 'rlock {}--help')", quote_input(shown), hint,
                          sub ? sub->get_name() + " " : ""))
      .error();
}

/// Checks an option word (before `--`) against the options `sub` and the
/// root know: an unknown one, or a password option, is refused, named
/// without its value. Each letter of a cluster (-nv) is checked up to the
/// first that takes a value (the rest of the word, -t5s). With `help`
/// (the line asks for it) an unknown option is let through: CLI11 prints
/// the help first, as it always did.
std::optional<Error> check_option_word(const CLI::App& root, const CLI::App* sub,
                                       const std::string& word, bool help) {
  const std::string name = word.substr(0, word.find('='));
  const std::string see = fmt::format("(see 'rlock {}--help')", sub ? sub->get_name() + " " : "");
  if (word.starts_with("--")) {
    if (auto secret = refused_secret(word)) return secret;
    if (help) return std::nullopt;
    const CLI::Option* opt = find_option(root, sub, name);
    if (!opt) return unknown_option(sub, name);
    // A flag given a value (--tls=yes): CLI11 would say the value back.
    if (name.size() < word.size() && !takes_value(opt))
      return fail(Error::Code::usage, fmt::format("{} takes no value {}", name, see)).error();
    return std::nullopt;
  }
  // Where the cluster stops making sense: an unknown letter, or a letter
  // that takes the rest of the word as its value.
  std::size_t k = 1;
  const CLI::Option* opt = nullptr;
  for (; k < word.size(); ++k) {
    opt = find_option(root, sub, std::string{'-', word[k]});
    if (!opt || takes_value(opt)) break;
  }
  if (k == word.size() || help) return std::nullopt;
  if (auto secret = refused_secret("", word[k]); secret && !opt) return secret;
  // A long option written with one dash (-url, -token SECRET, -quiet,
  // -json): as a cluster it would be -u rl, or -q -u iet, and its value
  // would end up anywhere. Only a word of letters that names an option is
  // taken so (every option is built for it: never for -nv, -t5s, -w30s
  // or -uredis://...).
  if (std::all_of(name.begin() + 1, name.end(),
                  [](char c) { return (c >= 'a' && c <= 'z') || c == '-'; })) {
    const EveryOption every;
    std::vector<std::string> names;
    add_long_names(every.app, names);
    for (const auto& [command, action] : every.commands) add_long_names(*command, names);
    if (std::find(names.begin(), names.end(), "-" + name) != names.end())
      return fail(Error::Code::usage, fmt::format("unknown option {}; did you mean '-{}'? {}",
                                                  quote_input(name), name, see))
          .error();
  }
  // Never past the unknown letter: what follows may be a value.
  if (!opt) return unknown_option(sub, std::string{'-', word[k]});
  return std::nullopt;
}

}  // namespace

std::optional<std::string> command_word(const CLI::App& app, const std::vector<std::string>& args) {
  const size_t i = command_index(app, args);
  if (i >= args.size()) return std::nullopt;
  return args[i];
}

std::vector<std::pair<CLI::App*, Action>> register_commands(CLI::App& app, Context& context,
                                                            std::optional<std::string_view> only,
                                                            const Mentioned& mentioned) {
  std::vector<std::pair<CLI::App*, Action>> commands;
  // A line that names a command and does not ask for help needs that one
  // command alone: the others are there for `rlock --help` and "did you
  // mean" (an unknown word, or none, keeps them all).
  const bool known = only && std::any_of(std::begin(k_commands), std::end(k_commands),
                                         [&](const CommandEntry& e) { return *only == e.name; });
  for (const CommandEntry& entry : k_commands) {
    const bool chosen = !only || *only == entry.name;
    if (known && !chosen && !mentioned.help()) continue;
    CLI::App* sub = app.add_subcommand(entry.name, entry.description);
    Action action;
    if (chosen) action = entry.add_options(*sub, context, mentioned);
    commands.emplace_back(sub, std::move(action));
  }
  return commands;
}

/// Appends option word `arg` to `out`: `--name=` (an empty value) as
/// `--name` and "", since CLI11 would take the next word as its value
/// (`--owner= --shared` took "--shared" as the owner and the lock as
/// exclusive).
void push_option_word(const CLI::App& root, const CLI::App* sub, const std::string& arg,
                      std::vector<std::string>& out) {
  const std::string name = arg.substr(0, arg.size() - 1);
  if (arg.size() > 3 && arg.starts_with("--") && arg.back() == '=' &&
      name.find('=') == std::string::npos && consumes_next(root, sub, name)) {
    out.push_back(name);
    out.emplace_back();
    return;
  }
  out.push_back(arg);
}

Result<CommandLine> split_command_line(const CLI::App& app, std::vector<std::string> args) {
  CommandLine line;
  // A line that asks for help gets it (CLI11 prints it before any error).
  bool help = false;
  for (const auto& arg : args) {
    if (arg == "--") break;
    help = help || arg == "-h" || arg == "--help";
  }
  // The global options before the command word, checked as the ones after
  // (and pushed as they are: push_option_word).
  std::vector<std::string> head;
  size_t j = 0;
  for (; j < args.size() && args[j] != "--" && is_option_word(app, nullptr, args[j]); ++j) {
    if (auto bad = check_option_word(app, nullptr, args[j], help)) return std::unexpected(*bad);
    push_option_word(app, nullptr, args[j], head);
    if (consumes_next(app, nullptr, args[j]) && j + 1 < args.size()) head.push_back(args[++j]);
  }
  head.insert(head.end(), std::make_move_iterator(args.begin() + static_cast<std::ptrdiff_t>(j)),
              std::make_move_iterator(args.end()));
  args = std::move(head);
  const size_t i = command_index(app, args);
  if (i >= args.size()) return CommandLine{std::move(args), {}};
  const std::string word = args[i];
  const CLI::App* sub = nullptr;
  for (const CLI::App* candidate : app.get_subcommands([](const CLI::App*) { return true; }))
    if (candidate->check_name(word)) sub = candidate;
  if (!sub) return unknown_command(app, word);

  line.args.assign(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1);
  const bool run = sub->get_name() == "run", status = sub->get_name() == "status";
  std::vector<std::string> positionals;
  bool options_ended = false;
  // run -- -x -- CMD: the "--" that let NAME start with '-' came first, so
  // the one right after NAME still separates it from the command.
  bool name_after_dashes = false;
  for (size_t j = i + 1; j < args.size(); ++j) {
    const std::string& arg = args[j];
    if (!options_ended && arg == "--") {
      options_ended = true;
    } else if (!options_ended && is_option_word(app, sub, arg)) {
      if (auto bad = check_option_word(app, sub, arg, help)) return std::unexpected(*bad);
      push_option_word(app, sub, arg, line.args);
      if (consumes_next(app, sub, arg)) {
        // The last word: CLI11 would take the "--" added before the
        // positionals below as its value (run NAME -c ran `sh -c --`);
        // a "--" next is the end of the options, not a value.
        if (j + 1 == args.size() || args[j + 1] == "--")
          return fail(Error::Code::usage,
                      fmt::format("{}: a value is required (see 'rlock --help')", arg));
        line.args.push_back(args[++j]);
      }
    } else if (run && !positionals.empty()) {
      // The command: this word and every one after it, verbatim.
      const size_t from = name_after_dashes && arg == "--" ? j + 1 : j;
      line.operands.assign(args.begin() + static_cast<std::ptrdiff_t>(from), args.end());
      break;
    } else if (status) {
      line.operands.push_back(arg);
    } else {
      if (positionals.empty()) name_after_dashes = options_ended;
      positionals.push_back(arg);
    }
  }
  if (!positionals.empty()) {
    line.args.emplace_back("--");
    line.args.insert(line.args.end(), positionals.begin(), positionals.end());
  }
  return line;
}

namespace {

/// CLI11 describes parse errors in several lines; the contract wants one.
int usage_error(const CLI::Error& e) {
  std::string what = e.what();
  if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
  // "--ttl: At Most 1 required but received 2": a value option given twice.
  if (auto at = what.find(": At Most 1 required but received "); at != std::string::npos)
    what = what.substr(0, at) + " was given more than once";
  to_stderr(fmt::format("rlock: error: {} (see 'rlock --help')\n", what));
  return static_cast<int>(ExitStatus::usage);
}

int run_main(int argc, char** argv) {
  CLI::App app{"rlock: a distributed lock on Redis for shell scripts, cron jobs and CI.", "rlock"};
  app.footer(
      "Exit status: 0 ok, 1 refused/free, 64 usage, 69 unreachable, 70 internal,\n"
      "75 busy or timed out, 76 Redis error, 77 auth/TLS, 78 configuration, 79 lock lost.\n"
      "See rlock(1).");
  app.require_subcommand(0, 1);
  Context context;
  std::vector<std::string> words(argv + 1, argv + argc);
  // The options the line names (Mentioned: every one when it asks for
  // help). Its views into `words` are used only until split_command_line.
  const Mentioned mentioned(words);
  add_global_options(app, context.global, mentioned);
  bool show_version = false;
  app.add_flag("-V,--version", show_version, "Print version information and exit");

  // Only the command that runs gets its options, and only those the line
  // names (register_commands). With no command word (--help, --version, a
  // mistake), none does: the others are words CLI11 may report or list,
  // never parse options for.
  const auto word = command_word(app, words);
  auto commands = register_commands(
      app, context,
      word ? std::optional<std::string_view>(*word) : std::optional<std::string_view>(""),
      mentioned);
  auto formatter = std::make_shared<Formatter>();
  app.formatter(formatter);
  for (auto& [sub, action] : commands) {
    sub->fallthrough();
    sub->formatter(formatter);
  }

  auto line = split_command_line(app, std::move(words));
  if (!line) return report(line.error());
  context.operands = std::move(line->operands);
  auto args = std::move(line->args);
  // CLI11 takes the arguments in reverse order.
  std::reverse(args.begin(), args.end());
  try {
    app.parse(std::move(args));
  } catch (const CLI::CallForHelp& e) {
    return flushed(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return flushed(app.exit(e));
  } catch (const CLI::ExtrasError& e) {
    // CLI11 2.1 lists the extra words last first (it joins them in
    // reverse); they are said in the order they were given.
    // The `--` that split_command_line put before the positionals is not
    // the user's.
    std::vector<std::string> extras;
    for (auto& extra : app.remaining(true))
      if (extra != "--") extras.push_back(std::move(extra));
    if (extras.empty()) return usage_error(e);
    // Said back without secrets: a token (the word after --token, or after
    // its =) releases the lock, and a URL's password is the server's.
    std::string list;
    bool token_next = false;
    for (const auto& extra : extras) {
      std::string shown = without_url_passwords(extra);
      if (token_next) shown = "...";
      if (shown.starts_with("--token=")) shown = "--token=...";
      token_next = extra == "--token";
      list += (list.empty() ? "" : " ") + quote_input(shown);
    }
    to_stderr(
        fmt::format("rlock: error: {} {} (see 'rlock --help')\n",
                    extras.size() == 1 ? "unexpected argument" : "unexpected arguments:", list));
    return static_cast<int>(ExitStatus::usage);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return flushed(app.exit(e));
    return usage_error(e);
  }
  if (show_version) {
    fmt::print("{}", version_text());
    return flushed(0);
  }
  for (auto& [sub, action] : commands)
    if (sub->parsed() && action) return action();
  to_stderr(
      "rlock: error: a command is required: run, acquire, renew, release or status "
      "(see 'rlock --help')\n");
  return static_cast<int>(ExitStatus::usage);
}

}  // namespace

int main(int argc, char** argv) {
  // A write to a pipe nobody reads must not kill us with SIGPIPE halfway
  // through releasing a lock; EPIPE is handled instead (and ends `rlock
  // status | head` quietly: output::end_quietly_on_broken_pipe). Likewise
  // SIGXFSZ; and SIGCHLD must not be ignored (claim_process_signals).
  claim_process_signals();
  output::claim_standard_fds();
  try {
    const int status = run_main(argc, argv);
    // Told to stop by Ctrl-C (or SIGQUIT) and done cleaning up: end by it,
    // so that a calling shell stops its script too (see die_as_told).
    die_as_told();
    return status;
  } catch (const std::exception& e) {
    to_stderr(fmt::format("rlock: error: internal error: {}\n", e.what()));
  } catch (...) {
    to_stderr("rlock: error: internal error\n");
  }
  return static_cast<int>(ExitStatus::internal);
}

}  // namespace rlock::cli
