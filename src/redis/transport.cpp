#include "redis/transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#include "redis/openssl_loader.h"

namespace rlock::redis {
namespace {

template <auto free_function>
struct FreeWith {
  template <class T>
  void operator()(T* pointer) const {
    free_function(pointer);
  }
};

std::string system_message(int error) {
  return std::system_category().message(error);
}

bool would_block(int error) {
  return error == EAGAIN || error == EWOULDBLOCK || error == EINTR;
}

/// Why the last OpenSSL call failed, for a message: the system error behind
/// it if there is one ("No such file or directory" beats "system lib"), else
/// the last reason in OpenSSL's queue.
std::string ssl_reason() {
  std::string reason = "unknown error";
  while (const unsigned long error = ERR_get_error()) {
    if (ERR_SYSTEM_ERROR(error)) return system_message(ERR_GET_REASON(error));
    if (const char* text = ERR_reason_error_string(error)) reason = text;
  }
  return reason;
}

bool is_ip_address(const std::string& text) {
  in6_addr address{};
  return inet_pton(AF_INET, text.c_str(), &address) == 1 ||
         inet_pton(AF_INET6, text.c_str(), &address) == 1;
}

enum class Ready { yes, timed_out, interrupted };

/// Waits for `events` on `fd` until `deadline`; a readable `interrupt_fd` wins
/// over everything, so a signal handler's wake-up is never missed.
Ready wait_for(int fd, short events, Deadline deadline, int interrupt_fd) {
  for (;;) {
    // Rounded up: rounding down would spin through sub-millisecond timeouts.
    const auto left = std::chrono::ceil<Millis>(deadline - Clock::now());
    if (left <= Millis::zero()) return Ready::timed_out;
    // poll() ignores negative descriptors, so a disabled interrupt fd is fine.
    pollfd fds[] = {{fd, events, 0}, {interrupt_fd, POLLIN, 0}};
    if (poll(fds, 2, static_cast<int>(std::min<Millis::rep>(left.count(), INT_MAX))) < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::system_category(), "poll");
    }
    if (fds[1].revents != 0) return Ready::interrupted;
    if (fds[0].revents != 0) return Ready::yes;
  }
}

// TLS records travel through this BIO rather than OpenSSL's socket BIO, which
// writes with write(2): a write to a connection the server has closed would
// raise SIGPIPE and kill the process. A library can neither count on the
// program ignoring SIGPIPE nor change the process-wide disposition, so this
// BIO uses send(MSG_NOSIGNAL), exactly as the plain-socket path does.
int bio_fd(BIO* bio) {
  return static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(bio)));
}

int bio_write(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  const ssize_t sent = send(bio_fd(bio), data, static_cast<std::size_t>(size), MSG_NOSIGNAL);
  if (sent < 0 && would_block(errno)) BIO_set_retry_write(bio);
  return static_cast<int>(sent);
}

int bio_read(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  const ssize_t got = recv(bio_fd(bio), data, static_cast<std::size_t>(size), 0);
  if (got < 0 && would_block(errno)) BIO_set_retry_read(bio);
  return static_cast<int>(got);
}

// OpenSSL flushes after each record; a socket has no buffer of its own. Every
// other control (kTLS, EOF queries, ...) answers "not supported".
long bio_ctrl(BIO*, int command, long, void*) {
  return command == BIO_CTRL_FLUSH ? 1 : 0;
}

BIO_METHOD* socket_bio_method() {
  // BIO_meth_free is a pointer set at run time (openssl_loader.h), not a
  // constant FreeWith could take.
  struct FreeMethod {
    void operator()(BIO_METHOD* method) const { BIO_meth_free(method); }
  };
  static const std::unique_ptr<BIO_METHOD, FreeMethod> method = [] {
    BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "rlock socket");
    if (!made || !BIO_meth_set_write(made, bio_write) || !BIO_meth_set_read(made, bio_read) ||
        !BIO_meth_set_ctrl(made, bio_ctrl)) {
      throw std::bad_alloc();
    }
    return std::unique_ptr<BIO_METHOD, FreeMethod>(made);
  }();
  return method.get();
}

}  // namespace

/// One address to try. Outside the anonymous namespace, since
/// Transport::Opening (a member of a class with external linkage) holds them.
struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

