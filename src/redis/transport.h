#pragma once
/// The byte stream under a Connection: TCP, a unix socket, or TLS over TCP
/// (OpenSSL, in our code: hiredis 0.14 has no TLS).

#include <openssl/types.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "redis/connection.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock::redis {

/// How long one exchange may take: the deadline to enforce, and the budget it
/// stood for when the exchange began, so that a timeout can say "after 5s".
struct TimeLimit {
  Deadline deadline;
  Millis budget;

  static TimeLimit after(Millis budget) { return {Clock::now() + budget, budget}; }
  static TimeLimit until(Deadline deadline);
  /// How a timeout reads: "timed out after 5s", or that no time was left.
  std::string timed_out() const;
};

/// Owns a file descriptor.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : m_fd(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  ~UniqueFd();

  int get() const { return m_fd; }

 private:
  int m_fd;
};

/// A connected, non-blocking stream to one Redis server. Every read and write
/// waits with poll() until a deadline and can be cut short by an interrupt fd,
/// so no Redis call can hang the lock's heartbeat. Errors name the URL
/// (redacted); after any error the stream is out of step with the server and
/// must be discarded.
class Transport {
 public:
  /// Connects (trying each address of the host) and, for TLS, completes the
  /// handshake, all within `limit`.
  static Result<std::unique_ptr<Transport>> open(const ConnectOptions& options, TimeLimit limit);

  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  Result<void> write_all(std::string_view bytes, const TimeLimit& limit);

  /// Reads at least one byte into `buffer`; the connection closing is an error.
  /// The deadline is checked before every read, not only when a read would
  /// block: a server streaming bytes without end must not outlast it.
  Result<std::size_t> read_some(std::span<char> buffer, const TimeLimit& limit);

  /// Whether a request sent now could be answered: false when the server has
  /// closed the connection (an idle timeout, CLIENT KILL, a proxy, a restart)
  /// or sent bytes nobody asked for. Never blocks. A request on an unusable
  /// connection provably was not processed, so reconnecting first is safe.
  bool usable();

  /// Readable `fd` = stop waiting with Error::Code::interrupted; -1 disables.
  void set_interrupt_fd(int fd) { m_interrupt_fd = fd; }

  // Step-wise use, for a caller that waits on many transports at once under
  // one deadline (redis::Multiplexer): nothing below blocks (a host name is
  // looked up on a thread of its own). After each call, poll_events() says
  // what to poll() the fd() for before the next one can make progress.

  /// Begins connecting: the host's lookup started, or for an address (and
  /// a unix socket) the socket made and connect() started. Finish with
  /// open_step(), by open_deadline().
  static Result<std::unique_ptr<Transport>> start_open(const ConnectOptions& options);
  /// Advances connecting (the lookup, TCP, then the TLS handshake); true
  /// once connected. An address that refuses is followed by the next one of
  /// the host. Past open_deadline(), fails as open() would have timed out.
  Result<bool> open_step();
  /// Until when connecting may take (--connect-timeout from start_open());
  /// the far future once connected.
  Deadline open_deadline() const;
  bool connected() const { return m_connected; }
  /// Writes what the socket takes now; how many bytes that was (0: none).
  Result<std::size_t> try_write(std::string_view bytes);
  /// Reads what has arrived; 0 = nothing yet. The connection closing is an
  /// error.
  Result<std::size_t> try_read(std::span<char> buffer);
  /// What the last step-wise call waits for: POLLIN, POLLOUT (TLS may need
  /// to write to read, and the reverse).
  short poll_events() const { return m_events; }
  /// The socket; while the host is being looked up, the lookup's eventfd.
  int fd() const;
  /// TLS: decrypted bytes already read from the socket (poll() would not
  /// see them).
  bool buffered() const;

 private:
  Transport(UniqueFd fd, std::string name, int interrupt_fd);
  Result<void> handshake(const ConnectOptions& options, const TimeLimit& limit);
  /// The TLS session over the connected socket, before its handshake.
  Result<void> start_tls(const ConnectOptions& options);
  /// After a TLS call returned `result`: the events OpenSSL waits for, or
  /// the failure.
  Result<short> ssl_want(int result) const;
  /// After a handshake step that did not finish: the server's certificate
  /// refused, unless --insecure.
  Result<void> verification(const ConnectOptions& options) const;
  /// A failed handshake step, worded for the user (a plain-text port, ...).
  Error handshake_failure(Error error, const ConnectOptions& options, bool timed_out) const;
  /// Waits until the socket is ready for `events` (POLLIN, POLLOUT).
  Result<void> wait(short events, const TimeLimit& limit) const;
  /// After a TLS call returned `result`: waits as OpenSSL asks, or fails.
  Result<void> ssl_wait(int result, const TimeLimit& limit) const;
  /// A plain-text connection closed (`error` 0) or broken (errno) by the
  /// server, said with a hint when no reply was ever read on it.
  /// Notes a plain-text answer (see dropped()).
  void answered_plain();
  std::unexpected<Error> dropped(int error) const;
  /// "cannot connect to URL: reason" before the handshake is done, then
  /// "URL: reason".
  std::unexpected<Error> failure(Error::Code code, std::string_view reason) const;
  /// A TLS connection closed or reset: an authentication failure when it is
  /// the server refusing our client certificate, else unreachable.
  std::unexpected<Error> closed(std::string_view reason) const;
  static void on_tls_message(int write_p, int version, int content_type, const void* buf,
                             std::size_t len, SSL* ssl, void* arg);

  struct FreeSsl {
    void operator()(SSL* ssl) const;
  };
  UniqueFd m_fd;
  std::unique_ptr<SSL, FreeSsl> m_ssl;  // null for plain TCP and unix sockets
  std::string m_name;                   // the redacted URL
  int m_interrupt_fd;
  bool m_connected = false;
  /// TLS: the server asked for a client certificate during the handshake
  /// (set by a message callback), and no reply has been read yet. A server
  /// that refuses the certificate (or its absence) does so after TLS 1.3's
  /// handshake, and its alert is often lost to the connection reset that
  /// follows: these two tell that case from an unreachable server.
  bool m_certificate_requested = false;
  bool m_answered = false;
  /// Step-wise use: what to poll for, and while connecting, the addresses
  /// left to try and the options (for TLS).
  short m_events = 0;
  struct Opening;
  std::unique_ptr<Opening> m_opening;
};

}  // namespace rlock::redis
