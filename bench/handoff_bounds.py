#!/usr/bin/python3
"""How far the protocol handoff is from what a handoff through Redis could
cost: bench.py's 1b (two bare-socket processes take turns; a handoff is from
one sending its release to the other holding), run with four protocols in
interleaved blocks, each block against its own idle round trip:

  rlock          the lock script as it is, the waiter's confirming acquire
                 pipelined behind its BLPOP (what LockClient does)
  no-confirm     the same script, but the woken waiter counts itself holding
                 at the BLPOP's reply and confirms afterwards
  least-release  a release that makes only the handover's writes (no ACL or
                 type checks, no purge, no expiries): NOT a lock to run, the
                 least a release that grants can do, with the confirmation
                 pipelined as rlock does
  least+no-confirm  both
  floor          a plain LPUSH waking a BLPOP (bench.py's floor)

and, with rlock_bench_loop built (bench/lock_loop.cpp, --turns), the same
turns through the binary's own C++ client, each against the C++ idle round
trip of its block, so that no Python is in those figures:

  C++ rlock      LockClient's acquire and release, as `rlock` runs them
  C++ floor      LPUSH -> BLPOP over rlock's connection code

Never asserts anything; see bench/README.md ("How far a handoff could go").
"""

import argparse
import os
import socket
import statistics
import subprocess
import time

import bench
from bench import RawClient

# The least release that hands the lock over: the holder leaves, the head
# waiter gets the next fence, its record and a lease, and its fence on its
# wake list. Placed in front of the real script, so that every other
# operation (the acquire that queues, the confirmation) is rlock's own.
LEAST_RELEASE = r"""
if ARGV[1] == 'release' then
  local H, Q, X, L, I, F = KEYS[1], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[8]
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local token = redis.sha1hex(ARGV[2])
  redis.call('ZREM', H, token)
  redis.call('HDEL', I, token)
  local head = redis.call('ZRANGE', Q, 0, 0)[1]
  if not head then return 1 end
  local fence = string.format('%.0f', tonumber(redis.call('GET', F) or '0') + 1)
  redis.call('SET', F, fence)
  redis.call('ZREM', Q, head)
  redis.call('ZREM', X, head)
  redis.call('ZREM', L, head)
  redis.call('ZADD', H, now + 3000, head)
  redis.call('HSET', I, head, fence .. '\n' .. now .. '\nexclusive\n30000\n')
  local wake = string.sub(Q, 1, -2) .. 'w:' .. head
  redis.call('LPUSH', wake, fence)
  redis.call('PEXPIREAT', wake, now + 3000)
  return 1
end
"""


class Client:
    """bench.RawRlockClient, with the confirmation either pipelined behind
    the BLPOP or sent after the waiter counts itself holding."""

    def __init__(self, port, name, sha, pipelined):
        self.c = RawClient(port)
        self.sha, self.name, self.pipelined = sha, name, pipelined
        self.keys = bench.lock_keys(name)
        self.blob = bench.netstrings(["bench", socket.gethostname(), str(os.getpid()), "bench"])

    def acquire(self):
        """Returns the token and when the lock was held."""
        token = os.urandom(16).hex()
        try_once = RawClient.encode("EVALSHA", self.sha, len(self.keys), *self.keys, "acquire",
                                    token, "exclusive", 1, 30000, self.blob, 1,
                                    bench.WAITER_LEASE_MS)
        block = RawClient.encode("BLPOP", bench.wake_key(self.name, token), bench.RECHECK_S)
        self.c.sock.sendall(try_once)
        reply = self.c.read()
        while reply[0] != 1:
            if self.pipelined:
                self.c.sock.sendall(block + try_once)
                self.c.read()
                reply = self.c.read()
                continue
            self.c.sock.sendall(block)
            if self.c.read() is not None:
                held = time.monotonic()
                self.c.sock.sendall(try_once)
                if self.c.read()[0] != 1:
                    raise SystemExit("a granted waiter could not confirm its grant")
                return token, held
            self.c.sock.sendall(try_once)
            reply = self.c.read()
        return token, time.monotonic()

    def release(self, token):
        return self.c.call("EVALSHA", self.sha, len(self.keys), *self.keys, "release", token)


def _worker(port, sha, pipelined, rounds, out):
    cl = Client(port, "bounds", sha, pipelined)
    held, released = [], []
    for _ in range(rounds):
        token, at = cl.acquire()
        held.append(at)
        time.sleep(0.01)  # the other process queues and blocks, as in bench.py
        released.append(time.monotonic())
        cl.release(token)
    out.put((held, released))