namespace {

/// getaddrinfo() for a stream socket to `host`:`port`, with `flags` besides
/// AI_NUMERICSERV: its status, and what it found in `addresses`. No
/// AI_ADDRCONFIG: it makes "::1" fail on hosts whose only IPv6 address is
/// the loopback.
int get_addresses(const std::string& host, const std::string& port, int flags,
                  std::vector<Address>& addresses) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | flags;
  addrinfo* found = nullptr;
  const int status = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (status != 0) return status;
  const std::unique_ptr<addrinfo, FreeWith<freeaddrinfo>> list(found);
  for (const addrinfo* info = found; info; info = info->ai_next) {
    Address address;
    std::memcpy(&address.storage, info->ai_addr, info->ai_addrlen);
    address.length = info->ai_addrlen;
    addresses.push_back(address);
  }
  return 0;
}

}  // namespace

/// One name lookup (getaddrinfo) on a detached thread of its own, so that
/// the caller can wait for it as for connect(): until the connection
/// attempt's deadline, cut short by the interrupt fd. getaddrinfo itself
/// takes no deadline and blocks for the resolver's own timeouts (seconds
/// per nameserver and attempt), which must not stretch --connect-timeout,
/// hold up a signal, or hold up the other members of a quorum.
///
/// The caller may give up at any time and the thread then runs on until the
/// resolver gives up: the two share this state through a shared_ptr, so
/// whichever lets go last frees it, and nothing the thread touches is freed
/// under it. The thread takes no lock of ours (the answer is published by
/// an atomic flag, then the eventfd), so a fork while it runs (`rlock run`'s
/// guardian and command) inherits no lock of ours held; the forked code
/// runs only async-signal-safe calls anyway (supervise/child.cpp), so the
/// resolver's own locks cannot matter either.
class Lookup {
 public:
  /// Starts looking up `host`; the error says why no thread could start.
  static Result<std::shared_ptr<Lookup>> start(const std::string& host, int port) {
    auto lookup = std::shared_ptr<Lookup>(new Lookup(host, std::to_string(port)));
    if (lookup->m_done_fd.get() < 0) {
      return fail(Error::Code::internal,
                  fmt::format("cannot resolve {}: eventfd: {}", host, system_message(errno)));
    }
    // The thread must never take a signal: `run` reads them from a signalfd
    // in the main thread, and a waiter's handler must run there too. A
    // thread inherits the creating thread's mask.
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    try {
      std::thread([lookup] { lookup->run(); }).detach();
    } catch (const std::system_error& error) {
      pthread_sigmask(SIG_SETMASK, &saved, nullptr);
      return fail(Error::Code::internal,
                  fmt::format("cannot resolve {}: cannot start a thread: {}", host, error.what()));
    }
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    return lookup;
  }

  /// Readable once the lookup is done.
  int fd() const { return m_done_fd.get(); }
  bool done() const { return m_done.load(std::memory_order_acquire); }
  /// Only once done() said so: getaddrinfo's status, and the addresses
  /// found.
  int status() const { return m_status; }
  const std::vector<Address>& addresses() const { return m_addresses; }

 private:
  Lookup(std::string host, std::string port)
      : m_host(std::move(host)),
        m_port(std::move(port)),
        m_done_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

  void run() {
    m_status = get_addresses(m_host, m_port, 0, m_addresses);
    m_done.store(true, std::memory_order_release);
    const std::uint64_t one = 1;
    // Written once, to a counter that starts at 0: it cannot be full.
    (void)!write(m_done_fd.get(), &one, sizeof one);
  }

  const std::string m_host, m_port;
  const UniqueFd m_done_fd;
  // Written by the thread before m_done is set, read by the caller after.
  int m_status = 0;
  std::vector<Address> m_addresses;
  std::atomic<bool> m_done{false};
};

