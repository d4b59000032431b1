// A quorum of independent deployments: every call goes to all members at
// once, and the lock protocol's quorum arithmetic decides as replies come in.

#include "backend/quorum.h"

#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "lock/protocol.h"
#include "redis/multiplexer.h"
#include "redis/server_error.h"
#include "supervise/fd.h"
#include "util/duration.h"

namespace rlock::backend {

namespace {

using lock::MemberReply;
using supervise::Fd;

Fd make_eventfd() {
  return Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
}

void signal_eventfd(const Fd& fd) {
  const std::uint64_t one = 1;
  // A full counter (2^64 - 2 signals unread) is the only way to fail, and
  // it is readable then anyway.
  (void)!write(fd.get(), &one, sizeof one);
}

void drain_eventfd(const Fd& fd) {
  std::uint64_t count = 0;
  (void)!read(fd.get(), &count, sizeof count);
}

struct Batch;

/// One member. Its backend is used either by the caller's thread, step-wise
/// (Backend::start/finish: a request queued on a connection that
/// redis::wait_for_answers drives with every other member's), or, for what
/// cannot go that way (Sentinel, Cluster, WAIT, a reconnection, a
/// redirection), by a thread of its own, started at the first such job,
/// which runs the jobs posted to it in order. Never both at once: a job is
/// posted only after the member's step-wise requests have been handed over
/// to the thread (in order), and the step-wise path is used only while the
/// thread is idle. Order matters: a give-back release sent after an acquire
/// reaches the member after it, even when the acquire is stuck on a frozen
/// server. A running job can be cancelled through the member backend's
/// interrupt fd.
class Member {
 public:
  using Work = std::function<void(Backend&)>;

  /// A call queued step-wise, in the order of the connection's requests.
  struct InFlight {
    std::shared_ptr<Batch> batch;
    std::string name;
    lock::Call call;  // empty args: a BLPOP (wait_for_wake)
    Deadline deadline;
    Deadline sent;
  };

  explicit Member(std::unique_ptr<Backend> backend)
      : m_backend(std::move(backend)), m_template(m_backend->clone()), m_cancel(make_eventfd()) {
    m_backend->set_interrupt_fd(m_cancel.get());
  }

  Member(const Member&) = delete;
  Member& operator=(const Member&) = delete;

  ~Member() {
    stop_accepting();
    finish_by(Clock::now(), Millis(0));
  }

  /// Queues `work` for the member's thread; returns its id (for cancel).
  std::uint64_t post(Work work) {
    std::lock_guard lock(m_mutex);
    if (!m_thread.joinable()) {
      // The thread must never take a signal: `run` blocks signals and reads
      // them from a signalfd in the main thread, and a waiter's handler
      // must run there too. A thread inherits the creating thread's mask.
      sigset_t all, saved;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, &saved);
      m_thread = std::thread([this] { loop(); });
      pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    }
    const std::uint64_t id = ++m_last_id;
    m_jobs.push_back(Job{id, std::move(work)});
    m_wake.notify_one();
    return id;
  }

  /// Drops job `id` if it is still queued, interrupts it if it is running.
  void cancel(std::uint64_t id) {
    std::lock_guard lock(m_mutex);
    if (m_current == id) {
      signal_eventfd(m_cancel);
      return;
    }
    std::erase_if(m_jobs, [id](const Job& job) { return job.id == id; });
  }

  /// Whether the thread has nothing to do (then the backend is the
  /// caller's, for the step-wise path).
  bool idle() const {
    std::lock_guard lock(m_mutex);
    return m_jobs.empty() && m_current == 0;
  }

  /// The backend, for the step-wise path: only while idle().
  Backend& backend() { return *m_backend; }

  /// What clone(), describe() and the like read: a copy made up front,
  /// never touched by the thread.
  const Backend& model() const { return *m_template; }

  void stop_accepting() {
    std::lock_guard lock(m_mutex);
    m_stopping = true;
    m_wake.notify_one();
  }

  /// Lets queued jobs run until `deadline` (or, for a member that has not
  /// finished a single job yet, until the running one has run for `stuck`:
  /// it does not answer), then drops the rest, interrupts the running one
  /// and joins the thread.
  void finish_by(Deadline deadline, Millis stuck) {
    if (!m_thread.joinable()) return;
    {
      std::unique_lock lock(m_mutex);
      while (!(m_jobs.empty() && m_current == 0) && Clock::now() < deadline &&
             !(m_finished == 0 && m_current != 0 && Clock::now() - m_since > stuck))
        m_idle.wait_for(lock, Millis(2));
      m_jobs.clear();
      if (m_current != 0) signal_eventfd(m_cancel);
      m_wake.notify_one();
    }
    m_thread.join();
  }

  /// The step-wise requests, oldest first, and their connection.
  std::deque<InFlight> in_flight;
  redis::Connection* connection = nullptr;
  /// Whether the member answered anything step-wise in this process.
  bool answered = false;

 private:
  struct Job {
    std::uint64_t id;
    Work work;
  };

  void loop() {
    std::unique_lock lock(m_mutex);
    for (;;) {
      m_wake.wait(lock, [this] { return m_stopping || !m_jobs.empty(); });
      if (m_jobs.empty()) return;
      Job job = std::move(m_jobs.front());
      m_jobs.pop_front();
      m_current = job.id;
      m_since = Clock::now();
      lock.unlock();
      job.work(*m_backend);
      lock.lock();
      m_current = 0;
      ++m_finished;
      // A cancel aimed at the job that just ended must not hit the next.
      drain_eventfd(m_cancel);
      m_idle.notify_all();
    }
  }

  std::unique_ptr<Backend> m_backend;
  std::unique_ptr<Backend> m_template;
  Fd m_cancel;
  mutable std::mutex m_mutex;
  std::condition_variable m_wake, m_idle;
  std::deque<Job> m_jobs;
  std::uint64_t m_current = 0, m_last_id = 0;
  Deadline m_since{};            // when the running job started
  std::uint64_t m_finished = 0;  // jobs finished (answered or failed)
  bool m_stopping = false;
  std::thread m_thread;
};

/// Where the answers to one call sent to several members land, shared by
/// the caller and the members' threads (a member may answer after the
/// caller has decided and moved on).
struct Batch {
  explicit Batch(std::size_t members)
      : replies(members),
        lists(members),
        uptimes(members),
        roles(members),
        servers(members),
        jobs(members, 0) {}
  std::mutex mutex;
  std::vector<MemberReply> replies;
  std::vector<std::optional<Result<std::vector<NamedReply>>>> lists;
  /// A listing's: each member's uptime in ms (nullopt: it did not say).
  std::vector<std::optional<std::int64_t>> uptimes;
  /// A listing's: each member's role ("master", "slave"; "": not said).
  std::vector<std::string> roles;
  /// A listing's: each member's answer to the uptime question, whose last
  /// element is its server's run_id (lock::same_server reads it).
  std::vector<MemberReply> servers;
  std::vector<std::uint64_t> jobs;  // the caller's: thread job id per member, 0 = none
  Fd ready = make_eventfd();

  void answer(std::size_t member, MemberReply reply) {
    std::lock_guard lock(mutex);
    replies[member] = std::move(reply);
    signal_eventfd(ready);
  }
};

MemberReply failed_reply(std::string problem) {
  MemberReply m;
  m.state = MemberReply::State::failed;
  m.problem = std::move(problem);
  return m;
}

/// A member that failed with `error`: why, and whether no retry mends it.
MemberReply failed_reply(const Error& error) {
  MemberReply m = failed_reply(error.message);
  m.misconfigured = error.code == Error::Code::config;
  m.auth_refused = error.code == Error::Code::auth;
  m.read_only = error.server == redis::ServerError::readonly;
  return m;
}

MemberReply reply_of(Result<Outcome> outcome) {
  MemberReply m;
  if (!outcome) {
    m = failed_reply(outcome.error());
  } else if (outcome->ack && !outcome->ack->enough()) {
    // A lease the member's replicas did not acknowledge does not count.
    m.state = MemberReply::State::failed;
    m.unacknowledged = true;
    m.problem = outcome->ack->problem.empty()
                    ? fmt::format("{} of {} replicas acknowledged", outcome->ack->acknowledged,
                                  outcome->ack->wanted)
                    : outcome->ack->problem;
  } else {
    m.state = MemberReply::State::replied;
    m.reply = std::move(outcome->reply);
  }
  return m;
}

class QuorumBackend final : public Backend {
 public:
  QuorumBackend(std::vector<std::unique_ptr<Backend>> members, Notice notice)
      : m_notice(std::move(notice)), m_notices(std::make_shared<MemberNotices>(members.size())) {
    for (auto& m : members) m_members.push_back(std::make_unique<Member>(std::move(m)));
  }

