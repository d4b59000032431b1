#pragma once
/// Text and JSON rendering of command results: the only writer to stdout.

#include <string>
#include <vector>

#include "lock/lock.h"
#include "output/json.h"

namespace rlock::output {

/// `acquire`: the token alone (so `T=$(rlock acquire x)` works), or JSON.
void print_acquired(const std::string& name, const lock::Grant& grant, const lock::Request& request,
                    bool json);
void print_renewed(const std::string& name, Millis ttl, bool json);
void print_released(const std::string& name, bool json);
/// `release --force`: whom it evicted.
void print_forced(const std::string& name, const std::vector<lock::HolderView>& evicted, bool json);
/// `status NAME`: holders, waiters, last forced release.
void print_status(const lock::LockView& view, bool json);
/// `status`: one row per lock.
void print_list(const std::vector<lock::LockView>& views, bool json);

Json holder_json(const lock::HolderView& h);
/// "alice@ci-3 (pid 4242, make deploy)": a holder in one phrase, for messages.
std::string describe_holder(const lock::HolderView& h);

}  // namespace rlock::output