namespace {

/// A unix socket's address, or a numeric host's (no lookup: no thread, no
/// start-up cost); nullopt for a name, which needs a Lookup.
Result<std::optional<std::vector<Address>>> resolve_at_once(const Url& url,
                                                            const std::string& name) {
  if (url.scheme == Url::Scheme::unix_socket) {
    Address address;
    sockaddr_un& un = reinterpret_cast<sockaddr_un&>(address.storage);
    if (url.path.size() >= sizeof un.sun_path) {
      return fail(Error::Code::usage, fmt::format("socket path too long in {}", name));
    }
    un.sun_family = AF_UNIX;
    std::memcpy(un.sun_path, url.path.c_str(), url.path.size() + 1);
    address.length = sizeof un;
    return std::vector{address};
  }
  if (!is_ip_address(url.host)) return std::nullopt;
  std::vector<Address> addresses;
  const int status = get_addresses(url.host, std::to_string(url.port), AI_NUMERICHOST, addresses);
  if (status != 0) {
    return fail(Error::Code::unreachable, fmt::format("cannot connect to {}: cannot resolve {}: {}",
                                                      name, url.host, gai_strerror(status)));
  }
  return addresses;
}

/// What a finished lookup found, or its failure worded for the user.
Result<std::vector<Address>> lookup_result(const Lookup& lookup, const Url& url,
                                           const std::string& name) {
  if (lookup.status() != 0) {
    return fail(Error::Code::unreachable,
                fmt::format("cannot connect to {}: cannot resolve {}: {}", name, url.host,
                            gai_strerror(lookup.status())));
  }
  return lookup.addresses();
}

/// The error of a lookup that did not finish within `limit`.
std::unexpected<Error> lookup_timed_out(const Url& url, const std::string& name,
                                        const TimeLimit& limit) {
  return fail(Error::Code::unreachable,
              fmt::format("cannot connect to {}: cannot resolve {}: no answer within {}", name,
                          url.host, format_duration(limit.budget)));
}

/// The addresses of `url`, looked up within `limit`; a readable
/// `interrupt_fd` stops the wait (the lookup runs on, abandoned).
Result<std::vector<Address>> resolve(const Url& url, const std::string& name,
                                     const TimeLimit& limit, int interrupt_fd) {
  auto at_once = resolve_at_once(url, name);
  if (!at_once) return std::unexpected(at_once.error());
  if (*at_once) return std::move(**at_once);
  auto lookup = Lookup::start(url.host, url.port);
  if (!lookup) return std::unexpected(lookup.error());
  // done() (an acquire) before the answer is read, not the eventfd alone:
  // a write(2) is no synchronisation C++ (or ThreadSanitizer) knows of. It
  // is set before the eventfd is written, so this waits once.
  while (!(*lookup)->done()) {
    switch (wait_for((*lookup)->fd(), POLLIN, limit.deadline, interrupt_fd)) {
      case Ready::timed_out:
        return lookup_timed_out(url, name, limit);
      case Ready::interrupted:
        return fail(Error::Code::interrupted,
                    fmt::format("cannot connect to {}: interrupted", name));
      case Ready::yes:
        break;
    }
  }
  return lookup_result(**lookup, url, name);
}

/// A non-blocking stream socket for `family` (-1 and errno on failure).
UniqueFd make_socket(int family) {
  // CLOEXEC: the command `rlock run` starts must not inherit the connection.
  UniqueFd fd(socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() >= 0 && family != AF_UNIX) {
    // Each command is one small write that waits for its reply: Nagle's
    // algorithm would only add latency (and hold back pipelined TLS records).
    const int on = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  }
  return fd;
}

/// A connected socket to the first address that accepts.
Result<UniqueFd> connect_socket(const ConnectOptions& options, const std::string& name,
                                const TimeLimit& limit) {
  const auto addresses = resolve(options.url, name, limit, options.interrupt_fd);
  if (!addresses) return std::unexpected(addresses.error());
  const auto cannot = [&](Error::Code code, std::string_view reason) {
    return fail(code, fmt::format("cannot connect to {}: {}", name, reason));
  };
  int error = 0;
  for (const Address& address : *addresses) {
    const int family = address.storage.ss_family;
    UniqueFd fd = make_socket(family);
    if (fd.get() < 0) {
      error = errno;
      // Out of descriptors is this process's limit, not the server's
      // outage (69): no retry mends it.
      if (out_of_descriptors(error))
        return cannot(Error::Code::internal, system_message(error) + descriptor_limit_hint(error));
      continue;
    }
    if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) ==
        0) {
      return fd;
    }
    error = errno;
    if (error != EINPROGRESS) continue;
    switch (wait_for(fd.get(), POLLOUT, limit.deadline, options.interrupt_fd)) {
      case Ready::timed_out:
        return cannot(Error::Code::unreachable, limit.timed_out());
      case Ready::interrupted:
        return cannot(Error::Code::interrupted, "interrupted");
      case Ready::yes:
        break;
    }
    socklen_t length = sizeof error;
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    if (error == 0) return fd;
  }
  return cannot(Error::Code::unreachable, system_message(error));
}

/// Whether the passphrase of an encrypted --key was asked for, and whether
/// there was a terminal to ask on.
struct PassphraseAsked {
  bool on_terminal = false;
  bool without_terminal = false;
};

/// Asks for the passphrase of an encrypted --key on the terminal, as
/// OpenSSL's default does, but only when there is a terminal to ask on:
/// without one (cron, systemd, CI) OpenSSL would fail with a cryptic
/// "bad decrypt", and `asked` lets us say why instead (and tell a wrong
/// passphrase, a credential refused, from an unreadable key).
int passphrase_callback(char* buffer, int size, int writing, void* asked) {
  auto& said = *static_cast<PassphraseAsked*>(asked);
  const int tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (tty < 0) {
    said.without_terminal = true;
    return -1;
  }
  close(tty);
  said.on_terminal = true;
  return PEM_def_callback(buffer, size, writing, nullptr);
}

