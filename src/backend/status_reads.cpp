#include "backend/status_reads.h"

#include <algorithm>
#include <charconv>
#include <unordered_map>

namespace rlock::backend::status_reads {
namespace {

// Key positions in lock::lock_keys.
enum Key : std::size_t { h, s, q, x, l, i, m, f, a };

// A lease is bounded by 2^53 ms in the reply, as lease_left() does; and
// 2^53 is where a Lua number stops being exact.
constexpr std::int64_t k_max_lease = std::int64_t{1} << 53;

/// A decimal integer as Redis prints an integral score or as rlock writes a
/// counter (a fence: ~1.8e15, 16 digits): digits only (a sign where
/// allowed), at most 2^53, so that it is exact as a Lua double. Anything else
/// (exponents, fractions, inf, spaces, hex, more) Lua's tonumber reads its
/// own way: nullopt.
std::optional<std::int64_t> plain_integer(std::string_view text, bool signed_ok) {
  const bool negative = signed_ok && !text.empty() && text.front() == '-';
  const std::string_view digits = negative ? text.substr(1) : text;
  if (digits.empty() || digits.size() > 16 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  std::int64_t value = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (value > k_max_lease) return std::nullopt;
  return negative ? -value : value;
}

bool is_string(const redis::Reply& reply) {
  return reply.type == redis::Reply::Type::string;
}

/// A reply to GET or HGET: nullopt for an error or anything unexpected; the
/// value, or `absent` for nil.
std::optional<std::string> text_or(const redis::Reply& reply, std::string_view absent) {
  if (reply.is_nil()) return std::string(absent);
  if (!is_string(reply)) return std::nullopt;
  return reply.str;
}

/// A ZRANGE ... WITHSCORES reply as (member, score) pairs.
std::optional<std::vector<std::pair<std::string, std::int64_t>>> scored(const redis::Reply& reply) {
  if (reply.type != redis::Reply::Type::array || reply.elements.size() % 2 != 0)
    return std::nullopt;
  std::vector<std::pair<std::string, std::int64_t>> pairs;
  pairs.reserve(reply.elements.size() / 2);
  for (std::size_t k = 0; k < reply.elements.size(); k += 2) {
    const auto score = plain_integer(reply.elements[k + 1].str, true);
    if (!is_string(reply.elements[k]) || !score) return std::nullopt;
    pairs.emplace_back(reply.elements[k].str, *score);
  }
  return pairs;
}

/// One entry of the holders or waiters array: short id, lease left, record.
void add_entry(std::vector<redis::Reply>& out, const std::string& hash, std::int64_t left,
               std::string record) {
  out.push_back(redis::Reply::of_string(hash.substr(0, 8)));
  out.push_back(redis::Reply::of_integer(std::min(left, k_max_lease)));
  out.push_back(redis::Reply::of_string(std::move(record)));
}

}  // namespace

std::optional<std::int64_t> now_of(const redis::Reply& time) {
  if (time.type != redis::Reply::Type::array || time.elements.size() != 2) return std::nullopt;
  const auto seconds = plain_integer(time.elements[0].str, false);
  const auto micros = plain_integer(time.elements[1].str, false);
  if (!seconds || !micros) return std::nullopt;
  return *seconds * 1000 + *micros / 1000;
}

void first_round(const std::vector<std::string>& keys, Commands& out) {
  out.push_back({"TYPE", keys[m]});
  out.push_back({"HGET", keys[m], "limit"});
  out.push_back({"ZRANGE", keys[h], "0", "-1", "WITHSCORES"});
  out.push_back({"ZRANGE", keys[s], "0", "-1", "WITHSCORES"});
  out.push_back({"ZRANGE", keys[q], "0", "-1"});
  // Two GETs, not MGET: MGET reads a key of another type as nil, where the
  // script's GET fails; and the minimum ACL has +get only.
  out.push_back({"GET", keys[f]});
  out.push_back({"GET", keys[a]});
}

std::optional<Pending> read_first(std::span<const redis::Reply> replies, std::int64_t now) {
  if (replies.size() != k_first_round) return std::nullopt;
  // The script checks every key's type when the meta key is not a hash
  // (gone since SCAN, or foreign): its answer, not ours.
  if (replies[0].type != redis::Reply::Type::status || replies[0].str != "hash")
    return std::nullopt;
  Pending lock;
  lock.now = now;
  const auto limit = text_or(replies[1], "1");
  if (!limit) return std::nullopt;
  const auto parsed_limit = plain_integer(*limit, false);
  if (!parsed_limit) return std::nullopt;
  lock.limit = *parsed_limit;
  for (const std::size_t set : {2, 3}) {
    const auto members = scored(replies[set]);
    if (!members) return std::nullopt;
    for (const auto& [hash, at] : *members)
      if (at > now) lock.holders.emplace_back(hash, at - now);
  }
  const auto& queue = replies[4];
  if (queue.type != redis::Reply::Type::array) return std::nullopt;
  for (const auto& hash : queue.elements) {
    if (!is_string(hash)) return std::nullopt;
    lock.queued.push_back(hash.str);
  }
  const auto fence = text_or(replies[5], "0");
  const auto audit = text_or(replies[6], "");
  if (!fence || !audit) return std::nullopt;
  const auto parsed_fence = plain_integer(*fence, false);
  if (!parsed_fence) return std::nullopt;
  lock.last_fence = *parsed_fence;
  lock.audit = *audit;
  return lock;
}

std::size_t second_round(const Pending& lock, const std::vector<std::string>& keys, Commands& out) {
  const std::size_t before = out.size();
  for (const auto& [hash, left] : lock.holders) out.push_back({"HGET", keys[i], hash});
  if (!lock.queued.empty()) {
    out.push_back({"ZRANGE", keys[l], "0", "-1", "WITHSCORES"});
    for (const auto& hash : lock.queued) out.push_back({"HGET", keys[i], hash});
  }
  return out.size() - before;
}

std::optional<redis::Reply> finish(const Pending& lock, std::span<const redis::Reply> replies) {
  const std::size_t expected =
      lock.holders.size() + (lock.queued.empty() ? 0 : 1 + lock.queued.size());
  if (replies.size() != expected) return std::nullopt;
  std::vector<redis::Reply> holders;
  holders.reserve(3 * lock.holders.size());
  std::size_t next = 0;
  for (const auto& [hash, left] : lock.holders) {
    auto record = text_or(replies[next++], "");
    if (!record) return std::nullopt;
    add_entry(holders, hash, left, std::move(*record));
  }
  std::vector<redis::Reply> waiters;
  if (!lock.queued.empty()) {
    const auto leases = scored(replies[next++]);
    if (!leases) return std::nullopt;
    const std::unordered_map<std::string, std::int64_t> lease_of(leases->begin(), leases->end());
    for (const auto& hash : lock.queued) {
      auto record = text_or(replies[next++], "");
      if (!record) return std::nullopt;
      // A waiter without a lease reads as lease 0, as in the script: not live.
      const auto found = lease_of.find(hash);
      const std::int64_t lease = found == lease_of.end() ? 0 : found->second;
      if (lease > lock.now) add_entry(waiters, hash, lease - lock.now, std::move(*record));
    }
  }
  std::vector<redis::Reply> reply;
  reply.reserve(6);
  reply.push_back(redis::Reply::of_integer(lock.now));
  reply.push_back(redis::Reply::of_integer(lock.limit));
  reply.push_back(redis::Reply::of_integer(lock.last_fence));
  reply.push_back(redis::Reply::of_array(std::move(holders)));
  reply.push_back(redis::Reply::of_array(std::move(waiters)));
  reply.push_back(redis::Reply::of_string(lock.audit));
  return redis::Reply::of_array(std::move(reply));
}

}  // namespace rlock::backend::status_reads
