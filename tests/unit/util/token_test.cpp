#include "util/token.h"

#include <gtest/gtest.h>

#include "util/sha1.h"

namespace rlock {
namespace {

TEST(Sha1, MatchesTheStandardTestVector) {
  // FIPS 180 "abc"; redis.sha1hex gives the same digits, which is what lets
  // the client name the wake list the script created from a token's hash.
  EXPECT_EQ(sha1_hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}

TEST(Token, IsStoredAsItsHashAndShownAsItsPrefix) {
  auto token = new_token();
  ASSERT_TRUE(token);
  EXPECT_TRUE(looks_like_token(*token));
  EXPECT_EQ(token_hash(*token), sha1_hex(*token));
  EXPECT_EQ(token_hash(*token).size(), 40u);
  EXPECT_EQ(short_id(*token), token_hash(*token).substr(0, 8));
  EXPECT_EQ(token_hash(*token).find(*token), std::string::npos);
}

TEST(Token, TwoTokensDiffer) {
  auto a = new_token(), b = new_token();
  ASSERT_TRUE(a && b);
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace rlock
