#include "redis/server_error.h"

#include <gtest/gtest.h>

#include "redis/connection.h"

namespace rlock::redis {
namespace {

TEST(ServerErrorKind, NamesEachKindByItsFirstWord) {
  const std::pair<const char*, ServerError> cases[] = {
      {"MOVED 3999 127.0.0.1:6381", ServerError::moved},
      {"ASK 3999 127.0.0.1:6381", ServerError::ask},
      {"READONLY You can't write against a read only replica.", ServerError::readonly},
      {"LOADING Redis is loading the dataset in memory", ServerError::loading},
      {"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
       ServerError::busy},
      {"TRYAGAIN Multiple keys request during rehashing of slot", ServerError::tryagain},
      {"CLUSTERDOWN The cluster is down", ServerError::clusterdown},
      {"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
       ServerError::masterdown},
      {"NOAUTH Authentication required.", ServerError::noauth},
      {"ERR Protocol error: unauthenticated multibulk length", ServerError::noauth},
      {"NOSCRIPT No matching script. Please use EVAL.", ServerError::noscript},
      {"WRONGTYPE Operation against a key holding the wrong kind of value", ServerError::wrongtype},
      {"OOM command not allowed when used memory > 'maxmemory'.", ServerError::oom},
      {"UNBLOCKED force unblock from blocking operation, instance state changed (master -> "
       "replica?)",
       ServerError::unblocked},
      {"ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 "
       "if a replica is configured to be writable (which is not the default) writes to "
       "replicas are just local and are not propagated.",
       ServerError::readonly},
      {"ERR Error running script", ServerError::other},
      {"NOPERM this user has no permissions", ServerError::other},
      {"BUSYKEY Target key name already exists.", ServerError::other},
      {"LOADINGX not a kind", ServerError::other},
      {"", ServerError::other},
  };
  for (const auto& [message, kind] : cases) EXPECT_EQ(server_error_kind(message), kind) << message;
}

TEST(ServerErrorKind, OnlyLoadingBusyTryagainAndMasterdownAreTransient) {
  for (ServerError kind :
       {ServerError::loading, ServerError::busy, ServerError::tryagain, ServerError::masterdown})
    EXPECT_TRUE(is_transient(kind)) << server_error_word(kind);
  for (ServerError kind :
       {ServerError::none, ServerError::moved, ServerError::ask, ServerError::readonly,
        ServerError::clusterdown, ServerError::noauth, ServerError::noscript,
        ServerError::wrongtype, ServerError::oom, ServerError::unblocked, ServerError::other})
    EXPECT_FALSE(is_transient(kind)) << server_error_word(kind);
}

TEST(ServerErrorKind, ErrorsCarryTheirKind) {
  EXPECT_EQ(classify_server_error("LOADING Redis is loading").server, ServerError::loading);
  EXPECT_EQ(classify_server_error("WRONGTYPE Operation").server, ServerError::wrongtype);
  EXPECT_EQ(Error{}.server, ServerError::none);
}

TEST(ServerFailure, AWaitRefusedByADemotedMasterIsReadonlyInOneSentence) {
  const Error error = server_failure(
      "redis://db:6379/0",
      "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 "
      "if a replica is configured to be writable (which is not the default) writes to replicas "
      "are just local and are not propagated.");
  EXPECT_EQ(error.server, ServerError::readonly);
  EXPECT_EQ(error.code, Error::Code::server);
  EXPECT_EQ(error.message, "ERR WAIT cannot be used with replica instances");
}

TEST(ServerFailure, NoauthSaysHowToGiveAPassword) {
  for (const char* message : {"NOAUTH Authentication required.",
                              "ERR Protocol error: unauthenticated multibulk length"}) {
    const Error error = server_failure("redis://db:6379/0", message);
    EXPECT_EQ(error.code, Error::Code::auth);
    EXPECT_EQ(error.message,
              "redis://db:6379/0: this server needs a password: set RLOCK_PASSWORD or "
              "--password-file");
  }
}

TEST(ServerFailure, OtherErrorsKeepTheServersWords) {
  const Error error = server_failure("redis://db:6379/0", "OOM command not allowed");
  EXPECT_EQ(error.code, Error::Code::server);
  EXPECT_EQ(error.message, "OOM command not allowed");
}

}  // namespace
}  // namespace rlock::redis