using Context = std::shared_ptr<SSL_CTX>;

/// A TLS context as the options ask: verification on unless --insecure.
/// Unreadable certificate files are the user's mistake: a usage error.
/// (Whether they may be trusted at all, check_tls_files says, before any
/// connection: config::resolve.)
Result<Context> make_context(const TlsOptions& tls) {
  Context context(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!context) throw std::bad_alloc();
  // Redis speaks TLS 1.2 and 1.3; anything older is broken.
  SSL_CTX_set_min_proto_version(context.get(), TLS1_2_VERSION);
  const auto cannot_load = [](std::string_view what, std::string_view path) {
    return fail(Error::Code::usage, fmt::format("cannot load {} {}: {}", what, path, ssl_reason()));
  };
  if (!tls.insecure) {
    SSL_CTX_set_verify(context.get(), SSL_VERIFY_PEER, nullptr);
    // OpenSSL looks into a CA directory only while verifying: one that is
    // not there would surface as "unable to get local issuer certificate".
    if (!tls.cacertdir.empty()) {
      struct stat st {};
      const char* why = ::stat(tls.cacertdir.c_str(), &st) != 0 ? std::strerror(errno)
                        : !S_ISDIR(st.st_mode)                  ? "not a directory"
                                                                : nullptr;
      if (why)
        return fail(Error::Code::usage,
                    fmt::format("cannot load CA certificates from {}: {}", tls.cacertdir, why));
    }
    if (tls.cacert.empty() && tls.cacertdir.empty()) {
      SSL_CTX_set_default_verify_paths(context.get());
    } else if (SSL_CTX_load_verify_locations(
                   context.get(), tls.cacert.empty() ? nullptr : tls.cacert.c_str(),
                   tls.cacertdir.empty() ? nullptr : tls.cacertdir.c_str()) != 1) {
      return cannot_load("CA certificates from", tls.cacert.empty() ? tls.cacertdir : tls.cacert);
    }
  }
  if (tls.cert.empty() != tls.key.empty()) {
    return fail(Error::Code::usage, "a TLS client certificate needs both --cert and --key");
  }
  if (!tls.cert.empty()) {
    if (SSL_CTX_use_certificate_chain_file(context.get(), tls.cert.c_str()) != 1) {
      return cannot_load("TLS client certificate", tls.cert);
    }
    PassphraseAsked asked;
    SSL_CTX_set_default_passwd_cb(context.get(), passphrase_callback);
    SSL_CTX_set_default_passwd_cb_userdata(context.get(), &asked);
    const bool loaded =
        SSL_CTX_use_PrivateKey_file(context.get(), tls.key.c_str(), SSL_FILETYPE_PEM) == 1;
    SSL_CTX_set_default_passwd_cb_userdata(context.get(), nullptr);
    if (asked.without_terminal) {
      ERR_clear_error();
      return fail(Error::Code::auth,
                  fmt::format("the TLS client key {} is encrypted and there is no terminal to ask "
                              "for its passphrase; use a key without a passphrase, readable only "
                              "by this user",
                              tls.key));
    }
    // A passphrase typed and the key still unreadable: the passphrase was
    // wrong (or empty), a credential refused as a wrong password is (77).
    if (!loaded && asked.on_terminal) {
      ERR_clear_error();
      return fail(Error::Code::auth,
                  fmt::format("wrong passphrase for the TLS client key {}", tls.key));
    }
    if (!loaded || SSL_CTX_check_private_key(context.get()) != 1) {
      return cannot_load("TLS client key", tls.key);
    }
  }
  return context;
}

/// The TLS context for `tls`, made once per process: an encrypted --key
/// asks for its passphrase once, not again for every connection (the
/// heartbeat, a reconnection). rlock talks to one server with one set of
/// options, so one cached context is enough; other options make a new one.
Result<Context> shared_context(const TlsOptions& tls) {
  static std::mutex mutex;
  static std::optional<TlsOptions> cached_options;
  static Context cached;
  const std::lock_guard lock(mutex);
  if (cached && cached_options && cached_options->context_key() == tls.context_key()) return cached;
  auto made = make_context(tls);
  if (!made) return made;
  cached = *made;
  cached_options = tls;
  return cached;
}

}  // namespace

