#include "lock/protocol.h"

#include <fmt/format.h>

#include <algorithm>

#include "lock/record.h"
#include "redis/server_error.h"

namespace rlock::lock {

namespace {

Error unexpected_reply(std::string_view what = "") {
  return Error{Error::Code::protocol, fmt::format("unexpected {}reply from the lock script", what),
               redis::ServerError::none};
}

bool granted(const redis::Reply& reply) {
  return reply.type == redis::Reply::Type::array && !reply.elements.empty() &&
         integer_of(reply.elements[0]).value_or(0) == 1;
}

bool extended(const redis::Reply& reply) {
  return integer_of(reply).value_or(0) > 0;
}

}  // namespace

Millis replication_timeout(Millis ttl) {
  return std::clamp(ttl / 10, Millis(1), Millis(1000));
}

Call acquire_call(const Request& request, const std::string& token, bool enqueue) {
  return Call{
      {"acquire", token, request.shared ? "shared" : "exclusive", std::to_string(request.limit),
       std::to_string(request.ttl.count()), identity_blob(request.who), enqueue ? "1" : "0",
       std::to_string(k_waiter_lease.count())},
      replication_timeout(request.ttl),
      granted};
}

Result<Attempt> decode_attempt(const Request& request, const redis::Reply& reply) {
  const auto& e = reply.elements;
  if (reply.type != redis::Reply::Type::array || e.size() < 2)
    return std::unexpected(unexpected_reply());
  auto state = integer_of(e[0]);
  auto second = integer_of(e[1]);
  if (!state || !second) return std::unexpected(unexpected_reply());
  if (*state == -1)
    return fail(Error::Code::usage,
                fmt::format("lock '{}' is used with --limit {}, not --limit {}; every user of a "
                            "lock must give the same limit",
                            request.name, *second, request.limit));
  Attempt attempt;
  if (*state == 1) {
    attempt.acquired = true;
    attempt.fence = *second;
    return attempt;
  }
  attempt.position = small_int(*second, 0);
  if (e.size() >= 4 && !e[2].str.empty()) {
    auto record = parse_record(e[2].str);
    // The holder's age is measured against the server's clock of this reply.
    auto now = e.size() >= 5 ? integer_of(e[4]).value_or(record.since_ms) : record.since_ms;
    attempt.holder = holder_from("", record, now, integer_of(e[3]).value_or(0), request.limit);
  }
  return attempt;
}

Call renew_call(const std::string& token, Millis ttl) {
  // A renewal with ttl 0 keeps the lease it was acquired with; WAIT's
  // timeout then follows the default TTL's tenth, capped the same way.
  return Call{{"renew", token, std::to_string(ttl.count())},
              replication_timeout(ttl.count() > 0 ? ttl : Millis(10'000)),
              extended};
}

Result<Millis> decode_renew(const std::string& name, const redis::Reply& reply) {
  auto renewed = integer_of(reply);
  if (!renewed) return std::unexpected(renewed.error());
  if (*renewed <= 0)
    return fail(
        Error::Code::not_owner,
        fmt::format("lock '{}' is not held by this token (expired, released or taken)", name));
  return Millis(*renewed);
}

Call release_call(const std::string& token) {
  return Call{{"release", token}, std::nullopt};
}

Result<void> decode_release(const std::string& name, const redis::Reply& reply) {
  auto released = integer_of(reply);
  if (!released) return std::unexpected(released.error());
  if (*released != 1)
    return fail(Error::Code::not_owner,
                fmt::format("lock '{}' is not held by this token; nothing released", name));
  return {};
}

Call force_call(const std::string& holder_id, const Identity& by, const std::string& acl_user) {
  return Call{{"force", holder_id, identity_blob(by), acl_user}, std::nullopt};
}

Result<std::vector<HolderView>> decode_force(const redis::Reply& reply) {
  const auto& e = reply.elements;
  if (reply.type != redis::Reply::Type::array || e.empty())
    return std::unexpected(unexpected_reply());
  std::vector<HolderView> evicted;
  auto now = integer_of(e[0]).value_or(0);
  for (size_t k = 1; k + 1 < e.size(); k += 2) {
    auto record = parse_record(e[k + 1].str);
    evicted.push_back(holder_from(e[k].str, record, now, 0, 1));
  }
  return evicted;
}

Call status_call() {
  return Call{{"status"}, std::nullopt};
}

Result<LockView> decode_status(const std::string& name, const redis::Reply& reply) {
  const auto& e = reply.elements;
  if (reply.type != redis::Reply::Type::array || e.size() < 6 ||
      e[3].type != redis::Reply::Type::array || e[4].type != redis::Reply::Type::array)
    return std::unexpected(unexpected_reply("status "));
  auto now = integer_of(e[0]).value_or(0);
  LockView view;
  view.name = name;
  view.limit = small_int(integer_of(e[1]).value_or(1), 1);
  view.last_fence = std::max<std::int64_t>(0, integer_of(e[2]).value_or(0));
  const auto& h = e[3].elements;
  for (size_t k = 0; k + 2 < h.size(); k += 3) {
    auto record = parse_record(h[k + 2].str);
    view.holders.push_back(
        holder_from(h[k].str, record, now, integer_of(h[k + 1]).value_or(0), view.limit));
  }
  const auto& w = e[4].elements;
  for (size_t k = 0; k + 2 < w.size(); k += 3) {
    auto record = parse_record(w[k + 2].str);
    // A waiter shows the mode it asked for (a semaphore's: exclusive).
    view.waiters.push_back(WaiterView{static_cast<int>(view.waiters.size()) + 1, w[k].str,
                                      record.mode, record.who, elapsed(now, record.since_ms)});
  }
  view.forced = parse_audit(e[5].str, now, view.limit);
  return view;
}

}  // namespace rlock::lock
