#include "config/settings.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>

#include "lock/keys.h"
#include "redis/url.h"
#include "supervise/fd.h"
#include "util/duration.h"
#include "util/number.h"
#include "util/trust.h"

namespace rlock::config {

namespace {

std::optional<std::string> getenv_opt(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

std::string trim(std::string_view s) {
  auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return "";
  auto end = s.find_last_not_of(" \t\r");
  return std::string(s.substr(begin, end - begin + 1));
}

Result<bool> parse_bool(const std::string& value) {
  if (value == "1" || value == "yes" || value == "true" || value == "on") return true;
  if (value == "0" || value == "no" || value == "false" || value == "off") return false;
  return fail(Error::Code::config, fmt::format("wants yes or no, not {}", quote_input(value)));
}

/// `value # comment` → `value`: a '#' starts a comment after a blank, so a
/// '#' inside a value (a password in a URL) stays.
std::string strip_comment(std::string_view text) {
  for (size_t i = 1; i < text.size(); ++i)
    if (text[i] == '#' && (text[i - 1] == ' ' || text[i - 1] == '\t'))
      return trim(text.substr(0, i));
  return trim(text);
}

std::string first_line(std::string_view text) {
  auto line = text.substr(0, text.find('\n'));
  if (line.ends_with('\r')) line.remove_suffix(1);
  return std::string(line);
}

template <class T>
const std::optional<T>& first_set(const std::optional<T>& a, const std::optional<T>& b) {
  return a ? a : b;
}

/// A password file option and where it was set: its name in messages.
struct PasswordFile {
  const std::optional<std::string>& path;
  std::string_view name;
};

/// A password by the precedence of the contract: the file named on the
/// command line, then the first variable set, then the file the config file
/// names (`origin` is its `file:line`). Unset when none is.
Result<std::optional<std::string>> read_password(
    PasswordFile cli,
    std::initializer_list<std::reference_wrapper<const std::optional<std::string>>> env,
    PasswordFile file, const std::string& origin, std::vector<std::string>& warnings) {
  if (cli.path) {
    auto p = read_secret_file(*cli.path, cli.name, Error::Code::usage, warnings);
    if (!p) return std::unexpected(p.error());
    return *p;
  }
  for (const auto& value : env)
    if (value.get()) return value.get();
  if (file.path) {
    auto p = read_secret_file(*file.path, fmt::format("{} (set at {})", file.name, origin),
                              Error::Code::config, warnings);
    if (!p) return fail(Error::Code::config, p.error().message);
    return *p;
  }
  return std::nullopt;
}

/// A secret file that is also one of the descriptors rlock was started with
/// (`--password-file /dev/stdin < secret`, `--password-file /dev/fd/7
/// 7< secret`): rlock opened the file anew (`own`), so the descriptor the
/// caller passed, which `run`'s command would inherit, still reads the
/// secret from its start. It is closed, or, standard input, replaced with
/// /dev/null. Only a regular file can be read again: reading the secret
/// drained a pipe, and a terminal does not give it twice. Standard output
/// and error are left alone (rlock writes to them).
void forget_inherited_copies(const struct stat& file, int own) {
  if (!S_ISREG(file.st_mode)) return;
  std::vector<int> copies;
  const auto check = [&](int fd) {
    struct stat st {};
    if (fd != own && fd != STDOUT_FILENO && fd != STDERR_FILENO && fstat(fd, &st) == 0 &&
        st.st_dev == file.st_dev && st.st_ino == file.st_ino)
      copies.push_back(fd);
  };
  if (DIR* dir = opendir("/proc/self/fd")) {
    const int listing = dirfd(dir);
    while (const dirent* entry = readdir(dir)) {
      const auto fd = parse_integer(entry->d_name, 0, INT_MAX);
      if (fd && *fd != listing) check(static_cast<int>(*fd));
    }
    closedir(dir);
  } else {
    // No /proc: the descriptors a caller is likely to have passed.
    for (int fd = 0; fd < 1024; ++fd) check(fd);
  }
  for (const int fd : copies) {
    if (fd != STDIN_FILENO) {
      ::close(fd);
      continue;
    }
    supervise::Fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (null) (void)::dup2(null.get(), STDIN_FILENO);  // dup2 clears O_CLOEXEC
  }
}

}  // namespace

Environment Environment::from_process() {
  return Environment{getenv_opt("RLOCK_URL"),     getenv_opt("REDIS_URL"),
                     getenv_opt("RLOCK_PREFIX"),  getenv_opt("RLOCK_PASSWORD"),
                     getenv_opt("REDISCLI_AUTH"), getenv_opt("RLOCK_CONNECT_TIMEOUT"),
                     getenv_opt("RLOCK_CONFIG"),  getenv_opt("RLOCK_SENTINEL_PASSWORD")};
}

std::optional<std::string> config_path(const std::optional<std::string>& flag,
                                       const Environment& env, bool& explicit_choice) {
  explicit_choice = true;
  if (flag) return flag;
  if (env.config) return env.config;
  explicit_choice = false;
  struct stat st {};
  if (stat("/etc/rlock.conf", &st) == 0) return "/etc/rlock.conf";
  if (auto home = getenv_opt("HOME")) {
    auto path = *home + "/.config/rlock/rlock.conf";
    if (stat(path.c_str(), &st) == 0) return path;
  }
  return std::nullopt;
}

Result<std::string> read_trusted_file(const std::string& path, std::string_view what, bool secret,
                                      Error::Code unreadable, std::vector<std::string>& warnings) {
  auto cannot = [&](const std::string& why) {
    return fail(unreadable, fmt::format("cannot read {} '{}': {}", what, path, why));
  };
  // O_NONBLOCK: opening a FIFO nobody writes to would block forever. It is
  // cleared before reading, so `--config <(generate)` still waits for data.
  supervise::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) return cannot(std::strerror(errno));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return cannot(std::strerror(errno));
  if (int flags = fcntl(fd.get(), F_GETFL);
      flags < 0 || fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) < 0)
    return cannot(std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return cannot("it is a directory");
  // /dev/null is everyone's to write and says nothing (`--config
  // /dev/null`: no config file at all).
  if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) return std::string{};
  if (auto refused = untrusted(st, what, path)) return std::unexpected(*refused);
  if (secret && (st.st_mode & S_IROTH))
    warnings.push_back(
        fmt::format("{} '{}' is readable by others; fix: chmod o-r '{}'", what, path, path));
  std::string text;
  char buffer[4096];
  // One byte past the limit tells "too large" from "exactly the limit".
  while (text.size() <= k_max_file_size) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return cannot(std::strerror(errno));
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  if (text.size() > k_max_file_size)
    return fail(Error::Code::config,
                fmt::format("{} '{}' is larger than {} KiB", what, path, k_max_file_size / 1024));
  // A named pipe that no program had open for writing reads as empty at
  // once: not an empty file (which means "the defaults"), but one whose
  // contents never came, so nothing it would have said may be left out.
  if (text.empty() && S_ISFIFO(st.st_mode))
    return cannot("it is a pipe that nothing was written to");
  if (secret) forget_inherited_copies(st, fd.get());
  return text;
}

