#include "util/process.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <thread>

namespace rlock {

std::string process_command(pid_t pid, std::span<const std::string> secrets) {
  // Each argument on its own (a URL ends with its argument), before the
  // cut, which could leave a password without the @ that ends it, or a
  // secret cut short.
  std::string line;
  bool first = true;
  for (const auto& arg : process_args(pid)) {
    if (!first) line += ' ';
    first = false;
    line += without_secrets(without_url_passwords(arg), secrets);
  }
  // A command line can be long; status shows the start of it.
  if (line.size() > 256) line.resize(256);
  return line;
}

std::string without_url_passwords(std::string text) {
  constexpr std::string_view k_scheme_end = "://";
  const auto is_scheme_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '.' || c == '-';
  };
  for (std::size_t at = text.find(k_scheme_end); at != std::string::npos;
       at = text.find(k_scheme_end, at)) {
    const std::size_t start = at + k_scheme_end.size();
    // The URL runs to the next one's scheme (a comma list), or the end.
    std::size_t end = text.find(k_scheme_end, start);
    if (end == std::string::npos) {
      end = text.size();
    } else {
      while (end > start && is_scheme_char(text[end - 1])) --end;
    }
    // As rlock's own parser reads a URL: the user info ends at the last
    // '@' (a password may hold '/', '?', '#', ',' or a space unencoded),
    // the password starts at its first ':'. Taking out too much of an odd
    // argument is the price of never storing a password.
    const std::size_t user_end = end > start ? text.rfind('@', end - 1) : std::string::npos;
    if (user_end != std::string::npos && user_end >= start) {
      const std::size_t colon = text.find(':', start);
      if (colon < user_end) {
        // Without the password; an empty user goes with its @.
        const std::size_t cut_from = colon == start ? start : colon;
        text.erase(cut_from, user_end + (colon == start ? 1 : 0) - cut_from);
      }
    }
    at = start;
  }
  return text;
}

std::string without_secrets(std::string text, std::span<const std::string> secrets) {
  for (const auto& secret : secrets) {
    if (secret.empty()) continue;
    for (std::size_t at = text.find(secret); at != std::string::npos;
         at = text.find(secret, at + 3))
      text.replace(at, secret.size(), "***");
  }
  return text;
}

std::string process_name(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/comm", pid));
  std::string comm;
  std::getline(in, comm);
  return comm;
}

std::string program_name(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  auto slash = path.rfind('/');
  if (slash != std::string_view::npos && slash + 1 < path.size()) path.remove_prefix(slash + 1);
  return std::string(path);
}

std::vector<std::string> process_args(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (std::size_t from = 0; from < raw.size();) {
    const std::size_t end = std::min(raw.find('\0', from), raw.size());
    args.emplace_back(raw.substr(from, end - from));
    from = end + 1;
  }
  return args;
}

pid_t parent_of(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Field 2 (comm) may contain spaces and parentheses: parse after the last ')'.
  auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 1));
  char state = 0;
  pid_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

namespace {

thread_local bool t_hand_off = false;

/// The lines the writer thread has to write. Never destroyed (leaked): the
/// thread may still be blocked in write() while the process exits.
struct StderrWriter {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::string> lines;
  bool writing = false;
  bool started = false;

  void loop() {
    std::unique_lock lock(mutex);
    for (;;) {
      changed.wait(lock, [this] { return !lines.empty(); });
      std::string line = std::move(lines.front());
      lines.pop_front();
      writing = true;
      lock.unlock();
      to_stderr(line);
      lock.lock();
      writing = false;
      changed.notify_all();
    }
  }
};

StderrWriter& stderr_writer() {
  static StderrWriter* writer = new StderrWriter;
  return *writer;
}

void hand_off(std::string_view text) noexcept {
  constexpr std::size_t k_most_waiting = 64;
  StderrWriter& w = stderr_writer();
  try {
    std::lock_guard lock(w.mutex);
    if (!w.started) {
      std::thread([&w] { w.loop(); }).detach();
      w.started = true;
    }
    if (w.lines.size() >= k_most_waiting) return;
    w.lines.emplace_back(text);
    w.changed.notify_all();
  } catch (...) {
    // No thread, or no memory: the line is dropped rather than blocking.
  }
}

}  // namespace

void stderr_never_blocks_this_thread(bool never) noexcept {
  t_hand_off = never;
}

void flush_stderr_writer(int ms) noexcept {
  StderrWriter& w = stderr_writer();
  std::unique_lock lock(w.mutex);
  if (!w.started) return;
  w.changed.wait_for(lock, std::chrono::milliseconds(ms),
                     [&w] { return w.lines.empty() && !w.writing; });
}

void to_stderr(std::string_view text) noexcept {
  if (t_hand_off) return hand_off(text);
  while (!text.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace rlock
