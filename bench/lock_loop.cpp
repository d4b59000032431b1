// rlock_bench_loop: the contended-throughput worker of bench/bench.py
// (section 2), driving the lock through the binary's own code
// (lock::LockClient over backend::make_backend), the way `rlock acquire -w`
// and `rlock release` do, but in one process that loops: the binary itself
// cannot loop, each call is a process.
//
// Usage: rlock_bench_loop [--poll] URL NAME SECONDS
// --poll: instead, redis-py's Lock algorithm in the same C++ over the same
// connection code (SET NX PX, on refusal sleep 100 ms and try again; release
// by a compare-and-delete script), so that the peer's figure carries no
// Python either.
// Connects, reads one line on stdin (the start signal, so that every worker
// starts at once), then takes and releases NAME (empty critical section,
// waiting without a limit) for SECONDS. Prints, on stdout, the
// CLOCK_MONOTONIC time (seconds) of each acquisition, one per line, then
// "end T", T being when the loop was to stop. Python's time.monotonic() reads
// the same clock, so the driver sets every worker's times on one line.
#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backend/target.h"
#include "lock/lock.h"
#include "redis/connection.h"
#include "redis/url.h"

namespace {

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

int fail(const std::string& what) {
  fmt::print(stderr, "rlock_bench_loop: {}\n", what);
  return 1;
}

/// Waits for the start signal (a line on stdin), then runs `operation`
/// (one acquire and release, which returns the moment it held the lock)
/// until `seconds` have passed, and prints each acquisition's time, then
/// "end T".
template <typename Operation>
int loop_and_print(double seconds, Operation operation) {
  std::string go;
  std::getline(std::cin, go);
  std::vector<double> held;
  held.reserve(1 << 16);
  const double end = now_s() + seconds;
  while (now_s() < end) {
    const rlock::Result<double> at = operation();
    if (!at) return fail(at.error().message);
    held.push_back(*at);
  }
  std::string out;
  out.reserve(held.size() * 20 + 32);
  for (double t : held) out += fmt::format("{:.6f}\n", t);
  out += fmt::format("end {:.6f}\n", end);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

/// redis-py's Lock.release script.
constexpr std::string_view k_poll_release =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end";

/// Loops as redis-py's Lock(timeout=30, sleep=0.1).acquire() and release()
/// do.
int poll_loop(const rlock::redis::Url& url, const std::string& name, double seconds) {
  using namespace rlock;
  redis::ConnectOptions options;
  options.url = url;
  auto connection = redis::Connection::connect(options);
  if (!connection) return fail(connection.error().message);
  const redis::Script release(k_poll_release);
  std::mt19937_64 random{std::random_device{}()};
  const std::vector<std::string> keys{name};
  return loop_and_print(seconds, [&]() -> Result<double> {
    const std::vector<std::string> token{fmt::format("{:016x}", random())};
    for (;;) {
      auto reply = connection->command({"SET", name, token[0], "NX", "PX", "30000"});
      if (!reply) return std::unexpected(reply.error());
      if (!reply->is_nil()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const double at = now_s();
    auto released = connection->eval(release, keys, token, Clock::now() + Millis{5000});
    if (!released) return std::unexpected(released.error());
    return at;
  });
}

/// Loops rlock's own acquire (no wait limit) and release.
int rlock_loop(const rlock::redis::Url& url, const std::string& name, double seconds) {
  using namespace rlock;
  backend::Target target;
  target.server.url = url;
  lock::LockClient client(backend::make_backend(std::move(target)));
  lock::Request request;
  request.name = name;
  request.ttl = Millis{30'000};
  request.who.owner = "bench";
  request.who.host = "bench";
  request.who.pid = getpid();
  request.who.command = "bench";
  // Connect before the start signal, as the Python workers do.
  if (auto view = client.status(request.name); !view) return fail(view.error().message);
  return loop_and_print(seconds, [&]() -> Result<double> {
    auto grant = client.acquire(request, std::nullopt);
    if (!grant) return std::unexpected(grant.error());
    const double at = now_s();
    if (auto released = client.release(request.name, grant->token); !released)
      return std::unexpected(released.error());
    return at;
  });
}

}  // namespace

int main(int argc, char** argv) {
  const bool poll = argc == 5 && std::string_view(argv[1]) == "--poll";
  if (poll) ++argv, --argc;
  if (argc != 4) return fail("usage: rlock_bench_loop [--poll] URL NAME SECONDS");
  auto url = rlock::redis::parse_url(argv[1]);
  if (!url) return fail(url.error().message);
  char* rest = nullptr;
  const double seconds = std::strtod(argv[3], &rest);
  if (rest == argv[3] || *rest != '\0' || seconds <= 0) return fail("SECONDS: a positive number");
  return poll ? poll_loop(*url, argv[2], seconds) : rlock_loop(*url, argv[2], seconds);
}
