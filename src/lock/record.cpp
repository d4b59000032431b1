#include "lock/record.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "lock/keys.h"

namespace rlock::lock {

// Every number read from the server is data that anyone who may write the
// lock's keys can forge, so each is clamped into the range its use can take
// before any arithmetic: no subtraction can overflow, no cast can wrap.

namespace {
std::int64_t clamped(std::int64_t value, std::int64_t lo, std::int64_t hi) {
  return std::clamp(value, lo, hi);
}
}  // namespace

std::int64_t time_ms(std::int64_t value) {
  return clamped(value, 0, k_max_time_ms);
}

/// How long ago `since` was at server time `now`; never negative.
Millis elapsed(std::int64_t now, std::int64_t since) {
  return Millis(std::max<std::int64_t>(0, time_ms(now) - time_ms(since)));
}

int small_int(std::int64_t value, int lo) {
  return static_cast<int>(clamped(value, lo, std::numeric_limits<int>::max()));
}

/// A decimal integer; 0 for anything else (garbage, out of range).
std::int64_t to_int(std::string_view text) {
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return 0;
  return value;
}

Result<std::int64_t> integer_of(const redis::Reply& reply) {
  if (reply.type == redis::Reply::Type::integer) return reply.integer;
  if (reply.type == redis::Reply::Type::string) return to_int(reply.str);
  return fail(Error::Code::protocol, "unexpected reply from the lock script (expected a number)");
}

Identity parse_identity(std::string_view blob) {
  Identity who;
  auto fields = parse_netstrings(blob);
  if (!fields || fields->size() < 4) return who;
  who.owner = (*fields)[0];
  who.host = (*fields)[1];
  // status compares it with our ancestors' pids (pid_t): keep it an int.
  who.pid = small_int(to_int((*fields)[2]), 0);
  who.command = (*fields)[3];
  return who;
}

std::string identity_blob(const Identity& who) {
  return netstrings({who.owner, who.host, std::to_string(who.pid), who.command});
}

Record parse_record(std::string_view text) {
  Record record;
  std::string_view parts[4];
  for (auto& part : parts) {
    auto nl = text.find('\n');
    if (nl == std::string_view::npos) return record;
    part = text.substr(0, nl);
    text.remove_prefix(nl + 1);
  }
  record.fence = std::max<std::int64_t>(0, to_int(parts[0]));
  record.since_ms = time_ms(to_int(parts[1]));
  record.mode = std::string(parts[2]);
  record.ttl_ms = std::max<std::int64_t>(0, to_int(parts[3]));
  record.who = parse_identity(text);
  record.parsed = true;
  return record;
}

/// The mode to show: the script records a semaphore's holders as exclusive
/// (they exclude nobody but the N+1st), the lock's limit says which it is.
std::string mode_shown(const std::string& mode, std::int64_t limit) {
  return mode == "exclusive" && limit > 1 ? "semaphore" : mode;
}

/// `now_ms` is the server's time of the reply that carried the record.
HolderView holder_from(std::string id, const Record& record, std::int64_t now_ms,
                       std::int64_t ttl_ms, std::int64_t limit) {
  // Without its record, the time since 1970 is no age.
  return HolderView{std::move(id),
                    mode_shown(record.mode, limit),
                    record.fence,
                    record.who,
                    record.parsed ? elapsed(now_ms, record.since_ms) : Millis(0),
                    Millis(time_ms(ttl_ms)),
                    record.parsed};
}

/// The audit key: netstrings of entries, newest first, each netstrings of
/// now, the forcing client's identity, its ACL user, then id and record of
/// each evicted holder (see lock.lua). Unreadable entries are skipped.
std::vector<AuditView> parse_audit(std::string_view text, std::int64_t now, std::int64_t limit) {
  std::vector<AuditView> entries;
  auto list = parse_netstrings(text);
  if (!list) return entries;
  // Older than this, an entry is history the script drops at the next force.
  constexpr std::int64_t k_audit_ms = std::int64_t{24} * 3600 * 1000;
  for (const auto& entry : *list) {
    auto fields = parse_netstrings(entry);
    if (!fields || fields->size() < 3) continue;
    AuditView audit;
    audit.ago = elapsed(now, to_int((*fields)[0]));
    if (audit.ago.count() >= k_audit_ms) continue;
    audit.by = parse_identity((*fields)[1]);
    audit.acl_user = (*fields)[2];
    for (size_t k = 3; k + 1 < fields->size(); k += 2)
      audit.evicted.push_back(
          holder_from((*fields)[k], parse_record((*fields)[k + 1]), now, 0, limit));
    entries.push_back(std::move(audit));
  }
  return entries;
}

}  // namespace rlock::lock
