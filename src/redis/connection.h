#pragma once
/// One connection to one Redis server: the only code that does I/O with
/// Redis. Commands are sent as argument vectors (user data never goes into a
/// format string) and every command has a deadline.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "redis/reply.h"
#include "redis/server_error.h"
#include "redis/url.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock::redis {

struct TlsOptions {
  bool enabled = false;  // also implied by rediss://
  std::string cacert;    // CA bundle file; empty = system default
  std::string cacertdir;
  std::string cert;  // client certificate (PEM)
  std::string key;   // client private key (PEM)
  std::string sni;   // server name; default: the URL's host
  bool insecure = false;
  /// What a TLS context is made of (the files, and whether it verifies):
  /// two options equal in it share one context and one check of its files.
  auto context_key() const { return std::tie(cacert, cacertdir, cert, key, insecure); }
};

struct ConnectOptions {
  Url url;
  std::optional<std::string> user;      // overrides the URL's user
  std::optional<std::string> password;  // overrides the URL's password
  TlsOptions tls;
  Millis connect_timeout{2000};
  /// Default deadline for a command sent without an explicit one.
  Millis command_timeout{5000};
  /// See Connection::set_interrupt_fd; this one also interrupts connect().
  int interrupt_fd = -1;
};

/// A Lua script run by EVALSHA, falling back to EVAL on NOSCRIPT.
struct Script {
  std::string_view body;
  std::string sha1;  // hex
  explicit Script(std::string_view body);
  /// With its SHA-1 known already (computed at build time).
  Script(std::string_view body, std::string_view sha1) : body(body), sha1(sha1) {}
};

class Transport;

class Connection {
 public:
  /// Connects, then AUTH (when a password is known) and SELECT (db != 0).
  /// Errors: unreachable (refused, timeout, DNS), auth (WRONGPASS, NOAUTH,
  /// TLS verification), server, protocol.
  static Result<Connection> connect(const ConnectOptions& options);
  /// A connection that connects at its first use (a command, or begin()).
  static Connection unopened(const ConnectOptions& options);

  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;
  ~Connection();

  /// Sends one command and reads its reply before `deadline`. A RESP error
  /// reply becomes server_failure(). A connection the server closed while it
  /// sat idle is replaced by a new one before sending (the command provably
  /// was not processed); any failure during the exchange closes it, and the
  /// next command connects again.
  Result<Reply> command(std::span<const std::string> args, Deadline deadline);
  Result<Reply> command(std::initializer_list<std::string_view> args);

  /// Sends all commands at once, then reads all replies (one round trip).
  /// Error replies are returned in place, as Reply::Type::error.
  Result<std::vector<Reply>> pipeline(const std::vector<std::vector<std::string>>& commands,
                                      Deadline deadline);

  /// EVALSHA, and EVAL when the server answers NOSCRIPT (restart, failover,
  /// SCRIPT FLUSH). `read_only` for a run that writes nothing (a status):
  /// EVALSHA_RO and EVAL_RO, which a server whose writes are paused (CLIENT
  /// PAUSE WRITE, a FAILOVER, a Cluster's manual failover) still runs, as
  /// it runs plain reads; see script_verb().
  Result<Reply> eval(const Script& script, std::span<const std::string> keys,
                     std::span<const std::string> args, Deadline deadline, bool read_only = false);

  // Step-wise use, for redis::Multiplexer, which waits on many connections
  // at once under one deadline: begin() queues a request, step() never
  // blocks and hands out each request's replies once they are all in.
  // Requests queued one after another travel in order on this connection
  // (pipelined), so a later one is run after an earlier one even when the
  // server has not answered that yet. A blocking command on a connection
  // with requests in flight closes it first.

  /// Queues `commands` as one request. A closed connection (or one found
  /// unusable while nothing is in flight) is opened again step-wise, AUTH
  /// and SELECT written ahead of the request; their refusals are its error.
  Result<void> begin(const std::vector<std::vector<std::string>>& commands);
  /// begin() for `count` commands already in RESP (redis::append_command).
  Result<void> begin(const std::string& request, std::size_t count);
  /// Writes what it can, reads what has arrived: the replies of the oldest
  /// request (error replies in place) once all are in, else nullopt. Any
  /// failure closes the connection and drops every queued request.
  Result<std::optional<std::vector<Reply>>> step();
  /// Whether the last failure of step() came before the connection was
  /// made (the host's lookup, TCP, TLS): the server is out of reach, and
  /// connecting again at once would only fail the same way, later.
  bool failed_connecting() const;
  /// Requests queued and not answered yet.
  std::size_t in_flight() const;
  /// What step() waits for: poll `fd` for `events`; `now`: it can make
  /// progress without waiting (TLS bytes already decrypted).
  /// `until`: while connecting, when step() must be called again even if
  /// nothing is ready (the connection attempt's deadline).
  struct Readiness {
    int fd = -1;
    short events = 0;
    bool now = false;
    Deadline until = Deadline::max();
  };
  Readiness readiness() const;
  /// Drops every queued request and closes (their replies may be in flight).
  void abandon();
  /// Writes `commands` behind the command last given up on (a timeout or
  /// an interrupt of command()), on its own stream, within `budget`, reads
  /// nothing, and closes that stream: the server runs them after what was
  /// stuck there, whenever it does (a frozen server, a cut network). False
  /// when there is no such stream or the write failed.
  bool part(const std::vector<std::vector<std::string>>& commands, Millis budget);
  /// Whether part() has a stream to write on.
  bool has_stale() const;

  /// A file descriptor that, when readable, interrupts a blocked command with
  /// Error::Code::interrupted (the connection is closed afterwards, since a
  /// reply may be in flight). -1 disables.
  void set_interrupt_fd(int fd);

  /// The URL as it may be shown to a person (no password).
  const std::string& describe() const;

  Millis command_timeout() const;

 private:
  Connection();
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

/// The verb of a script run: `read_only` gives EVALSHA_RO (EVAL_RO with
/// `body`), unless a server refused that form earlier in this process (an
/// ACL granting +evalsha but not +evalsha_ro, as the minimum ACL of older
/// releases did; a renamed command), when it is the plain verb.
std::string_view script_verb(bool read_only, bool body = false);

/// Whether `reply` refuses the read-only verbs themselves (a NOPERM for
/// 'evalsha_ro' or 'eval_ro', an unknown command), which only a run sent
/// with one gets: then they are given up for this process (script_verb
/// gives the plain ones from then on), and the run goes again with the
/// plain verb. A refusal of the keys is not one: the plain verb would be
/// refused them too.
bool refuses_read_only(const Reply& reply);

/// Classifies a server error message ("WRONGPASS ...", "NOPERM ...",
/// "WRONGTYPE ...", ...) into an Error with its ServerError kind; the
/// message is the server's.
Error classify_server_error(std::string_view message);

/// classify_server_error() for a reply from `name` (the redacted URL), with
/// a message saying what to do where Redis' own words would not.
Error server_failure(std::string_view name, std::string_view message);

}  // namespace rlock::redis
