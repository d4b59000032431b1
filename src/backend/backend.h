#pragma once
/// Where a lock lives, behind one interface: a backend runs one operation
/// of the lock script on the server responsible for a lock, blocks on a
/// waiter's wake list, and runs an operation on every lock it holds. It owns
/// the connections and every retry: reconnecting, riding out a transient
/// refusal, following a failover. The lock protocol (lock/protocol.h) and
/// its users (LockClient, the heartbeat, status) never know whether they
/// talk to one server, a Sentinel-managed master, a Cluster or a quorum.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lock/protocol.h"
#include "redis/connection.h"
#include "redis/reply.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock::backend {

/// How many replicas acknowledged a write, of how many were wanted.
struct Ack {
  int acknowledged = 0;
  int wanted = 0;
  /// Set when the replicas could not even be counted (ROLE refused): the
  /// lease then does not count either.
  std::string problem;
  /// What kind of failure the problem is: an ACL's refusal (ROLE, WAIT: 77)
  /// or the server's (a replica that takes writes: 76).
  bool problem_is_server = false;
  bool enough() const { return problem.empty() && acknowledged >= wanted; }
};

/// The reply of one script call, and for a write that asked for it
/// (Call::replicate_within), the replicas' acknowledgement.
struct Outcome {
  redis::Reply reply;
  std::optional<Ack> ack;
  /// The call was sent again on a new connection after the one the first
  /// went out on was lost (reset, closed): the reply may be to a repeat (a
  /// release that finds nothing, because the first, whose reply was lost,
  /// released it).
  bool sent_again = false;
};

/// A lock name with the reply (an error reply in place) of one call on it.
using NamedReply = std::pair<std::string, redis::Reply>;

/// Takes each lock's reply of Backend::for_every_lock as soon as it is read
/// (the name and the reply are the sink's to keep); an error stops the
/// listing with it. A sink does no I/O on the backend: the listing's reads
/// may still be in flight on its connections.
using LockSink = std::function<Result<void>(std::string name, redis::Reply reply)>;

/// Takes each part of a deployment that Backend::for_every_reachable_lock
/// had to leave out (a Cluster master still out of reach when the retries
/// ran out): why, naming it (host:port, never a password).
using GapSink = std::function<void(Error why)>;

class Backend {
 public:
  virtual ~Backend() = default;

  /// Runs `call` for lock `name` before `deadline`, with every retry the
  /// deployment calls for. Operations are idempotent by token, so a call may
  /// be sent again when its reply was lost.
  virtual Result<Outcome> run(const std::string& name, const lock::Call& call,
                              Deadline deadline) = 0;

  /// Blocks until a release pushes to the wake list of `token`'s waiter on
  /// lock `name`, or `block` has passed. A wake-up that was not one (the
  /// server changed role, the connection was replaced) is harmless: the
  /// waiter simply asks again. The answer is waited for until `by` at the
  /// latest (the end of a --wait), or the command timeout after the block
  /// if sooner: a server that froze meanwhile cannot stretch the wait.
  virtual Result<void> wait_for_wake(const std::string& name, const std::string& token,
                                     Millis block, Deadline by) = 0;

  /// Blocks like wait_for_wake, then runs `then` (the waiter's acquire, which
  /// confirms a grant pushed to it, or refreshes its place), pipelined
  /// behind the BLPOP on the same connection: the server runs it as soon as
  /// the BLPOP is answered, so a woken waiter learns that it holds the lock
  /// in the same round trip as the wake-up. Returns the call's outcome, or
  /// nullopt when it was not run (a backend that cannot pipeline, such as a
  /// quorum, only waits; a wake-up that was not one): the caller then asks
  /// itself.
  virtual Result<std::optional<Outcome>> wait_then_run(const std::string& name,
                                                       const std::string& token, Millis block,
                                                       Deadline by, const lock::Call& then) {
    (void)then;
    if (auto woke = wait_for_wake(name, token, block, by); !woke)
      return std::unexpected(woke.error());
    return std::nullopt;
  }

  /// Runs `call` on every live lock under the prefix, on every server that
  /// holds locks, and hands each lock's reply (an error reply in place) to
  /// `sink` as soon as it is read: in no particular order, and a name may
  /// come more than once (SCAN may return a key twice; a Cluster slot may
  /// move during the listing). A large listing is thus never held as
  /// replies: the caller keeps what it makes of each.
  virtual Result<void> for_every_lock(const lock::Call& call, const LockSink& sink) = 0;

