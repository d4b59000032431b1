#include "util/process.h"

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

}  // namespace
}  // namespace rlock
