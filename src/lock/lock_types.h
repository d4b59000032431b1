#pragma once
/// The values the lock protocol speaks in: what is asked (Request), what is
/// granted (Grant, Attempt) and what status shows (LockView and its parts).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/duration.h"

namespace rlock::lock {

/// Who holds or waits: shown by status, never used for decisions.
struct Identity {
  std::string owner;  // --owner, default user@host
  std::string host;
  long pid = 0;
  std::string command;
};

struct Request {
  std::string name;
  Millis ttl{30'000};
  bool shared = false;
  int limit = 1;  // semaphore size; every user of a lock must agree
  Identity who;
};

struct Grant {
  std::string token;
  std::int64_t fence = 0;
};

struct HolderView {
  std::string id;    // short id, never the token
  std::string mode;  // exclusive, shared or semaphore
  std::int64_t fence = 0;
  Identity who;
  Millis age{0};
  Millis ttl_left{0};
  /// False when the holder's record (PREFIX{NAME}:i) is missing (deleted,
  /// or evicted): its mode, owner, fence and age are unknown; age is 0.
  bool recorded = true;
};

struct WaiterView {
  int position = 0;  // 1 = next
  std::string id;
  std::string mode;
  Identity who;
  Millis waiting{0};
  bool recorded = true;  ///< as HolderView's: false, waiting is unknown (0)
};

/// One forced release. `by` and `acl_user` are what the forcing client
/// reported: whoever may write a lock's keys may also write this record.
struct AuditView {
  Millis ago{0};
  Identity by;
  std::string acl_user;  // the Redis ACL user the client was connected as
  std::vector<HolderView> evicted;
};

/// One quorum member's view of a lock (status NAME in quorum mode).
struct MemberView {
  std::string member;  // the member's URL, without a password
  /// ok: it agrees with the majority; disagrees: its holders differ;
  /// unreachable: it did not answer (problem says why).
  std::string state;
  std::vector<std::string> holders;  // short ids
  std::int64_t last_fence = 0;
  std::string problem;
};

struct LockView {
  std::string name;
  int limit = 1;
  std::int64_t last_fence = 0;
  std::vector<HolderView> holders;
  std::vector<WaiterView> waiters;
  std::vector<AuditView> forced;  // the last forced releases, newest first
  /// Set when the lock's keys could not be read as a lock (a foreign key at
  /// its name, a malformed reply): the server's message. Only list() returns
  /// such views, so that one broken lock does not hide the others.
  std::string problem;
  /// Quorum mode: every member's view, in the order of the URLs.
  std::vector<MemberView> members;
};

/// The answer to one try: held, or busy with our place in the queue.
struct Attempt {
  bool acquired = false;
  std::int64_t fence = 0;
  int position = 0;  // in the queue; 0 = not queued
  std::optional<HolderView> holder;
};

/// How long a waiter's place in the queue lasts without a refresh: a killed
/// waiter stops blocking the ones behind it after at most this long.
inline constexpr Millis k_waiter_lease{3000};

}  // namespace rlock::lock