  /// for_every_lock for a caller that can use a partial listing (`status`,
  /// which shows an operator what the reachable servers hold while a
  /// Cluster shard is down): a part of the deployment that stays out of
  /// reach is handed to `gaps` and the listing goes on with the rest, where
  /// for_every_lock stops with an error (as this does when `gaps` is empty).
  /// An error still stops it (nothing reachable at all, an ACL refusal). By
  /// default (a deployment that is not made of parts) it is for_every_lock.
  virtual Result<void> for_every_reachable_lock(const lock::Call& call, const LockSink& sink,
                                                const GapSink& gaps) {
    (void)gaps;
    return for_every_lock(call, sink);
  }

  /// for_every_lock, collected: the replies sorted by name, each name once
  /// (its first reply). For a caller that needs every reply at once (a
  /// quorum merging its members' listings).
  Result<std::vector<NamedReply>> run_on_every_lock(const lock::Call& call);

  /// Sends `call` for lock `name` on every connection whose requests were
  /// given up on (timed out, interrupted), behind them, and waits for
  /// nothing (redis::Connection::part): a frozen server, or a network cut,
  /// delivers what was stuck there later, and `call` (a release) then runs
  /// after it and undoes it. A new connection could not promise that order,
  /// nor be opened at all while the server is frozen (AUTH, SELECT and TLS
  /// need its answers). Best effort: by default nothing.
  virtual void part(const std::string& name, const lock::Call& call) {
    (void)name;
    (void)call;
  }

  /// For status, after its reads: what an operator should know of the
  /// server they went to (backend::server_warnings in node.h): a replica
  /// cut off from its master, whose copy may show a held lock as free; a
  /// server that may evict a lock's keys. None by default: a
  /// Cluster listing reads several masters, and a quorum shows a replica
  /// member as such.
  virtual std::vector<std::string> server_warnings() { return {}; }

  /// A readable fd that cuts connecting, commands and retry pauses short
  /// with Error::Code::interrupted (-1: none).
  virtual void set_interrupt_fd(int fd) = 0;
  virtual int interrupt_fd() const = 0;

  /// The deadline a command gets when the caller has none.
  virtual Millis command_timeout() const = 0;
  /// The deployment as it may be shown to a person (never a password).
  virtual std::string describe() const = 0;
  /// The Redis ACL user this backend authenticates as (for audit records).
  virtual std::string acl_user() const = 0;

  /// A new backend for the same deployment with connections of its own (for
  /// another thread: the heartbeat). Does no I/O.
  virtual std::unique_ptr<Backend> clone() const = 0;

  /// Whether a holder may wait on its wake list between renewals (the
  /// heartbeat, for a forced release's word: see Heartbeat::wait_until).
  /// A quorum may not: each wait there ends with the connections of the
  /// members that did not answer first, which every renewal would then
  /// open again.
  virtual bool holder_waits() const { return true; }

  /// The server the requests on lock `name` go to now, as last learned (its
  /// URL or address); empty when not known. Two backends that name the same
  /// one reach the lock the same way (Heartbeat::client_after_stop).
  virtual std::string server_of(const std::string& name) const {
    (void)name;
    return {};
  }

  // The step-wise path, for a caller that runs one call on many backends at
  // once (the quorum): start() queues the call on a connection without
  // blocking (Connection::begin), the caller waits on all of them with
  // redis::wait_for_answers and hands each answer to finish(). Only the
  // common case goes this way (a server known to be neither a Cluster node
  // nor behind Sentinel, no replicas to WAIT for); the rest, and the
  // follow-ups an answer may call for, go through run().

  /// What finish() made of an answer.
  struct Stepped {
    /// Set: the call's outcome. Unset: see `again`.
    std::optional<Result<Outcome>> outcome;
    /// The call was queued again on the same connection (EVAL after
    /// NOSCRIPT): wait for its next answer. Neither: run() must finish it.
    bool again = false;
  };

  /// Queues `call` for lock `name` step-wise and returns the connection to
  /// wait on, or null when this call must go through run().
  virtual redis::Connection* start(const std::string& name, const lock::Call& call) {
    (void)name;
    (void)call;
    return nullptr;
  }
  /// Queues the BLPOP of wait_for_wake() step-wise (the reply ends the wait,
  /// whatever it is); null: use wait_for_wake().
  virtual redis::Connection* start_wake(const std::string& name, const std::string& token,
                                        Millis block) {
    (void)name;
    (void)token;
    (void)block;
    return nullptr;
  }
  /// What the answer to a call start() queued means.
  virtual Stepped finish(const std::string& name, const lock::Call& call,
                         Result<std::vector<redis::Reply>> answer) {
    (void)name;
    (void)call;
    (void)answer;
    return {};
  }

  /// Learns, before `deadline`, what a long-lived user (the heartbeat) will
  /// need later when the server it was given may be gone (e.g. that a
  /// one-node URL names a Cluster node, and its slot map). Best effort; by
  /// default nothing.
  virtual void prepare(Deadline deadline) { (void)deadline; }
};

}  // namespace rlock::backend
