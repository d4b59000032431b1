#pragma once
/// The environment of the supervised command: the caller's, plus what the
/// command may use to identify its hold, minus every secret rlock was given.
///
/// RLOCK_NAME, RLOCK_TOKEN and RLOCK_FENCE describe the innermost hold.
/// RLOCK_HELD lists every hold of the enclosing runs, outermost first, this
/// one last: `ID:NAME,ID:NAME,...`, ID being the holder's short id (as
/// status shows it, never the token) and NAME the lock name with `%` and `,`
/// percent-encoded. A nested `rlock run` of any of them runs its command at
/// once instead of waiting for itself (A -> B -> A).
/// RLOCK_DEADLINES lists the descriptors of the runs' deadline pages, so
/// that a nested run's guardian kills its command by the enclosing leases'
/// ends too.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlock::supervise {

/// What the command learns about the lock it runs under.
struct HoldInfo {
  std::string name;
  std::string token;
  std::int64_t fence = 0;
  /// This run's deadline page, which the command inherits (-1: none).
  int deadline_fd = -1;
};

/// Variables that are secrets in themselves: never passed on.
inline constexpr std::string_view k_secret_variables[] = {"RLOCK_PASSWORD", "REDISCLI_AUTH",
                                                          "RLOCK_SENTINEL_PASSWORD"};
/// Variables holding URL lists that may carry a password: passed on with the
/// password removed, so a nested `rlock run` still reaches the same server
/// (and asks for the password the usual ways) instead of silently using the
/// default one.
inline constexpr std::string_view k_url_variables[] = {"RLOCK_URL", "REDIS_URL"};

/// One entry of RLOCK_HELD.
struct HeldLock {
  std::string id;  // short_id() of the holder's token
  std::string name;
  bool operator==(const HeldLock&) const = default;
};

/// RLOCK_HELD's value for `held`.
std::string format_held(const std::vector<HeldLock>& held);

/// The entries of an RLOCK_HELD value; malformed entries are skipped (the
/// variable is only a hint: every entry is checked with the server).
std::vector<HeldLock> parse_held(std::string_view value);

/// A comma-separated URL list with every password removed; empty when an
/// entry cannot be parsed and might hide one (the variable is then dropped).
std::string without_passwords(std::string_view url_list);

/// `parent` ("NAME=VALUE" entries) with secrets removed, RLOCK_NAME,
/// RLOCK_TOKEN and RLOCK_FENCE set (replacing any inherited ones), this
/// hold appended to the inherited RLOCK_HELD, and its deadline page's
/// descriptor to the inherited RLOCK_DEADLINES (the enclosing runs' pages,
/// outermost first: see Guardian).
std::vector<std::string> child_environment(const std::vector<std::string>& parent,
                                           const HoldInfo& hold);

/// The current process environment as "NAME=VALUE" entries.
std::vector<std::string> process_environment();

}  // namespace rlock::supervise
