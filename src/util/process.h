#pragma once
/// Small facts about processes, read from /proc.

#include <sys/types.h>

#include <string>
#include <string_view>

namespace rlock {

/// The command line of a process, arguments joined by spaces ("" if gone).
/// Arguments may hold secrets (`mysql -phunter2`): stored in Redis only
/// with --show-command.
std::string process_command(pid_t pid);

/// The program name of a process (its comm: the file name it executed, a
/// script's own name for a #! script; "" if gone). What is stored in Redis
/// by default: it tells operators what runs without any of its arguments.
std::string process_name(pid_t pid);

/// The last component of a program path ("/usr/bin/report" -> "report").
std::string program_name(std::string_view path);

/// The parent of a process (0 if unknown).
pid_t parent_of(pid_t pid);

}  // namespace rlock
