#pragma once
/// `status` of many locks by pipelined plain reads instead of one run of the
/// lock script per lock: the server's share of a listing was the script
/// (~57 us a lock), where a read costs a microsecond or two. The reads are
/// the ones the status operation of lock.lua makes, and their replies are
/// turned into the very reply that operation would give, so decode_status,
/// and so the output, cannot tell the two apart.
///
/// Only what can be reproduced exactly is: a lock whose reads show anything
/// unusual (an error reply, a meta key that is absent or has no limit, a
/// counter or a score that is not a plain integer, which Lua's tonumber
/// would read its own way) is "for the script", and the caller runs the
/// status operation for it, which answers as it always did (broken,
/// foreign, MOVED...).
///
/// Two rounds per lock: the first reads its sets and counters, the second
/// the records of the live holders and waiters it found (and the waiters'
/// leases). The caller pipelines both with other locks' reads, so neither
/// waits for the other's round trip. Only commands of the documented
/// minimum ACL are used (TIME, HGET, ZRANGE, GET).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redis/reply.h"

namespace rlock::backend::status_reads {

/// The server's time in ms from a TIME reply, as the script computes `now`.
std::optional<std::int64_t> now_of(const redis::Reply& time);

/// How many commands first_round() appends for one lock.
inline constexpr std::size_t k_first_round = 6;

/// Appends the first round's reads of one lock, as RESP (one buffer for a
/// whole batch, no string per argument); `base` as lock::base_key gives it
/// (each key is the base and one letter, as in lock::lock_keys).
void first_round(std::string_view base, std::string& out);

/// One lock between the two rounds.
struct Pending {
  std::int64_t now = 0;
  std::int64_t limit = 1;
  std::int64_t last_fence = 0;
  std::string audit;
  /// Live holders, H's then S's, in the sets' order: hash and ttl.
  std::vector<std::pair<std::string, std::int64_t>> holders;
  /// Every queued hash, in queue order (whether its lease is live is known
  /// after the second round).
  std::vector<std::string> queued;
};

/// The first round's replies of one lock (k_first_round of them) read as the
/// script would, or nullopt: for the script. Their strings are moved out.
std::optional<Pending> read_first(std::span<redis::Reply> replies, std::int64_t now);

/// Appends the second round's reads of one lock, as RESP: the record of each
/// live holder, and when someone is queued, the waiter leases and their
/// records. Returns how many commands it appended.
std::size_t second_round(const Pending& lock, std::string_view base, std::string& out);

/// The status reply the script would give, from the second round's replies
/// of this lock (as many as second_round returned; their strings are moved
/// out), or nullopt: for the script.
std::optional<redis::Reply> finish(Pending lock, std::span<redis::Reply> replies);

}  // namespace rlock::backend::status_reads