Result<std::string> read_secret_file(const std::string& path, std::string_view what,
                                     Error::Code unreadable, std::vector<std::string>& warnings) {
  auto text = read_trusted_file(path, what, true, unreadable, warnings);
  if (!text) return std::unexpected(text.error());
  auto line = first_line(*text);
  if (line.empty()) return fail(Error::Code::config, fmt::format("{} '{}' is empty", what, path));
  return line;
}

Result<std::string> read_secret_stdin(std::string_view what) {
  std::string text;
  char buffer[4096];
  // A line is all we want; stop at the first newline or the size limit.
  while (text.find('\n') == std::string::npos && text.size() <= k_max_file_size) {
    ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return fail(Error::Code::usage, fmt::format("cannot read {} from standard input: {}", what,
                                                  std::strerror(errno)));
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  auto line = first_line(text);
  if (line.empty()) return fail(Error::Code::usage, fmt::format("no {} on standard input", what));
  return line;
}

Result<Layer> read_config_file(const std::string& path) {
  std::vector<std::string> warnings;
  auto content = read_trusted_file(path, "config file", false, Error::Code::config, warnings);
  if (!content) return std::unexpected(content.error());
  if (content->find('\0') != std::string::npos)
    return fail(Error::Code::config, fmt::format("config file '{}' is not a text file", path));
  // A byte order mark, as some Windows editors save UTF-8, is not part of
  // the first key.
  constexpr std::string_view k_bom = "\xEF\xBB\xBF";
  if (content->starts_with(k_bom)) content->erase(0, k_bom.size());
  Layer layer;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & S_IROTH) != 0)
    layer.readable_by_others = path;
  std::istringstream in(*content);
  std::string line;
  // The line each key was first set on: a key set twice (two `user`
  // lines) is a mistake that "the last one wins" would hide. Only `url`
  // may repeat: each line adds a quorum member.
  std::map<std::string, int> set_at;
  // A file named by a relative path is the config file's neighbour, not
  // the working directory's: cron and CI run rlock from anywhere (before,
  // `password-file = pw` in /etc/rlock.conf was read from the cwd).
  const auto beside = [&path](const std::string& file) {
    if (file.starts_with('/')) return file;
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? file : path.substr(0, slash + 1) + file;
  };
  for (int number = 1; std::getline(in, line); ++number) {
    auto text = trim(line);
    if (text.empty() || text[0] == '#') continue;
    auto eq = text.find('=');
    auto where = fmt::format("{}:{}", path, number);
    if (eq == std::string::npos)
      return fail(Error::Code::config, fmt::format("{}: expected 'key = value'", where));
    auto key = trim(text.substr(0, eq));
    auto value = strip_comment(text.substr(eq + 1));
    auto bad = [&](const std::string& why) {
      return fail(Error::Code::config, fmt::format("{}: {}: {}", where, key, why));
    };
    if (value.empty()) return bad("missing value");
    if (auto [first, added] = set_at.emplace(key, number); !added && key != "url")
      return bad(fmt::format("set again (first on line {}); give each key once", first->second));
    auto flag = [&](std::optional<bool>& slot) -> Result<void> {
      auto b = parse_bool(value);
      if (!b) return bad(b.error().message);
      slot = *b;
      return {};
    };
    Result<void> ok;
    if (key == "url") {
      for (auto& u : redis::split_deployments(value)) {
        if (auto url = redis::parse_url(u); !url) return bad(url.error().message);
        layer.urls.push_back(u);
        layer.url_origins.push_back(where);
      }
      layer.url_origin = where;
    } else if (key == "prefix") {
      if (auto valid = lock::validate_prefix(value, "value"); !valid)
        return bad(valid.error().message);
      layer.prefix = value;
    } else if (key == "user") {
      layer.user = value;
    } else if (key == "password-file") {
      layer.password_file = beside(value);
      layer.password_file_origin = where;
    } else if (key == "sentinel-user") {
      layer.sentinel_user = value;
    } else if (key == "sentinel-password-file") {
      layer.sentinel_password_file = beside(value);
      layer.sentinel_password_file_origin = where;
    } else if (key == "replicas") {
      if (auto parsed = parse_replicas(value); !parsed) return bad(parsed.error().message);
      layer.replicas = value;
    } else if (key == "tls") {
      ok = flag(layer.tls);
      layer.tls_origin = where;
    } else if (key == "insecure") {
      ok = flag(layer.insecure);
      layer.insecure_origin = where;
    } else if (key == "cacert") {
      layer.cacert = beside(value);
      layer.cacert_origin = where;
    } else if (key == "cacertdir") {
      layer.cacertdir = beside(value);
      layer.cacert_origin = where;
    } else if (key == "cert") {
      layer.cert = beside(value);
      layer.cert_origin = where;
    } else if (key == "key") {
      layer.key = beside(value);
      layer.key_origin = where;
    } else if (key == "sni") {
      layer.sni = value;
    } else if (key == "connect-timeout") {
      auto parsed = parse_duration(value);
      if (!parsed) return bad(parsed.error().message);
      if (parsed->count() <= 0) return bad("must be greater than zero");
      layer.connect_timeout = value;
    } else if (key == "show-command") {
      ok = flag(layer.show_command);
    } else {
      return fail(Error::Code::config, fmt::format("{}: unknown key '{}'", where, key));
    }
    if (!ok) return std::unexpected(ok.error());
  }
  return layer;
}

