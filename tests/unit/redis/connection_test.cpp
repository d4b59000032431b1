#include "redis/connection.h"

#include <gtest/gtest.h>

namespace rlock::redis {
namespace {

TEST(Script, HashesBodyAsRedisDoes) {
  // SHA1 of "return 1", as `SCRIPT LOAD "return 1"` answers.
  EXPECT_EQ(Script("return 1").sha1, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
}

TEST(ClassifyServerError, AuthenticationFailuresAreAuth) {
  for (const char* message :
       {"WRONGPASS invalid username-password pair or user is disabled.",
        "NOAUTH Authentication required.", "NOPERM this user has no permissions to run the 'eval'",
        "ERR invalid password", "ERR Protocol error: unauthenticated multibulk length",
        "ERR The user executing the script can't run this command or subcommand script: ..."}) {
    EXPECT_EQ(classify_server_error(message).code, Error::Code::auth) << message;
  }
}

TEST(ClassifyServerError, OtherErrorsAreServerErrorsWithTheirMessage) {
  for (const char* message :
       {"WRONGTYPE Operation against a key holding the wrong kind of value",
        "OOM command not allowed when used memory > 'maxmemory'.",
        "READONLY You can't write against a read only replica.", "MOVED 3999 127.0.0.1:6381",
        "LOADING Redis is loading the dataset in memory", "BUSY Redis is busy running a script.",
        "NOSCRIPT No matching script.", "CLUSTERDOWN The cluster is down",
        "ERR Error running script"}) {
    const Error error = classify_server_error(message);
    EXPECT_EQ(error.code, Error::Code::server) << message;
    EXPECT_EQ(error.message, message);
  }
}

TEST(ClassifyServerError, AServerAtMaxclientsIsOutOfReach) {
  // What Redis writes to a new connection beyond maxclients, then closes it.
  const Error error = classify_server_error("ERR max number of clients reached");
  EXPECT_EQ(error.code, Error::Code::unreachable);
  EXPECT_EQ(error.message, "ERR max number of clients reached");
  // Of a kind of its own: an unreachable ERR of kind `other` is a write the
  // replicas did not acknowledge, which a waiter retries as lagging.
  EXPECT_EQ(error.server, ServerError::maxclients);
  // A Cluster node's words.
  const Error cluster =
      classify_server_error("ERR max number of clients + cluster connections reached");
  EXPECT_EQ(cluster.code, Error::Code::unreachable);
  EXPECT_EQ(cluster.server, ServerError::maxclients);
  // Only that refusal: another ERR stays a server error.
  EXPECT_EQ(classify_server_error("ERR max number of arguments").code, Error::Code::server);
}

}  // namespace
}  // namespace rlock::redis
