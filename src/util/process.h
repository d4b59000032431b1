#pragma once
/// Small facts about processes, read from /proc.

#include <sys/types.h>

#include <string>

namespace rlock {

/// The command line of a process, arguments joined by spaces ("" if gone).
std::string process_command(pid_t pid);

/// The parent of a process (0 if unknown).
pid_t parent_of(pid_t pid);

}  // namespace rlock
