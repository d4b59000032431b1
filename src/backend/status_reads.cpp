#include "backend/status_reads.h"

#include <algorithm>
#include <charconv>
#include <unordered_map>

#include "redis/resp.h"

namespace rlock::backend::status_reads {
namespace {

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
/// value (moved out), or `absent` for nil.
std::optional<std::string> text_or(redis::Reply& reply, std::string_view absent) {
  if (reply.is_nil()) return std::string(absent);
  if (!is_string(reply)) return std::nullopt;
  return std::move(reply.str);
}

/// A ZRANGE ... WITHSCORES reply as (member, score) pairs, members moved out.
std::optional<std::vector<std::pair<std::string, std::int64_t>>> scored(redis::Reply& reply) {
  if (reply.type != redis::Reply::Type::array || reply.elements.size() % 2 != 0)
    return std::nullopt;
  std::vector<std::pair<std::string, std::int64_t>> pairs;
  pairs.reserve(reply.elements.size() / 2);
  for (std::size_t k = 0; k < reply.elements.size(); k += 2) {
    const auto score = plain_integer(reply.elements[k + 1].str, true);
    if (!is_string(reply.elements[k]) || !score) return std::nullopt;
    pairs.emplace_back(std::move(reply.elements[k].str), *score);
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

void first_round(std::string_view base, std::string& out) {
  std::string key(base);
  key += ' ';
  const auto of = [&key](char letter) -> std::string_view {
    key.back() = letter;
    return key;
  };
  // No TYPE of the meta key: an HGET of its limit tells the same apart. The
  // script always writes the limit, so a hash without one, or no hash, is
  // the script's to answer (gone since SCAN: it checks every key's type).
  redis::append_command(out, {"HGET", of('m'), "limit"});
  redis::append_command(out, {"ZRANGE", of('h'), "0", "-1", "WITHSCORES"});
  redis::append_command(out, {"ZRANGE", of('s'), "0", "-1", "WITHSCORES"});
  redis::append_command(out, {"ZRANGE", of('q'), "0", "-1"});
  // Two GETs, not MGET: MGET reads a key of another type as nil, where the
  // script's GET fails; and the minimum ACL has +get only.
  redis::append_command(out, {"GET", of('f')});
  redis::append_command(out, {"GET", of('a')});
}

std::optional<Pending> read_first(std::span<redis::Reply> replies, std::int64_t now) {
  if (replies.size() != k_first_round) return std::nullopt;
  Pending lock;
  lock.now = now;
  // Absent (or no limit): see first_round.
  if (replies[0].is_nil()) return std::nullopt;
  const auto limit = text_or(replies[0], "");
  if (!limit) return std::nullopt;
  const auto parsed_limit = plain_integer(*limit, false);
  if (!parsed_limit) return std::nullopt;
  lock.limit = *parsed_limit;
  for (const std::size_t set : {1, 2}) {
    auto members = scored(replies[set]);
    if (!members) return std::nullopt;
    for (auto& [hash, at] : *members)
      if (at > now) lock.holders.emplace_back(std::move(hash), at - now);
  }
  auto& queue = replies[3];
  if (queue.type != redis::Reply::Type::array) return std::nullopt;
  lock.queued.reserve(queue.elements.size());
  for (auto& hash : queue.elements) {
    if (!is_string(hash)) return std::nullopt;
    lock.queued.push_back(std::move(hash.str));
  }
  const auto fence = text_or(replies[4], "0");
  auto audit = text_or(replies[5], "");
  if (!fence || !audit) return std::nullopt;
  const auto parsed_fence = plain_integer(*fence, false);
  if (!parsed_fence) return std::nullopt;
  lock.last_fence = *parsed_fence;
  lock.audit = std::move(*audit);
  return lock;
}

std::size_t second_round(const Pending& lock, std::string_view base, std::string& out) {
  std::string key(base);
  key += ' ';
  const auto of = [&key](char letter) -> std::string_view {
    key.back() = letter;
    return key;
  };
  for (const auto& [hash, left] : lock.holders) redis::append_command(out, {"HGET", of('i'), hash});
  if (lock.queued.empty()) return lock.holders.size();
  redis::append_command(out, {"ZRANGE", of('l'), "0", "-1", "WITHSCORES"});
  for (const auto& hash : lock.queued) redis::append_command(out, {"HGET", of('i'), hash});
  return lock.holders.size() + 1 + lock.queued.size();
}

std::optional<redis::Reply> finish(Pending lock, std::span<redis::Reply> replies) {
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
    std::unordered_map<std::string, std::int64_t> lease_of;
    lease_of.reserve(leases->size());
    for (const auto& [hash, lease] : *leases) lease_of.emplace(hash, lease);
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
  reply.push_back(redis::Reply::of_string(std::move(lock.audit)));
  return redis::Reply::of_array(std::move(reply));
}

}  // namespace rlock::backend::status_reads