/// Step-wise connecting (start_open): what is left to try.
struct Transport::Opening {
  ConnectOptions options;
  /// --connect-timeout, from start_open(): the lookup, TCP and the TLS
  /// handshake must be done by then, as in open().
  TimeLimit limit;
  /// The host's lookup while it runs; then `addresses` holds what it found.
  std::shared_ptr<Lookup> lookup;
  std::vector<Address> addresses;
  std::size_t next = 0;  // the address to try after the current one
  bool tls = false;
  bool tcp_done = false;
  int error = 0;  // why the last address failed
};

TimeLimit TimeLimit::until(Deadline deadline) {
  // The budget only words a timeout ("timed out after 5s"): a deadline set a
  // few milliseconds earlier by the caller should not read "4.99s".
  const auto left =
      std::chrono::round<std::chrono::duration<Millis::rep, std::deci>>(deadline - Clock::now());
  return {deadline, std::max(Millis::zero(), std::chrono::duration_cast<Millis>(left))};
}

std::string TimeLimit::timed_out() const {
  // A deadline spent before the wait began (an earlier server of a list
  // took the time) is no timeout "after 0ms".
  if (budget <= Millis::zero()) return "timed out: no time was left for it";
  return fmt::format("timed out after {}", format_duration(budget));
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (m_fd >= 0) close(m_fd);
    m_fd = std::exchange(other.m_fd, -1);
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (m_fd >= 0) close(m_fd);
}

void Transport::FreeSsl::operator()(SSL* ssl) const {
  SSL_free(ssl);
}

Transport::Transport(UniqueFd fd, std::string name, int interrupt_fd)
    : m_fd(std::move(fd)), m_name(std::move(name)), m_interrupt_fd(interrupt_fd) {}

Transport::~Transport() = default;

Result<std::unique_ptr<Transport>> Transport::open(const ConnectOptions& options, TimeLimit limit) {
  std::string name = options.url.redacted();
  const bool tls = options.tls.enabled || options.url.scheme == Url::Scheme::tls;
  if (tls && options.url.scheme == Url::Scheme::unix_socket) {
    return fail(Error::Code::usage, fmt::format("TLS is not available over {}", name));
  }
  auto fd = connect_socket(options, name, limit);
  if (!fd) return std::unexpected(fd.error());
  std::unique_ptr<Transport> transport(
      new Transport(std::move(*fd), std::move(name), options.interrupt_fd));
  if (tls) {
    if (auto done = transport->handshake(options, limit); !done)
      return std::unexpected(done.error());
  }
  transport->m_connected = true;
  return transport;
}

Result<std::unique_ptr<Transport>> Transport::start_open(const ConnectOptions& options) {
  std::string name = options.url.redacted();
  const bool tls = options.tls.enabled || options.url.scheme == Url::Scheme::tls;
  if (tls && options.url.scheme == Url::Scheme::unix_socket) {
    return fail(Error::Code::usage, fmt::format("TLS is not available over {}", name));
  }
  // A name is looked up on a thread of its own (see Lookup): nothing here
  // may block the caller, who drives other connections meanwhile.
  auto opening = std::make_unique<Opening>();
  opening->options = options;
  opening->limit = TimeLimit::after(options.connect_timeout);
  opening->tls = tls;
  auto at_once = resolve_at_once(options.url, name);
  if (!at_once) return std::unexpected(at_once.error());
  if (*at_once) {
    opening->addresses = std::move(**at_once);
  } else {
    auto lookup = Lookup::start(options.url.host, options.url.port);
    if (!lookup) return std::unexpected(lookup.error());
    opening->lookup = std::move(*lookup);
  }
  std::unique_ptr<Transport> transport(
      new Transport(UniqueFd(), std::move(name), options.interrupt_fd));
  transport->m_opening = std::move(opening);
  if (auto started = transport->open_step(); !started) return std::unexpected(started.error());
  return transport;
}

