#include "backend/sentinel.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/node.h"
#include "util/number.h"

namespace rlock::backend {

namespace {

/// ConnectOptions whose connect timeout also fits before `deadline`.
redis::ConnectOptions within(redis::ConnectOptions options, int interrupt_fd, Deadline deadline) {
  const auto left = std::chrono::ceil<Millis>(deadline - Clock::now());
  options.connect_timeout = std::clamp(left, Millis(1), options.connect_timeout);
  options.interrupt_fd = interrupt_fd;
  return options;
}

/// What one Sentinel said about the master: its address, that it knows no
/// such master, or an error.
struct Answer {
  std::optional<std::pair<std::string, int>> address;
  bool unknown = false;
  /// A server that does not know the SENTINEL command: a Redis data node
  /// (the URL names it as a Sentinel), its refusal as it said it.
  std::optional<std::string> not_sentinel;
  /// How many replicas the Sentinel knows of that master and does not
  /// think down (-1: it did not say).
  int replicas = -1;
};

Result<Answer> ask(redis::Connection& sentinel, const std::string& master, Deadline deadline) {
  // The replicas travel with the address, in the same round trip.
  const std::vector<std::vector<std::string>> commands{
      {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", master}, {"SENTINEL", "REPLICAS", master}};
  auto replies = sentinel.pipeline(commands, deadline);
  if (!replies) return std::unexpected(replies.error());
  auto reply = Result<redis::Reply>(std::move(replies->front()));
  if (reply->is_error())
    reply = std::unexpected(redis::server_failure(sentinel.describe(), reply->str));
  if (!reply && reply.error().code == Error::Code::server &&
      reply.error().message.find("unknown command") != std::string::npos)
    return Answer{std::nullopt, false, reply.error().message};
  if (!reply) return std::unexpected(reply.error());
  if (reply->is_nil()) return Answer{std::nullopt, true, std::nullopt};
  const auto& e = reply->elements;
  if (reply->type != redis::Reply::Type::array || e.size() != 2 || e[0].str.empty())
    return fail(Error::Code::protocol,
                fmt::format("{}: unexpected reply to SENTINEL GET-MASTER-ADDR-BY-NAME",
                            sentinel.describe()));
  auto port = parse_integer(e[1].str, 1, 65535);
  if (!port)
    return fail(Error::Code::protocol, fmt::format("{}: the master's port '{}' is not a port",
                                                   sentinel.describe(), e[1].str));
  // A Sentinel whose ACL refuses SENTINEL REPLICAS leaves the count unsaid.
  return Answer{std::make_pair(e[0].str, static_cast<int>(*port)), false, std::nullopt,
                live_replicas(replies->back())};
}

/// The first word of ROLE: "master", "slave" or "sentinel".
Result<std::string> role_of(redis::Connection& node, Deadline deadline) {
  const std::vector<std::string> args{"ROLE"};
  auto reply = node.command(args, deadline);
  if (!reply) return std::unexpected(reply.error());
  if (reply->type != redis::Reply::Type::array || reply->elements.empty())
    return fail(Error::Code::protocol,
                fmt::format("{}: unexpected reply to ROLE", node.describe()));
  return reply->elements[0].str;
}

/// Why the master the Sentinels named failed us, naming it: the Sentinels
/// answered, the master did not (a server at its maxclients says only "ERR
/// max number of clients reached", which read as the Sentinels' fault).
std::string master_problem(const Error& error, const redis::Url& master) {
  const std::string named = master.redacted();
  if (error.message.find(named) != std::string::npos) return error.message;
  return fmt::format("the master they name, {}: {}", named, error.message);
}

/// A Sentinel's refusal of our credentials, worded as one: the password it
/// wants is the Sentinels' (--sentinel-password-file), not the master's.
Error sentinels_auth_error(Error error, const redis::Url& sentinel) {
  if (error.server == redis::ServerError::noauth)
    error.message = fmt::format(
        "{} (a Sentinel) needs a password: set RLOCK_SENTINEL_PASSWORD or "
        "--sentinel-password-file",
        sentinel.redacted());
  else if (error.message.find("NOPERM") != std::string::npos)
    // The password was taken; the Sentinel's ACL lacks a command.
    error.message = fmt::format("{} (a Sentinel's ACL)", error.message);
  else if (error.message.find("TLS") == std::string::npos)
    // (A TLS failure, also 77, is no password's: its own words say what.)
    error.message = fmt::format(
        "{} (the Sentinels' password is --sentinel-password-file or "
        "RLOCK_SENTINEL_PASSWORD)",
        error.message);
  return error;
}

}  // namespace

int live_replicas(const redis::Reply& reply) {
  if (reply.type != redis::Reply::Type::array) return -1;
  int live = 0;
  for (const auto& replica : reply.elements) {
    std::string_view flags;
    const auto& fields = replica.elements;
    for (std::size_t k = 0; k + 1 < fields.size(); k += 2) {
      if (fields[k].str == "flags") flags = fields[k + 1].str;
    }
    const auto has = [&](std::string_view flag) { return flags.find(flag) != flags.npos; };
    if (has("s_down")) continue;
    // Not the link status the Sentinel last heard: after a failover it
    // still said "ok" for the replica just promoted and "err" for the old
    // master rejoining, which did acknowledge (probe P).
    if (has("promoted") || !has("disconnected")) ++live;
  }
  return live;
}

Result<redis::Connection> connect_master(const Target& target, int interrupt_fd, Deadline deadline,
                                         Discovery& discovery,
                                         std::optional<redis::Connection> current,
                                         std::optional<redis::Connection>* kept) {
  const auto& sentinels = target.sentinels;
  std::vector<std::string> problems;
  std::size_t answered = 0, unknown = 0;
  std::vector<std::string> not_sentinels;
  // How many Sentinels refused our credentials: only all of them is an
  // auth error (77). One refusing while the others are out of reach is an
  // outage like any other, which a waiter rides out (it would make a
  // short outage of the good ones fatal).
  std::optional<Error> auth_error;
  std::size_t auth_refusals = 0;
  // A Sentinel that failed us (connecting, or asking): why, for the message.
  const auto failed = [&](Error error, const redis::Url& sentinel) {
    if (error.code == Error::Code::auth) {
      error = sentinels_auth_error(std::move(error), sentinel);
      auth_error = error, ++auth_refusals;
    }
    problems.push_back(std::move(error.message));
  };
  for (std::size_t k = 0; k < sentinels.size(); ++k) {
    if (Clock::now() >= deadline) break;
    const std::size_t index = (discovery.first + k) % sentinels.size();
    // Each Sentinel gets its share of what is left, so that one that
    // accepts connections and never answers (hung, or a host gone with
    // its connections still routed) cannot take the others' time: with
    // three, a hung first one costs a third of the timeout, not all of it.
    const Deadline by = Clock::now() + (deadline - Clock::now()) / (sentinels.size() - k);
    // The Sentinel that answered last time, over the connection it
    // answered on (one closed since is opened again by the question).
    const bool again = k == 0 && kept && *kept;
    auto sentinel = again ? Result<redis::Connection>(std::move(**kept))
                          : redis::Connection::connect(within(sentinels[index], interrupt_fd, by));
    if (kept) kept->reset();
    if (again) sentinel->set_interrupt_fd(interrupt_fd);
    if (!sentinel) {
      if (sentinel.error().code == Error::Code::interrupted) return sentinel;
      failed(sentinel.error(), sentinels[index].url);
      continue;
    }
    auto answer = ask(*sentinel, target.master_name, by);
    if (!answer) {
      if (answer.error().code == Error::Code::interrupted) return std::unexpected(answer.error());
      failed(answer.error(), sentinels[index].url);
      continue;
    }
    ++answered;
    if (answer->not_sentinel) {
      not_sentinels.push_back(sentinel->describe());
      continue;
    }
    if (answer->unknown) {
      ++unknown;
      continue;
    }
    // The master's credentials, TLS settings and database; the Sentinel's
    // address for it.
    redis::ConnectOptions options = target.server;
    options.url.sentinel = false;
    options.url.master_name.clear();
    options.url.host = answer->address->first;
    options.url.port = answer->address->second;
    options.url.hosts = {redis::Endpoint{options.url.host, options.url.port}};
    // Half of what is left at most: a master that hangs is failing over,
    // and the Sentinels will name its successor (failover_try_deadline).
    const Deadline master_by = failover_try_deadline(deadline);
    // The master named before, at the same address: its connection again
    // (once: if its ROLE fails, the next Sentinel's answer gets a fresh
    // connection, and with none left the next question does).
    const bool same = current && current->describe() == options.url.redacted();
    auto master = same ? Result<redis::Connection>(std::move(*current))
                       : redis::Connection::connect(within(options, interrupt_fd, master_by));
    if (same) {
      current.reset();
      master->set_interrupt_fd(interrupt_fd);
    }
    if (!master) {
      if (master.error().code == Error::Code::interrupted) return master;
      // Wrong master credentials are the user's to fix, not a failover.
      if (master.error().code == Error::Code::auth) return master;
      problems.push_back(master_problem(master.error(), options.url));
      continue;
    }
    // A Sentinel may still name the old master for a moment after a
    // failover, or one that came back as a replica: only a node that says
    // it is the master is used.
    auto role = role_of(*master, master_by);
    if (!role) {
      if (role.error().code == Error::Code::interrupted || role.error().code == Error::Code::auth)
        return std::unexpected(role.error());
      problems.push_back(master_problem(role.error(), options.url));
      continue;
    }
    if (*role != "master") {
      problems.push_back(fmt::format("{} is a {}, not the master (a failover in progress?)",
                                     master->describe(), *role));
      continue;
    }
    discovery.first = index;
    discovery.no_sentinel = false;
    discovery.found = true;
    discovery.replicas = answer->replicas;
    if (kept) kept->emplace(std::move(*sentinel));
    return std::move(*master);
  }
  discovery.no_sentinel = answered == 0;
  // Every server that answered is a data node: the URL is not a Sentinel
  // URL's, which no retry or failover will change.
  if (answered > 0 && not_sentinels.size() == answered)
    return fail(
        Error::Code::config,
        fmt::format("{} {} not a Sentinel (it does not know the SENTINEL command): a "
                    "redis-sentinel:// URL lists the Sentinels (default port 26379), "
                    "a redis:// URL a server",
                    fmt::join(not_sentinels, ", "), not_sentinels.size() == 1 ? "is" : "are"));
  if (answered > 0 && unknown + not_sentinels.size() == answered && unknown > 0 && discovery.found)
    return fail(Error::Code::unreachable,
                fmt::format("no Sentinel knows a master named '{}' any more ({} of {} asked "
                            "answered): reconfigured?",
                            target.master_name, answered, sentinels.size()));
  if (answered > 0 && unknown + not_sentinels.size() == answered && unknown > 0)
    return fail(Error::Code::config,
                fmt::format("no Sentinel knows a master named '{}' ({} of {} asked answered)",
                            target.master_name, answered, sentinels.size()));
  if (auth_error && auth_refusals == sentinels.size()) {
    // Every one refused: said of them all, not of the last one asked (a
    // TLS failure, also 77, says its own words).
    if (sentinels.size() > 1 && auth_error->message.find("TLS") == std::string::npos)
      auth_error->message = fmt::format("every Sentinel refused the credentials ({} asked); {}",
                                        sentinels.size(), auth_error->message);
    return std::unexpected(*auth_error);
  }
  std::string why = problems.empty() ? std::string("no time left to ask")
                                     : fmt::format("{}", fmt::join(problems, "; "));
  return fail(
      Error::Code::unreachable,
      fmt::format("no master '{}' found through the Sentinels: {}", target.master_name, why));
}

}  // namespace rlock::backend