  ~QuorumBackend() override {
    // Give-backs and queue exits still on their way to a member that
    // answers are worth finishing (a millisecond each, more on a loaded
    // machine); a frozen member's are not worth waiting for: its leases
    // expire by themselves. A member that has not finished one job in this
    // process and whose job has run for 100 ms is taken as not answering
    // (one that answers takes milliseconds, its first job included:
    // connecting and loading the script; a verdict reached early, when
    // three of five members refused the connection at once, leaves the
    // others' first jobs running, and their give-backs behind them), so a
    // frozen member does not cost the whole grace at every exit.
    // The same rule holds for step-wise requests: a member that has
    // answered nothing in this process, and whose oldest request has been
    // out for 100 ms, is not waited for.
    constexpr Millis k_grace{250};
    constexpr Millis k_stuck{100};
    const Deadline until = Clock::now() + k_grace;
    for (;;) {
      auto connections = busy_connections();
      bool any = false;
      for (std::size_t k = 0; k < m_members.size(); ++k) {
        const Member& m = *m_members[k];
        if (connections[k] && !m.answered && Clock::now() - m.in_flight.front().sent > k_stuck)
          connections[k] = nullptr;
        any = any || connections[k];
      }
      if (!any || Clock::now() >= until) break;
      // In slices, so that a member's turn to count as stuck is noticed.
      if (!drive(std::move(connections), std::min(until, Clock::now() + Millis(10)), -1)) break;
    }
    for (auto& m : m_members) m->stop_accepting();
    for (auto& m : m_members) m->finish_by(until, k_stuck);
  }

  Result<Outcome> run(const std::string& name, const lock::Call& call, Deadline deadline) override;
  bool holder_waits() const override { return false; }
  Result<void> wait_for_wake(const std::string& name, const std::string& token, Millis block,
                             Deadline by) override;
  void part(const std::string& name, const lock::Call& call) override {
    // A member whose thread is busy has the stuck request there, and its
    // own retries; the step-wise connections are the caller's.
    for (auto& m : m_members)
      if (m->idle()) m->backend().part(name, call);
  }
  Result<void> for_every_lock(const lock::Call& call, const LockSink& sink) override {
    return list(call, sink, nullptr);
  }
  /// A member out of reach is a gap: the listing shows what the others
  /// hold, and a lock it could make a majority holder of shows without
  /// that holder.
  Result<void> for_every_reachable_lock(const lock::Call& call, const LockSink& sink,
                                        const GapSink& gaps) override {
    return list(call, sink, gaps ? &gaps : nullptr);
  }

  void set_interrupt_fd(int fd) override { m_interrupt_fd = fd; }
  int interrupt_fd() const override { return m_interrupt_fd; }
  Millis command_timeout() const override { return m_members.front()->model().command_timeout(); }

  std::string describe() const override {
    std::vector<std::string> names;
    names.reserve(m_members.size());
    for (const auto& m : m_members) names.push_back(m->model().describe());
    return fmt::format("quorum of {} ({})", m_members.size(), fmt::join(names, ", "));
  }

  std::string acl_user() const override { return m_members.front()->model().acl_user(); }

  std::unique_ptr<Backend> clone() const override {
    std::vector<std::unique_ptr<Backend>> members;
    members.reserve(m_members.size());
    for (const auto& m : m_members) members.push_back(m->model().clone());
    auto copy = std::make_unique<QuorumBackend>(std::move(members), m_notice);
    copy->m_notices = m_notices;  // shared: each member is told of once per process
    copy->m_interrupt_fd = m_interrupt_fd;
    copy->m_held = m_held;
    return copy;
  }

 private:
  using Decided = std::function<bool(const std::vector<MemberReply>&)>;

  /// Sends `call` for `name` to the members in `to` (empty: all); the
  /// others count as failed ("not asked").
  std::shared_ptr<Batch> send(const std::string& name, const lock::Call& call, Deadline deadline,
                              const std::vector<std::size_t>& to = {});
  /// Sends `name`'s `call` (empty args: the BLPOP of a wait for `block`
  /// on `token`'s wake list) to member `k` for `batch`: step-wise when the
  /// member's backend can take it that way, else on the member's thread.
  void dispatch(std::size_t k, const std::shared_ptr<Batch>& batch, const std::string& name,
                const lock::Call& call, Deadline deadline, const std::string& token = {},
                Millis block = Millis(0));
  /// Hands member `k`'s step-wise requests over to its thread, in order,
  /// and closes the step-wise connection.
  void hand_over(std::size_t k);
  /// Posts `work` to member `k`'s thread, after hand_over(k).
  std::uint64_t post(std::size_t k, Member::Work work);
  /// Posts run(name, call, deadline) to member `k`'s thread, answering `batch`.
  std::uint64_t post_run(std::size_t k, const std::shared_ptr<Batch>& batch,
                         const std::string& name, const lock::Call& call, Deadline deadline);
  /// What member `k`'s oldest step-wise request got: its batch's answer, a
  /// request queued again, or a follow-up on the member's thread.
  void on_answer(std::size_t k, Result<std::vector<redis::Reply>> answer);
  /// Drops member `k`'s step-wise requests (answered as failed) and closes
  /// its connection (a blocked BLPOP ends only so).
  void abandon(std::size_t k, const std::string& why);
  /// Per member, its connection if it has step-wise requests in flight.
  std::vector<redis::Connection*> busy_connections() const;
  /// redis::wait_for_answers on `connections` (members' step-wise
  /// requests), answers going to on_answer, until `decided` (if given).
  Result<redis::Waited> drive(std::vector<redis::Connection*> connections, Deadline deadline,
                              int interrupt_fd, const std::function<bool()>& decided = {},
                              int wake_fd = -1);
  /// Writes what the sockets take now and reads what has arrived, without
  /// waiting: what was just sent leaves at once.
  void kick();
  /// Waits until `decided` says so, the deadline passes (members that have
  /// not answered stay pending) or the interrupt fd becomes readable. Every
  /// member's step-wise requests advance meanwhile, whatever their batch.
  Result<std::vector<MemberReply>> gather(Batch& batch, Deadline deadline, const Decided& decided);
  /// Every member's listing merged (for_every_lock); with `gaps`, each
  /// member that did not list its locks is handed to it.
  Result<void> list(const lock::Call& call, const LockSink& sink, const GapSink* gaps);
  /// Gathers `batch` further for the members slower than those that
  /// decided: as long again as the operation took since `started` (2 ms at
  /// least), never past `deadline`, so that a frozen member costs at most
  /// that. `at_least` replaces the 2 ms where an accurate count matters
  /// more than a millisecond (a failure being explained).
  Result<std::vector<MemberReply>> hear_slower(Batch& batch, Clock::time_point started,
                                               Deadline deadline, Millis at_least = Millis(2));
  /// Every member's answer, for a call whose answer is each member's view
  /// (status, a forced release): once a majority has answered, the others
  /// get as long again as that took, `at_least` k_stragglers, so that a
  /// frozen member costs a moment, not the command timeout.
  Result<std::vector<MemberReply>> hear_all(Batch& batch, Clock::time_point started,
                                            Deadline deadline);
  /// Releases `token` on the given members without waiting for them;
  /// `keep` says what stays of its places in their queues.
  void give_back(const std::string& name, const std::string& token,
                 const std::vector<std::size_t>& to, lock::KeepPlace keep = lock::KeepPlace::no);
  /// The unreachable error naming what the members said.
  Error too_few(const std::string& what, const std::vector<MemberReply>& replies) const;
  /// The configuration error when a member failed by one (exit 78), or two
  /// members' acquire replies come from one server (lock::same_server).
  std::optional<Error> misconfiguration(const std::vector<MemberReply>& replies) const;
  /// "; MEMBER: PROBLEM" for each member that did not reply.
  std::string problems_of(const std::vector<MemberReply>& replies) const;
  /// status NAME when the members cannot tell whether the lock is held.
  Error in_doubt(const std::string& name, const lock::InDoubt& doubt, Millis min_uptime,
                 const std::vector<MemberReply>& replies) const;
  std::vector<std::string> member_names() const {
    std::vector<std::string> names;
    names.reserve(m_members.size());
    for (const auto& m : m_members) names.push_back(m->model().describe());
    return names;
  }