Result<bool> Transport::open_step() {
  if (m_connected) return true;
  Opening& o = *m_opening;
  if (Clock::now() >= o.limit.deadline) {
    if (o.lookup) return lookup_timed_out(o.options.url, m_name, o.limit);
    auto timed_out = failure(Error::Code::unreachable, o.limit.timed_out());
    if (o.tcp_done && o.tls)
      return std::unexpected(handshake_failure(timed_out.error(), o.options, true));
    return timed_out;
  }
  if (o.lookup) {
    if (!o.lookup->done()) {
      m_events = POLLIN;  // on the lookup's fd (see fd())
      return false;
    }
    auto addresses = lookup_result(*o.lookup, o.options.url, m_name);
    o.lookup.reset();
    if (!addresses) return std::unexpected(addresses.error());
    o.addresses = std::move(*addresses);
  }
  while (!o.tcp_done) {
    if (m_fd.get() >= 0) {
      // connect() is under way: done when the socket is writable.
      pollfd fd{m_fd.get(), POLLOUT, 0};
      if (poll(&fd, 1, 0) == 0) return false;
      int error = 0;
      socklen_t length = sizeof error;
      getsockopt(m_fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
      if (error == 0) {
        o.tcp_done = true;
        break;
      }
      o.error = error;
      m_fd = UniqueFd();
    }
    if (o.next == o.addresses.size())
      return failure(Error::Code::unreachable, system_message(o.error));
    const Address& address = o.addresses[o.next++];
    m_fd = make_socket(address.storage.ss_family);
    if (m_fd.get() < 0) {
      o.error = errno;
      if (out_of_descriptors(o.error))
        return failure(Error::Code::internal,
                       system_message(o.error) + descriptor_limit_hint(o.error));
      continue;
    }
    if (connect(m_fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) ==
        0) {
      o.tcp_done = true;
    } else if (errno == EINPROGRESS) {
      m_events = POLLOUT;
      return false;
    } else {
      o.error = errno;
      m_fd = UniqueFd();
    }
  }
  if (o.tls) {
    if (!m_ssl) {
      if (auto started = start_tls(o.options); !started) return std::unexpected(started.error());
    }
    ERR_clear_error();
    const int result = SSL_connect(m_ssl.get());
    if (result != 1) {
      if (auto verified = verification(o.options); !verified)
        return std::unexpected(verified.error());
      auto events = ssl_want(result);
      if (!events) return std::unexpected(handshake_failure(events.error(), o.options, false));
      m_events = *events;
      return false;
    }
  }
  m_connected = true;
  m_events = 0;
  m_opening.reset();
  return true;
}

Result<std::size_t> Transport::try_write(std::string_view bytes) {
  if (bytes.empty()) return 0;
  if (m_ssl) {
    ERR_clear_error();
    std::size_t written = 0;
    const int result = SSL_write_ex(m_ssl.get(), bytes.data(), bytes.size(), &written);
    if (result == 1) return written;
    auto events = ssl_want(result);
    if (!events) return std::unexpected(events.error());
    m_events = *events;
    return 0;
  }
  const ssize_t sent = send(m_fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
  if (sent >= 0) return static_cast<std::size_t>(sent);
  if (!would_block(errno)) return failure(Error::Code::unreachable, system_message(errno));
  m_events = POLLOUT;
  return 0;
}

Result<std::size_t> Transport::try_read(std::span<char> buffer) {
  if (m_ssl) {
    ERR_clear_error();
    std::size_t got = 0;
    const int result = SSL_read_ex(m_ssl.get(), buffer.data(), buffer.size(), &got);
    if (result == 1) {
      m_answered = true;
      return got;
    }
    auto events = ssl_want(result);
    if (!events) return std::unexpected(events.error());
    m_events = *events;
    return 0;
  }
  const ssize_t got = recv(m_fd.get(), buffer.data(), buffer.size(), 0);
  if (got > 0) {
    answered_plain();
    return static_cast<std::size_t>(got);
  }
  if (got == 0 || !would_block(errno)) return dropped(got == 0 ? 0 : errno);
  m_events = POLLIN;
  return 0;
}

int Transport::fd() const {
  if (m_opening && m_opening->lookup) return m_opening->lookup->fd();
  return m_fd.get();
}

Deadline Transport::open_deadline() const {
  return m_opening ? m_opening->limit.deadline : Deadline::max();
}

bool Transport::buffered() const {
  return m_ssl && SSL_pending(m_ssl.get()) > 0;
}

Result<void> Transport::handshake(const ConnectOptions& options, const TimeLimit& limit) {
  if (auto started = start_tls(options); !started) return started;
  for (;;) {
    ERR_clear_error();
    const int result = SSL_connect(m_ssl.get());
    if (result == 1) return {};
    if (auto verified = verification(options); !verified) return verified;
    auto waited = ssl_wait(result, limit);
    if (!waited) {
      const Error& error = waited.error();
      const bool timed_out =
          error.code == Error::Code::unreachable && Clock::now() >= limit.deadline;
      return std::unexpected(handshake_failure(error, options, timed_out));
    }
  }
}

Result<void> Transport::start_tls(const ConnectOptions& options) {
  const TlsOptions& tls = options.tls;
  if (auto loaded = load_openssl(); !loaded)
    return failure(loaded.error().code, loaded.error().message);
  auto context = shared_context(tls);
  if (!context) return std::unexpected(context.error());
  m_ssl.reset(SSL_new(context->get()));
  BIO* bio = BIO_new(socket_bio_method());
  if (!m_ssl || !bio) throw std::bad_alloc();
  // The BIO's data slot is a void*; the fd travels in it by value (as in
  // OpenSSL's own socket BIO), so the cast is the point, not a pessimization.
  BIO_set_data(bio, reinterpret_cast<void*>(  // NOLINT(performance-no-int-to-ptr)
                        static_cast<std::intptr_t>(m_fd.get())));
  BIO_set_init(bio, 1);
  SSL_set_bio(m_ssl.get(), bio, bio);
  // A step-wise writer (try_write) retries with its buffer grown by later
  // requests, which may have moved it.
  SSL_set_mode(m_ssl.get(), SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_set_msg_callback(m_ssl.get(), on_tls_message);
  SSL_set_msg_callback_arg(m_ssl.get(), this);

  // The certificate must name the host we asked for: the --sni name when
  // given (an IP address in the URL, a DNS name in the certificate), else the
  // URL's host. SNI itself cannot carry an IP address (RFC 6066).
  const std::string& server = tls.sni.empty() ? options.url.host : tls.sni;
  const bool ip = is_ip_address(server);
  if (!ip) SSL_set_tlsext_host_name(m_ssl.get(), server.c_str());
  if (!tls.insecure) {
    // Only subjectAltName counts: the old fallback to the subject's CN lets a
    // certificate for something else pass, and RFC 6125 deprecates it.
    SSL_set_hostflags(m_ssl.get(), X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
    const int set = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(m_ssl.get()), server.c_str())
                       : SSL_set1_host(m_ssl.get(), server.c_str());
    if (set != 1) return failure(Error::Code::usage, fmt::format("invalid TLS name {}", server));
  }
  return {};
}

Result<void> Transport::verification(const ConnectOptions& options) const {
  if (const long verified = SSL_get_verify_result(m_ssl.get());
      !options.tls.insecure && verified != X509_V_OK) {
    return fail(Error::Code::auth,
                fmt::format("TLS verification failed for {}: certificate verify failed ({})",
                            m_name, X509_verify_cert_error_string(verified)));
  }
  return {};
}

Error Transport::handshake_failure(Error error, const ConnectOptions& options,
                                   bool timed_out) const {
  // A plain-text Redis takes a TLS handshake for a partial command and
  // waits for the rest, or answers it with an error OpenSSL cannot read
  // as a record: either way the user's likely mistake is the port.
  const bool garbled = error.message.find("wrong version number") != std::string::npos ||
                       error.message.find("packet length too long") != std::string::npos ||
                       error.message.find("record layer failure") != std::string::npos;
  if (timed_out || garbled) {
    error.message += fmt::format(
        " during the TLS handshake (probably not a TLS port: "
        "is the server speaking plain text on {}?)",
        options.url.port);
    if (garbled) error.code = Error::Code::unreachable;
  }
  return error;
}

void Transport::on_tls_message(int write_p, int, int content_type, const void* buf, std::size_t len,
                               SSL*, void* arg) {
  // A received handshake message of type 13 is a CertificateRequest.
  constexpr int k_handshake = 22, k_certificate_request = 13;
  if (write_p == 0 && content_type == k_handshake && len > 0 &&
      static_cast<const unsigned char*>(buf)[0] == k_certificate_request) {
    static_cast<Transport*>(arg)->m_certificate_requested = true;
  }
}

std::unexpected<Error> Transport::closed(std::string_view reason) const {
  if (m_ssl && m_certificate_requested && !m_answered) {
    return failure(Error::Code::auth,
                   fmt::format("{} right after the TLS handshake, in which it asked for a client "
                               "certificate: it refused the one from --cert, or its absence",
                               reason));
  }
  return failure(Error::Code::unreachable, reason);
}

namespace {

/// The servers (by redacted URL) that have answered in plain text in this
/// process, on any connection: a later connection to one of them that is
/// dropped before its first reply (a restart, a proxy cutting it) is no
/// sign of a TLS port. Shared by the heartbeat's thread and the main one.
std::mutex g_plain_mutex;
std::set<std::string> g_answered_plain;

}  // namespace

void Transport::answered_plain() {
  if (std::exchange(m_answered, true)) return;
  std::lock_guard lock(g_plain_mutex);
  g_answered_plain.insert(m_name);
}

std::unexpected<Error> Transport::dropped(int error) const {
  std::string reason = error == 0 ? "connection closed by the server" : system_message(error);
  // A TLS-only port drops a plain-text request without a word; a server
  // that answered this process in plain text before is not one.
  if (!m_answered && !m_ssl) {
    std::lock_guard lock(g_plain_mutex);
    if (!g_answered_plain.contains(m_name))
      reason +=
          " before any reply (if that is a TLS port: rediss:// or --tls; if not, the "
          "server's log says why: a reply over client-output-buffer-limit, say)";
  }
  return failure(Error::Code::unreachable, reason);
}

std::unexpected<Error> Transport::failure(Error::Code code, std::string_view reason) const {
  return fail(code,
              fmt::format("{}{}: {}", m_connected ? "" : "cannot connect to ", m_name, reason));
}

Result<void> Transport::wait(short events, const TimeLimit& limit) const {
  switch (wait_for(m_fd.get(), events, limit.deadline, m_interrupt_fd)) {
    case Ready::yes:
      return {};
    case Ready::interrupted:
      return failure(Error::Code::interrupted, "interrupted");
    case Ready::timed_out:
      break;
  }
  return failure(Error::Code::unreachable, limit.timed_out());
}

Result<void> Transport::ssl_wait(int result, const TimeLimit& limit) const {
  const auto events = ssl_want(result);
  if (!events) return std::unexpected(events.error());
  return wait(*events, limit);
}

Result<short> Transport::ssl_want(int result) const {
  const int saved_errno = errno;
  switch (SSL_get_error(m_ssl.get(), result)) {
    case SSL_ERROR_WANT_READ:
      return POLLIN;
    case SSL_ERROR_WANT_WRITE:
      return POLLOUT;
    case SSL_ERROR_SYSCALL:
      if (saved_errno != 0) return closed(system_message(saved_errno));
      [[fallthrough]];
    case SSL_ERROR_ZERO_RETURN:
      return closed("connection closed by the server");
    default:
      break;
  }
  if (ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
    return closed("connection closed by the server");
  }
  // Anything else is TLS refusing to go on: a rejected client certificate, a
  // server that does not speak TLS, a tampered record.
  return failure(Error::Code::auth, fmt::format("TLS error: {}", ssl_reason()));
}

Result<void> Transport::write_all(std::string_view bytes, const TimeLimit& limit) {
  while (!bytes.empty()) {
    std::size_t written = 0;
    if (m_ssl) {
      ERR_clear_error();
      const int result = SSL_write_ex(m_ssl.get(), bytes.data(), bytes.size(), &written);
      if (result != 1) {
        if (auto waited = ssl_wait(result, limit); !waited) return waited;
        continue;
      }
    } else {
      const ssize_t sent = send(m_fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (sent < 0) {
        if (!would_block(errno)) return failure(Error::Code::unreachable, system_message(errno));
        if (auto waited = wait(POLLOUT, limit); !waited) return waited;
        continue;
      }
      written = static_cast<std::size_t>(sent);
    }
    bytes.remove_prefix(written);
  }
  return {};
}

// What has arrived is read before the deadline is looked at (wait() looks at
// it when nothing has): a process stopped past its deadline (SIGSTOP, a
// paused VM) finds the reply the server sent meanwhile, rather than calling
// a server that answered unreachable. A server that trickles a reply byte by
// byte still times out, between two bytes; one that floods is cut off by the
// reader's limits.
Result<std::size_t> Transport::read_some(std::span<char> buffer, const TimeLimit& limit) {
  for (;;) {
    if (m_ssl) {
      ERR_clear_error();
      std::size_t got = 0;
      const int result = SSL_read_ex(m_ssl.get(), buffer.data(), buffer.size(), &got);
      if (result == 1) {
        m_answered = true;
        return got;
      }
      if (auto waited = ssl_wait(result, limit); !waited) return std::unexpected(waited.error());
      continue;
    }
    const ssize_t got = recv(m_fd.get(), buffer.data(), buffer.size(), 0);
    if (got > 0) {
      answered_plain();
      return static_cast<std::size_t>(got);
    }
    if (got == 0 || !would_block(errno)) return dropped(got == 0 ? 0 : errno);
    if (auto waited = wait(POLLIN, limit); !waited) return std::unexpected(waited.error());
  }
}

bool Transport::usable() {
  char byte = 0;
  if (m_ssl) {
    // SSL_peek also consumes what TLS itself sent meanwhile (TLS 1.3 session
    // tickets) and recognises the server's close_notify.
    ERR_clear_error();
    std::size_t got = 0;
    const int result = SSL_peek_ex(m_ssl.get(), &byte, 1, &got);
    if (result == 1) return false;  // unasked-for data: out of step
    const int error = SSL_get_error(m_ssl.get(), result);
    ERR_clear_error();
    return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE;
  }
  const ssize_t got = recv(m_fd.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  // 0: the server closed; > 0: unasked-for data; < 0: reset, unless it
  // only says "nothing to read", which is the healthy idle state.
  return got < 0 && would_block(errno);
}

}  // namespace rlock::redis
