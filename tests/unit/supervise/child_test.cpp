#include "supervise/child.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
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

TEST(Child, NotesOnceTheSignalThatStoppedTheCommand) {
  auto child = Child::spawn(launch_of({"sh", "-c", "kill -TSTP $$; exit 3"}));
  ASSERT_TRUE(child.has_value());
  int stop = 0;
  for (int k = 0; k < 500 && !stop; ++k) {
    EXPECT_FALSE(child->poll_exit().has_value());
    stop = child->take_stop();
    if (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(stop, SIGTSTP);
  EXPECT_FALSE(child->poll_exit().has_value());
  EXPECT_EQ(child->take_stop(), 0);
  child->signal_group(SIGCONT);
  EXPECT_EQ(exit_status_of(wait_exit(*child)), 3);
}

TEST(ResolveCommand, FindsTheFirstExecutableInPath) {
  EXPECT_EQ(resolve_command("sh", "/nonexistent:/bin:/usr/bin"), "/bin/sh");
  EXPECT_EQ(resolve_command("./relative", "/bin"), "./relative");
  EXPECT_EQ(resolve_command("/abs/olute", "/bin"), "/abs/olute");
}

TEST(ResolveCommand, ReportsWhatExecvpWould) {
  EXPECT_EQ(resolve_command("rlock-no-such-command", "/bin:/usr/bin").error(), ENOENT);
  EXPECT_EQ(resolve_command("", "/bin").error(), ENOENT);
  // A directory named like the command is skipped, not run.
  EXPECT_EQ(resolve_command("bin", "/").error(), ENOENT);
  // Found but not executable.
  EXPECT_EQ(resolve_command("passwd", "/etc").error(), EACCES);
}

TEST(Child, ACommandNotFoundInPathNeverForks) {
  auto child = Child::spawn(launch_of({"rlock-no-such-command"}));
  ASSERT_TRUE(child.has_value());
  EXPECT_EQ(child->exec_errno(), ENOENT);
  EXPECT_EQ(exit_status_of(*child->poll_exit()), 127);
}

TEST(Child, AScriptWithoutInterpreterLineRunsWithTheShell) {
  char dir[] = "/tmp/rlock-child-test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string script = std::string(dir) + "/script";
  {
    std::ofstream out(script);
    out << "exit 7\n";
  }
  chmod(script.c_str(), 0700);
  auto child = Child::spawn(launch_of({script}));
  ASSERT_TRUE(child.has_value());
  EXPECT_EQ(exit_status_of(wait_exit(*child)), 7);
  unlink(script.c_str());
  rmdir(dir);
}

std::string comm_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(in, comm);
  return comm;
}

TEST(Guardian, RunsInAGroupOfItsOwnHoldingOnlyItsPipeAndTimer) {
  auto child = Child::spawn(launch_of({"sleep", "10"}));
  ASSERT_TRUE(child.has_value());
  pid_t guardian = child->guardian_pid();
  ASSERT_GT(guardian, 0);
  // Until it has set itself up (it runs concurrently with us).
  for (int k = 0; k < 200 && comm_of(guardian) != "rlock-guard"; ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(comm_of(guardian), "rlock-guard");
  for (int k = 0; k < 200 && getpgid(guardian) != guardian; ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(getpgid(guardian), guardian);
  // stdin, stdout, stderr on /dev/null, the pipe and its CLOCK_BOOTTIME
  // timer: nothing else of ours.
  auto fd_dir = "/proc/" + std::to_string(guardian) + "/fd";
  std::vector<std::string> targets;
  for (int k = 0; k < 200; ++k) {
    targets.clear();
    for (const auto& e : std::filesystem::directory_iterator(fd_dir))
      targets.push_back(std::filesystem::read_symlink(e.path()).string());
    if (targets.size() == 5) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(targets.size(), 5u);
  EXPECT_EQ(std::count(targets.begin(), targets.end(), "/dev/null"), 3);
  EXPECT_EQ(std::count_if(targets.begin(), targets.end(),
                          [](const std::string& t) { return t.starts_with("pipe:"); }),
            1);
  EXPECT_EQ(std::count(targets.begin(), targets.end(), "anon_inode:[timerfd]"), 1);
  child->signal_group(SIGTERM);
  wait_exit(*child);
  child->dismiss_guardian();
  EXPECT_EQ(child->guardian_pid(), -1);
  EXPECT_NE(kill(guardian, 0), 0);  // reaped, not a zombie
}

TEST(Guardian, KillsTheGroupWhenTheDeadlinePassesWithoutNews) {
  auto launch = launch_of({"sh", "-c", "trap '' TERM; sleep 10 & wait"});
  launch.must_be_dead_by = Clock::now() + Millis(300);
  auto started = Clock::now();
  auto child = Child::spawn(launch);
  ASSERT_TRUE(child.has_value());
  int status = wait_exit(*child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  auto took = Clock::now() - started;
  EXPECT_GE(took, Millis(250));
  EXPECT_LT(took, Millis(3000));
  for (int k = 0; k < 100 && child->group_exists(); ++k) {
    child->poll_exit();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(child->group_exists());
}

TEST(Guardian, AMovedDeadlineOrADismissalSparesTheCommand) {
  auto launch = launch_of({"sleep", "10"});
  launch.must_be_dead_by = Clock::now() + Millis(200);
  auto child = Child::spawn(launch);
  ASSERT_TRUE(child.has_value());
  child->guard_until(Clock::now() + Millis(400));
  std::this_thread::sleep_for(Millis(300));
  EXPECT_FALSE(child->poll_exit().has_value());
  child->dismiss_guardian();
  std::this_thread::sleep_for(Millis(300));
  EXPECT_FALSE(child->poll_exit().has_value());
  child->signal_group(SIGTERM);
  EXPECT_EQ(exit_status_of(wait_exit(*child)), 128 + SIGTERM);
}

/// The state letter of /proc/PID/stat ('Z' zombie), or 0 when it is gone.
char state_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  auto paren = line.rfind(')');
  return paren + 2 < line.size() ? line[paren + 2] : 0;
}

TEST(Guardian, LetGoItExitsByItselfAndLeavesTheCommandAlone) {
  auto child = Child::spawn(launch_of({"sleep", "10"}));
  ASSERT_TRUE(child.has_value());
  pid_t guardian = child->guardian_pid();
  ASSERT_GT(guardian, 0);
  child->let_guardian_go();
  // It exits on its own (a zombie until reaped), without being signalled.
  for (int k = 0; k < 300 && state_of(guardian) != 'Z'; ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(state_of(guardian), 'Z');
  int status = 0;
  ASSERT_EQ(waitpid(guardian, &status, 0), guardian);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // The pipe's end came after the message: the command was not touched.
  std::this_thread::sleep_for(Millis(200));
  EXPECT_FALSE(child->poll_exit().has_value());
  child->signal_group(SIGTERM);
  EXPECT_EQ(exit_status_of(wait_exit(*child)), 128 + SIGTERM);
}

TEST(Guardian, DismissingAStoppedGuardianDoesNotHang) {
  auto child = Child::spawn(launch_of({"sleep", "10"}));
  ASSERT_TRUE(child.has_value());
  pid_t guardian = child->guardian_pid();
  ASSERT_GT(guardian, 0);
  kill(guardian, SIGSTOP);
  // Far more renewals than the pipe holds: none of them may block.
  for (int k = 0; k < 20000; ++k) child->guard_until(Clock::now() + Millis(60'000));
  child->dismiss_guardian();
  EXPECT_NE(kill(guardian, 0), 0);
  EXPECT_FALSE(child->poll_exit().has_value());  // the command is left alone
  child->signal_group(SIGTERM);
  EXPECT_EQ(exit_status_of(wait_exit(*child)), 128 + SIGTERM);
}

}  // namespace
}  // namespace rlock::supervise
