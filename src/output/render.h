#pragma once
/// Text and JSON rendering of command results: the only writer to stdout.
///
/// Every print_* reports whether its output reached stdout: a full disk, a
/// closed pipe or a closed stdout is an error the command must act on (for
/// `acquire`, a token nobody received).

#include <string>
#include <vector>

#include "lock/lock.h"
#include "output/json.h"
#include "util/error.h"

namespace rlock::output {

/// Call first thing in main: a standard descriptor that the caller closed
/// (`rlock status >&-`) is reopened on /dev/null, so that no socket or file
/// opened later can become fd 0, 1 or 2 and receive our output; a closed
/// stdout is remembered and every later print fails with EBADF.
void claim_standard_fds();
/// Which of descriptors 0, 1 and 2 claim_standard_fds() found closed (bit
/// N for descriptor N): `run` closes them again for its command, which
/// gets rlock's standard descriptors as they were.
unsigned claimed_standard_fds();

/// For output that only informs (`status`, --help, --version): a reader
/// that stops reading early (`rlock status | head`) ends rlock as it ends
/// any Unix filter, by SIGPIPE with no message, rather than as a failed
/// write (70). Output that hands something over (`acquire`'s token) keeps
/// the error: nobody received it.
void end_quietly_on_broken_pipe();

/// Flushes what was printed to stdout by other means (CLI11's --help, the
/// version): a closed, full or broken stdout is an error, as in emit().
[[nodiscard]] Result<void> flush_stdout();

/// `acquire`: the token alone (so `T=$(rlock acquire x)` works), or JSON,
/// whose ttl_ms is `lease_left`: what the caller can count on from now.
[[nodiscard]] Result<void> print_acquired(const std::string& name, const lock::Grant& grant,
                                          const lock::Request& request, Millis lease_left,
                                          bool json);
[[nodiscard]] Result<void> print_renewed(const std::string& name, Millis ttl, bool json);
[[nodiscard]] Result<void> print_released(const std::string& name, bool json);
/// `run`'s document (JSON only), once the command has ended: what it ran
/// under and how it ended.
struct RunSummary {
  const lock::Grant& grant;
  int wait_status = 0;  // waitpid's
  Millis held{0};
  bool released = false;
  const std::string* lost = nullptr;  // why the lock was lost (exit 79), or none
};
[[nodiscard]] Result<void> print_ran(const std::string& name, const RunSummary& run);
/// `release --force`: whom it evicted.
[[nodiscard]] Result<void> print_forced(const std::string& name,
                                        const std::vector<lock::HolderView>& evicted, bool json);
/// `status NAME`: holders, waiters, the last forced releases.
[[nodiscard]] Result<void> print_status(const lock::LockView& view, bool json);
/// `status`: one row per lock; a lock that could not be read gets a row
/// saying so (JSON: the "broken" list). `unlisted`: why each part of the
/// deployment left out was (JSON only: the "unlisted" list, present when
/// not empty; the text form has them on stderr).
[[nodiscard]] Result<void> print_list(const lock::Listing& views, bool json,
                                      const std::vector<std::string>& unlisted = {});
[[nodiscard]] Result<void> print_list(const std::vector<lock::LockView>& views, bool json);

Json holder_json(const lock::HolderView& h);
/// "alice@ci-3 (pid 4242, make deploy)": a holder in one phrase, for messages
/// (already sanitised for a terminal).
std::string describe_holder(const lock::HolderView& h);

}  // namespace rlock::output
