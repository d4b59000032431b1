#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "lock/lock.h"

namespace rlock::lock {
namespace {

LockView view(std::string name, std::int64_t fence) {
  LockView v;
  v.name = std::move(name);
  v.last_fence = fence;
  return v;
}

TEST(ListingSort, SortsByNameAndKeepsEachViewWhole) {
  // Names past the small-string buffer too: their characters move with them.
  Listing views;
  for (int k = 0; k < 200; ++k)
    views.push_back(view(std::to_string(k * 7919 % 200) + (k % 3 ? "" : "-a-longer-name"), k));
  std::mt19937 shuffle(42);
  std::shuffle(views.begin(), views.end(), shuffle);
  std::vector<std::pair<std::string, std::int64_t>> expected;
  for (const auto& v : views) expected.emplace_back(v.name, v.last_fence);
  std::sort(expected.begin(), expected.end());
  sort_by_name(views);
  ASSERT_EQ(views.size(), expected.size());
  for (std::size_t k = 0; k < views.size(); ++k) {
    EXPECT_EQ(views[k].name, expected[k].first);
    EXPECT_EQ(views[k].last_fence, expected[k].second);
  }
}

TEST(ListingSort, ListsANameReadTwiceOnceAsFirstRead) {
  Listing views{view("b", 1), view("a", 2), view("b", 3), view("c", 4), view("a", 5)};
  sort_by_name(views);
  ASSERT_EQ(views.size(), 3U);
  EXPECT_EQ(views[0].name, "a");
  EXPECT_EQ(views[0].last_fence, 2);
  EXPECT_EQ(views[1].name, "b");
  EXPECT_EQ(views[1].last_fence, 1);
  EXPECT_EQ(views[2].name, "c");
}

TEST(ListingSort, ManyNamesReadTwiceKeepTheirFirstRead) {
  // Enough views that std::sort does not fall back to insertion sort.
  Listing views;
  for (int k = 0; k < 300; ++k) views.push_back(view(std::to_string(k * 37 % 150), k));
  sort_by_name(views);
  ASSERT_EQ(views.size(), 150U);
  for (const auto& v : views) EXPECT_LT(v.last_fence, 150) << v.name;
}

TEST(ListingSort, EmptyListingStaysEmpty) {
  Listing views;
  sort_by_name(views);
  EXPECT_TRUE(views.empty());
}

}  // namespace
}  // namespace rlock::lock
