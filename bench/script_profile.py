#!/usr/bin/python3
"""What the lock script costs Redis per common operation: the commands it
calls (INFO commandstats: calls and microseconds per operation) and the
server's CPU per operation against one PING's, on a private redis-server.

Operations, each run N times back to back from one Python process (so no
process start-up and no waiting is measured, only the server's work):

  acquire free   acquire of a lock nobody holds
  release alone  release of a lock nobody waits for
  renew          a holder's renewal
  enqueue        an acquire that joins the queue behind a holder
  re-check       a queued waiter's acquire (its once-a-second refresh)
  handoff        the holder's release that grants the head waiter, plus the
                 waiter's BLPOP and the acquire pipelined behind it (the
                 confirmation): both script runs of one handoff

`--script FILE` profiles another version of the script (e.g. the parent
commit's, `git show HEAD~1:src/lock/scripts/lock.lua > /tmp/old.lua`), so a
change is measured before and after in one session; repeat it to compare
several. `--own-time` prints instead, for each script given, Redis' own time
per EVALSHA (INFO commandstats, no I/O) of a renewal, a release nobody waits
for and an acquire of a free lock, in rounds that alternate the scripts:
steadier than the CPU figures on a busy machine. Never asserts anything.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the private server, the keys, the wake list name)


# What the client sends; the rest are calls made inside the script.
TOP_LEVEL = ("ping", "evalsha", "eval", "blpop")


def commandstats(r):
    """{command: (calls, usec)} from INFO commandstats."""
    out = {}
    for key, val in r.info("commandstats").items():
        out[key.removeprefix("cmdstat_")] = (val["calls"], val["usec"])
    return out


def delta(before, after):
    d = {}
    for cmd, (calls, usec) in after.items():
        c0, u0 = before.get(cmd, (0, 0))
        if calls - c0 > 0 and cmd not in ("info",):
            d[cmd] = (calls - c0, usec - u0)
    return d


class Profile:
    """Measures a block of N operations: commandstats and CPU deltas."""

    def __init__(self, srv):
        self.srv = srv
        self.r = srv.client()
        self.rows = []

    def measure(self, label, n, setup, op):
        """`setup(k)` prepares operation k unmeasured, `op(k)` is measured.
        Setup and op alternate, so INFO is read around each op and the deltas
        summed: setup's commands never count."""
        total, cpu = {}, 0.0
        for k in range(n):
            setup(k)
            s0, c0 = commandstats(self.r), self.srv.cpu()
            op(k)
            c1, s1 = self.srv.cpu(), commandstats(self.r)
            # Two INFO calls sit between c0 and c1 at most (the commandstats
            # read is outside): subtract the probe's cost once.
            cpu += c1 - c0 - self.srv.probe
            for cmd, (calls, usec) in delta(s0, s1).items():
                tc, tu = total.get(cmd, (0, 0))
                total[cmd] = (tc + calls, tu + usec)
        self.rows.append((label, n, total, cpu / n * 1e6))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=300, help="operations of each kind")
    ap.add_argument("--script", action="append",
                    help="a lock script to profile (default: the repository's); repeatable")
    ap.add_argument("--own-time", action="store_true",
                    help="only the scripts' own time per operation, alternating the scripts")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of --own-time")
    args = ap.parse_args()
    paths = args.script or [None]

    srv = bench.Server()
    try:
        if args.own_time:
            own_time(srv, paths, args.n, args.rounds)
            return
        for path in paths:
            if path:
                bench.SCRIPT = open(path, "rb").read()
                print(f"== {path}")
            run(srv, args.n)
    finally:
        srv.stop()


def own_time(srv, paths, n, rounds):
    """EVALSHA own time (us) per renew, release alone and acquire free."""
    r = srv.client()
    keys = bench.lock_keys("own-time")
    texts = {p or "repository": open(p or os.path.join(bench.REPO, "src/lock/scripts/lock.lua"),
                                     "rb").read() for p in paths}

    def evalsha_usec():
        return r.info("commandstats")["cmdstat_evalsha"]["usec"]

    results = {}
    for _ in range(rounds):
        for label, text in texts.items():
            sha = r.script_load(text)

            def call(*argv):
                return r.execute_command("EVALSHA", sha, len(keys), *keys, *argv)

            def acquire(token):
                return call("acquire", token, "exclusive", 1, 30000, "b", 0,
                            bench.WAITER_LEASE_MS)

            token = os.urandom(16).hex()
            acquire(token)
            u0 = evalsha_usec()
            for _ in range(n):
                call("renew", token, 30000)
            renew = (evalsha_usec() - u0) / n
            release = acquire_free = 0
            for _ in range(n):
                u0 = evalsha_usec()
                call("release", token)
                u1 = evalsha_usec()
                token = os.urandom(16).hex()
                acquire(token)
                release += u1 - u0
                acquire_free += evalsha_usec() - u1
            call("release", token)
            for op, value in (("renew", renew), ("release alone", release / n),
                              ("acquire free", acquire_free / n)):
                results.setdefault((op, label), []).append(value)
    print(f"Redis' own time per EVALSHA, us ({rounds} rounds of {n}; renew back to back, "
          "the others with INFO between)")
    for (op, label), values in results.items():
        print(f"{op:<14} {' '.join(f'{v:6.1f}' for v in values)}  {label}")


