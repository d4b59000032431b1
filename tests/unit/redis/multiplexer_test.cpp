#include "redis/multiplexer.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

namespace rlock::redis {
namespace {

using namespace std::chrono_literals;

TEST(PollTimeout, RoundsUpAndNeverGoesNegative) {
  const auto now = Clock::now();
  EXPECT_EQ(detail::poll_timeout(now + 1500us, now), 2);
  EXPECT_EQ(detail::poll_timeout(now + 1ns, now), 1);
  EXPECT_EQ(detail::poll_timeout(now, now), 0);
  EXPECT_EQ(detail::poll_timeout(now - 5ms, now), 0);
  EXPECT_EQ(detail::poll_timeout(now + std::chrono::hours(24 * 365 * 100), now), INT_MAX);
}

/// A stand-in for a server on 127.0.0.1: accepts one client, reads
/// `expect` bytes of requests, then answers `reply` in one write (or never,
/// when `reply` is empty: a frozen server). Only bytes on a socket, no
/// Redis semantics.
class FakeServer {
 public:
  FakeServer(std::string reply, std::size_t expect) : m_reply(std::move(reply)) {
    m_listen = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(m_listen, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(listen(m_listen, 4), 0);
    socklen_t length = sizeof address;
    getsockname(m_listen, reinterpret_cast<sockaddr*>(&address), &length);
    m_port = ntohs(address.sin_port);
    m_thread = std::thread([this, expect] {
      m_client = accept(m_listen, nullptr, nullptr);
      std::size_t got = 0;
      char buffer[4096];
      while (got < expect) {
        const ssize_t n = read(m_client, buffer, sizeof buffer);
        if (n <= 0) return;
        got += static_cast<std::size_t>(n);
      }
      if (!m_reply.empty()) (void)!write(m_client, m_reply.data(), m_reply.size());
    });
  }
  ~FakeServer() {
    shutdown(m_listen, SHUT_RDWR);
    if (m_client >= 0) shutdown(m_client, SHUT_RDWR);
    m_thread.join();
    close(m_listen);
    if (m_client >= 0) close(m_client);
  }
  Connection connection() const {
    ConnectOptions options;
    options.url = *parse_url("redis://127.0.0.1:" + std::to_string(m_port) + "/0");
    return Connection::unopened(options);
  }

 private:
  std::string m_reply;
  int m_listen = -1;
  std::atomic<int> m_client = -1;
  int m_port = 0;
  std::thread m_thread;
};

const std::vector<std::vector<std::string>> k_ping{{"PING"}};
const std::size_t k_ping_bytes = std::string("*1\r\n$4\r\nPING\r\n").size();

TEST(WaitForAnswers, StopsAsSoonAsTheCallbackIsDecidedDespiteASilentServer) {
  FakeServer answers("+PONG\r\n", k_ping_bytes), silent("", k_ping_bytes);
  Connection a = answers.connection(), b = silent.connection();
  ASSERT_TRUE(a.begin(k_ping));
  ASSERT_TRUE(b.begin(k_ping));
  Connection* both[] = {&a, &b};
  std::vector<std::size_t> seen;
  const auto started = Clock::now();
  const auto waited = wait_for_answers(both, Clock::now() + 5s, -1,
                                       [&](std::size_t k, Result<std::vector<Reply>> replies) {
                                         EXPECT_TRUE(replies) << replies.error().message;
                                         if (replies) {
                                           EXPECT_EQ(replies->front().str, "PONG");
                                         }
                                         seen.push_back(k);
                                         return Then::stop;
                                       });
  ASSERT_TRUE(waited);
  EXPECT_EQ(*waited, Waited::stopped);
  EXPECT_EQ(seen, std::vector<std::size_t>{0});
  EXPECT_LT(Clock::now() - started, 1s);
  EXPECT_EQ(b.in_flight(), 1u);  // still queued for a later wait
}

TEST(WaitForAnswers, EndsAtTheDeadlineWithTheSilentOnesStillInFlight) {
  FakeServer answers("+PONG\r\n", k_ping_bytes), silent("", k_ping_bytes);
  Connection a = answers.connection(), b = silent.connection();
  ASSERT_TRUE(a.begin(k_ping));
  ASSERT_TRUE(b.begin(k_ping));
  Connection* both[] = {&a, &b};
  int answers_seen = 0;
  const auto waited = wait_for_answers(both, Clock::now() + 200ms, -1,
                                       [&](std::size_t, Result<std::vector<Reply>>) {
                                         ++answers_seen;
                                         return Then::wait;
                                       });
  ASSERT_TRUE(waited);
  EXPECT_EQ(*waited, Waited::deadline);
  EXPECT_EQ(answers_seen, 1);
  EXPECT_EQ(a.in_flight(), 0u);
  EXPECT_EQ(b.in_flight(), 1u);
}

TEST(WaitForAnswers, PipelinedRequestsAnswerInOrder) {
  // Both answers arrive in one segment: the second must still come out.
  FakeServer server(":1\r\n:2\r\n", 2 * k_ping_bytes);
  Connection c = server.connection();
  ASSERT_TRUE(c.begin(k_ping));
  ASSERT_TRUE(c.begin(k_ping));
  EXPECT_EQ(c.in_flight(), 2u);
  Connection* one[] = {&c};
  std::vector<long long> values;
  const auto waited = wait_for_answers(one, Clock::now() + 5s, -1,
                                       [&](std::size_t, const Result<std::vector<Reply>>& replies) {
                                         if (replies) values.push_back(replies->front().integer);
                                         return Then::wait;
                                       });
  ASSERT_TRUE(waited);
  EXPECT_EQ(*waited, Waited::answered);
  EXPECT_EQ(values, (std::vector<long long>{1, 2}));
}

TEST(WaitForAnswers, AConnectionTheCallbackTookAwayIsNotTouchedAgain) {
  // Both answers arrive in one segment; after the first, the callback
  // gives the connection away (as the quorum does to a member's thread).
  FakeServer server(":1\r\n:2\r\n", 2 * k_ping_bytes);
  Connection c = server.connection();
  ASSERT_TRUE(c.begin(k_ping));
  ASSERT_TRUE(c.begin(k_ping));
  std::vector<Connection*> one{&c};
  int answers = 0;
  const auto waited =
      wait_for_answers(one, Clock::now() + 5s, -1, [&](std::size_t k, Result<std::vector<Reply>>) {
        ++answers;
        one[k] = nullptr;
        return Then::wait;
      });
  ASSERT_TRUE(waited);
  EXPECT_EQ(*waited, Waited::answered);
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(c.in_flight(), 1u);
}

TEST(WaitForAnswers, ARefusedConnectionIsAnUnreachableAnswer) {
  // A port nobody listens on: bind one, note it, close it.
  int probe = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length);
  close(probe);
  ConnectOptions options;
  options.url = *parse_url("redis://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + "/0");
  Connection c = Connection::unopened(options);
  Connection* one[] = {&c};
  if (auto begun = c.begin(k_ping); !begun) {
    EXPECT_EQ(begun.error().code, Error::Code::unreachable);
    return;
  }
  std::optional<Error> failure;
  const auto waited = wait_for_answers(one, Clock::now() + 5s, -1,
                                       [&](std::size_t, const Result<std::vector<Reply>>& replies) {
                                         if (!replies) failure = replies.error();
                                         return Then::wait;
                                       });
  ASSERT_TRUE(waited);
  EXPECT_EQ(*waited, Waited::answered);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->code, Error::Code::unreachable);
  EXPECT_NE(failure->message.find("cannot connect to"), std::string::npos) << failure->message;
  EXPECT_EQ(c.in_flight(), 0u);
}

TEST(WaitForAnswers, AnInterruptEndsTheWait) {
  FakeServer silent("", k_ping_bytes);
  Connection c = silent.connection();
  ASSERT_TRUE(c.begin(k_ping));
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  ASSERT_EQ(write(pipe_fds[1], "x", 1), 1);
  Connection* one[] = {&c};
  const auto waited =
      wait_for_answers(one, Clock::now() + 5s, pipe_fds[0],
                       [](std::size_t, Result<std::vector<Reply>>) { return Then::wait; });
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  ASSERT_FALSE(waited);
  EXPECT_EQ(waited.error().code, Error::Code::interrupted);
}

}  // namespace
}  // namespace rlock::redis