  Result<Outcome> acquire(const std::string& name, const lock::Call& call, Deadline deadline);
  Result<Outcome> renew(const std::string& name, const lock::Call& call, Deadline deadline);
  Result<Outcome> release(const std::string& name, const lock::Call& call, Deadline deadline);

  /// Tells m_notice of each member flagged in `read_only` (a read-only
  /// replica) that it was not told of before, once per member.
  void tell_read_only(const std::vector<bool>& read_only);
  /// Tells of each member whose host name does not resolve, once.
  void tell_unresolved(const std::vector<MemberReply>& replies);

  std::vector<std::unique_ptr<Member>> m_members;
  Notice m_notice;
  /// The members seen to be read-only replicas or to have a host name that
  /// does not resolve, and told of (m_notice), shared with the clones
  /// (run's heartbeat) so that a process tells of each member once.
  struct MemberNotices {
    explicit MemberNotices(std::size_t n) : read_only(n, false), unresolved(n, false) {}
    std::mutex mutex;
    std::vector<bool> read_only;  // the read-only replicas, told of
    /// The members whose host name does not resolve, told of likewise.
    std::vector<bool> unresolved;
  };
  std::shared_ptr<MemberNotices> m_notices;
  int m_interrupt_fd = -1;
  /// Set when the last acquire gave back grants it got on a minority: the
  /// next wait is a short random pause instead (see wait_for_wake).
  bool m_back_off = false;
  /// The acquire (as a non-queuing try) of each token this backend got a
  /// grant for: a renewal takes the lock again with it on a member that
  /// lost it. Copied by clone(), which `run` calls after acquiring.
  std::map<std::string, lock::Call> m_held;
  std::mt19937 m_random{std::random_device{}()};
};

std::shared_ptr<Batch> QuorumBackend::send(const std::string& name, const lock::Call& call,
                                           Deadline deadline, const std::vector<std::size_t>& to) {
  auto batch = std::make_shared<Batch>(m_members.size());
  for (std::size_t k = 0; k < m_members.size(); ++k) {
    if (!to.empty() && std::find(to.begin(), to.end(), k) == to.end()) {
      batch->replies[k] = failed_reply("not asked");
      continue;
    }
    dispatch(k, batch, name, call, deadline);
  }
  kick();
  return batch;
}

void QuorumBackend::dispatch(std::size_t k, const std::shared_ptr<Batch>& batch,
                             const std::string& name, const lock::Call& call, Deadline deadline,
                             const std::string& token, Millis block) {
  Member& m = *m_members[k];
  const bool wake = call.args.empty();
  if (m.idle()) {
    Backend& backend = m.backend();
    if (redis::Connection* c =
            wake ? backend.start_wake(name, token, block) : backend.start(name, call)) {
      m.connection = c;
      m.in_flight.push_back({batch, name, call, deadline, Clock::now()});
      return;
    }
  }
  if (!wake) {
    batch->jobs[k] = post_run(k, batch, name, call, deadline);
    return;
  }
  batch->jobs[k] = post(k, [batch, k, name, token, block, deadline](Backend& backend) {
    MemberReply m;
    if (auto woke = backend.wait_for_wake(name, token, block, deadline); woke) {
      m.state = MemberReply::State::replied;
    } else {
      m = failed_reply(woke.error().message);
    }
    batch->answer(k, std::move(m));
  });
}

void QuorumBackend::hand_over(std::size_t k) {
  Member& m = *m_members[k];
  if (m.in_flight.empty()) return;
  // The thread runs them again, in order (operations are idempotent by
  // token, so one the server already ran may run twice); a BLPOP is not
  // worth running again: its waiter asks again anyway.
  std::deque<Member::InFlight> moved = std::move(m.in_flight);
  m.in_flight.clear();
  m.connection->abandon();
  for (auto& f : moved) {
    if (f.call.args.empty()) {
      f.batch->answer(k, failed_reply("cancelled"));
      continue;
    }
    f.batch->jobs[k] = post_run(k, f.batch, f.name, f.call, f.deadline);
  }
}

std::uint64_t QuorumBackend::post(std::size_t k, Member::Work work) {
  hand_over(k);
  return m_members[k]->post(std::move(work));
}

std::uint64_t QuorumBackend::post_run(std::size_t k, const std::shared_ptr<Batch>& batch,
                                      const std::string& name, const lock::Call& call,
                                      Deadline deadline) {
  return post(k, [batch, k, name, call, deadline](Backend& backend) {
    batch->answer(k, reply_of(backend.run(name, call, deadline)));
  });
}

void QuorumBackend::on_answer(std::size_t k, Result<std::vector<redis::Reply>> answer) {
  Member& m = *m_members[k];
  m.answered = true;
  Member::InFlight f = std::move(m.in_flight.front());
  m.in_flight.pop_front();
  if (f.call.args.empty()) {
    // A BLPOP: any reply ends the wait (a wake-up, or the block's end).
    if (answer) {
      MemberReply woke;
      woke.state = MemberReply::State::replied;
      f.batch->answer(k, std::move(woke));
    } else {
      f.batch->answer(k, failed_reply(answer.error().message));
    }
    return;
  }
  Backend::Stepped stepped = m.backend().finish(f.name, f.call, std::move(answer));
  if (stepped.outcome) {
    f.batch->answer(k, reply_of(std::move(*stepped.outcome)));
  } else if (stepped.again) {
    // Queued again at the end of the connection's requests: so in ours.
    m.in_flight.push_back(std::move(f));
  } else {
    // A follow-up (reconnect, redirection, WAIT, a transient refusal):
    // run() on the member's thread, with what is left of the deadline, so
    // that it cannot hold up the other members; before the requests queued
    // after it, which follow it there.
    m.in_flight.push_front(std::move(f));
    hand_over(k);
  }
}

void QuorumBackend::abandon(std::size_t k, const std::string& why) {
  Member& m = *m_members[k];
  if (m.in_flight.empty()) return;
  for (auto& f : m.in_flight) f.batch->answer(k, failed_reply(why));
  m.in_flight.clear();
  m.connection->abandon();
}

std::vector<redis::Connection*> QuorumBackend::busy_connections() const {
  std::vector<redis::Connection*> connections(m_members.size(), nullptr);
  for (std::size_t k = 0; k < m_members.size(); ++k)
    if (!m_members[k]->in_flight.empty()) connections[k] = m_members[k]->connection;
  return connections;
}

Result<redis::Waited> QuorumBackend::drive(std::vector<redis::Connection*> connections,
                                           Deadline deadline, int interrupt_fd,
                                           const std::function<bool()>& decided, int wake_fd) {
  return redis::wait_for_answers(
      connections, deadline, interrupt_fd,
      [&](std::size_t k, Result<std::vector<redis::Reply>> answer) {
        on_answer(k, std::move(answer));
        // Nothing left in flight: done, or handed over to the member's
        // thread, whose connection it is now. Not to be touched again.
        if (m_members[k]->in_flight.empty()) connections[k] = nullptr;
        return decided && decided() ? redis::Then::stop : redis::Then::wait;
      },
      wake_fd);
}

void QuorumBackend::kick() {
  // A deadline already passed: every connection steps once, nothing waits.
  (void)drive(busy_connections(), Clock::now(), -1);
}

Result<std::vector<MemberReply>> QuorumBackend::gather(Batch& batch, Deadline deadline,
                                                       const Decided& decided) {
  const auto snapshot = [&batch] {
    std::lock_guard lock(batch.mutex);
    return batch.replies;
  };
  const auto done = [&decided](const std::vector<MemberReply>& replies) {
    return decided(replies) ||
           std::none_of(replies.begin(), replies.end(), [](const MemberReply& m) {
             return m.state == MemberReply::State::pending;
           });
  };
  for (;;) {
    auto replies = snapshot();
    if (done(replies) || Clock::now() >= deadline) {
      std::vector<bool> read_only(replies.size());
      for (std::size_t k = 0; k < replies.size(); ++k)
        read_only[k] = lock::read_only_member(replies[k]);
      tell_read_only(read_only);
      tell_unresolved(replies);
      return replies;
    }
    // Step-wise answers land in their batches through on_answer; a
    // thread's answer signals batch.ready (woken).
    auto waited = drive(
        busy_connections(), deadline, m_interrupt_fd, [&] { return done(snapshot()); },
        batch.ready.get());
    if (!waited) {
      if (waited.error().code == Error::Code::interrupted)
        return fail(Error::Code::interrupted, "interrupted while waiting for the quorum");
      return std::unexpected(waited.error());
    }
    if (*waited == redis::Waited::woken) drain_eventfd(batch.ready);
  }
}

namespace {

/// How much failure a quorum of `n` still bears with only `able` members
/// that can take a lock.
std::string what_may_fail(std::size_t n, std::size_t able) {
  const std::size_t need = lock::majority(n);
  return able < need   ? fmt::format("no majority ({}) can take it", need)
         : able > need ? fmt::format("only {} may fail (a majority is {})", able - need, need)
                       : fmt::format("none may fail (a majority is {})", need);
}

/// Whether a member failed because its host name does not exist (a typo:
/// no retry mends it), not because the resolver is slow or out of reach.
bool unresolvable(const MemberReply& m) {
  return m.state == MemberReply::State::failed &&
         m.problem.find("cannot resolve") != std::string::npos &&
         (m.problem.find("Name or service not known") != std::string::npos ||
          m.problem.find("No address associated with hostname") != std::string::npos);
}

}  // namespace

void QuorumBackend::tell_unresolved(const std::vector<MemberReply>& replies) {
  if (!m_notice) return;
  std::vector<std::size_t> news;
  {
    std::lock_guard lock(m_notices->mutex);
    for (std::size_t k = 0; k < replies.size() && k < m_members.size(); ++k)
      if (unresolvable(replies[k]) && !m_notices->unresolved[k]) {
        m_notices->unresolved[k] = true;
        news.push_back(k);
      }
  }
  const std::size_t n = m_members.size();
  for (const std::size_t k : news)
    m_notice(fmt::format(
        "quorum member {}: its host name does not resolve (a typo?), so it counts as down on "
        "every try: of the other {}, {}",
        m_members[k]->model().describe(), n - 1, what_may_fail(n, n - 1)));
}

void QuorumBackend::tell_read_only(const std::vector<bool>& read_only_now) {
  if (!m_notice) return;
  std::vector<std::size_t> news;
  std::size_t read_only = 0;
  {
    std::lock_guard lock(m_notices->mutex);
    for (std::size_t k = 0; k < read_only_now.size() && k < m_members.size(); ++k)
      if (read_only_now[k] && !m_notices->read_only[k]) {
        m_notices->read_only[k] = true;
        news.push_back(k);
      }
    read_only = static_cast<std::size_t>(
        std::count(m_notices->read_only.begin(), m_notices->read_only.end(), true));
  }
  const std::size_t n = m_members.size(), able = n - read_only;
  for (const std::size_t k : news) {
    const std::string left = what_may_fail(n, able);
    m_notice(
        fmt::format("quorum member {} is a read-only replica and cannot take a lock: {} of "
                    "{} members can, so {}; {}",
                    m_members[k]->model().describe(), able, n, left, lock::k_read_only_fix));
  }
}

Result<std::vector<MemberReply>> QuorumBackend::hear_slower(Batch& batch, Clock::time_point started,
                                                            Deadline deadline, Millis at_least) {
  const auto so_far = std::max(at_least, std::chrono::ceil<Millis>(Clock::now() - started));
  return gather(batch, std::min(deadline, Clock::now() + so_far),
                [](const std::vector<MemberReply>&) { return false; });
}

Result<std::vector<MemberReply>> QuorumBackend::hear_all(Batch& batch, Clock::time_point started,
                                                         Deadline deadline) {
  // A live member on a loaded machine answers within milliseconds of the
  // others, seldom a second later: the same second the operator waits
  // for a frozen one.
  constexpr Millis k_stragglers{1000};
  const std::size_t need = lock::majority(m_members.size());
  auto majority = gather(batch, deadline, [need](const std::vector<MemberReply>& r) {
    return static_cast<std::size_t>(std::count_if(r.begin(), r.end(), [](const MemberReply& m) {
             return m.state != MemberReply::State::pending;
           })) >= need;
  });
  if (!majority) return majority;
  return hear_slower(batch, started, deadline, k_stragglers);
}

void QuorumBackend::give_back(const std::string& name, const std::string& token,
                              const std::vector<std::size_t>& to, lock::KeepPlace keep) {
  if (to.empty()) return;
  (void)send(name, lock::release_call(token, keep), Clock::now() + command_timeout(), to);
}

/// How many members gave an answer (an error reply is none).
std::size_t members_answering(const std::vector<MemberReply>& replies) {
  return static_cast<std::size_t>(
      std::count_if(replies.begin(), replies.end(), [](const MemberReply& m) {
        return m.state == MemberReply::State::replied && !m.reply.is_error();
      }));
}

std::string QuorumBackend::problems_of(const std::vector<MemberReply>& replies) const {
  std::string problems;
  for (std::size_t k = 0; k < replies.size(); ++k) {
    if (replies[k].state == MemberReply::State::replied) continue;
    const std::string name = m_members[k]->model().describe();
    problems += fmt::format("; {}: {}", name,
                            replies[k].state == MemberReply::State::pending
                                ? "no answer yet"
                                : lock::without_member_name(replies[k].problem, name));
  }
  return problems;
}

std::optional<Error> QuorumBackend::misconfiguration(
    const std::vector<MemberReply>& replies) const {
  // A member configured wrongly is as much the user's to fix: the quorum
  // would otherwise run on the others, one failure from refusing.
  for (std::size_t k = 0; k < replies.size(); ++k)
    if (replies[k].misconfigured)
      return Error{Error::Code::config,
                   fmt::format("quorum member {}: {}", m_members[k]->model().describe(),
                               lock::without_member_name(replies[k].problem,
                                                         m_members[k]->model().describe())),
                   redis::ServerError::none};
  const auto pair = lock::same_server(replies);
  if (!pair) return std::nullopt;
  return Error{Error::Code::config,
               fmt::format("quorum members {} and {} are one Redis server (run_id {}), reached "
                           "two ways: it would vote twice, and its grant alone could make a "
                           "majority; give each deployment once",
                           m_members[pair->first]->model().describe(),
                           m_members[pair->second]->model().describe(),
                           replies[pair->first].reply.elements.back().str.substr(0, 8)),
               redis::ServerError::none};
}

Error QuorumBackend::too_few(const std::string& what,
                             const std::vector<MemberReply>& replies) const {
  // So many members refuse our credentials that no majority can answer
  // until they are fixed: an auth error (77), which waiting does not mend,
  // rather than an outage (69) that a cron wrapper would retry forever.
  const auto refusing = static_cast<std::size_t>(std::count_if(
      replies.begin(), replies.end(), [](const MemberReply& m) { return m.auth_refused; }));
  const bool auth = refusing > replies.size() - lock::majority(replies.size());
  // Replicas answer, but cannot take part in a write: said as such, not
  // left to be read as members out of reach.
  const auto read_only = static_cast<std::size_t>(
      std::count_if(replies.begin(), replies.end(), lock::read_only_member));
  const std::string replicas =
      read_only == 0
          ? ""
          : fmt::format(" ({} {} read-only {}, which cannot take a lock)", read_only,
                        read_only == 1 ? "is a" : "are", read_only == 1 ? "replica" : "replicas");
  Error error{auth ? Error::Code::auth : Error::Code::unreachable,
              fmt::format("{} of {} quorum members: a majority is {}{}{}", what, replies.size(),
                          lock::majority(replies.size()), replicas, problems_of(replies)),
              redis::ServerError::none};
  // Members that have not answered yet (frozen, slow) rather than refused:
  // a waiter (-w) tries again within its wait, as it waits for one server
  // that does not answer; one that refuses connections is an outage at
  // once, as a server down from the start is.
  error.failing_over =
      !auth && std::any_of(replies.begin(), replies.end(), [](const MemberReply& m) {
        return m.state == MemberReply::State::pending;
      });
  return error;
}

Error QuorumBackend::in_doubt(const std::string& name, const lock::InDoubt& doubt,
                              Millis min_uptime, const std::vector<MemberReply>& replies) const {
  const std::size_t n = replies.size();
  std::string what;
  if (doubt.contested) {
    what = fmt::format(
        "lock '{}': neither held nor free: no holder is on a majority of the {} quorum members, "
        "and only {} show no holder, fewer than a grant needs; holders on fewer members ({}) "
        "keep it from anyone until their leases end",
        name, n, doubt.free, doubt.holders);
  } else if (doubt.holder.empty()) {
    what = fmt::format(
        "lock '{}': cannot tell whether it is held: no holder is named, but only {} of {} "
        "quorum members have been up for the TTL ({}), {} for less{} (a member restarted "
        "more recently may have lost a holder)",
        name, doubt.old, n, format_duration(min_uptime), doubt.young,
        doubt.old + doubt.young < n
            ? fmt::format(", {} did not answer", n - doubt.old - doubt.young)
            : std::string());
  } else if (doubt.young > 0) {
    what = fmt::format(
        "lock '{}': cannot tell whether it is held: holder {} is on {} of {} quorum members; "
        "{} of the others {} been up for less than the TTL ({}) and may have lost it in a "
        "restart",
        name, doubt.holder, doubt.on, n, doubt.young, doubt.young == 1 ? "has" : "have",
        format_duration(min_uptime));
  } else {
    return too_few(fmt::format("lock '{}': cannot tell whether it is held: holder {} is on {}",
                               name, doubt.holder, doubt.on),
                   replies);
  }
  return Error{Error::Code::unreachable,
               fmt::format("{}: a majority is {}{}", what, lock::majority(n), problems_of(replies)),
               redis::ServerError::none};
}

Result<Outcome> QuorumBackend::acquire(const std::string& name, const lock::Call& call,
                                       Deadline deadline) {
  // Each member counts only its own holders: with a limit of N, N + 1
  // holders can each hold a majority without any member seeing more than
  // N (with five members and N = 2: {1,2,3}, {3,4,5}, {1,2,4,5}). Only one
  // holder at a time (an exclusive lock: any two majorities share a
  // member) or readers against a writer (a shared lock: the same) are safe.
  if (const int limit = lock::requested_limit(call); limit > 1)
    return fail(Error::Code::usage,
                fmt::format("--limit {}: a quorum of deployments cannot keep a counting "
                            "semaphore (each member counts only its own holders, so more than "
                            "{} could each hold a majority); use one deployment for it",
                            limit, limit));
  const auto started = Clock::now();
  const Millis ttl = lock::requested_ttl(call);
  // Past the TTL no grant could still be valid (validity = TTL - time
  // spent): waiting longer for frozen members only delays the answer.
  if (ttl > Millis(0)) deadline = std::min(deadline, started + ttl);
  const std::string& token = call.args.at(1);
  const bool enqueue = call.args.size() > 6 && call.args[6] == "1";
  std::vector<std::size_t> everyone(m_members.size());
  for (std::size_t k = 0; k < everyone.size(); ++k) everyone[k] = k;
  // A member that may have restarted without its data may have forgotten a
  // holder that still counts it in its majority: it does not count until it
  // has been up for the TTL (the "delayed restart" of Redlock).
  auto batch = send(name, lock::with_min_uptime(call, ttl), deadline);
  auto replies = gather(*batch, deadline, [](const std::vector<MemberReply>& r) {
    const auto count = lock::count_acquire(r);
    return count.verdict != lock::Verdict::pending || count.split;
  });
  // A majority answered, and the lock went to several waiters (each member
  // hands it to the head of its own queue): only the members yet to answer
  // could still make our grants a majority. A member that is merely slower
  // is given as long again as the acquire took so far (k_split_grace at
  // least). Waiting for a frozen one until the deadline (the command
  // timeout, 5 s) held our grants, extended to the TTL by this very
  // acquire, and the waiter holding the other grants did the same: nobody
  // got the lock while one member of five was frozen. After the grace it
  // counts as not granted: everything is given back (on the silent member
  // behind the request still stuck there), and the next try comes after a
  // random pause.
  if (const auto count = replies ? lock::count_acquire(*replies) : lock::AcquireCount{};
      count.verdict == lock::Verdict::pending && count.split) {
    constexpr Millis k_split_grace{50};
    const auto so_far = std::max(k_split_grace, std::chrono::ceil<Millis>(Clock::now() - started));
    replies = gather(*batch, std::min(deadline, Clock::now() + so_far),
                     [](const std::vector<MemberReply>& r) {
                       return lock::count_acquire(r).verdict != lock::Verdict::pending;
                     });
  }
  if (!replies) {
    give_back(name, token, everyone);
    return std::unexpected(replies.error());
  }
  if (auto twice = misconfiguration(*replies)) {
    give_back(name, token, everyone);
    return std::unexpected(*twice);
  }
  auto count = lock::count_acquire(*replies);
  if (count.verdict == lock::Verdict::yes) {
    // A member that is merely slower than the others is given as long
    // again as the acquire took so far (a frozen one costs at most that):
    // holding on more than a bare majority is what lets a lock survive the
    // loss of a member later. Its grant counts from here on (answers add
    // grants, but may also show a holder that discounts some: see below).
    // 20 ms at least: a member configured wrongly (a Sentinel URL naming a
    // plain server) answers a round trip or two after the others, and on a
    // busy machine 2 ms missed it, so the lock ran on the others.
    constexpr Millis k_hear_misconfigured{20};
    // Never into the second half of the TTL (beyond those 20 ms): a
    // majority that took long to gather (a member frozen, another slow)
    // would otherwise spend the grant's validity waiting for the frozen
    // one, and the fence could not even be raised in time.
    const Deadline hear_by =
        std::min(deadline, std::max(Clock::now() + k_hear_misconfigured, started + ttl / 2));
    auto late = hear_slower(*batch, started, hear_by, k_hear_misconfigured);
    if (!late) {
      give_back(name, token, everyone);
      return std::unexpected(late.error());
    }
    if (auto twice = misconfiguration(*late)) {
      give_back(name, token, everyone);
      return std::unexpected(*twice);
    }
    count = lock::count_acquire(*late);
    // A slower member showed a holder older than some granting members
    // have been up (count_acquire): their grants do not count after all,
    // and the lock is busy, not ours.
    if (count.verdict != lock::Verdict::yes) {
      give_back(name, token, everyone);
      m_back_off = true;
      return Outcome{count.refusal, std::nullopt};
    }
    // Raise every granting member's counter to the highest fence any of
    // them returned, the one handed out, so that any later majority (which
    // shares a member with this one) hands out a higher one. Only then is
    // the grant returned.
    auto raise = send(name, lock::raise_call(count.fence, token), deadline, count.grants);
    auto raised = gather(*raise, deadline, [](const std::vector<MemberReply>&) { return false; });
    if (!raised) {
      give_back(name, token, everyone);
      return std::unexpected(raised.error());
    }
    std::size_t confirmed = 0;
    for (std::size_t k : count.grants) {
      const auto& m = (*raised)[k];
      if (m.state == MemberReply::State::replied && m.reply.type == redis::Reply::Type::integer &&
          m.reply.integer >= count.fence)
        ++confirmed;
    }
    const auto spent = std::chrono::ceil<Millis>(Clock::now() - started);
    if (confirmed >= lock::majority(m_members.size()) && lock::validity(ttl, spent) > Millis(0)) {
      // Renewals and the release reach every member. Leave the queues of
      // the members that did not grant, and give back a grant that is
      // still on its way, so that nobody waits behind us there.
      std::vector<std::size_t> others;
      for (std::size_t k : everyone)
        if (std::find(count.grants.begin(), count.grants.end(), k) == count.grants.end())
          others.push_back(k);
      give_back(name, token, others);
      lock::Call retake = call;
      // assign(), not = "0": GCC 12 sees an overlap in the inlined copy
      // of a literal (a -Wrestrict false positive).
      retake.args[6].assign(1, '0');
      m_held[token] = std::move(retake);
      redis::Reply granted;
      granted.type = redis::Reply::Type::array;
      granted.elements = {redis::Reply::of_integer(1), redis::Reply::of_integer(count.fence)};
      return Outcome{std::move(granted), std::nullopt};
    }
    give_back(name, token, everyone);
    m_back_off = true;
    if (confirmed < lock::majority(m_members.size()))
      return std::unexpected(too_few(
          fmt::format("lock '{}': the fence was raised on only {}", name, confirmed), *raised));
    return Outcome{count.refusal, std::nullopt};
  }
  // Not a majority. A waiter keeps its place on every member that answers
  // in time: a member merely slower than the ones that decided is given as
  // long again as the acquire took so far (as a grant's, above), so that
  // it queues us rather than being given back. Otherwise each re-check
  // would put us back at the tail of the slower members' queues, and the
  // members would never agree on who is next (FIFO).
  // A caller that cannot wait is told how many members count: the young
  // ones that have not answered yet are waited for the same way.
  if ((enqueue || count.young > 0) && count.pending > 0 && count.verdict == lock::Verdict::no) {
    replies = hear_slower(*batch, started, deadline);
    if (!replies) {
      give_back(name, token, everyone);
      return std::unexpected(replies.error());
    }
    count = lock::count_acquire(*replies);
  }
  // Give back what was granted (and what may still be, from a member that
  // has not answered), keep our places in the queues: also a place on a
  // member that answers too late to count (it was there from an earlier
  // try, or it is being taken now). A late member's refusal used to take
  // the place away, and the next try put the waiter back at the tail
  // there: under load the members' queues drifted apart and a later
  // waiter could collect a majority first.
  // Split grants are the exception: giving back only the grants put each
  // contender at the tail of the members that had granted to it, and kept
  // its early place on the others, which then handed the lock to it while
  // the first ones handed it to its rival: the same split again, mirrored,
  // for seconds on end while a member was frozen or dead (nothing breaks
  // the tie). A contender leaves every queue instead, and queues again
  // after its random pause, behind the waiters that did not take part.
  // A grant a member handed over from our place in its queue goes back to
  // that place while a majority still shows the last holder: its release
  // reaches the members one after another, and a member that woke us first
  // would otherwise hand the lock to the waiter behind us, and queue us
  // again at its tail (the quorum then served its waiters out of order).
  // Not otherwise: members whose queues disagree (each granting another
  // waiter, none a majority) would keep granting the same ones for ever;
  // a grant given back goes to the next in line there.
  const bool keep_places = enqueue && !count.split;
  std::vector<std::size_t> back;
  for (std::size_t k : everyone)
    if (!keep_places ||
        std::find(count.queued.begin(), count.queued.end(), k) == count.queued.end())
      back.push_back(k);
  give_back(name, token, back,
            !keep_places             ? lock::KeepPlace::no
            : count.held_by_majority ? lock::KeepPlace::granted
                                     : lock::KeepPlace::queued);
  // Grants on a minority while the others gave the lock to other waiters:
  // a short random pause breaks the tie. Not while one holder holds a
  // majority (its grants on the rest given back, or it reached too few in
  // time): the members it does not hold grant every waiter, and backing
  // off each time had the waiters poll all members every 10-150 ms for as
  // long as it held the lock, never blocking on a wake list.
  if (count.granted > 0 && !count.held_by_majority) m_back_off = true;
  const std::size_t answered = m_members.size() - count.failed - count.pending;
  // Members whose replicas did not acknowledge answered: said so, as the
  // --replicas the user gave, not an outage, is what a majority lacks.
  const bool unacknowledged = std::any_of(replies->begin(), replies->end(),
                                          [](const MemberReply& m) { return m.unacknowledged; });
  if (answered < lock::majority(m_members.size()))
    return std::unexpected(too_few(
        unacknowledged ? fmt::format("lock '{}': the lease was acknowledged by the replicas "
                                     "(--replicas) of only {}",
                                     name, answered)
                       : fmt::format("lock '{}': only {} answered", name, answered),
        *replies));
  // Members restarted within the TTL refuse whatever the lock's state (the
  // delayed restart): without enough of the others no majority can grant,
  // and "busy" would be false. A waiter waits for them to come of age; a
  // caller that cannot wait is told why.
  if (!enqueue && answered - count.young < lock::majority(m_members.size())) {
    Error young{Error::Code::unreachable,
                fmt::format("lock '{}': only {} of {} quorum members have been up for the TTL "
                            "({}), {} for less{}: a majority is {}; a member "
                            "restarted more recently does not count yet (it may have lost locks "
                            "it held)",
                            name, answered - count.young, m_members.size(), format_duration(ttl),
                            count.young,
                            answered < m_members.size()
                                ? fmt::format(", {} did not answer", m_members.size() - answered)
                                : std::string(),
                            lock::majority(m_members.size())),
                redis::ServerError::none};
    young.decisive = true;
    return std::unexpected(std::move(young));
  }
  return Outcome{count.refusal, std::nullopt};
}

Result<Outcome> QuorumBackend::renew(const std::string& name, const lock::Call& call,
                                     Deadline deadline) {
  const auto started = Clock::now();
  auto batch = send(name, call, deadline);
  auto replies = gather(*batch, deadline, [](const std::vector<MemberReply>& r) {
    return lock::count_renew(r).verdict != lock::Verdict::pending;
  });
  if (!replies) return std::unexpected(replies.error());
  const auto count = lock::count_renew(*replies);
  const auto spent = std::chrono::ceil<Millis>(Clock::now() - started);
  if (count.verdict == lock::Verdict::yes && lock::validity(count.ttl, spent) > Millis(0)) {
    // A member that says the token holds nothing there while a majority
    // confirms it lost the lock's keys (restarted, flushed, failed over
    // without them): take it again there, so that the lock keeps more than
    // a bare majority. Safe: nobody else can hold a majority meanwhile, and
    // a member restarted too recently refuses (its uptime is checked).
    // The members slower than the majority are heard too (as long again as
    // the renewal took: it was decided by the fastest, so a lost member
    // that answers later was never taken again). The retake is not waited
    // for: the next renewal counts it.
    if (auto held = m_held.find(call.args.at(1)); held != m_held.end()) {
      auto late = hear_slower(*batch, started, deadline);
      const auto& heard = late ? *late : *replies;
      std::vector<std::size_t> lost;
      for (std::size_t k = 0; k < heard.size(); ++k) {
        const auto& m = heard[k];
        if (m.state == MemberReply::State::replied && m.reply.type == redis::Reply::Type::integer &&
            m.reply.integer <= 0)
          lost.push_back(k);
      }
      if (!lost.empty())
        (void)send(name, lock::with_min_uptime(held->second, lock::requested_ttl(held->second)),
                   Clock::now() + command_timeout(), lost);
    }
    return Outcome{redis::Reply::of_integer(count.ttl.count()), std::nullopt};
  }
  // Decided by the members that failed first (refused connections come
  // back at once): the ones still answering are heard too (as long again),
  // so that the count and the members' reasons say what they did, not
  // "no answer yet" for a member that extended the lease. At least a
  // quarter of a second (the renewal has failed anyway): on a loaded
  // machine the live members took longer than the refusals' millisecond.
  auto heard = std::move(*replies);
  auto final_count = count;
  if (count.pending > 0) {
    if (auto late = hear_slower(*batch, started, deadline, Millis(250))) {
      heard = std::move(*late);
      final_count = lock::count_renew(heard);
    }
  }
  // So many members say the token holds nothing that no majority can
  // confirm it again: the lock is lost. Otherwise it is only not confirmed
  // (members out of reach), and the heartbeat tries again.
  if (final_count.lost) return Outcome{redis::Reply::of_integer(0), std::nullopt};
  return std::unexpected(too_few(
      fmt::format("the renewal of lock '{}' was confirmed by {}", name, final_count.renewed),
      heard));
}

Result<Outcome> QuorumBackend::release(const std::string& name, const lock::Call& call,
                                       Deadline deadline) {
  const bool force = lock::operation_of(call) == lock::Operation::force;
  const auto started = Clock::now();
  auto batch = send(name, call, deadline);
  // A forced release hears every member it can (each says whom it
  // evicted); one frozen still gets the request when it thaws, as its
  // copy of the request is already on its way.
  auto replies = force ? hear_all(*batch, started, deadline)
                       : gather(*batch, deadline, [](const std::vector<MemberReply>& r) {
                           const auto count = lock::count_release(r);
                           return count.decided || count.released > 0;
                         });
  if (!replies) return std::unexpected(replies.error());
  // Released on a member: the release stands. A majority's answer is
  // still waited for (a script that releases and takes the lock again at
  // once finds it free on a majority), but only for a moment when members
  // are out of reach: they drop their copies when they answer, or when
  // their leases end. Not released where a majority answered: the others
  // get the same moment, since one of them may hold the only copy (a lock
  // left on one member), and released there the release is done (0), not
  // refused (1).
  if (!force) {
    const auto settled = [](const std::vector<MemberReply>& r) {
      const auto count = lock::count_release(r);
      return count.pending == 0 || (count.decided && count.released > 0);
    };
    if (!settled(*replies)) {
      constexpr Millis k_release_grace{1000};
      auto more = gather(*batch, std::min(deadline, Clock::now() + k_release_grace), settled);
      if (!more) return std::unexpected(more.error());
      replies = std::move(more);
    }
  }
  if (force) {
    // Nobody evicted on the members that answered within hear_all's
    // grace: the silent ones may hold the only copies, and "not held"
    // would be wrong (a member busy for a second did evict). They are
    // waited for after all.
    if (lock::combine_force(*replies).elements.size() < 2 &&
        std::any_of(replies->begin(), replies->end(),
                    [](const MemberReply& m) { return m.state == MemberReply::State::pending; })) {
      replies = gather(*batch, deadline, [](const std::vector<MemberReply>&) { return false; });
      if (!replies) return std::unexpected(replies.error());
    }
    // Without a majority nothing can be said: the holders may be on the
    // members out of reach (they evict them when they come back, if the
    // request reaches them).
    const std::size_t n = members_answering(*replies);
    if (n < lock::majority(m_members.size()))
      return std::unexpected(too_few(
          fmt::format("lock '{}': the forced release was answered by only {}", name, n), *replies));
    auto combined = lock::combine_force(*replies);
    // Nobody evicted, and members silent: "not held" (1) cannot be said,
    // the holder may be on them alone (they evict it when the request
    // reaches them).
    if (combined.elements.size() < 2 && n < m_members.size())
      return std::unexpected(too_few(
          fmt::format("lock '{}': the forced release evicted nobody where it was answered, and "
                      "the members that did not answer may hold it (they evict it if the "
                      "request reaches them): answered by {}",
                      name, n),
          *replies));
    return Outcome{std::move(combined), std::nullopt};
  }
  const auto count = lock::count_release(*replies);
  if (count.released > 0) return Outcome{redis::Reply::of_integer(1), std::nullopt};
  if (count.failed + count.pending == 0 || count.not_owner >= lock::majority(m_members.size()))
    return Outcome{redis::Reply::of_integer(0), std::nullopt};
  return std::unexpected(too_few(
      fmt::format("lock '{}': the release was answered by {}", name, count.not_owner), *replies));
}

Result<Outcome> QuorumBackend::run(const std::string& name, const lock::Call& call,
                                   Deadline deadline) {
  switch (lock::operation_of(call)) {
    case lock::Operation::acquire:
      return acquire(name, call, deadline);
    case lock::Operation::renew:
      return renew(name, call, deadline);
    case lock::Operation::release:
    case lock::Operation::force:
      return release(name, call, deadline);
    case lock::Operation::status: {
      // Each member says how long it has been up: one restarted within the
      // TTL may have lost the holder with its data, so its "free" is no
      // evidence (the delayed restart, as for a grant).
      const Millis ttl = lock::status_ttl(call);
      const auto started = Clock::now();
      auto batch = send(name, lock::status_call(ttl, true), deadline);
      auto replies = hear_all(*batch, started, deadline);
      if (!replies) return std::unexpected(replies.error());
      // The members still silent after hear_all's grace are waited for
      // after all when they decide: a majority cannot tell without them,
      // or they could make a minority's holder a majority one. A member
      // busy for a second or two (a slow script, a large KEYS) is then
      // heard, as before; one frozen costs the command timeout only then.
      if (std::any_of(
              replies->begin(), replies->end(),
              [](const MemberReply& m) { return m.state == MemberReply::State::pending; }) &&
          (members_answering(*replies) < lock::majority(m_members.size()) ||
           lock::holder_in_doubt(*replies, lock::status_min_uptime(*replies, ttl)))) {
        replies = gather(*batch, deadline, [](const std::vector<MemberReply>&) { return false; });
        if (!replies) return std::unexpected(replies.error());
      }
      // One server reached two ways would count twice (as for a grant).
      if (auto twice = misconfiguration(*replies)) return std::unexpected(*twice);
      // A minority cannot tell: the holders may be on the others.
      if (const std::size_t n = members_answering(*replies); n < lock::majority(m_members.size()))
        return std::unexpected(
            too_few(fmt::format("lock '{}': only {} answered", name, n), *replies));
      // Neither "held" nor "free": the members out of reach, or too young,
      // decide.
      const Millis min_uptime = lock::status_min_uptime(*replies, ttl);
      if (const auto doubt = lock::holder_in_doubt(*replies, min_uptime))
        return std::unexpected(in_doubt(name, *doubt, min_uptime, *replies));
      return Outcome{lock::combine_status(member_names(), *replies), std::nullopt};
    }
    case lock::Operation::raise:
    case lock::Operation::other:
      break;
  }
  return fail(Error::Code::internal, "the quorum backend cannot run this operation");
}

Result<void> QuorumBackend::wait_for_wake(const std::string& name, const std::string& token,
                                          Millis block, Deadline by) {
  if (m_back_off) {
    // Our last try got grants on a minority only and gave them back: other
    // waiters hold the rest. A short random pause, rather than a wake-up
    // that may never come from the members where we are not queued any
    // more, lets one of the contenders reach a majority first (as Redlock
    // retries after a random delay).
    m_back_off = false;
    std::uniform_int_distribution<int> pause(10, 150);
    pollfd fd{m_interrupt_fd, POLLIN, 0};
    const int waited = poll(&fd, m_interrupt_fd >= 0 ? 1 : 0,
                            std::min<int>(pause(m_random), static_cast<int>(block.count())));
    if (waited > 0) return fail(Error::Code::interrupted, "interrupted while waiting");
    return {};
  }
  // Blocks on the wake list of every member at once: the first wake-up (or
  // the end of the block) ends the wait, and the other waits are cut short.
  auto batch = std::make_shared<Batch>(m_members.size());
  const Deadline deadline = std::min(by, Clock::now() + block + command_timeout());
  for (std::size_t k = 0; k < m_members.size(); ++k)
    dispatch(k, batch, name, lock::Call{}, deadline, token, block);
  kick();
  auto replies = gather(*batch, deadline, [](const std::vector<MemberReply>& r) {
    return std::any_of(r.begin(), r.end(),
                       [](const MemberReply& m) { return m.state == MemberReply::State::replied; });
  });
  for (std::size_t k = 0; k < m_members.size(); ++k) {
    if (batch->jobs[k] != 0) m_members[k]->cancel(batch->jobs[k]);
    // A BLPOP still blocked ends only with its connection (and with it
    // whatever was queued before it: written, so most likely run).
    const auto& in_flight = m_members[k]->in_flight;
    if (std::any_of(in_flight.begin(), in_flight.end(),
                    [&](const Member::InFlight& f) { return f.batch == batch; }))
      abandon(k, "the wait ended");
  }
  if (!replies) return std::unexpected(replies.error());
  const bool woke = std::any_of(replies->begin(), replies->end(), [](const MemberReply& m) {
    return m.state != MemberReply::State::failed;
  });
  if (woke) return {};
  return std::unexpected(
      too_few(fmt::format("lock '{}': none could be waited on", name), *replies));
}

Result<void> QuorumBackend::list(const lock::Call& call, const LockSink& sink,
                                 const GapSink* gaps) {
  auto batch = std::make_shared<Batch>(m_members.size());
  for (std::size_t k = 0; k < m_members.size(); ++k) {
    batch->jobs[k] = post(k, [batch, k, call](Backend& backend) {
      // How long it has been up first: one restarted within the TTL may
      // have lost locks with its data, which its listing cannot show. (The
      // name only routes the question: no key is read.)
      // And its role: a read-only replica cannot have granted what it shows.
      // And its run_id: two members that are one server are refused, as by
      // status NAME.
      std::optional<std::int64_t> uptime;
      std::string role;
      MemberReply server;
      auto up =
          backend.run("uptime", lock::uptime_call(), Clock::now() + backend.command_timeout());
      if (up && up->reply.type == redis::Reply::Type::array && up->reply.elements.size() >= 2 &&
          up->reply.elements[0].type == redis::Reply::Type::integer) {
        uptime = up->reply.elements[0].integer;
        role = up->reply.elements[1].str;
        server.state = MemberReply::State::replied;
        server.reply = up->reply;
      }
      // A member that refused our credentials already is not asked again:
      // the server may answer a second unauthenticated try by closing the
      // connection, which would read as out of reach.
      // Nor one that did not answer it at all (frozen, cut off): its
      // listing would cost another command timeout for the same answer.
      Result<std::vector<NamedReply>> listed = !up && (up.error().code == Error::Code::auth ||
                                                       up.error().code == Error::Code::unreachable)
                                                   ? std::unexpected(up.error())
                                                   : backend.run_on_every_lock(call);
      MemberReply m;
      if (listed)
        m.state = MemberReply::State::replied;
      else
        m = failed_reply(listed.error());
      std::lock_guard lock(batch->mutex);
      batch->uptimes[k] = uptime;
      batch->roles[k] = std::move(role);
      batch->servers[k] = std::move(server);
      batch->lists[k] = std::move(listed);
      batch->replies[k] = std::move(m);
      signal_eventfd(batch->ready);
    });
  }
  // Each member bounds its own SCAN; this only guards against one that
  // never answers at all. Every member is waited for: a member with many
  // keys takes seconds to list them after the others have (hear_all's
  // second would leave it out), and one frozen costs one command timeout,
  // as its uptime goes unanswered.
  const Deadline deadline = Clock::now() + 3 * command_timeout();
  auto replies = gather(*batch, deadline, [](const std::vector<MemberReply>&) { return false; });
  if (!replies) return std::unexpected(replies.error());
  std::map<std::string, std::vector<MemberReply>> locks;
  std::size_t answered = 0;
  {
    std::lock_guard lock(batch->mutex);
    for (std::size_t k = 0; k < m_members.size(); ++k) {
      if ((*replies)[k].state != MemberReply::State::replied || !batch->lists[k] ||
          !*batch->lists[k])
        continue;
      ++answered;
      for (const auto& [name, reply] : **batch->lists[k]) {
        auto& members = locks[name];
        if (members.empty()) {
          // Until a member says otherwise: it has no keys for this lock
          // (an empty status), or it did not answer at all.
          members.resize(m_members.size());
          for (std::size_t j = 0; j < m_members.size(); ++j) {
            members[j] = (*replies)[j];
            if (members[j].state == MemberReply::State::replied)
              members[j].reply = lock::empty_status();
          }
        }
        if (reply.is_error()) {
          members[k].state = MemberReply::State::failed;
          members[k].problem = reply.str;
        } else {
          members[k].reply = reply;
        }
      }
    }
  }
  // A member that refuses our credentials is left out like one out of
  // reach (its own line says why), as status NAME and every other call
  // leave it out; too few left is an auth error when the refusals make it
  // so (too_few).
  {
    // One server reached two ways would count twice, as in status NAME.
    std::lock_guard lock(batch->mutex);
    if (auto twice = misconfiguration(batch->servers)) return std::unexpected(*twice);
  }
  if (answered < lock::majority(m_members.size()))
    return std::unexpected(too_few(fmt::format("only {} listed their locks", answered), *replies));
  // Members up for less than the TTL (the caller's) may have lost locks in
  // a restart: their listing cannot count toward "free", as in status NAME.
  // A lock whose own records ask for more, or whose holders are older than
  // a member that does not show them, is judged on its own below.
  const Millis min_uptime = lock::status_ttl(call);
  std::vector<std::size_t> young;
  {
    std::lock_guard lock(batch->mutex);
    // A read-only replica is never young: it cannot have granted anything.
    std::vector<bool> read_only(m_members.size());
    for (std::size_t k = 0; k < m_members.size(); ++k) {
      read_only[k] = batch->roles[k] == "slave";
      if ((*replies)[k].state == MemberReply::State::replied && batch->uptimes[k] &&
          *batch->uptimes[k] < min_uptime.count() && !read_only[k])
        young.push_back(k);
    }
    tell_read_only(read_only);
  }
  if (answered - young.size() < lock::majority(m_members.size())) {
    const std::size_t n = m_members.size();
    return std::unexpected(Error{
        Error::Code::unreachable,
        fmt::format("only {} of {} quorum members have been up for the TTL ({}), {} for less{}: "
                    "a majority is {} (a member restarted more recently may have lost locks it "
                    "held){}",
                    answered - young.size(), n, format_duration(min_uptime), young.size(),
                    answered < n ? fmt::format(", {} did not answer", n - answered) : "",
                    lock::majority(n), problems_of(*replies)),
        redis::ServerError::none});
  }
  // Merged here, from every member's whole listing: a lock's members'
  // replies are needed together.
  const auto names = member_names();
  std::vector<Error> in_doubt_locks;
  for (auto& [name, members] : locks) {
    if (gaps) {
      {
        // Each member's uptime (and role) beside its view, as status NAME
        // has them (its run_id is not needed here).
        std::lock_guard lock(batch->mutex);
        for (std::size_t k = 0; k < members.size(); ++k)
          if (members[k].state == MemberReply::State::replied && batch->uptimes[k] &&
              members[k].reply.type == redis::Reply::Type::array &&
              members[k].reply.elements.size() == 6) {
            auto& e = members[k].reply.elements;
            e.push_back(redis::Reply::of_integer(*batch->uptimes[k]));
            e.push_back(redis::Reply::of_string(batch->roles[k]));
            e.push_back(redis::Reply::of_string(""));
          }
      }
      const Millis lock_min_uptime = lock::status_min_uptime(members, min_uptime);
      // A doubt that the members out of reach explain alone is told by
      // their own line below; one that young members add, or holders of a
      // minority each that keep it from anyone (neither held nor free, as
      // status NAME says), is told here.
      if (const auto doubt = lock::holder_in_doubt(members, lock_min_uptime);
          doubt && (doubt->contested || doubt->young > 0 || doubt->holder.empty()))
        in_doubt_locks.push_back(in_doubt(name, *doubt, lock_min_uptime, members));
    }
    if (auto taken = sink(name, lock::combine_status(names, members)); !taken) return taken;
  }
  if (gaps) {
    for (auto& doubt : in_doubt_locks) {
      doubt.message = "listing incomplete: " + doubt.message;
      (*gaps)(std::move(doubt));
    }
    std::lock_guard lock(batch->mutex);
    for (const std::size_t k : young)
      (*gaps)(Error{
          Error::Code::unreachable,
          fmt::format("listing incomplete: quorum member {} has been up for {}, less "
                      "than the TTL ({}): a lock it lost in a restart shows without "
                      "the holders the others cannot confirm",
                      m_members[k]->model().describe(), format_duration(Millis(*batch->uptimes[k])),
                      format_duration(min_uptime)),
          redis::ServerError::none});
  }
  if (gaps && answered < m_members.size()) {
    std::lock_guard lock(batch->mutex);
    for (std::size_t k = 0; k < m_members.size(); ++k) {
      if ((*replies)[k].state == MemberReply::State::replied && batch->lists[k] && *batch->lists[k])
        continue;
      const MemberReply& m = (*replies)[k];
      const std::string member = m_members[k]->model().describe();
      const std::string why = batch->lists[k] && !*batch->lists[k]
                                  ? batch->lists[k]->error().message
                              : m.state == MemberReply::State::pending ? "no answer in time"
                                                                       : m.problem;
      (*gaps)(Error{Error::Code::unreachable,
                    fmt::format("listing incomplete: quorum member {} left out ({}): a lock it "
                                "holds shows without the holders the others cannot confirm",
                                member, lock::without_member_name(why, member)),
                    redis::ServerError::none});
    }
  }
  return {};
}

}  // namespace

std::unique_ptr<Backend> make_quorum_backend(std::vector<std::unique_ptr<Backend>> members,
                                             Notice notice) {
  return std::make_unique<QuorumBackend>(std::move(members), std::move(notice));
}

}  // namespace rlock::backend
