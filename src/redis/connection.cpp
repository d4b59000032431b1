#include "redis/connection.h"

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <deque>
#include <iterator>
#include <span>
#include <stdexcept>

#include "redis/resp.h"
#include "redis/transport.h"
#include "util/sha1.h"

namespace rlock::redis {
namespace {

/// How big a piece of a reply one read takes.
constexpr std::size_t k_read_size = std::size_t{16} * 1024;

/// A RESP error reply from `name` becomes an Error; other replies pass through.
Result<Reply> checked(Result<Reply> reply, const std::string& name) {
  if (reply && reply->is_error()) return std::unexpected(server_failure(name, reply->str));
  return reply;
}

}  // namespace

Script::Script(std::string_view body) : body(body), sha1(sha1_hex(body)) {}

struct Connection::Impl {
  ConnectOptions options;                // to connect again
  std::unique_ptr<Transport> transport;  // null once closed
  RespReader reader;
  std::string name;      // the redacted URL
  bool opening = false;  // AUTH and SELECT of open() must not reconnect
  /// The last step() failed while connecting (see failed_connecting()).
  bool failed_connecting = false;

  /// Step-wise use: the bytes not written yet, and for each request still
  /// to be answered, how many replies it takes and what it is (AUTH and
  /// SELECT of a step-wise open are checked here, not handed out).
  enum class Purpose { auth, select, request };
  struct Expected {
    std::size_t count;
    Purpose purpose;
  };
  std::string outgoing;
  std::deque<Expected> expected;
  std::vector<Reply> got;  // of the oldest request, so far
  /// What a read lands in before the reader takes it: on the heap, made at
  /// the first read. On the stack it made a 17 KB frame, which a small
  /// `ulimit -s` (or a thread's stack) turned into a crash.
  std::vector<char> read_buffer;
  std::span<char> buffer() {
    if (read_buffer.empty()) read_buffer.resize(k_read_size);
    return read_buffer;
  }

  /// The transport of a command given up on (timed out or interrupted),
  /// kept open for part(): a frozen server runs what it was sent when it
  /// thaws, and only a request written behind it on the same stream is sure
  /// to run after it. Replaced by the next one. (abandon() closes for good:
  /// a step-wise BLPOP still blocked must end with its connection.)
  std::unique_ptr<Transport> stale;

  /// Closes the transport, keeping it as `stale` if it is connected.
  void retire() {
    if (transport && transport->connected())
      stale = std::move(transport);
    else
      transport.reset();
  }

  void abandon() {
    transport.reset();
    reader = RespReader();
    outgoing.clear();
    expected.clear();
    got.clear();
  }

  /// Connects, authenticates and selects the database, within the connect
  /// timeout and `limit`, whichever ends first.
  Result<void> open(const TimeLimit& limit) {
    transport.reset();
    reader = RespReader();
    const TimeLimit connect_limit = limit.deadline < Clock::now() + options.connect_timeout
                                        ? limit
                                        : TimeLimit::after(options.connect_timeout);
    auto opened = Transport::open(options, connect_limit);
    if (!opened) return std::unexpected(opened.error());
    transport = std::move(*opened);
    opening = true;
    auto ready = authenticate(connect_limit);
    if (ready) ready = select(options.url.db, connect_limit);
    opening = false;
    if (ready) return {};
    transport.reset();
    Error error = ready.error();
    // A transport failure says "URL: timed out after 2s"; before the first
    // command, the user is better told that connecting failed.
    if (error.code == Error::Code::unreachable || error.code == Error::Code::interrupted) {
      error.message = "cannot connect to " + error.message;
    }
    return std::unexpected(error);
  }