def handoff(srv, sha, pipelined, rounds):
    _, lat = bench.take_turns(_worker, [(srv.port, sha, pipelined, rounds)] * 2)
    return statistics.median(lat)


def _turn_times(lines):
    held, released = [], []
    for line in lines:
        what, at = line.split()
        (held if what == "held" else released).append(float(at))
    return held, released


def cpp_turns(loop, srv, kind, rounds):
    """The median handoff (us) of two rlock_bench_loop --turns processes."""
    url = f"redis://127.0.0.1:{srv.port}/0"
    ps = [subprocess.Popen([loop, "--turns", kind, url, f"bounds-{kind}", str(rounds), first],
                           stdout=subprocess.PIPE, text=True) for first in ("1", "0")]
    held, released = [], []
    for p in ps:
        out, _ = p.communicate(timeout=120)
        if p.returncode != 0:
            raise SystemExit(f"rlock_bench_loop --turns {kind} failed")
        h, r = _turn_times(out.splitlines())
        held += h
        released += r
    return statistics.median(bench.latencies(sorted(released), sorted(held)))


def cpp_rtt(loop, srv, n=100):
    """The median idle PING (us) over rlock's connection code, 10 ms apart."""
    out = subprocess.run([loop, "--turns", "ping", f"redis://127.0.0.1:{srv.port}/0", "ping",
                          str(n), "1"], stdout=subprocess.PIPE, text=True, check=True).stdout
    return statistics.median(float(line.split()[1]) for line in out.splitlines())


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=7)
    ap.add_argument("--handoffs", type=int, default=100, help="handoffs per protocol per block")
    ap.add_argument("--loop", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                   "build", "rlock_bench_loop"),
                    help="rlock_bench_loop for the C++ rows (default build/rlock_bench_loop)")
    a = ap.parse_args()
    cpp = os.access(a.loop, os.X_OK)
    if not cpp:
        print(f"(no {a.loop}: build the rlock_bench_loop target for the C++ columns)")
    srv = bench.Server()
    try:
        raw = RawClient(srv.port)
        full = raw.call("SCRIPT", "LOAD", bench.SCRIPT).decode()
        least = raw.call("SCRIPT", "LOAD", LEAST_RELEASE.encode() + bench.SCRIPT).decode()
        kinds = [("rlock", full, True), ("no-confirm", full, False),
                 ("least-release", least, True), ("least+no-confirm", least, False)]
        names = [k[0] for k in kinds] + ["floor"]
        cpp_names = ["C++ rlock", "C++ floor"] if cpp else []
        rows, cpp_rows = [], []
        print(f"{a.blocks} blocks of (idle PING x100, then {a.handoffs} handoffs of each), us")
        print(f"{'block':>5} {'idle RTT':>9} " + " ".join(f"{n:>17}" for n in names))
        for b in range(a.blocks):
            idle, _ = bench.raw_rtt_us(srv.port, n=100, idle=0.01)
            row = [handoff(srv, sha, pipelined, a.handoffs) for _, sha, pipelined in kinds]
            row.append(statistics.median(bench.notification_floor(srv, a.handoffs)))
            rows.append((idle, row))
            line = f"{b + 1:>5} {idle:>7.0f}us " + " ".join(f"{v:>15.0f}us" for v in row)
            if cpp:
                cidle = cpp_rtt(a.loop, srv)
                crow = [cpp_turns(a.loop, srv, kind, a.handoffs) for kind in ("rlock", "floor")]
                cpp_rows.append((cidle, crow))
                line += f" | C++ RTT {cidle:.0f}us " + " ".join(f"{v:>9.0f}us" for v in crow)
            print(line, flush=True)
        print(f"{'median':>5} {statistics.median(i for i, _ in rows):>7.0f}us " +
              " ".join(f"{statistics.median(r[k] for _, r in rows):>15.0f}us"
                       for k in range(len(names))))
        print(f"{'/RTT':>5} {'':>9} " +
              " ".join(f"{statistics.median(r[k] / i for i, r in rows):>17.2f}"
                       for k in range(len(names))) + "   (median of each block's ratio)")
        if cpp:
            print(f"C++ client: idle RTT {statistics.median(i for i, _ in cpp_rows):.0f}us; " +
                  ", ".join(f"{n} {statistics.median(r[k] for _, r in cpp_rows):.0f}us = "
                            f"{statistics.median(r[k] / i for i, r in cpp_rows):.2f} RTT"
                            for k, n in enumerate(cpp_names)) +
                  f"; handoff / floor {statistics.median(r[0] / r[1] for _, r in cpp_rows):.2f}")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