def run(srv, n):
    prof = Profile(srv)
    r = srv.client()
    # The CPU unit: one PING, measured the same way as the operations.
    prof.measure("PING", n, lambda k: None, lambda k: r.ping())

    a = bench.RlockClient(srv.port, "profile")
    b = bench.RlockClient(srv.port, "profile")
    sha = a.script.sha
    r.script_load(bench.SCRIPT)
    keys = a.keys

    def evalsha(*argv):
        return r.execute_command("EVALSHA", sha, len(keys), *keys, *argv)

    def acquire_args(token, enqueue=0):
        return ["acquire", token, "exclusive", 1, 30000, a.blob, enqueue, bench.WAITER_LEASE_MS]

    tokens = {}

    # acquire free / release alone
    def acq(k):
        tokens[k] = os.urandom(16).hex()
        reply = evalsha(*acquire_args(tokens[k]))
        assert reply[0] == 1, reply

    def rel(k):
        assert evalsha("release", tokens[k]) == 1

    prof.measure("acquire free", n, lambda k: k and rel(k - 1), acq)
    rel(n - 1)
    prof.measure("release alone", n, acq, rel)

    # renew
    holder = os.urandom(16).hex()
    evalsha(*acquire_args(holder))
    prof.measure("renew", n, lambda k: None, lambda k: evalsha("renew", holder, 30000))

    # enqueue / re-check, behind that holder
    def enq(k):
        tokens[k] = os.urandom(16).hex()
        reply = evalsha(*acquire_args(tokens[k], 1))
        assert reply[0] == 0 and reply[1] == 1, reply

    def leave(k):
        evalsha("release", tokens[k])

    tokens.clear()
    prof.measure("enqueue", n, lambda k: k and leave(k - 1), enq)
    leave(n - 1)
    waiter = os.urandom(16).hex()
    evalsha(*acquire_args(waiter, 1))
    prof.measure("re-check", n, lambda k: None,
                 lambda k: evalsha(*acquire_args(waiter, 1)))
    evalsha("release", waiter)
    evalsha("release", holder)

    # handoff: `cur` holds, `nxt` is queued; the release grants nxt, whose
    # BLPOP + pipelined acquire confirms. Then cur queues again (unmeasured).
    state = {"cur": os.urandom(16).hex(), "nxt": os.urandom(16).hex()}
    evalsha(*acquire_args(state["cur"]))
    evalsha(*acquire_args(state["nxt"], 1))

    def handoff(k):
        cur, nxt = state["cur"], state["nxt"]
        assert evalsha("release", cur) == 1
        pipe = r.pipeline(transaction=False)
        pipe.blpop([bench.wake_key("profile", nxt)], timeout=1)
        pipe.execute_command("EVALSHA", sha, len(keys), *keys, *acquire_args(nxt, 1))
        popped, reply = pipe.execute()
        assert popped is not None and reply[0] == 1, (popped, reply)
        state["cur"] = nxt
        state["nxt"] = os.urandom(16).hex()

    def requeue(k):
        if k:
            reply = evalsha(*acquire_args(state["nxt"], 1))
            assert reply[0] == 0, reply

    prof.measure("handoff", n, requeue, handoff)
    evalsha("release", state["cur"])

    # What a lock nobody holds or waits for leaves behind.
    left = sorted(k.decode() for k in r.keys("rlock:*"))

    ping_cpu = prof.rows[0][3]
    print(f"redis {r.info('server')['redis_version']}; {n} operations of each kind, back to back;"
          f" CPU unit: one PING = {ping_cpu:.1f} us")
    print(f"{'operation':<14} {'cmds':>5} {'cpu us':>7} {'pings':>6} {'top us':>7}  commands per operation")
    for label, count, total, cpu in prof.rows:
        calls = sum(c for c, _ in total.values())
        usec = sum(u for cmd, (_, u) in total.items() if cmd in TOP_LEVEL)
        inner = sorted(((c, cmd) for cmd, (c, _) in total.items()), reverse=True)
        detail = " ".join(f"{cmd.upper()}:{c / count:g}" for c, cmd in inner)
        print(f"{label:<14} {calls / count:5.1f} {cpu:7.1f} {cpu / ping_cpu:6.1f} "
              f"{usec / count:7.1f}  {detail}")
    print("cmds: every command Redis counted, the EVALSHA/BLPOP included; top us: Redis' own time"
          " for what the client sent (a script's includes its calls')")
    print(f"keys left after the last release: {' '.join(left) or '(none)'}")


if __name__ == "__main__":
    main()
