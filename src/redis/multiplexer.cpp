#include "redis/multiplexer.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <system_error>

namespace rlock::redis {

namespace detail {

int poll_timeout(Deadline deadline, Clock::time_point now) {
  const auto left = std::chrono::ceil<Millis>(deadline - now);
  if (left <= Millis::zero()) return 0;
  return static_cast<int>(std::min<Millis::rep>(left.count(), INT_MAX));
}

}  // namespace detail

namespace {

bool idle(std::span<Connection*> connections) {
  return std::none_of(connections.begin(), connections.end(),
                      [](const Connection* c) { return c && c->in_flight() > 0; });
}

}  // namespace

Result<Waited> wait_for_answers(std::span<Connection*> connections, Deadline deadline,
                                int interrupt_fd, const OnAnswer& on_answer, int wake_fd) {
  std::vector<pollfd> fds;
  for (;;) {
    // Every connection gets its turn first: step() writes what is queued,
    // reads what has arrived, and may hand out several answers in a row
    // (pipelined requests, TLS records already decrypted).
    // connections[k] is read again after every answer: the callback may
    // have taken it away.
    for (std::size_t k = 0; k < connections.size(); ++k) {
      while (connections[k] && connections[k]->in_flight() > 0) {
        auto stepped = connections[k]->step();
        if (stepped && !*stepped) break;
        Result<std::vector<Reply>> answer =
            stepped ? Result<std::vector<Reply>>(std::move(**stepped))
                    : Result<std::vector<Reply>>(std::unexpected(stepped.error()));
        if (on_answer(k, std::move(answer)) == Then::stop) return Waited::stopped;
      }
    }
    if (wake_fd < 0 && idle(connections)) return Waited::answered;
    fds.clear();
    bool now = false;
    // A connection still connecting fails at its own deadline (see
    // Transport::open_step): its step() comes then, even if nothing stirs.
    Deadline step_by = deadline;
    for (std::size_t k = 0; k < connections.size(); ++k) {
      const Connection* c = connections[k];
      if (!c || c->in_flight() == 0) continue;
      const auto ready = c->readiness();
      now = now || ready.now;
      step_by = std::min(step_by, ready.until);
      fds.push_back({ready.fd, ready.events, 0});
    }
    if (now) continue;
    if (detail::poll_timeout(deadline, Clock::now()) == 0) return Waited::deadline;
    const int timeout = detail::poll_timeout(step_by, Clock::now());
    // poll() ignores a negative descriptor, so a disabled fd is fine.
    fds.push_back({wake_fd, POLLIN, 0});
    fds.push_back({interrupt_fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::system_category(), "poll");
    }
    if (fds.back().revents != 0) return fail(Error::Code::interrupted, "interrupted");
    if (fds[fds.size() - 2].revents != 0) return Waited::woken;
  }
}

}  // namespace rlock::redis
