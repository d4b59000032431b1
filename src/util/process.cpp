#include "util/process.h"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <sstream>

namespace rlock {

std::string process_command(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  for (char& c : raw)
    if (c == '\0') c = ' ';
  // A command line can be long; status shows the start of it.
  if (raw.size() > 256) raw.resize(256);
  return raw;
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

}  // namespace rlock
