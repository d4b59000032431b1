// Fuzz target: the lock-record decoder ("fence\nsince\nmode\nttl\nblob", the
// blob being netstrings of the holder's identity) that status, list and the
// eviction reports apply to whatever the server stored.
//
// The decoder is private to src/lock/lock.cpp (an anonymous namespace), so
// this target compiles that file into itself rather than widening its
// interface for a test; the archive's copy of lock.cpp is then never linked.
#include "lock/lock.cpp"  // NOLINT(bugprone-suspicious-include)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto record = rlock::lock::parse_record(text);
  auto who = rlock::lock::parse_identity(text);
  // A record that decoded must render: the holder view is what status prints.
  auto view = rlock::lock::holder_from("id", record, 0, rlock::Millis(0));
  (void)view;
  (void)who;
  return 0;
}
