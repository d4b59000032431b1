#pragma once
/// Small facts about processes, read from /proc.

#include <sys/types.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rlock {

/// The command line of a process, arguments joined by spaces ("" if gone),
/// with the passwords of URLs in it and every one of `secrets` taken out
/// (without_url_passwords, without_secrets) and cut to 256 bytes. Other
/// arguments may hold secrets (`mysql -phunter2`): stored in Redis only
/// with --show-command.
std::string process_command(pid_t pid, std::span<const std::string> secrets = {});

/// `text` with every occurrence of each non-empty one of `secrets` (rlock's
/// own passwords) replaced by `***`: a caller's command line may carry one
/// (`env RLOCK_PASSWORD=... rlock ...`), and what --show-command stores
/// every lock user can read.
std::string without_secrets(std::string text, std::span<const std::string> secrets);

/// `text` with the password of every URL in it taken out, as rlock shows a
/// URL: `redis://:pw@h/0` -> `redis://h/0`, `https://u:pw@h` -> `https://u@h`
/// (the authority ends at /, ?, #, whitespace or the end; its user info at
/// its last @). A command line stored with --show-command may be rlock's own
/// caller's, `rlock -u redis://:pw@h ...`.
std::string without_url_passwords(std::string text);

/// The program name of a process (its comm: the file name it executed, a
/// script's own name for a #! script; "" if gone). What is stored in Redis
/// by default: it tells operators what runs without any of its arguments.
std::string process_name(pid_t pid);

/// The last component of a program path ("/usr/bin/report" -> "report").
std::string program_name(std::string_view path);

/// The parent of a process (0 if unknown).
pid_t parent_of(pid_t pid);

/// The arguments of a process, as it was started (empty if gone), unedited:
/// never for display or storage (they may hold secrets).
std::vector<std::string> process_args(pid_t pid);

/// Writes `text` to standard error, whatever happens: a full disk, a
/// closed pipe or /dev/full behind it is ignored. fmt::print(stderr) throws
/// on a failed write, and an exception there aborted rlock, once with a
/// lock taken and never released (a `run -v` whose stderr was full).
void to_stderr(std::string_view text) noexcept;

/// Makes to_stderr() on the calling thread never block (`never` false: as
/// before): its text is handed to a writer thread of its own (started at
/// the first line), which blocks instead. For the heartbeat, which must
/// keep renewing while standard error is a pipe nobody reads (`rlock run
/// ... 2>&1 | less` with the pager stopped): a warning written there
/// stopped the renewals, and the command was killed as if the lock were
/// lost. And for `run`'s main thread while it holds the lock, which must
/// watch the command and release. Lines beyond 64 waiting are dropped, as
/// is one when no thread can be started.
void stderr_never_blocks_this_thread(bool never = true) noexcept;

/// Waits up to `ms` milliseconds for the lines handed to the writer thread
/// to be written (before the process exits, which would lose them).
void flush_stderr_writer(int ms) noexcept;

}  // namespace rlock