  /// Sends `request` and reads `count` replies, error replies included.
  ///
  /// A connection that sat idle may have been closed by the server (its
  /// `timeout`, CLIENT KILL, a proxy, a restart): that is checked before
  /// sending, and a fresh connection is opened instead. The request provably
  /// was not processed then, so this is safe for any command.
  ///
  /// Any failure closes the connection: a reply may still be in flight, and
  /// taking it for the answer to the next command would be far worse than
  /// reconnecting.
  Result<std::vector<Reply>> exchange(std::string_view request, std::size_t count,
                                      const TimeLimit& limit) {
    // Step-wise requests still in flight (or a step-wise open not done):
    // their replies would be taken for ours.
    if (!opening && (!expected.empty() || (transport && !transport->connected()))) abandon();
    if (!transport || (!opening && !transport->usable())) {
      if (opening)
        return fail(Error::Code::unreachable, fmt::format("{}: connection closed", name));
      if (auto opened = open(limit); !opened) return std::unexpected(opened.error());
    }
    auto replies = send_and_receive(request, count, limit);
    if (!replies) retire();
    return replies;
  }

  Result<std::vector<Reply>> send_and_receive(std::string_view request, std::size_t count,
                                              const TimeLimit& limit) {
    std::vector<Reply> replies;
    if (auto sent = transport->write_all(request, limit); !sent) {
      return std::unexpected(closing_words(sent.error(), replies));
    }
    replies.reserve(count);
    const std::span<char> buffer = this->buffer();
    while (replies.size() < count) {
      auto reply = reader.next();
      if (!reply)
        return fail(reply.error().code, fmt::format("{}: {}", name, reply.error().message));
      if (*reply) {
        replies.push_back(std::move(**reply));
        continue;
      }
      const auto got = transport->read_some(buffer, limit);  // times out if nothing came
      if (!got) return std::unexpected(closing_words(got.error(), replies));
      reader.feed({buffer.data(), *got});
    }
    return replies;
  }

  /// `dropped`, the connection closed by the server, or what the server
  /// said before it closed it: a first reply that is a refusal Redis closes
  /// a connection after (maxclients, NOAUTH, a protocol error), read now if
  /// it is still to be read, is the reason. A server at maxclients tells a
  /// new connection so and closes it, before the request has even arrived:
  /// a write then fails, or the rest of a pipelined request goes
  /// unanswered, and 'Connection reset by peer' hid why. (Another error
  /// reply, a refused ROLE before a restart, is no reason for the close.)
  Error closing_words(Error dropped, std::vector<Reply>& so_far) {
    if (dropped.code != Error::Code::unreachable || !transport) return dropped;
    const std::span<char> buffer = this->buffer();
    while (so_far.empty()) {
      auto reply = reader.next();
      if (!reply) break;
      if (*reply) {
        so_far.push_back(std::move(**reply));
        break;
      }
      const auto read = transport->try_read(buffer);
      if (!read || *read == 0) break;
      reader.feed({buffer.data(), *read});
    }
    if (so_far.empty() || !so_far.front().is_error()) return dropped;
    const std::string& said = so_far.front().str;
    const ServerError kind = server_error_kind(said);
    if (kind != ServerError::maxclients && kind != ServerError::noauth &&
        !said.starts_with("ERR Protocol error"))
      return dropped;
    return server_failure(name, said);
  }

  /// One command; an error reply is returned as a Reply.
  Result<Reply> call(std::span<const std::string> args, const TimeLimit& limit) {
    auto replies = exchange(format_command(args), 1, limit);
    if (!replies) return std::unexpected(replies.error());
    return std::move(replies->front());
  }

  /// AUTH with the password, if one is known: `AUTH user password` (ACL,
  /// Redis 6+) with a user, else the one-argument form every server knows.
  Result<void> authenticate(const TimeLimit& limit) {
    const auto args = auth_command();
    if (!args) return {};
    const auto reply = call(*args, limit);
    if (!reply) return std::unexpected(reply.error());
    if (!reply->is_error()) return {};
    return std::unexpected(auth_refused(*reply));
  }

  /// The AUTH command for the known password, if there is one.
  std::optional<std::vector<std::string>> auth_command() const {
    const auto& password = options.password ? options.password : options.url.password;
    if (!password) return std::nullopt;
    const auto& user = options.user ? options.user : options.url.user;
    std::vector<std::string> args{"AUTH"};
    if (user) args.push_back(*user);
    args.push_back(*password);
    return args;
  }

