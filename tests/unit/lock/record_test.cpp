#include "lock/record.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace rlock::lock {
namespace {

TEST(Record, DecodesWhatTheScriptStores) {
  const std::string blob = identity_blob({"ann@h1", "h1", 4242, "deploy.sh"});
  const Record record = parse_record("7\n1000\nexclusive\n30000\n" + blob);
  EXPECT_EQ(record.fence, 7);
  EXPECT_EQ(record.since_ms, 1000);
  EXPECT_EQ(record.mode, "exclusive");
  EXPECT_EQ(record.who.owner, "ann@h1");
  EXPECT_EQ(record.who.pid, 4242);
  EXPECT_EQ(record.who.command, "deploy.sh");
}

TEST(Record, GarbageDecodesToAnEmptyRecordNotAnError) {
  for (const char* text : {"", "\n\n\n", "x\ny\nz\nw\n3:abc", "1\n2\n3"}) {
    const Record record = parse_record(text);
    EXPECT_EQ(record.fence, 0) << text;
    EXPECT_TRUE(record.who.owner.empty()) << text;
  }
}

TEST(Record, AHolderWithoutItsRecordHasNoAgeRatherThanFiftyYears) {
  const Record missing = parse_record("");
  EXPECT_FALSE(missing.parsed);
  const HolderView view = holder_from("id", missing, 1'795'000'000'000'000, 5000, 1);
  EXPECT_FALSE(view.recorded);
  EXPECT_EQ(view.age.count(), 0);
  EXPECT_EQ(view.ttl_left.count(), 5000);
  const HolderView kept =
      holder_from("id", parse_record("7\n1000\nexclusive\n30000\n"), 4000, 0, 1);
  EXPECT_TRUE(kept.recorded);
  EXPECT_EQ(kept.age.count(), 3000);
}

TEST(Record, ForgedNumbersAreClampedBeforeArithmetic) {
  const Record record = parse_record("-5\n-9223372036854775808\nexclusive\n0\n");
  EXPECT_EQ(record.fence, 0);
  EXPECT_EQ(record.since_ms, 0);
  const HolderView view = holder_from("id", record, INT64_MIN, INT64_MAX, 1);
  EXPECT_GE(view.age.count(), 0);
  EXPECT_EQ(view.ttl_left.count(), k_max_time_ms);
  EXPECT_EQ(elapsed(0, INT64_MAX).count(), 0) << "a since in the future is no age, not an overflow";
  EXPECT_EQ(small_int(INT64_MAX, 0), INT32_MAX);
  EXPECT_EQ(to_int("99999999999999999999"), 0);
  EXPECT_EQ(to_int("12abc"), 0);
}

TEST(Record, SemaphoreHoldersAreShownAsSuch) {
  EXPECT_EQ(mode_shown("exclusive", 3), "semaphore");
  EXPECT_EQ(mode_shown("exclusive", 1), "exclusive");
  EXPECT_EQ(mode_shown("shared", 1), "shared");
}

}  // namespace
}  // namespace rlock::lock
