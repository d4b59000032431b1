#pragma once
/// A quorum of independent deployments (Redlock): a backend made of
/// backends. Every call goes to all members at once, each on a thread of its
/// own, and the outcome is decided by the lock protocol's quorum arithmetic
/// (lock/protocol.h: count_acquire, count_renew, ...) as the replies come
/// in, so a frozen member costs nothing once a majority has answered.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace rlock::backend {

/// Takes a warning about the quorum's configuration (one line, no prefix).
using Notice = std::function<void(const std::string&)>;

/// The backend for a quorum of `members` (each made by make_backend: a
/// single server, a Sentinel group, ...). At least two members. `notice`
/// is told, once per member and process, of a member that is a read-only
/// replica: the quorum runs on the others, so it tolerates fewer failures
/// than its size says.
std::unique_ptr<Backend> make_quorum_backend(std::vector<std::unique_ptr<Backend>> members,
                                             Notice notice = {});

}  // namespace rlock::backend
