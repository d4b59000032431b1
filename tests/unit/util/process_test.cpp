#include "util/process.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace rlock {
namespace {

TEST(ProgramName, IsTheLastComponentOfThePath) {
  EXPECT_EQ(program_name("/usr/local/bin/report"), "report");
  EXPECT_EQ(program_name("./deploy.sh"), "deploy.sh");
  EXPECT_EQ(program_name("mysql"), "mysql");
  EXPECT_EQ(program_name("dir/"), "dir");
  EXPECT_EQ(program_name("/"), "/");
}

TEST(ProcessName, IsTheCommWithoutArguments) {
  // The test binary itself: its comm is (the start of) its file name.
  auto name = process_name(getpid());
  EXPECT_FALSE(name.empty());
  EXPECT_EQ(name.find(' '), std::string::npos);
  EXPECT_EQ(process_name(-1), "");
}

TEST(ParentOf, IsThePpid) {
  EXPECT_EQ(parent_of(getpid()), getppid());
}

TEST(WithoutUrlPasswords, TakesOutEveryUrlsPasswordAndNothingElse) {
  // The probe's case: rlock's caller's command line, stored with
  // --show-command, showed the server's password to every user of the lock.
  EXPECT_EQ(without_url_passwords("sh -c ./rlock -u redis://:S3cr3tPW@127.0.0.1:30102/0 acquire x"),
            "sh -c ./rlock -u redis://127.0.0.1:30102/0 acquire x");
  EXPECT_EQ(without_url_passwords("rediss://bob:pw@h:6380/1 and https://u:p%40ss@example/x?y"),
            "rediss://bob@h:6380/1 and https://u@example/x?y");
  EXPECT_EQ(without_url_passwords("redis-sentinel://:pw@s1:26379,s2:26379/0#m"),
            "redis-sentinel://s1:26379,s2:26379/0#m");
  // No password: unchanged (a user alone, a port's colon, no URL at all).
  for (const char* kept : {"redis://bob@h:6379/0", "redis://h:6379/0", "mysql -phunter2", "a://",
                           "x://@", "see http://h/a@b:c"})
    EXPECT_EQ(without_url_passwords(kept), kept);
  EXPECT_EQ(without_url_passwords("redis://:pw@"), "redis://");
  // Passwords rlock's parser accepts unencoded (its user info ends at the
  // last '@'), and a list whose first URL has none (the probe's cases).
  for (const char* pw : {"pa/ss", "pa?ss", "pa#ss", "pa ss", "pa,ss", "p:a@ss"})
    EXPECT_EQ(without_url_passwords(fmt::format("redis://:{}@127.0.0.1:30302/0", pw)),
              "redis://127.0.0.1:30302/0")
        << pw;
  EXPECT_EQ(without_url_passwords("redis://h1,redis://:SECRET1@h2/0"), "redis://h1,redis://h2/0");
  EXPECT_EQ(without_url_passwords("redis://h1:1,redis://u:SECRET5@h2:2"),
            "redis://h1:1,redis://u@h2:2");
  // What looks like user info after a URL in the same argument goes too:
  // too much is taken out rather than a password left in.
  EXPECT_EQ(without_url_passwords("redis://h:1/0 user:pw@h"), "redis://h@h");
}

}  // namespace
}  // namespace rlock
