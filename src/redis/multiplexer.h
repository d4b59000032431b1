#pragma once
/// Waits on several connections at once under one deadline: the parallel
/// I/O under a quorum, without a thread per server. Each connection has
/// requests queued with Connection::begin(); their replies are handed to a
/// callback as they arrive, and the callback may say that the answers so
/// far decide the matter, which ends the wait at once.

#include <functional>
#include <span>
#include <vector>

#include "redis/connection.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock::redis {

/// What the callback says after each answer.
enum class Then { wait, stop };

/// How a wait ended.
enum class Waited {
  answered,  // no connection has a request in flight any more
  stopped,   // the callback said stop
  deadline,  // the deadline passed with requests still in flight
  woken,     // the wake fd became readable
};

/// One answer: the replies of one request on connection `index`, or why the
/// connection failed (it is closed then, and its other requests dropped).
using OnAnswer = std::function<Then(std::size_t index, Result<std::vector<Reply>> replies)>;

/// Advances every connection of `connections` (null entries are skipped)
/// until one of the ways in Waited, or `interrupt_fd` (-1: none) becomes
/// readable (Error::Code::interrupted). Requests still in flight stay
/// queued: a later call goes on waiting for them. `wake_fd` (-1: none) is
/// another source of answers (an eventfd of threads): readable = woken;
/// with one, the wait goes on even when no connection has anything in
/// flight. The callback may set `connections[index]` to null (say, it gave
/// that connection to another thread): it is not touched again.
Result<Waited> wait_for_answers(std::span<Connection*> connections, Deadline deadline,
                                int interrupt_fd, const OnAnswer& on_answer, int wake_fd = -1);

namespace detail {

/// The poll() timeout in milliseconds from `now` until `deadline`: rounded
/// up (rounding down would spin through the last millisecond), never
/// negative, at most INT_MAX.
int poll_timeout(Deadline deadline, Clock::time_point now);

}  // namespace detail

}  // namespace rlock::redis
