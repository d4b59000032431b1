#pragma once
/// Decoding what the lock script stored and returned (records, identities,
/// the audit list), and clamping every number in it. Anyone who may write a
/// lock's keys can forge all of it, so nothing here trusts its input: every
/// decoder is total, and the fuzz target fuzz/record.cpp checks that.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lock/lock_types.h"
#include "redis/reply.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock::lock {

/// Times and durations in ms: 2^53 ms is 285,000 years, beyond any real
/// server time or lease, and far from overflow when two are subtracted.
inline constexpr std::int64_t k_max_time_ms = std::int64_t{1} << 53;

/// A server time or duration in ms, clamped into [0, k_max_time_ms].
std::int64_t time_ms(std::int64_t value);
/// How long ago `since` was at server time `now`; never negative.
Millis elapsed(std::int64_t now, std::int64_t since);
/// An int-sized count (limit, position, pid), at least `lo`.
int small_int(std::int64_t value, int lo);
/// A decimal integer; 0 for anything else (garbage, out of range).
std::int64_t to_int(std::string_view text);
/// A number from an integer or string reply; protocol error otherwise.
Result<std::int64_t> integer_of(const redis::Reply& reply);

/// netstrings of owner, host, pid, command (see lock.lua).
Identity parse_identity(std::string_view blob);
std::string identity_blob(const Identity& who);

/// A record is "fence\nsince_ms\nmode\nttl_ms\nblob" (see lock.lua).
struct Record {
  std::int64_t fence = 0;
  std::int64_t since_ms = 0;
  std::string mode;
  std::int64_t ttl_ms = 0;  ///< the TTL the holder asked for
  Identity who;
  bool parsed = false;  ///< false: no record (empty, or not one): the rest is 0
};
Record parse_record(std::string_view text);

/// The mode to show: "semaphore" for an exclusive holder of a lock whose
/// limit is above 1.
std::string mode_shown(const std::string& mode, std::int64_t limit);

/// `now_ms` is the server's time of the reply that carried the record.
HolderView holder_from(std::string id, const Record& record, std::int64_t now_ms,
                       std::int64_t ttl_ms, std::int64_t limit);

/// The audit key's entries, newest first, within 24 h; unreadable entries
/// are skipped.
std::vector<AuditView> parse_audit(std::string_view text, std::int64_t now, std::int64_t limit);

}  // namespace rlock::lock
