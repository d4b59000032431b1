#include "util/trust.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace rlock {
namespace {

struct stat file(uid_t owner, mode_t mode) {
  struct stat st {};
  st.st_uid = owner;
  st.st_mode = S_IFREG | mode;
  return st;
}

TEST(Untrusted, MineOrRootsAndNobodyElsesToWrite) {
  EXPECT_FALSE(untrusted(file(geteuid(), 0644), "CA certificate file", "ca.pem"));
  EXPECT_FALSE(untrusted(file(0, 0644), "CA certificate file", "ca.pem"));
  EXPECT_FALSE(untrusted(file(0, 0755), "CA certificate directory", "certs"));
}

TEST(Untrusted, WritableByOthersOrAnotherUsersIsRefusedWithTheFix) {
  auto group = untrusted(file(geteuid(), 0664), "CA certificate file", "ca.pem");
  ASSERT_TRUE(group);
  EXPECT_EQ(group->code, Error::Code::config);
  EXPECT_EQ(group->message,
            "refusing CA certificate file 'ca.pem': others can write it; fix: chmod go-w 'ca.pem'");
  EXPECT_TRUE(untrusted(file(0, 0646), "TLS client key", "k"));
  if (geteuid() != 12345) {
    auto other = untrusted(file(12345, 0600), "TLS client key", "k");
    ASSERT_TRUE(other);
    EXPECT_NE(other->message.find("owned by another user (uid 12345)"), std::string::npos);
  }
}

}  // namespace
}  // namespace rlock