  /// The error for an AUTH refused with `reply`.
  Error auth_refused(const Reply& reply) const {
    // Besides WRONGPASS, an "ERR ..." answer to AUTH means the credentials do
    // not fit this server (no password configured, no ACL on Redis 5): still
    // an authentication problem for the user to fix. LOADING and the like
    // are not.
    const Error error = classify_server_error(reply.str);
    const bool auth = error.code == Error::Code::auth || reply.str.starts_with("ERR");
    return Error{auth ? Error::Code::auth : error.code,
                 fmt::format("authentication failed for {}: {}", name, reply.str), error.server};
  }

  /// The error for a SELECT refused with `reply`.
  Error select_refused(int db, const Reply& reply) const {
    Error error = server_failure(name, reply.str);
    // A Cluster has database 0 only: the URL is the user's to fix (78),
    // not a server's refusal (76).
    if (reply.str.find("not allowed in cluster mode") != std::string::npos)
      return Error{Error::Code::config,
                   fmt::format("cannot select database {} on {}: a Redis Cluster has only "
                               "database 0 (end the URL with /0)",
                               db, name),
                   ServerError::none};
    error.message = fmt::format("cannot select database {} on {}: {}", db, name, error.message);
    return error;
  }

  /// SELECT, unless the URL wants database 0, where every connection starts.
  Result<void> select(int db, const TimeLimit& limit) {
    if (db == 0) return {};
    const std::string args[] = {"SELECT", std::to_string(db)};
    const auto reply = call(args, limit);
    if (!reply) return std::unexpected(reply.error());
    if (!reply->is_error()) return {};
    return std::unexpected(select_refused(db, *reply));
  }

  /// Queues `request` (`count` replies), opening the connection step-wise
  /// first when it is closed or unusable and nothing is in flight.
  Result<void> begin(const std::string& request, std::size_t count) {
    if (expected.empty() && (!transport || (transport->connected() && !transport->usable()))) {
      abandon();
      ConnectOptions step_options = options;
      step_options.interrupt_fd = -1;  // nothing step-wise waits
      auto started = Transport::start_open(step_options);
      if (!started) return std::unexpected(started.error());
      transport = std::move(*started);
      if (auto auth = auth_command()) {
        outgoing += format_command(*auth);
        expected.push_back({1, Purpose::auth});
      }
      if (options.url.db != 0) {
        const std::string args[] = {"SELECT", std::to_string(options.url.db)};
        outgoing += format_command(args);
        expected.push_back({1, Purpose::select});
      }
    }
    outgoing += request;
    expected.push_back({count, Purpose::request});
    return {};
  }

