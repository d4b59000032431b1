#include "redis/connection.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <array>
#include <iterator>
#include <stdexcept>

#include "redis/resp.h"
#include "redis/transport.h"

namespace rlock::redis {
namespace {

std::string sha1_hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha1(), nullptr) != 1) {
    throw std::runtime_error("SHA1 is not available from OpenSSL");
  }
  std::string hex;
  for (unsigned int i = 0; i < length; ++i)
    fmt::format_to(std::back_inserter(hex), "{:02x}", digest[i]);
  return hex;
}

/// A RESP error reply becomes an Error; other replies pass through.
Result<Reply> checked(Result<Reply> reply) {
  if (reply && reply->is_error()) return std::unexpected(classify_server_error(reply->str));
  return reply;
}

}  // namespace

Script::Script(std::string_view body) : body(body), sha1(sha1_hex(body)) {}

struct Connection::Impl {
  std::unique_ptr<Transport> transport;  // null once closed
  RespReader reader;
  std::string name;  // the redacted URL
  Millis command_timeout{};

  /// Sends `request` and reads `count` replies, error replies included. Any
  /// failure closes the connection: a reply may still be in flight, and
  /// taking it for the answer to the next command would be far worse than
  /// reconnecting.
  Result<std::vector<Reply>> exchange(std::string_view request, std::size_t count,
                                      const TimeLimit& limit) {
    if (!transport)
      return fail(Error::Code::unreachable, fmt::format("{}: connection closed", name));
    auto replies = send_and_receive(request, count, limit);
    if (!replies) transport.reset();
    return replies;
  }

  Result<std::vector<Reply>> send_and_receive(std::string_view request, std::size_t count,
                                              const TimeLimit& limit) {
    if (auto sent = transport->write_all(request, limit); !sent) {
      return std::unexpected(sent.error());
    }
    std::vector<Reply> replies;
    std::array<char, std::size_t{16} * 1024> buffer;
    while (replies.size() < count) {
      auto reply = reader.next();
      if (!reply)
        return fail(reply.error().code, fmt::format("{}: {}", name, reply.error().message));
      if (*reply) {
        replies.push_back(std::move(**reply));
        continue;
      }
      const auto got = transport->read_some(buffer, limit);
      if (!got) return std::unexpected(got.error());
      reader.feed({buffer.data(), *got});
    }
    return replies;
  }

  /// One command; an error reply is returned as a Reply.
  Result<Reply> call(std::span<const std::string> args, const TimeLimit& limit) {
    auto replies = exchange(format_command(args), 1, limit);
    if (!replies) return std::unexpected(replies.error());
    return std::move(replies->front());
  }

  /// AUTH with the password, if one is known: `AUTH user password` (ACL,
  /// Redis 6+) with a user, else the one-argument form every server knows.
  Result<void> authenticate(const ConnectOptions& options, const TimeLimit& limit) {
    const auto& password = options.password ? options.password : options.url.password;
    if (!password) return {};
    const auto& user = options.user ? options.user : options.url.user;
    std::vector<std::string> args{"AUTH"};
    if (user) args.push_back(*user);
    args.push_back(*password);
    const auto reply = call(args, limit);
    if (!reply) return std::unexpected(reply.error());
    if (!reply->is_error()) return {};
    // Besides WRONGPASS, an "ERR ..." answer to AUTH means the credentials do
    // not fit this server (no password configured, no ACL on Redis 5): still
    // an authentication problem for the user to fix. LOADING and the like
    // are not.
    const Error error = classify_server_error(reply->str);
    const bool auth = error.code == Error::Code::auth || reply->str.starts_with("ERR");
    return fail(auth ? Error::Code::auth : error.code,
                fmt::format("authentication failed for {}: {}", name, reply->str));
  }