namespace {

/// The servers a deployment's URL names, as "host:port" or a socket path
/// (host names compared without case); a Sentinel URL's are its Sentinels,
/// each with the master's name, since one group of Sentinels may watch
/// several masters.
std::vector<std::string> servers_of(const redis::Url& url) {
  if (url.scheme == redis::Url::Scheme::unix_socket) return {"unix:" + url.path};
  std::vector<std::string> servers;
  for (const auto& e : url.hosts) {
    std::string host = e.host;
    std::transform(host.begin(), host.end(), host.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    servers.push_back(
        fmt::format("{}:{}{}", host, e.port, url.sentinel ? "#" + url.master_name : ""));
  }
  return servers;
}

/// A quorum counts each deployment once: two URLs that name the same server
/// (another database of it, a Cluster seed twice, the same Sentinel master)
/// would let one server's vote count twice, so that losing it loses a
/// majority, or its grant alone makes one. Only the same spelling is
/// caught: `localhost` and 127.0.0.1 are not compared.
/// `sources` names where each URL was given (a config file's line, the
/// second of the pair's).
Result<void> check_independent(const std::vector<redis::Url>& urls, Error::Code code,
                               const std::vector<std::string>& sources) {
  for (std::size_t a = 0; a < urls.size(); ++a)
    for (std::size_t b = a + 1; b < urls.size(); ++b)
      for (const auto& server : servers_of(urls[a])) {
        const auto theirs = servers_of(urls[b]);
        if (std::find(theirs.begin(), theirs.end(), server) == theirs.end()) continue;
        return fail(code,
                    fmt::format("{}: {} and {} name the same server: the deployments of a quorum "
                                "must be independent (each counts once)",
                                sources[b], urls[a].redacted(), urls[b].redacted()));
      }
  return {};
}

}  // namespace

Result<Settings> resolve(const Layer& cli, const Environment& env, const Layer& file) {
  Settings settings;
  // priority 1: command line; 2: environment; 3: config file; 4: default.
  // Each value remembers where it came from, so that an error names it: a
  // usage error for an option or a variable, a config error for the file
  // (whose values read_config_file already checked).
  std::vector<std::string> urls = cli.urls;
  std::string url_source = "--url";
  if (urls.empty() && env.rlock_url)
    urls = redis::split_deployments(*env.rlock_url), url_source = "RLOCK_URL";
  if (urls.empty() && env.redis_url)
    urls = redis::split_deployments(*env.redis_url), url_source = "REDIS_URL";
  const bool urls_from_file = urls.empty() && !file.urls.empty();
  if (urls_from_file)
    urls = file.urls, url_source = file.url_origin.empty() ? "config file" : file.url_origin;
  if (urls.empty()) urls = {"redis://127.0.0.1:6379/0"};
  const bool urls_from_cli = !cli.urls.empty();

  if (auto prefix = cli.prefix ? cli.prefix : env.prefix ? env.prefix : file.prefix)
    settings.prefix = *prefix;
  // Named as the user gave it: a bad RLOCK_PREFIX was blamed on --prefix.
  if (auto ok = lock::validate_prefix(settings.prefix, cli.prefix   ? "--prefix"
                                                       : env.prefix ? "RLOCK_PREFIX"
                                                                    : "prefix");
      !ok)
    return std::unexpected(ok.error());

  Millis connect_timeout{2000};
  auto timeout_text = cli.connect_timeout;
  const char* timeout_source = "--connect-timeout";
  if (!timeout_text && env.connect_timeout)
    timeout_text = env.connect_timeout, timeout_source = "RLOCK_CONNECT_TIMEOUT";
  if (!timeout_text) timeout_text = file.connect_timeout, timeout_source = "connect-timeout";
  if (timeout_text) {
    auto parsed = parse_duration(*timeout_text);
    if (!parsed)
      return fail(Error::Code::usage,
                  fmt::format("{}: {}", timeout_source, parsed.error().message));
    if (parsed->count() <= 0)
      return fail(Error::Code::usage, fmt::format("{} must be greater than zero", timeout_source));
    connect_timeout = *parsed;
  }

  // The password: a file named on the command line, the environment, then
  // a URL's own password if the URL came from the command line or the
  // environment (priority 1 and 2 over the config file), then the file the
  // config file names, last a password inside the config file's URL. The
  // config file's is read only when no URL has its own.
  const std::optional<std::string> no_file;
  auto password =
      read_password({cli.password_file, "--password-file"}, {env.password, env.rediscli_auth},
                    {no_file, "password-file"}, "", settings.warnings);
  if (!password) return std::unexpected(password.error());
  std::optional<Result<std::optional<std::string>>> file_password;
  // The user likewise: --user, a command-line or environment URL's own
  // user, the config file's `user`, the config file's URL's user.
  const auto user_of = [&](const redis::Url& url) -> std::optional<std::string> {
    if (cli.user) return cli.user;
    if (url.user && !urls_from_file) return std::nullopt;  // the URL's own
    return file.user;
  };

  // The Sentinels' own credentials, by the same rules.
  auto sentinel_password = read_password({cli.sentinel_password_file, "--sentinel-password-file"},
                                         {env.sentinel_password},
                                         {file.sentinel_password_file, "sentinel-password-file"},
                                         file.sentinel_password_file_origin, settings.warnings);
  if (!sentinel_password) return std::unexpected(sentinel_password.error());
  settings.sentinel_password = *sentinel_password;
  settings.sentinel_user = first_set(cli.sentinel_user, file.sentinel_user);

  if (cli.replicas) {
    auto parsed = parse_replicas(*cli.replicas);
    if (!parsed) return fail(Error::Code::usage, "--replicas: " + parsed.error().message);
    settings.replicas = *parsed;
  } else if (file.replicas) {
    // read_config_file checked it; a Layer made elsewhere may not be.
    auto parsed = parse_replicas(*file.replicas);
    if (!parsed) return fail(Error::Code::config, "replicas: " + parsed.error().message);
    settings.replicas = *parsed;
  }
  settings.show_command = first_set(cli.show_command, file.show_command).value_or(false);

  // --insecure turns verification off; a CA certificate asks for it. Both
  // at once is a contradiction, not a preference.
  const bool insecure = first_set(cli.insecure, file.insecure).value_or(false);
  if (insecure &&
      (first_set(cli.cacert, file.cacert) || first_set(cli.cacertdir, file.cacertdir))) {
    if (cli.insecure && !cli.cacert && !cli.cacertdir)
      return fail(Error::Code::usage,
                  fmt::format("--insecure (no verification) cannot be combined with the CA of {} "
                              "(verify with this CA): remove that line, or --insecure",
                              file.cacert_origin));
    if (cli.insecure)
      return fail(Error::Code::usage,
                  "--insecure (no verification) cannot be combined with --cacert or --cacertdir "
                  "(verify with this CA)");
    // The CA comes from the command line, insecure from the file: say so.
    if (cli.cacert || cli.cacertdir)
      return fail(Error::Code::usage,
                  fmt::format("{} cannot be combined with insecure = yes from {} (no "
                              "verification): remove that line to verify with this CA",
                              cli.cacert ? "--cacert" : "--cacertdir", file.insecure_origin));
    return fail(Error::Code::config,
                fmt::format("{}: insecure = yes cannot be combined with cacert or cacertdir",
                            file.insecure_origin));
  }

  std::vector<redis::Url> parsed_urls;
  for (const auto& text : urls) {
    auto url = redis::parse_url(text);
    if (!url)
      return fail(Error::Code::usage, url_source == "--url"
                                          ? url.error().message
                                          : fmt::format("{}: {}", url_source, url.error().message));
    parsed_urls.push_back(*url);
  }
  // Each URL's own line when they come from a config file.
  std::vector<std::string> url_sources(urls.size(), url_source);
  if (urls_from_file && file.url_origins.size() == urls.size()) url_sources = file.url_origins;
  if (auto independent = check_independent(
          parsed_urls, urls_from_file ? Error::Code::config : Error::Code::usage, url_sources);
      !independent)
    return std::unexpected(independent.error());
  for (const auto& parsed_url : parsed_urls) {
    const redis::Url* url = &parsed_url;  // as the checks above, one at a time
    if (url->password)
      settings.warnings.push_back(
          urls_from_cli ? "using a password on the command line interface may not be safe; use "
                          "--password-file or RLOCK_PASSWORD"
                        : "a password inside a URL may not be safe; use --password-file or "
                          "RLOCK_PASSWORD");
    // As for a password file: one that others may read is theirs too.
    if (url->password && urls_from_file && !file.readable_by_others.empty())
      settings.warnings.push_back(fmt::format(
          "config file '{}' holds a password and is readable by others; fix: chmod o-r '{}'",
          file.readable_by_others, file.readable_by_others));
    redis::ConnectOptions options;
    options.url = *url;
    options.connect_timeout = connect_timeout;
    // A command never waits longer than the lease it protects would allow;
    // 5 s (or the connect timeout, if longer) bounds a stalled server.
    options.command_timeout = std::max(Millis(5000), connect_timeout);
    if (auto user = user_of(*url)) options.user = user;
    if (*password) {
      options.password = *password;
    } else if (!url->password || urls_from_file) {
      if (!file_password)
        file_password =
            read_password({no_file, "--password-file"}, {}, {file.password_file, "password-file"},
                          file.password_file_origin, settings.warnings);
      if (!*file_password) return std::unexpected(file_password->error());
      if (**file_password) options.password = **file_password;
    }
    auto& tls = options.tls;
    tls.enabled =
        url->scheme == redis::Url::Scheme::tls || first_set(cli.tls, file.tls).value_or(false);
    tls.cacert = first_set(cli.cacert, file.cacert).value_or("");
    tls.cacertdir = first_set(cli.cacertdir, file.cacertdir).value_or("");
    tls.cert = first_set(cli.cert, file.cert).value_or("");
    tls.key = first_set(cli.key, file.key).value_or("");
    tls.sni = first_set(cli.sni, file.sni).value_or("");
    tls.insecure = insecure;
    if (tls.enabled && insecure && settings.servers.empty())
      settings.warnings.push_back(
          "--insecure: the server's TLS certificate is not verified; anyone on the network path "
          "can impersonate the server and read the password");
    // A contradiction the config file alone made is its error (78, naming
    // the line); one the command line had a part in is a usage error.
    if (tls.enabled && url->scheme == redis::Url::Scheme::unix_socket) {
      if (!cli.tls && file.tls && urls_from_file)
        return fail(Error::Code::config,
                    fmt::format("{}: tls = yes with a unix socket URL ({}): TLS over a unix "
                                "socket is not supported",
                                file.tls_origin, file.url_origin));
      return fail(Error::Code::usage, "TLS over a unix socket is not supported");
    }
    if (tls.cert.empty() != tls.key.empty()) {
      if (!cli.cert && !cli.key)
        return fail(Error::Code::config,
                    fmt::format("{}: {} without {}: cert and key must be given together",
                                file.cert ? file.cert_origin : file.key_origin,
                                file.cert ? "cert" : "key", file.cert ? "key" : "cert"));
      return fail(Error::Code::usage, "--cert and --key must be given together");
    }
    settings.servers.push_back(std::move(options));
  }
  // The TLS files, before any connection: one others could change (78),
  // or that is not there (64), would otherwise read as every node out of
  // reach (69) through a Sentinel or a quorum. Members share their options:
  // each set is checked once.
  const redis::TlsOptions* checked = nullptr;
  for (const auto& server : settings.servers) {
    const auto& tls = server.tls;
    if (!tls.enabled || (checked && checked->context_key() == tls.context_key())) continue;
    if (auto problem = check_tls_files(tls.cacert, tls.cacertdir, tls.cert, tls.key, !tls.insecure))
      return std::unexpected(*problem);
    checked = &tls;
  }
  // One warning once, not once per quorum member whose URL it concerns.
  std::vector<std::string> said;
  for (auto& warning : settings.warnings)
    if (std::ranges::find(said, warning) == said.end()) said.push_back(std::move(warning));
  settings.warnings = std::move(said);
  // A TLS option on the command line with no TLS URL: the user meant TLS,
  // and would otherwise send the password in the clear, unverified. (One
  // from the config file may serve its other URLs: it is not an error.)
  if (std::ranges::none_of(settings.servers, [](const auto& s) { return s.tls.enabled; })) {
    const char* given = cli.cacert                     ? "--cacert"
                        : cli.cacertdir                ? "--cacertdir"
                        : cli.cert                     ? "--cert"
                        : cli.key                      ? "--key"
                        : cli.sni                      ? "--sni"
                        : cli.insecure.value_or(false) ? "--insecure"
                                                       : nullptr;
    if (given && !settings.servers.empty()) {
      const redis::Url& url = settings.servers.front().url;
      if (url.scheme == redis::Url::Scheme::unix_socket)
        return fail(Error::Code::usage,
                    fmt::format("{} is a TLS option, and {} is a unix socket, which rlock does "
                                "not use TLS over: leave {} out",
                                given, url.redacted(), given));
      return fail(Error::Code::usage,
                  fmt::format("{} is a TLS option, but {} is plain text: use rediss:// or --tls "
                              "(or leave {} out)",
                              given, url.redacted(), given));
    }
  }
  return settings;
}

}  // namespace rlock::config
