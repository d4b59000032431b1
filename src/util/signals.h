#pragma once
/// Turns termination signals into a readable file descriptor, so a blocked
/// Redis call can be interrupted (Ctrl-C while waiting for a lock).

#include <csignal>
#include <initializer_list>
#include <vector>

namespace rlock {

class SignalPipe {
 public:
  explicit SignalPipe(std::initializer_list<int> signals);
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  /// Readable once one of the signals arrived.
  int fd() const { return m_fds[0]; }
  /// The first signal received, or 0.
  int received() const;

 private:
  int m_fds[2] = {-1, -1};
  std::vector<std::pair<int, struct sigaction>> m_saved;
};

}  // namespace rlock
