// rlock_bench_loop: the contended-throughput worker of bench/bench.py
// (section 2), driving the lock through the binary's own code
// (lock::LockClient over backend::make_backend), the way `rlock acquire -w`
// and `rlock release` do, but in one process that loops: the binary itself
// cannot loop, each call is a process.
//
// Usage: rlock_bench_loop [--poll] URL NAME SECONDS
//        rlock_bench_loop --turns rlock|floor|ping URL NAME ROUNDS FIRST
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
//
// --turns: the idle handoff of bench/handoff_bounds.py through the binary's
// own client, so that no client language is in the figure. Two processes
// take turns ROUNDS times; each holds 10 ms (the other queues and blocks
// meanwhile), prints "released T" just before it lets go and "held T" when
// it holds (a handoff is from one's released to the other's held):
//   rlock  LockClient's acquire (no wait limit) and release;
//   floor  a plain LPUSH onto the other's list waking its BLPOP (no lock):
//          the least any notification through Redis costs; FIRST (1 or 0)
//          says which of the two starts, the other blocks first;
//   ping   one process alone: ROUNDS PINGs, each after 10 ms idle, prints
//          "rtt US" for each (the round trip the others are divided by).
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

rlock::backend::Target target_of(const rlock::redis::Url& url) {
  rlock::backend::Target target;
  target.server.url = url;
  return target;
}

/// rlock's own client for `url`, and the request of an exclusive lock
/// `name` (TTL 30 s).
struct Locker {
  rlock::lock::LockClient client;
  rlock::lock::Request request;

  Locker(const rlock::redis::Url& url, const std::string& name)
      : client(rlock::backend::make_backend(target_of(url))) {
    request.name = name;
    request.ttl = rlock::Millis{30'000};
    request.who.owner = "bench";
    request.who.host = "bench";
    request.who.pid = getpid();
    request.who.command = "bench";
  }

  /// Connects (asks the lock's status), so that what is timed later does
  /// not include it.
  rlock::Result<void> connect() {
    auto view = client.status(request.name);
    if (!view) return std::unexpected(view.error());
    return {};
  }
};

/// Loops rlock's own acquire (no wait limit) and release.
int rlock_loop(const rlock::redis::Url& url, const std::string& name, double seconds) {
  using namespace rlock;
  Locker locker(url, name);
  auto& [client, request] = locker;
  // Connect before the start signal, as the Python workers do.
  if (auto connected = locker.connect(); !connected) return fail(connected.error().message);
  return loop_and_print(seconds, [&]() -> Result<double> {
    auto grant = client.acquire(request, std::nullopt);
    if (!grant) return std::unexpected(grant.error());
    const double at = now_s();
    if (auto released = client.release(request.name, grant->token); !released)
      return std::unexpected(released.error());
    return at;
  });
}

void print_at(std::string_view what, double at) {
  fmt::print("{} {:.6f}\n", what, at);
}

void idle() {
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

int turns_rlock(const rlock::redis::Url& url, const std::string& name, long rounds) {
  Locker locker(url, name);
  auto& [client, request] = locker;
  if (auto connected = locker.connect(); !connected) return fail(connected.error().message);
  for (long k = 0; k < rounds; ++k) {
    auto grant = client.acquire(request, std::nullopt);
    if (!grant) return fail(grant.error().message);
    print_at("held", now_s());
    idle();
    print_at("released", now_s());
    if (auto released = client.release(request.name, grant->token); !released)
      return fail(released.error().message);
  }
  return 0;
}

rlock::Result<rlock::redis::Connection> connect_to(const rlock::redis::Url& url) {
  rlock::redis::ConnectOptions options;
  options.url = url;
  return rlock::redis::Connection::connect(options);
}

int turns_floor(const rlock::redis::Url& url, const std::string& name, long rounds, bool first) {
  using namespace rlock;
  auto connection = connect_to(url);
  if (!connection) return fail(connection.error().message);
  const std::string mine = fmt::format("{}:floor:{}", name, first ? 0 : 1);
  const std::string theirs = fmt::format("{}:floor:{}", name, first ? 1 : 0);
  const auto block = [&]() -> Result<bool> {
    const std::vector<std::string> args{"BLPOP", mine, "5"};
    auto reply = connection->command(args, Clock::now() + Millis{10'000});
    if (!reply) return std::unexpected(reply.error());
    return !reply->is_nil();
  };
  if (!first) {
    auto woke = block();
    if (!woke) return fail(woke.error().message);
    print_at("held", now_s());
  }
  for (long k = 0; k < rounds; ++k) {
    idle();
    print_at("released", now_s());
    if (auto pushed = connection->command({"LPUSH", theirs, "x"}); !pushed)
      return fail(pushed.error().message);
    auto woke = block();
    if (!woke) return fail(woke.error().message);
    if (*woke) print_at("held", now_s());
  }
  return 0;
}

int turns_ping(const rlock::redis::Url& url, long rounds) {
  using namespace rlock;
  auto connection = connect_to(url);
  if (!connection) return fail(connection.error().message);
  for (long k = 0; k < rounds; ++k) {
    idle();
    const double sent = now_s();
    if (auto pong = connection->command({"PING"}); !pong) return fail(pong.error().message);
    fmt::print("rtt {:.1f}\n", (now_s() - sent) * 1e6);
  }
  return 0;
}

int turns(int argc, char** argv) {
  if (argc != 7)
    return fail("usage: rlock_bench_loop --turns rlock|floor|ping URL NAME ROUNDS FIRST");
  const std::string_view kind = argv[2];
  auto url = rlock::redis::parse_url(argv[3]);
  if (!url) return fail(url.error().message);
  char* rest = nullptr;
  const long rounds = std::strtol(argv[5], &rest, 10);
  if (rest == argv[5] || *rest != '\0' || rounds <= 0) return fail("ROUNDS: a positive number");
  const bool first = std::string_view(argv[6]) == "1";
  if (kind == "rlock") return turns_rlock(*url, argv[4], rounds);
  if (kind == "floor") return turns_floor(*url, argv[4], rounds, first);
  if (kind == "ping") return turns_ping(*url, rounds);
  return fail("--turns: rlock, floor or ping");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--turns") return turns(argc, argv);
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
