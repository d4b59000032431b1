#pragma once
/// Connection settings, merged with the precedence of the contract:
/// command line > environment > config file > default.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "redis/connection.h"
#include "util/error.h"

namespace rlock::config {

/// What the user may set (global options), each unset until someone sets it.
struct Layer {
  std::vector<std::string> urls;
  std::optional<std::string> prefix;
  std::optional<std::string> user;
  std::optional<std::string> password_file;
  std::optional<std::string> password;  // only from env, URL or file: never argv
  std::optional<bool> tls;
  std::optional<std::string> cacert, cacertdir, cert, key, sni;
  std::optional<bool> insecure;
  std::optional<std::string> connect_timeout;
  std::optional<bool> show_command;  // store full command lines (not only program names)
};

/// The settings a command runs with.
struct Settings {
  std::vector<redis::ConnectOptions> servers;  // one, or several for quorum
  std::string prefix = "rlock:";
  std::vector<std::string> warnings;  // printed to stderr by the CLI
  /// Holders and audit records carry the full command line, not only the
  /// program name: every lock user can read them (--show-command).
  bool show_command = false;
};

/// The environment variables rlock reads, in one table (see rlock(1)).
struct Environment {
  std::optional<std::string> rlock_url, redis_url, prefix, password, rediscli_auth, connect_timeout,
      config;
  static Environment from_process();
};

/// Reads a config file of `key = value` lines (the long option names without
/// dashes; `#` comments). A missing explicit file or a bad line → config error.
Result<Layer> read_config_file(const std::string& path);

/// The config file to read: --config, then RLOCK_CONFIG, then /etc/rlock.conf,
/// then ~/.config/rlock/rlock.conf if present.
std::optional<std::string> config_path(const std::optional<std::string>& flag,
                                       const Environment& env, bool& explicit_choice);

/// Merges command line, environment and file into connection settings.
Result<Settings> resolve(const Layer& command_line, const Environment& env, const Layer& file);

}  // namespace rlock::config
