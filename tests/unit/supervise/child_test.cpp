#include "supervise/child.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace rlock::supervise {
namespace {

Launch launch_of(std::vector<std::string> argv) {
  Launch launch;
  launch.argv = std::move(argv);
  launch.env = {"PATH=/usr/bin:/bin"};
  sigemptyset(&launch.mask);
  return launch;
}

/// Waits (bounded) for the child to exit; its wait status.
int wait_exit(Child& child) {
  for (int k = 0; k < 500; ++k) {
    if (auto status = child.poll_exit()) return *status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "child did not exit";
  return -1;
}

TEST(ExitStatus, IsTheCodeOr128PlusTheSignal) {
  EXPECT_EQ(exit_status_of(42 << 8), 42);
  EXPECT_EQ(exit_status_of(SIGKILL), 128 + SIGKILL);
  EXPECT_EQ(exit_status_of(SIGTERM), 143);
}

TEST(ExecFailure, NotFoundIs127OtherwiseIs126) {
  EXPECT_EQ(exec_failure_status(ENOENT), 127);
  EXPECT_EQ(exec_failure_status(ENOTDIR), 127);
  EXPECT_EQ(exec_failure_status(EACCES), 126);
  EXPECT_EQ(exec_failure_status(ENOEXEC), 126);
}

TEST(Child, RunsTheCommandAndReportsItsStatus) {
  auto child = Child::spawn(launch_of({"sh", "-c", "exit 3"}));
  ASSERT_TRUE(child.has_value());
  EXPECT_EQ(child->exec_errno(), 0);
  EXPECT_EQ(exit_status_of(wait_exit(*child)), 3);
}

TEST(Child, ReportsTheErrnoOfAFailedExec) {
  auto child = Child::spawn(launch_of({"/nonexistent/rlock-test-command"}));
  ASSERT_TRUE(child.has_value());
  EXPECT_EQ(child->exec_errno(), ENOENT);
  EXPECT_TRUE(child->poll_exit().has_value());
}

TEST(Child, LeadsItsOwnProcessGroup) {
  auto child = Child::spawn(launch_of({"sleep", "10"}));
  ASSERT_TRUE(child.has_value());
  EXPECT_EQ(getpgid(child->pid()), child->pid());
  EXPECT_TRUE(child->group_exists());
  child->signal_group(SIGTERM);
  EXPECT_EQ(exit_status_of(wait_exit(*child)), 128 + SIGTERM);
}

TEST(Child, GetsOnlyTheEnvironmentItIsGiven) {
  auto launch = launch_of({"sh", "-c", "test \"$ONLY\" = yes && test -z \"$HOME\""});
  launch.env.push_back("ONLY=yes");
  auto child = Child::spawn(launch);
  ASSERT_TRUE(child.has_value());
  EXPECT_EQ(exit_status_of(wait_exit(*child)), 0);
}

TEST(Child, ADestroyedChildDoesNotOutliveIt) {
  pid_t pid = 0;
  {
    auto child = Child::spawn(launch_of({"sleep", "10"}));
    ASSERT_TRUE(child.has_value());
    pid = child->pid();
  }
  EXPECT_NE(kill(pid, 0), 0);
}

}  // namespace
}  // namespace rlock::supervise