  Result<std::optional<std::vector<Reply>>> step() {
    if (expected.empty()) return std::nullopt;
    if (!transport->connected()) {
      auto done = transport->open_step();
      if (!done) return std::unexpected(done.error());
      if (!*done) return std::nullopt;
    }
    while (!outgoing.empty()) {
      auto written = transport->try_write(outgoing);
      if (!written) return std::unexpected(closing_words(written.error(), got));
      if (*written == 0) break;
      outgoing.erase(0, *written);
    }
    const std::span<char> buffer = this->buffer();
    for (;;) {
      auto reply = reader.next();
      if (!reply)
        return fail(reply.error().code, fmt::format("{}: {}", name, reply.error().message));
      if (!*reply) {
        const auto read = transport->try_read(buffer);
        if (!read) return std::unexpected(closing_words(read.error(), got));
        if (*read == 0) return std::nullopt;
        reader.feed({buffer.data(), *read});
        continue;
      }
      if (got.empty()) got.reserve(expected.front().count);
      got.push_back(std::move(**reply));
      if (got.size() < expected.front().count) continue;
      const Purpose purpose = expected.front().purpose;
      expected.pop_front();
      std::vector<Reply> replies = std::move(got);
      got.clear();
      if (purpose == Purpose::request) return replies;
      if (replies.front().is_error())
        return std::unexpected(purpose == Purpose::auth
                                   ? auth_refused(replies.front())
                                   : select_refused(options.url.db, replies.front()));
    }
  }
};

Connection::Connection() : m_impl(std::make_unique<Impl>()) {}
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() = default;

Result<Connection> Connection::connect(const ConnectOptions& options) {
  // One budget for everything up to the first command (TCP, TLS, AUTH,
  // SELECT): --connect-timeout is how long a user waits before learning that
  // a server is out of reach.
  Connection connection;
  Impl& impl = *connection.m_impl;
  impl.options = options;
  impl.name = options.url.redacted();
  if (auto opened = impl.open(TimeLimit::after(options.connect_timeout)); !opened)
    return std::unexpected(opened.error());
  return connection;
}

Connection Connection::unopened(const ConnectOptions& options) {
  Connection connection;
  connection.m_impl->options = options;
  connection.m_impl->name = options.url.redacted();
  return connection;
}

Result<void> Connection::begin(const std::vector<std::vector<std::string>>& commands) {
  std::string request;
  for (const auto& args : commands) request += format_command(args);
  return begin(request, commands.size());
}

Result<void> Connection::begin(const std::string& request, std::size_t count) {
  auto begun = m_impl->begin(request, count);
  if (!begun) m_impl->abandon();
  return begun;
}

Result<std::optional<std::vector<Reply>>> Connection::step() {
  auto stepped = m_impl->step();
  if (!stepped) {
    m_impl->failed_connecting = m_impl->transport && !m_impl->transport->connected();
    m_impl->abandon();
  }
  return stepped;
}

bool Connection::failed_connecting() const {
  return m_impl->failed_connecting;
}

std::size_t Connection::in_flight() const {
  std::size_t requests = 0;
  for (const auto& e : m_impl->expected)
    if (e.purpose == Impl::Purpose::request) ++requests;
  return requests;
}

Connection::Readiness Connection::readiness() const {
  const Impl& impl = *m_impl;
  if (impl.expected.empty() || !impl.transport) return {};
  const Transport& t = *impl.transport;
  if (!t.connected()) return {t.fd(), t.poll_events(), false, t.open_deadline()};
  // Always ready to read an answer; to write while bytes wait; and whatever
  // TLS asked for last (it may need to write to read, or the reverse).
  const short events =
      static_cast<short>(POLLIN | (impl.outgoing.empty() ? 0 : POLLOUT) | t.poll_events());
  return {t.fd(), events, t.buffered()};
}

void Connection::abandon() {
  m_impl->abandon();
}

bool Connection::has_stale() const {
  return m_impl->stale != nullptr;
}

bool Connection::part(const std::vector<std::vector<std::string>>& commands, Millis budget) {
  if (!m_impl->stale) return false;
  std::string request;
  for (const auto& args : commands) request += format_command(args);
  const bool written = m_impl->stale->write_all(request, TimeLimit::after(budget)).has_value();
  m_impl->stale.reset();
  return written;
}

Result<Reply> Connection::command(std::span<const std::string> args, Deadline deadline) {
  return checked(m_impl->call(args, TimeLimit::until(deadline)), m_impl->name);
}

Result<Reply> Connection::command(std::initializer_list<std::string_view> args) {
  const std::vector<std::string> owned(args.begin(), args.end());
  return command(owned, Clock::now() + m_impl->options.command_timeout);
}

Result<std::vector<Reply>> Connection::pipeline(
    const std::vector<std::vector<std::string>>& commands, Deadline deadline) {
  if (commands.empty()) return {};
  std::string request;
  for (const auto& args : commands) request += format_command(args);
  return m_impl->exchange(request, commands.size(), TimeLimit::until(deadline));
}

namespace {
/// Set once a server refused EVALSHA_RO or EVAL_RO (see script_verb).
std::atomic<bool> g_read_only_refused{false};
}  // namespace

std::string_view script_verb(bool read_only, bool body) {
  if (read_only && !g_read_only_refused.load(std::memory_order_relaxed))
    return body ? "EVAL_RO" : "EVALSHA_RO";
  return body ? "EVAL" : "EVALSHA";
}

bool refuses_read_only(const Reply& reply) {
  if (!reply.is_error()) return false;
  std::string text = reply.str;
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // "NOPERM this user has no permissions to run the 'evalsha_ro' command",
  // "ERR unknown command 'EVALSHA_RO'" (the quote ends the name).
  if (text.find("evalsha_ro'") == std::string::npos && text.find("eval_ro'") == std::string::npos)
    return false;
  g_read_only_refused.store(true, std::memory_order_relaxed);
  return true;
}

Result<Reply> Connection::eval(const Script& script, std::span<const std::string> keys,
                               std::span<const std::string> args, Deadline deadline,
                               bool read_only) {
  const TimeLimit limit = TimeLimit::until(deadline);
  std::vector<std::string> command{std::string(script_verb(read_only)), script.sha1,
                                   std::to_string(keys.size())};
  command.insert(command.end(), keys.begin(), keys.end());
  command.insert(command.end(), args.begin(), args.end());
  auto reply = m_impl->call(command, limit);
  // The read-only verb itself refused: the plain one.
  const auto again_plain = [&](bool body) {
    if (!reply || !refuses_read_only(*reply)) return;
    command[0] = script_verb(false, body);
    reply = m_impl->call(command, limit);
  };
  again_plain(false);
  if (reply && reply->is_error() && server_error_kind(reply->str) == ServerError::noscript) {
    // The script cache is empty after a restart, a failover or SCRIPT FLUSH;
    // EVAL runs the script and caches it again for the next EVALSHA.
    command[0] = script_verb(read_only, true);
    command[1] = script.body;
    reply = m_impl->call(command, limit);
    again_plain(true);
  }
  return checked(std::move(reply), m_impl->name);
}

void Connection::set_interrupt_fd(int fd) {
  m_impl->options.interrupt_fd = fd;  // also for the next reconnection
  if (m_impl->transport) m_impl->transport->set_interrupt_fd(fd);
}

const std::string& Connection::describe() const {
  return m_impl->name;
}

Millis Connection::command_timeout() const {
  return m_impl->options.command_timeout;
}

Error classify_server_error(std::string_view message) {
  // Redis 6+ says WRONGPASS, NOAUTH or NOPERM; older servers "ERR invalid
  // password"; some refusals are an ERR with their own words. Everything
  // else (WRONGTYPE, OOM, READONLY, BUSY, LOADING, MOVED, NOSCRIPT, script
  // errors, ...) is the server refusing the command, and its message says why.
  const ServerError kind = server_error_kind(message);
  // A server at maxclients says so to a new connection and closes it: out
  // of reach for now, like a refused connection (69; a waiter already in
  // the queue rides it out as an outage), not a refusal of the command (76).
  if (kind == ServerError::maxclients)
    return Error{Error::Code::unreachable, std::string(message), kind};
  const std::string_view prefix = message.substr(0, message.find(' '));
  const bool auth =
      kind == ServerError::noauth || prefix == "WRONGPASS" || prefix == "NOPERM" ||
      message.find("invalid password") != std::string_view::npos ||
      message.find("invalid username-password pair") != std::string_view::npos ||
      // Redis 7.0 words an ACL refusal inside a script this way.
      message.find("user executing the script can't run this command") != std::string_view::npos ||
      message.find("No permissions to") != std::string_view::npos;
  return Error{auth ? Error::Code::auth : Error::Code::server, std::string(message), kind};
}

Error server_failure(std::string_view name, std::string_view message) {
  Error error = classify_server_error(message);
  error.origin = name;
  // The demoted master's refusal of WAIT goes on about writable replicas
  // in a second sentence that does not apply: its first one is the news.
  if (error.server == ServerError::readonly && message.starts_with("ERR WAIT")) {
    if (const auto end = error.message.find(". "); end != std::string::npos)
      error.message.resize(end);
  }
  // Redis' own words ("NOAUTH Authentication required", "Protocol error:
  // unauthenticated multibulk length") do not say what to do about it.
  if (error.server == ServerError::noauth) {
    error.message = fmt::format(
        "{}: this server needs a password: set RLOCK_PASSWORD or --password-file", name);
  }
  return error;
}

}  // namespace rlock::redis