  /// SELECT, unless the URL wants database 0, where every connection starts.
  Result<void> select(int db, const TimeLimit& limit) {
    if (db == 0) return {};
    const std::string args[] = {"SELECT", std::to_string(db)};
    const auto reply = call(args, limit);
    if (!reply) return std::unexpected(reply.error());
    if (!reply->is_error()) return {};
    return fail(classify_server_error(reply->str).code,
                fmt::format("cannot select database {} on {}: {}", db, name, reply->str));
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
  const TimeLimit limit = TimeLimit::after(options.connect_timeout);
  auto transport = Transport::open(options, limit);
  if (!transport) return std::unexpected(transport.error());
  Connection connection;
  Impl& impl = *connection.m_impl;
  impl.transport = std::move(*transport);
  impl.name = options.url.redacted();
  impl.command_timeout = options.command_timeout;
  auto ready = impl.authenticate(options, limit);
  if (ready) ready = impl.select(options.url.db, limit);
  if (ready) return connection;
  Error error = ready.error();
  // A transport failure says "URL: timed out after 2s"; before the first
  // command, the user is better told that connecting failed.
  if (error.code == Error::Code::unreachable || error.code == Error::Code::interrupted) {
    error.message = "cannot connect to " + error.message;
  }
  return std::unexpected(error);
}

Result<Reply> Connection::command(std::span<const std::string> args, Deadline deadline) {
  return checked(m_impl->call(args, TimeLimit::until(deadline)));
}

Result<Reply> Connection::command(std::initializer_list<std::string_view> args) {
  const std::vector<std::string> owned(args.begin(), args.end());
  return command(owned, Clock::now() + m_impl->command_timeout);
}

Result<std::vector<Reply>> Connection::pipeline(
    const std::vector<std::vector<std::string>>& commands, Deadline deadline) {
  if (commands.empty()) return {};
  std::string request;
  for (const auto& args : commands) request += format_command(args);
  return m_impl->exchange(request, commands.size(), TimeLimit::until(deadline));
}

Result<Reply> Connection::eval(const Script& script, std::span<const std::string> keys,
                               std::span<const std::string> args, Deadline deadline) {
  const TimeLimit limit = TimeLimit::until(deadline);
  std::vector<std::string> command{"EVALSHA", script.sha1, std::to_string(keys.size())};
  command.insert(command.end(), keys.begin(), keys.end());
  command.insert(command.end(), args.begin(), args.end());
  auto reply = m_impl->call(command, limit);
  if (reply && reply->is_error() && reply->str.starts_with("NOSCRIPT")) {
    // The script cache is empty after a restart, a failover or SCRIPT FLUSH;
    // EVAL runs the script and caches it again for the next EVALSHA.
    command[0] = "EVAL";
    command[1] = script.body;
    reply = m_impl->call(command, limit);
  }
  return checked(std::move(reply));
}

void Connection::set_interrupt_fd(int fd) {
  if (m_impl->transport) m_impl->transport->set_interrupt_fd(fd);
}

const std::string& Connection::describe() const {
  return m_impl->name;
}

Millis Connection::command_timeout() const {
  return m_impl->command_timeout;
}

Error classify_server_error(std::string_view message) {
  // Redis 6+ says WRONGPASS, NOAUTH or NOPERM; older servers "ERR invalid
  // password"; some refusals are an ERR with their own words. Everything
  // else (WRONGTYPE, OOM, READONLY, BUSY, LOADING, MOVED, NOSCRIPT, script
  // errors, ...) is the server refusing the command, and its message says why.
  const std::string_view prefix = message.substr(0, message.find(' '));
  const bool auth =
      prefix == "WRONGPASS" || prefix == "NOAUTH" || prefix == "NOPERM" ||
      message.find("invalid password") != std::string_view::npos ||
      message.find("invalid username-password pair") != std::string_view::npos ||
      // Redis 7.0 words an ACL refusal inside a script this way.
      message.find("user executing the script can't run this command") != std::string_view::npos ||
      message.find("No permissions to") != std::string_view::npos ||
      // Redis 7 refuses a long command (our EVALSHA) from a client that has
      // not authenticated before it would answer NOAUTH.
      message.find("unauthenticated multibulk") != std::string_view::npos;
  return Error{auth ? Error::Code::auth : Error::Code::server, std::string(message)};
}

}  // namespace rlock::redis
