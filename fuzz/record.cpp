// Fuzz target: the lock-record decoder ("fence\nsince\nmode\nttl\nblob", the
// blob being netstrings of the holder's identity) and the audit list, which
// status, list and the eviction reports apply to whatever the server stored
// (src/lock/record.h).
#include "lock/record.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  namespace lk = rlock::lock;
  auto record = lk::parse_record(text);
  (void)lk::parse_identity(text);
  // A record that decoded must render: the holder view is what status prints,
  // whatever times the server claims.
  for (std::int64_t now : {std::int64_t{0}, lk::k_max_time_ms, INT64_MIN, INT64_MAX}) {
    auto view = lk::holder_from("id", record, now, now, 2);
    if (view.age.count() < 0 || view.ttl_left.count() < 0) __builtin_trap();
    (void)lk::parse_audit(text, now, 1);
  }
  return 0;
}
