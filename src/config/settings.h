#pragma once
/// Connection settings, merged with the precedence of the contract:
/// command line > environment > config file > default.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/replicas.h"
#include "redis/connection.h"
#include "util/error.h"

namespace rlock::config {

/// What the user may set (global options), each unset until someone sets it.
struct Layer {
  /// One deployment each (a config file's or RLOCK_URL's comma list split by
  /// redis::split_deployments).
  std::vector<std::string> urls;
  std::optional<std::string> prefix;
  std::optional<std::string> user;
  std::optional<std::string> password_file;
  std::optional<std::string> password;  // only from env, URL or file: never argv
  std::optional<bool> tls;
  std::optional<std::string> cacert, cacertdir, cert, key, sni;
  std::optional<bool> insecure;
  std::optional<std::string> connect_timeout;
  /// The Sentinels' own ACL user and password file (a Sentinel URL's user
  /// and password are the master's). The password itself only ever comes
  /// from a file or RLOCK_SENTINEL_PASSWORD: never argv.
  std::optional<std::string> sentinel_user, sentinel_password_file;
  std::optional<std::string> replicas;  // "all" or a number, as given
  /// Where a config file set url, password-file, sentinel-password-file,
  /// insecure, tls, cert and key: the `file:line` its errors name.
  std::string url_origin, password_file_origin, sentinel_password_file_origin, insecure_origin;
  /// The `file:line` of each of `urls` (a quorum's duplicate is named on
  /// its own line).
  std::vector<std::string> url_origins;
  std::string tls_origin, cert_origin, key_origin, cacert_origin;
  std::optional<bool> show_command;  // store full command lines (not only program names)
  /// A config file's path when others may read it (a password in its URL
  /// is theirs too); empty otherwise.
  std::string readable_by_others;
};

/// The settings a command runs with.
struct Settings {
  /// One, or several for quorum. For a Sentinel URL (url.sentinel), url.hosts
  /// are the Sentinels, user and password are the master's (the Sentinels'
  /// are sentinel_user and sentinel_password), tls is for both.
  std::vector<redis::ConnectOptions> servers;
  /// How many replicas must acknowledge each acquire and renewal (WAIT).
  ReplicaPolicy replicas;
  /// For redis-sentinel:// URLs: the credentials sent to the Sentinels
  /// (each server's user and password are the master's). Unset: none.
  std::optional<std::string> sentinel_user, sentinel_password;
  std::string prefix = "rlock:";
  std::vector<std::string> warnings;  // printed to stderr by the CLI
  /// Holders and audit records carry the full command line, not only the
  /// program name: every lock user can read them (--show-command).
  bool show_command = false;
};

/// The environment variables rlock reads, in one table (see rlock(1)).
struct Environment {
  std::optional<std::string> rlock_url, redis_url, prefix, password, rediscli_auth, connect_timeout,
      config, sentinel_password;
  static Environment from_process();
};

/// Reads a config file of `key = value` lines (the long option names without
/// dashes; `#` starts a comment at the start of a line or after a blank).
/// Every value is checked here, so a bad one is a config error naming
/// `file:line`. The file must be safe to trust (see read_trusted_file).
Result<Layer> read_config_file(const std::string& path);

/// The most rlock reads from a config, password or token file: far more
/// than any real one, and a bound for `--config /dev/zero`.
inline constexpr std::size_t k_max_file_size = std::size_t{64} * 1024;

/// Reads a file that configures secrets (config, password, token file), at
/// most k_max_file_size bytes. `what` names it in messages ("config file").
/// Refuses (config error, naming the fix) a file that someone other than its
/// owner or root can write, or that another non-root user owns: whoever can
/// write it chooses the server we send our password to. When `secret`, a
/// file readable by others adds a warning. A file that cannot be opened or
/// read is an error with `unreadable` as its code.
Result<std::string> read_trusted_file(const std::string& path, std::string_view what, bool secret,
                                      Error::Code unreadable, std::vector<std::string>& warnings);

/// The first line of a password or token file (without its line end);
/// an empty one is an error.
Result<std::string> read_secret_file(const std::string& path, std::string_view what,
                                     Error::Code unreadable, std::vector<std::string>& warnings);

/// The first line of standard input, for `--token -` (never argv, which
/// `ps` shows).
Result<std::string> read_secret_stdin(std::string_view what);

/// The config file to read: --config, then RLOCK_CONFIG, then /etc/rlock.conf,
/// then ~/.config/rlock/rlock.conf if present.
std::optional<std::string> config_path(const std::optional<std::string>& flag,
                                       const Environment& env, bool& explicit_choice);

/// Merges command line, environment and file into connection settings.
Result<Settings> resolve(const Layer& command_line, const Environment& env, const Layer& file);

}  // namespace rlock::config
