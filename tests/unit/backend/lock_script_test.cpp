#include <gtest/gtest.h>

#include "backend/node.h"
#include "util/sha1.h"

namespace rlock::backend {
namespace {

// The build computes the script's SHA-1 (cmake/embed_scripts.cmake); EVALSHA
// finds the script only if it is the SHA-1 of the very text EVAL sends.
TEST(LockScript, ShaFromTheBuildIsTheShaOfItsBody) {
  const auto& script = lock_script();
  EXPECT_GT(script.body.size(), 1000U);
  EXPECT_EQ(script.sha1, sha1_hex(script.body));
}

}  // namespace
}  // namespace rlock::backend
