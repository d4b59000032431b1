#include "config/settings.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "lock/keys.h"
#include "util/duration.h"

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

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (auto t = trim(item); !t.empty()) out.push_back(t);
  return out;
}

Result<bool> parse_bool(const std::string& key, const std::string& value) {
  if (value == "1" || value == "yes" || value == "true" || value == "on") return true;
  if (value == "0" || value == "no" || value == "false" || value == "off") return false;
  return fail(Error::Code::config, fmt::format("'{}' wants yes or no, not '{}'", key, value));
}

Result<std::string> read_password_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail(Error::Code::usage, fmt::format("cannot read --password-file '{}'", path));
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

template <class T>
const std::optional<T>& first_set(const std::optional<T>& a, const std::optional<T>& b) {
  return a ? a : b;
}

}  // namespace

Environment Environment::from_process() {
  return Environment{getenv_opt("RLOCK_URL"),     getenv_opt("REDIS_URL"),
                     getenv_opt("RLOCK_PREFIX"),  getenv_opt("RLOCK_PASSWORD"),
                     getenv_opt("REDISCLI_AUTH"), getenv_opt("RLOCK_CONNECT_TIMEOUT"),
                     getenv_opt("RLOCK_CONFIG")};
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

Result<Layer> read_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail(Error::Code::config, fmt::format("cannot read config file '{}'", path));
  Layer layer;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    auto text = trim(line);
    if (text.empty() || text[0] == '#') continue;
    auto eq = text.find('=');
    auto where = fmt::format("{}:{}", path, number);
    if (eq == std::string::npos)
      return fail(Error::Code::config, fmt::format("{}: expected 'key = value'", where));
    auto key = trim(text.substr(0, eq));
    auto value = trim(text.substr(eq + 1));
    auto flag = [&](std::optional<bool>& slot) -> Result<void> {
      auto b = parse_bool(key, value);
      if (!b) return fail(Error::Code::config, fmt::format("{}: {}", where, b.error().message));
      slot = *b;
      return {};
    };
    Result<void> ok;
    if (key == "url")
      for (auto& u : split_commas(value)) layer.urls.push_back(u);
    else if (key == "prefix")
      layer.prefix = value;
    else if (key == "user")
      layer.user = value;
    else if (key == "password-file")
      layer.password_file = value;
    else if (key == "tls")
      ok = flag(layer.tls);
    else if (key == "insecure")
      ok = flag(layer.insecure);
    else if (key == "cacert")
      layer.cacert = value;
    else if (key == "cacertdir")
      layer.cacertdir = value;
    else if (key == "cert")
      layer.cert = value;
    else if (key == "key")
      layer.key = value;
    else if (key == "sni")
      layer.sni = value;
    else if (key == "connect-timeout")
      layer.connect_timeout = value;
    else if (key == "show-command")
      ok = flag(layer.show_command);
    else
      return fail(Error::Code::config, fmt::format("{}: unknown key '{}'", where, key));
    if (!ok) return std::unexpected(ok.error());
  }
  return layer;
}

Result<Settings> resolve(const Layer& cli, const Environment& env, const Layer& file) {
  Settings settings;
  // priority 1: command line; 2: environment; 3: config file; 4: default.
  std::vector<std::string> urls = cli.urls;
  if (urls.empty() && env.rlock_url) urls = split_commas(*env.rlock_url);
  if (urls.empty() && env.redis_url) urls = split_commas(*env.redis_url);
  if (urls.empty()) urls = file.urls;
  if (urls.empty()) urls = {"redis://127.0.0.1:6379/0"};
  const bool urls_from_cli = !cli.urls.empty();

  if (auto prefix = cli.prefix ? cli.prefix : env.prefix ? env.prefix : file.prefix)
    settings.prefix = *prefix;
  if (auto ok = lock::validate_prefix(settings.prefix); !ok) return std::unexpected(ok.error());

  auto timeout_text = cli.connect_timeout
                          ? cli.connect_timeout
                          : (env.connect_timeout ? env.connect_timeout : file.connect_timeout);
  Millis connect_timeout{2000};
  if (timeout_text) {
    auto parsed = parse_duration(*timeout_text);
    if (!parsed)
      return fail(Error::Code::usage, fmt::format("--connect-timeout: {}", parsed.error().message));
    if (parsed->count() <= 0)
      return fail(Error::Code::usage, "--connect-timeout must be greater than zero");
    connect_timeout = *parsed;
  }

  // The password: a file named on the command line, the environment, a file
  // from the config file; a URL's own password counts last.
  std::optional<std::string> password;
  if (cli.password_file) {
    auto p = read_password_file(*cli.password_file);
    if (!p) return std::unexpected(p.error());
    password = *p;
  } else if (env.password) {
    password = env.password;
  } else if (env.rediscli_auth) {
    password = env.rediscli_auth;
  } else if (file.password_file) {
    auto p = read_password_file(*file.password_file);
    if (!p) return fail(Error::Code::config, p.error().message);
    password = *p;
  }
  auto user = first_set(cli.user, file.user);
  settings.show_command = first_set(cli.show_command, file.show_command).value_or(false);

  for (const auto& text : urls) {
    auto url = redis::parse_url(text);
    if (!url) return std::unexpected(url.error());
    if (url->password)
      settings.warnings.push_back(
          urls_from_cli ? "using a password on the command line interface may not be safe; use "
                          "--password-file or RLOCK_PASSWORD"
                        : "a password inside a URL may not be safe; use --password-file or "
                          "RLOCK_PASSWORD");
    redis::ConnectOptions options;
    options.url = *url;
    options.connect_timeout = connect_timeout;
    // A command never waits longer than the lease it protects would allow;
    // 5 s (or the connect timeout, if longer) bounds a stalled server.
    options.command_timeout = std::max(Millis(5000), connect_timeout);
    if (user) options.user = user;
    if (password) options.password = password;
    auto& tls = options.tls;
    tls.enabled =
        url->scheme == redis::Url::Scheme::tls || first_set(cli.tls, file.tls).value_or(false);
    tls.cacert = first_set(cli.cacert, file.cacert).value_or("");
    tls.cacertdir = first_set(cli.cacertdir, file.cacertdir).value_or("");
    tls.cert = first_set(cli.cert, file.cert).value_or("");
    tls.key = first_set(cli.key, file.key).value_or("");
    tls.sni = first_set(cli.sni, file.sni).value_or("");
    tls.insecure = first_set(cli.insecure, file.insecure).value_or(false);
    if (tls.enabled && url->scheme == redis::Url::Scheme::unix_socket)
      return fail(Error::Code::usage, "TLS over a unix socket is not supported");
    if (tls.cert.empty() != tls.key.empty())
      return fail(Error::Code::usage, "--cert and --key must be given together");
    settings.servers.push_back(std::move(options));
  }
  if (settings.servers.size() > 1)
    return fail(Error::Code::usage,
                "several --url values (quorum mode over independent masters) are not supported "
                "yet; give one URL");
  // De-duplicate the warning for several URLs.
  if (settings.warnings.size() > 1) settings.warnings.resize(1);
  return settings;
}

}  // namespace rlock::config
