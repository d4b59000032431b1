#!/usr/bin/python3
"""rlock benchmark: handoff latency, contended throughput and Redis CPU per
handoff, as ratios to a raw Redis round trip measured in the same run, and the
same figures for a 100 ms polling lock (redis-py's Lock) as the peer.

Starts its own redis-server on a free 127.0.0.1 port, so nothing else shares
the server. Never asserts anything: it prints a table (see bench/README.md).
"""

import argparse
import hashlib
import os
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import multiprocessing as mp

import redis
from redis.lock import Lock

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SCRIPT = open(os.path.join(REPO, "src/lock/scripts/lock.lua"), "rb").read()
PREFIX = "rlock:"
# Must match k_waiter_lease and k_recheck_interval in src/lock/lock.h.
WAITER_LEASE_MS = 3000
RECHECK_S = 1.0


# --- the server ----------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A private redis-server, stopped (by its pid) on exit."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rlock-bench.")
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--maxclients", "10000",
             "--logfile", os.path.join(self.dir, "redis.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        for _ in range(200):
            try:
                if self.client().ping():
                    self.probe = self.cpu_probe_cost()
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise SystemExit("redis-server did not start")

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.port)

    def cpu(self):
        """Seconds of CPU the server used so far (all its threads, user+sys)."""
        info = self.cpu_client.info("cpu")
        return info["used_cpu_sys"] + info["used_cpu_user"]

    def cpu_probe_cost(self):
        """What one cpu() costs the server itself, to subtract from a delta."""
        self.cpu_client = self.client()
        deltas = []
        for _ in range(200):
            c0 = self.cpu()
            deltas.append(self.cpu() - c0)
        return statistics.median(deltas)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --- rlock's protocol, spoken from Python (the same script, by SHA) -------------


def escape(name):
    return "".join("%%%02X" % ord(c) if c in "%{}" else c for c in name)


def lock_keys(name):
    base = f"{PREFIX}{{{escape(name)}}}:"
    return [base + s for s in "h s q x l i m f a".split()]


def wake_key(name, token):
    # Named by the token's SHA-1, as the script names it (tokens are never
    # stored in Redis, not even in key names).
    return f"{PREFIX}{{{escape(name)}}}:w:{hashlib.sha1(token.encode()).hexdigest()}"


def netstrings(fields):
    return "".join(f"{len(f)}:{f}" for f in fields)


class RlockClient:
    """LockClient::acquire/release of src/lock/lock.cpp, in Python: one
    EVALSHA, then BLPOP on the waiter's own wake list with the next EVALSHA
    pipelined behind it (the release grants the lock to the head waiter and
    pushes the grant; the pipelined acquire confirms it in the same round
    trip, or refreshes the waiter's place after a block without news)."""

    def __init__(self, port, name):
        self.r = redis.Redis(host="127.0.0.1", port=port)
        self.script = self.r.register_script(SCRIPT)
        self.name = name
        self.keys = lock_keys(name)
        self.blob = netstrings(["bench", socket.gethostname(), str(os.getpid()), "bench"])

    def acquire(self, ttl_ms=30000):
        token = os.urandom(16).hex()
        args = ["acquire", token, "exclusive", 1, ttl_ms, self.blob, 1, WAITER_LEASE_MS]
        reply = self.script(keys=self.keys, args=args)
        while reply[0] != 1:
            # Raw EVALSHA (the script is loaded by the call above): a redis-py
            # Script in a pipeline would add a SCRIPT EXISTS round trip.
            pipe = self.r.pipeline(transaction=False)
            pipe.blpop([wake_key(self.name, token)], timeout=RECHECK_S)
            pipe.execute_command("EVALSHA", self.script.sha, len(self.keys), *self.keys, *args)
            reply = pipe.execute()[1]
        return token

    def release(self, token):
        return self.script(keys=self.keys, args=["release", token])


class RawClient:
    """The same protocol over a bare socket: requests encoded once, replies
    read with a minimal RESP2 parser. redis-py spends tens of microseconds
    per call in Python; this client spends a few, so what 1b measures with
    it is the protocol (the server and the two processes' wake-ups), and its
    round trip is the baseline measured the same way."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    @staticmethod
    def encode(*args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit("redis-server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise SystemExit(f"redis error: {rest.decode()}")
        if kind == b":":
            return int(rest)
        n = int(rest)
        if n < 0:
            return None
        if kind == b"*":
            return [self.read() for _ in range(n)]
        while len(self.buf) < n + 2:
            self.buf += self.sock.recv(65536)
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def call(self, *args):
        self.sock.sendall(self.encode(*args))
        return self.read()


class RawRlockClient:
    """RlockClient's acquire and release over a RawClient."""

    def __init__(self, port, name, sha):
        self.c = RawClient(port)
        self.sha, self.name = sha, name
        self.keys = lock_keys(name)
        self.blob = netstrings(["bench", socket.gethostname(), str(os.getpid()), "bench"])

    def acquire(self, ttl_ms=30000):
        token = os.urandom(16).hex()
        try_once = RawClient.encode("EVALSHA", self.sha, len(self.keys), *self.keys, "acquire",
                                    token, "exclusive", 1, ttl_ms, self.blob, 1,
                                    WAITER_LEASE_MS)
        self.c.sock.sendall(try_once)
        reply = self.c.read()
        if reply[0] != 1:
            block = RawClient.encode("BLPOP", wake_key(self.name, token), RECHECK_S) + try_once
            while reply[0] != 1:
                self.c.sock.sendall(block)
                self.c.read()
                reply = self.c.read()
        return token

    def release(self, token):
        return self.c.call("EVALSHA", self.sha, len(self.keys), *self.keys, "release", token)


# --- measurements ----------------------------------------------------------------


def rtt_us(port, n=3000, idle=0.0):
    """Median and p99 of a PING round trip with redis-py, in microseconds.
    With `idle`, each PING follows that many seconds of sleep: a handoff
    crosses processes that were all idle (blocked), and on a VM an idle CPU
    takes a while to wake, so that is the comparable round trip."""
    r = redis.Redis(host="127.0.0.1", port=port)
    r.ping()
    samples = []
    for _ in range(n):
        if idle:
            time.sleep(idle)
        t0 = time.perf_counter()
        r.ping()
        samples.append((time.perf_counter() - t0) * 1e6)
    return pct(samples, 50), pct(samples, 99)


def raw_rtt_us(port, n=300, idle=0.0):
    """rtt_us with RawClient: median and p99 of a PING, in microseconds."""
    c = RawClient(port)
    c.call("PING")
    samples = []
    for _ in range(n):
        if idle:
            time.sleep(idle)
        t0 = time.perf_counter()
        c.call("PING")
        samples.append((time.perf_counter() - t0) * 1e6)
    return pct(samples, 50), pct(samples, 99)


def idle_ping_cpu_us(srv, n=100):
    """Median Redis CPU of one PING arriving at an idle server, measured like
    a handoff's (INFO before and after, minus the INFO itself)."""
    r = srv.client()
    deltas = []
    for _ in range(n):
        time.sleep(0.01)
        c0 = srv.cpu()
        r.ping()
        deltas.append((srv.cpu() - c0 - srv.probe) * 1e6)
    return max(statistics.median(deltas), 1.0)


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def wait_until(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.01)
    raise SystemExit(f"timed out waiting for {what}")


def rlock_handoff(srv, rlock, waiters, handoffs):
    """Handoff latency with `waiters` real `rlock acquire -w` processes blocked.

    The driver releases the current holder's token (one EVALSHA from Python)
    and times until the next waiter prints its token on its stdout pipe. After
    each handoff a new waiter is queued at the tail, so the queue stays at
    `waiters` long. Returns latencies (us) and the Redis CPU (us) per handoff,
    both total and net of what the idle queue costs (its 1 s re-checks)."""
    name = f"handoff-{waiters}"
    r = srv.client()
    cl = RlockClient(srv.port, name)
    q = lock_keys(name)[2]
    env = dict(os.environ, RLOCK_URL=srv.url)
    for k in ("RLOCK_PREFIX", "RLOCK_CONFIG", "REDIS_URL"):
        env.pop(k, None)
    sel = selectors.DefaultSelector()
    procs = []

    def spawn():
        p = subprocess.Popen([rlock, "acquire", name, "-w", "1h", "-t", "60s", "-q"],
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
        procs.append(p)
        sel.register(p.stdout, selectors.EVENT_READ, p)

    token = cl.acquire(ttl_ms=600000)
    try:
        for k in range(waiters):
            spawn()
            if k % 50 == 49:  # don't fork 1000 at once on a small machine
                wait_until(lambda: r.zcard(q) >= k + 1, 60, "waiters to queue")
        wait_until(lambda: r.zcard(q) == waiters, 120, f"{waiters} waiters to queue")
        time.sleep(RECHECK_S + 0.2)  # let the start-up burst settle
        idle_window = 2.0
        c0 = srv.cpu()
        time.sleep(idle_window)
        idle_cpu_per_s = (srv.cpu() - c0) / idle_window

        lat = []
        cpu_total = 0.0
        busy_time = 0.0
        # The newest waiter must be past its start-up and blocked in BLPOP, or
        # its process start would count as handoff time. Waiters leave BLPOP
        # for ~0.3 ms once a second to re-check, so with a long queue a few
        # may be unblocked at any moment.
        slack = waiters // 100

        def settled():
            return (r.zcard(q) == waiters and
                    r.info("clients")["blocked_clients"] >= waiters - slack)

        for _ in range(handoffs):
            wait_until(settled, 30, "the queue to refill")
            c0 = srv.cpu()
            w0 = time.perf_counter()
            t0 = time.perf_counter()
            cl.script(keys=cl.keys, args=["release", token])
            got = None
            while got is None:
                events = sel.select(timeout=10)
                if not events:
                    raise SystemExit("no waiter acquired within 10 s of a release")
                for key, _ in events:
                    line = key.fileobj.readline()
                    sel.unregister(key.fileobj)
                    if line:
                        got = line.decode().strip()
            t1 = time.perf_counter()
            cpu_total += srv.cpu() - c0 - srv.probe
            busy_time += time.perf_counter() - w0
            lat.append((t1 - t0) * 1e6)
            token = got
            spawn()
        n = len(lat)
        per_total = cpu_total / n * 1e6
        per_net = max(0.0, (cpu_total - idle_cpu_per_s * busy_time) / n * 1e6)
        return lat, per_total, per_net, idle_cpu_per_s
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)  # leaves the queue, exits 143
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            p.stdout.close()
        cl.release(token)


def polling_handoff(srv, waiters, handoffs):
    """The same handoff with redis-py's Lock (SET NX PX, retry every 100 ms):
    `waiters` threads block in Lock.acquire(); each, once it holds, records
    the time and waits to be told to release."""
    name = f"poll-{waiters}"
    acquired = []  # (time, release event)
    cond = threading.Condition()

    def waiter():
        r = redis.Redis(host="127.0.0.1", port=srv.port)
        lk = Lock(r, name, timeout=60, blocking=True)  # sleep=0.1 (the default)
        lk.acquire()
        ev = threading.Event()
        with cond:
            acquired.append((time.perf_counter(), ev))
            cond.notify()
        ev.wait()
        lk.release()

    r = srv.client()
    holder = Lock(r, name, timeout=60)
    holder.acquire()
    threads = []

    def spawn():
        t = threading.Thread(target=waiter, daemon=True)
        t.start()
        threads.append(t)

    for _ in range(waiters):
        spawn()
    time.sleep(0.3)
    lat = []
    c0 = srv.cpu()
    release = holder.release
    for _ in range(handoffs):
        with cond:
            before = len(acquired)
        t0 = time.perf_counter()
        release()
        with cond:
            cond.wait_for(lambda: len(acquired) > before, timeout=10)
            if len(acquired) == before:
                raise SystemExit("polling waiter did not acquire within 10 s")
            t1, ev = acquired[-1]
        lat.append((t1 - t0) * 1e6)
        release = ev.set
        spawn()
        # Randomise the release phase against the waiters' 100 ms sleeps.
        time.sleep(0.005 + (len(lat) % 7) * 0.013)
    cpu = srv.cpu() - c0 - srv.probe
    release()
    # Let the remaining threads through so they end.
    for _ in range(waiters):
        with cond:
            cond.wait_for(lambda: len(acquired) >= handoffs + 1 + _, timeout=10)
            if len(acquired) < handoffs + 1 + _:
                break
            acquired[-1][1].set()
    return lat, cpu / handoffs * 1e6


def _pingpong_worker(port, name, rounds, sha, out):
    cl = RawRlockClient(port, name, sha) if sha else RlockClient(port, name)
    held, released = [], []
    for _ in range(rounds):
        tok = cl.acquire()
        held.append(time.monotonic())
        # Long enough for the other process to queue and block in BLPOP, so
        # that the handoff starts from idle processes, like the idle RTT.
        time.sleep(0.01)
        released.append(time.monotonic())
        cl.release(tok)
    # Sent once at the end: a queue's feeder thread must not run beside
    # the handoffs it would measure.
    out.put((held, released))


def latencies(starts, ends):
    """Each start (sorted times) paired with the first end after it: the
    gaps, in microseconds."""
    lat, k = [], 0
    for s in starts:
        while k < len(ends) and ends[k] <= s:
            k += 1
        if k < len(ends):
            lat.append((ends[k] - s) * 1e6)
    return lat


def take_turns(target, argsets):
    """One forked process per argument tuple, each called as
    target(*args, out); returns what each put on `out` (its (ends, starts)
    lists, e.g. when it held and when it released), and the latencies (us)
    from every start to the first end after it in any process."""
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    ps = [ctx.Process(target=target, args=(*args, out)) for args in argsets]
    for p in ps:
        p.start()
    results = [out.get(timeout=120) for _ in ps]
    for p in ps:
        p.join(30)
    return results, latencies(sorted(t for _, starts in results for t in starts),
                              sorted(t for ends, _ in results for t in ends))


def _floor_worker(port, mine, theirs, rounds, holds_first, out):
    c = RawClient(port)
    woke, sent = [], []
    if not holds_first:
        c.call("BLPOP", mine, 5)
        woke.append(time.monotonic())
    for _ in range(rounds):
        # The same idle as _pingpong_worker's: the other process is blocked.
        time.sleep(0.01)
        sent.append(time.monotonic())
        c.call("LPUSH", theirs, "x")
        if c.call("BLPOP", mine, 1) is not None:
            woke.append(time.monotonic())
    out.put((woke, sent))


def notification_floor(srv, rounds):
    """The floor under any handoff that wakes a blocked waiter through Redis:
    two bare-socket processes take turns as in protocol_handoff, but pass a
    plain LPUSH to a BLPOP (no script, no lock state). Returns the latencies
    (us) from one sending its LPUSH to the other's BLPOP returning."""
    _, lat = take_turns(_floor_worker, [(srv.port, f"floor:{k}", f"floor:{1 - k}", rounds, k == 0)
                                        for k in range(2)])
    return lat


def protocol_handoff(srv, rounds, raw=False):
    """The protocol alone: two processes take turns; a handoff is from one
    sending its release to the other holding (its pipelined confirmation
    answered). No process start, no pipe back to a driver: what `rlock`
    itself adds is in 1). With `raw`, the processes speak through RawClient
    (the protocol's own cost), otherwise through redis-py (RlockClient).
    Returns the latencies (us), the server's CPU per round (us: a handoff
    and the next acquire that queues) and, with `raw`, Redis' own time per
    EVALSHA and BLPOP ({name: (calls, us per call)}, INFO commandstats)."""
    sha = None
    if raw:
        sha = RawClient(srv.port).call("SCRIPT", "LOAD", SCRIPT).decode()
        srv.client().config_resetstat()
    c0 = srv.cpu()
    _, lat = take_turns(_pingpong_worker, [(srv.port, "pingpong", rounds, sha)] * 2)
    cpu = srv.cpu() - c0 - srv.probe
    own = {}
    if raw:
        # Redis' own time (no I/O, no wake-up) per call, from INFO
        # commandstats: SLOWLOG would log every command the scripts call
        # too, which slows the scripts it measures.
        stats = srv.client().info("commandstats")
        for name in ("evalsha", "blpop"):
            entry = stats.get(f"cmdstat_{name}")
            if entry:
                own[name.upper()] = (entry["calls"], entry["usec_per_call"])
    return lat, cpu / max(len(lat), 1) * 1e6, own


def repeated_handoff(srv, blocks, rounds):
    """1b again, in `blocks` interleaved blocks: each measures the bare-socket
    client's idle round trip, the bare-socket protocol handoff and the floor
    one after the other, and divides by its own round trip. The idle round
    trip on a VM moves from one minute to the next (43 to 182 us between runs
    on the machine of bench/README.md), more than any change to the protocol
    would; a ratio taken within one block, and its median over the blocks,
    does not."""
    print(f"   repeated: {blocks} blocks of (idle PING x100, handoff x{rounds}, floor "
          f"x{rounds}), each against its own idle PING")
    print(f"   {'block':>5} {'idle RTT':>9} {'handoff':>8} {'floor':>8} {'handoff/RTT':>12} "
          f"{'floor/RTT':>10} {'handoff/floor':>14}")
    ratios, floors, overs = [], [], []
    for b in range(blocks):
        idle, _ = raw_rtt_us(srv.port, n=100, idle=0.01)
        med = statistics.median(protocol_handoff(srv, rounds, raw=True)[0])
        fmed = statistics.median(notification_floor(srv, rounds))
        ratios.append(med / idle)
        floors.append(fmed / idle)
        overs.append(med / fmed)
        print(f"   {b + 1:>5} {idle:>7.0f}us {med:>6.0f}us {fmed:>6.0f}us {med / idle:>12.2f} "
              f"{fmed / idle:>10.2f} {med / fmed:>14.2f}", flush=True)

    def summary(values):
        return (f"{statistics.median(values):.2f} (range {min(values):.2f}-"
                f"{max(values):.2f})")
    print(f"   median over the blocks: handoff/RTT {summary(ratios)}; floor/RTT "
          f"{summary(floors)}; handoff/floor {summary(overs)}")


# --- whole processes ---------------------------------------------------------------

# The section every process runs: two bash builtins around a 20 ms sleep, so
# that the log holds when each command started and ended (EPOCHREALTIME: one
# system-wide clock, microseconds).
SECTION = 'echo "s $EPOCHREALTIME" >>"$1"; sleep 0.02; echo "e $EPOCHREALTIME" >>"$1"'

POLL_WRAPPER = r"""
import subprocess, sys, redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
lk = r.lock(sys.argv[2], timeout=60)  # sleep=0.1, the default
open(sys.argv[3], "a").write("ready\n")
lk.acquire()
subprocess.run(["bash", "-c", sys.argv[4], "section", sys.argv[5]])
lk.release()
"""


def section_gaps(log):
    """Time from each command's end to the next command's start (us)."""
    events = []
    with open(log) as f:
        for line in f:
            kind, at = line.split()
            events.append((float(at), kind))
    events.sort()
    gaps, last_end = [], None
    for at, kind in events:
        if kind == "s" and last_end is not None:
            gaps.append((at - last_end) * 1e6)
        elif kind == "e":
            last_end = at
    return gaps


def process_handoff(srv, rlock, procs):
    """Whole-process handoff: `procs` commands queued for one lock, each
    started by its own wrapper process (`rlock run`, or a Python process
    holding a redis-py Lock), all waiting before the first release. Returns
    the gaps (us) between one command's end and the next one's start, for
    rlock and for the polling lock."""
    tmp = tempfile.mkdtemp(prefix="rlock-bench-proc.")
    env = dict(os.environ, RLOCK_URL=srv.url)
    for k in ("RLOCK_PREFIX", "RLOCK_CONFIG", "REDIS_URL"):
        env.pop(k, None)
    r = srv.client()
    out = []
    # rlock run: the driver holds the lock until every wrapper is queued.
    log = os.path.join(tmp, "rlock.log")
    driver = RlockClient(srv.port, "proc-rlock")
    token = driver.acquire(ttl_ms=600000)
    ps = [subprocess.Popen([rlock, "run", "-w", "10m", "proc-rlock", "--", "bash", "-c", SECTION,
                            "section", log], env=env, stdin=subprocess.DEVNULL)
          for _ in range(procs)]
    wait_until(lambda: r.zcard(lock_keys("proc-rlock")[2]) == procs, 60, "run wrappers to queue")
    time.sleep(RECHECK_S + 0.2)
    driver.release(token)
    for p in ps:
        p.wait(120)
    out.append(section_gaps(log))
    # redis-py Lock: the driver holds it until every wrapper said it is ready.
    log = os.path.join(tmp, "poll.log")
    ready = os.path.join(tmp, "ready")
    holder = Lock(r, "proc-poll", timeout=600)
    holder.acquire()
    ps = [subprocess.Popen(["/usr/bin/python3", "-c", POLL_WRAPPER, str(srv.port), "proc-poll",
                            ready, SECTION, log], stdin=subprocess.DEVNULL)
          for _ in range(procs)]

    def all_ready():
        try:
            with open(ready) as f:
                return len(f.readlines()) == procs
        except FileNotFoundError:
            return False

    wait_until(all_ready, 60, "polling wrappers to start")
    time.sleep(0.5)
    holder.release()
    for p in ps:
        p.wait(120)
    out.append(section_gaps(log))
    return out


# --- contended throughput ----------------------------------------------------------


def _rlock_worker(port, name, seconds, start, out):
    cl = RlockClient(port, name)
    start.wait()
    held = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        tok = cl.acquire()
        held.append(time.monotonic())
        cl.release(tok)
    out.put((os.getpid(), held, end))


def _poll_worker(port, name, seconds, start, out):
    r = redis.Redis(host="127.0.0.1", port=port)
    start.wait()
    held = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        lk = Lock(r, name, timeout=30, blocking=True)
        lk.acquire()
        held.append(time.monotonic())
        lk.release()
    out.put((os.getpid(), held, end))


def throughput(srv, worker, procs, seconds, name):
    ctx = mp.get_context("fork")
    start, out = ctx.Event(), ctx.Queue()
    ps = [ctx.Process(target=worker, args=(srv.port, name, seconds, start, out))
          for _ in range(procs)]
    for p in ps:
        p.start()
    time.sleep(0.5)
    began = time.monotonic()
    start.set()
    results = [out.get(timeout=seconds + 60) for _ in ps]
    for p in ps:
        p.join(30)
    return tally(results, began)


def native_throughput(srv, loop, procs, seconds, name, poll=False):
    """throughput() with rlock_bench_loop (bench/lock_loop.cpp) processes:
    the binary's own lock client, or with `poll` redis-py's algorithm in the
    same C++. Each connects, waits for a line on stdin, loops, and prints its
    acquisition times (CLOCK_MONOTONIC, as time.monotonic())."""
    args = [loop] + (["--poll"] if poll else []) + [srv.url, name, str(seconds)]
    ps = [subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
          for _ in range(procs)]
    time.sleep(0.5)
    began = time.monotonic()
    for p in ps:
        p.stdin.write("go\n")
        p.stdin.flush()
    results = []
    for p in ps:
        out, _ = p.communicate(timeout=seconds + 60)
        lines = out.split()
        if p.returncode != 0 or len(lines) < 2 or lines[-2] != "end":
            raise SystemExit(f"{loop} failed (exit {p.returncode})")
        results.append((p.pid, [float(t) for t in lines[:-2]], float(lines[-1])))
    return tally(results, began)


def tally(results, began):
    """(ops/s, operations per process, handoffs/s) of throughput runs that
    began at `began`: results are (pid, acquisition times, planned end)."""
    # Only the window in which all of them contend counts: a process that
    # woke late from the start signal also stops late, and alone at the end
    # it would take the lock again and again, which says nothing about
    # fairness.
    window_end = min(end for _, _, end in results)
    window = window_end - began
    counts = [sum(1 for t in held if t <= window_end) for _, held, _ in results]
    # Handoffs: acquisitions (in time order; CLOCK_MONOTONIC is system-wide)
    # by another process than the previous one.
    events = sorted((t, pid) for pid, held, _ in results for t in held if t <= window_end)
    changes = sum(1 for a, b in zip(events, events[1:]) if a[1] != b[1])
    return sum(counts) / window, counts, changes / window


def shell_throughput(srv, rlock, procs, seconds):
    """The binary as scripts use it: T=$(rlock acquire X); rlock release X."""
    loop = ('end=$((SECONDS+%d)); n=0; while ((SECONDS < end)); do '
            'T=$("$RL" acquire shell-tp -t 30s) || exit 1; "$RL" release shell-tp --token "$T" '
            '|| exit 1; n=$((n+1)); done; echo $n') % seconds
    env = dict(os.environ, RLOCK_URL=srv.url, RL=rlock)
    ps = [subprocess.Popen(["bash", "-c", loop], stdout=subprocess.PIPE, env=env)
          for _ in range(procs)]
    counts = [int(p.communicate(timeout=seconds + 60)[0] or 0) for p in ps]
    return sum(counts) / seconds, counts, None


# --- report ------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rlock", default=os.path.join(REPO, "build/rlock"))
    ap.add_argument("--waiters", default="1,10,100,1000",
                    help="queue lengths for the handoff runs")
    ap.add_argument("--handoffs", type=int, default=200, help="handoffs per queue length")
    ap.add_argument("--poll-waiters", default="1,10,100")
    ap.add_argument("--poll-handoffs", type=int, default=60)
    ap.add_argument("--procs", type=int, default=16, help="processes for throughput")
    ap.add_argument("--seconds", type=int, default=5, help="length of each throughput run")
    ap.add_argument("--sections", default="1,4,5,2",
                    help="which measurements to run (1+3 handoff, 4 polling peer, "
                    "5 whole processes, 2 throughput)")
    ap.add_argument("--loop", help="the rlock_bench_loop binary of section 2 (default: next "
                    "to --rlock)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="1b: also measure the bare-socket handoff, the floor and the idle "
                    "round trip again in this many interleaved blocks, each block's ratios "
                    "against its own round trip (the idle round trip moves between runs)")
    ap.add_argument("--script", help="the lock script the Python clients use (default: the "
                    "repository's; give the one --rlock embeds when measuring another version)")
    a = ap.parse_args()
    if a.script:
        global SCRIPT
        SCRIPT = open(a.script, "rb").read()
    if not os.access(a.rlock, os.X_OK):
        raise SystemExit(f"no rlock binary at {a.rlock} (use --rlock)")

    srv = Server()
    try:
        hot, hot99 = rtt_us(srv.port)
        rtt, rtt99 = rtt_us(srv.port, n=300, idle=0.01)
        print(f"raw round trip (redis-py PING, 127.0.0.1): back-to-back median {hot:.0f} us "
              f"(p99 {hot99:.0f}); after 10 ms idle median {rtt:.0f} us (p99 {rtt99:.0f})")
        print("ratios (/RTT) use the idle round trip; x hot = the same against back-to-back")
        ping_cpu = idle_ping_cpu_us(srv)
        print(f"Redis CPU of one PING after 10 ms idle: {ping_cpu:.0f} us (the unit of 'pings')")
        print(f"machine: {os.cpu_count()} CPUs; redis {srv.client().info()['redis_version']}")
        print()
        sections = set(a.sections.split(","))
        if "1" in sections:
            print("1) handoff latency: holder releases -> next waiter holds "
                  "(real `rlock acquire -w` processes)")
            print("   and 3) Redis CPU per handoff (INFO used_cpu_sys+user)")
            print(f"{'waiters':>8} {'median':>9} {'p99':>9} {'med/RTT':>8} {'x hot':>6} "
                  f"{'p99/RTT':>8} {'cpu/handoff':>12} {'net of idle':>12} {'pings':>6} "
                  f"{'idle cpu':>9}")
            for n in [int(x) for x in a.waiters.split(",") if x]:
                lat, cpu_tot, cpu_net, idle = rlock_handoff(srv, a.rlock, n, a.handoffs)
                med, p99 = statistics.median(lat), pct(lat, 99)
                print(f"{n:>8} {med:>7.0f}us {p99:>7.0f}us {med / rtt:>8.1f} {med / hot:>6.1f} "
                      f"{p99 / rtt:>8.1f} "
                      f"{cpu_tot:>10.0f}us {cpu_net:>10.0f}us {cpu_net / ping_cpu:>6.1f} "
                      f"{idle * 100:>8.1f}%", flush=True)
            print()
        if "1" in sections:
            print("1b) the protocol alone: two processes take turns; release sent -> the other "
                  "holds (its pipelined confirmation answered)")
            raw_hot, _ = raw_rtt_us(srv.port, n=3000)
            raw_idle, _ = raw_rtt_us(srv.port, n=300, idle=0.01)
            print(f"   bare-socket client's own PING: back-to-back {raw_hot:.0f} us, after 10 ms "
                  f"idle {raw_idle:.0f} us (its /RTT and x hot use these)")
            print(f"{'client':<24} {'median':>9} {'p99':>9} {'med/RTT':>8} {'x hot':>6} "
                  f"{'cpu/round':>10} {'pings':>6}")
            own, medians = {}, {}
            for label, raw, base_idle, base_hot in (("redis-py", False, rtt, hot),
                                                    ("bare socket", True, raw_idle, raw_hot)):
                lat, cpu, got = protocol_handoff(srv, a.handoffs, raw=raw)
                own = got or own
                med = medians[label] = statistics.median(lat)
                print(f"{label:<24} {med:>7.0f}us {pct(lat, 99):>7.0f}us {med / base_idle:>8.1f} "
                      f"{med / base_hot:>6.1f} {cpu:>8.0f}us {cpu / ping_cpu:>6.1f}", flush=True)
            floor = notification_floor(srv, a.handoffs)
            fmed = statistics.median(floor)
            print(f"{'floor: LPUSH -> BLPOP':<24} {fmed:>7.0f}us {pct(floor, 99):>7.0f}us "
                  f"{fmed / raw_idle:>8.1f} {fmed / raw_hot:>6.1f} {'-':>10} {'-':>6}", flush=True)
            bare = medians["bare socket"]
            print(f"   floor: the same two bare-socket processes passing a plain LPUSH to a "
                  f"BLPOP (no script): the least any wake-up through Redis costs here. The "
                  f"protocol handoff is {bare / fmed:.2f}x the floor, {bare - fmed:.0f} us above it.")
            print("   cpu/round: Redis CPU per handoff plus the next acquire that queues "
                  "(INFO); Redis' own time per call in the bare-socket run (commandstats, no I/O; "
                  "a round is three EVALSHA: the release that grants, the acquire that queues, "
                  "the confirmation):")
            print("   " + ", ".join(f"{k}: {n} calls, {us:.1f} us each"
                                    for k, (n, us) in sorted(own.items())))
            if a.repeat > 1:
                repeated_handoff(srv, a.repeat, a.handoffs)
            print()
        if "4" in sections:
            print("4) the same handoff with a 100 ms polling peer (redis-py Lock, sleep=0.1)")
            print(f"{'waiters':>8} {'median':>9} {'p99':>9} {'med/RTT':>8} {'x hot':>6} "
                  f"{'cpu/handoff':>12} {'pings':>6}")
            for n in [int(x) for x in a.poll_waiters.split(",") if x]:
                lat, cpu = polling_handoff(srv, n, a.poll_handoffs)
                med, p99 = statistics.median(lat), pct(lat, 99)
                print(f"{n:>8} {med:>7.0f}us {p99:>7.0f}us {med / rtt:>8.1f} {med / hot:>6.1f} "
                      f"{cpu:>10.0f}us {cpu / ping_cpu:>6.1f}", flush=True)
            print()
        if "5" in sections:
            print(f"5) whole-process handoff: {a.procs} commands queued, each started by its "
                  "own wrapper; one command ends -> the next starts")
            print(f"{'wrapper':<34} {'median':>9} {'p90':>9} {'med/RTT':>8}")
            gaps_rlock, gaps_poll = process_handoff(srv, a.rlock, a.procs)
            for label, gaps in (("rlock run", gaps_rlock),
                                ("redis-py Lock (python wrapper)", gaps_poll)):
                med = statistics.median(gaps)
                print(f"{label:<34} {med:>7.0f}us {pct(gaps, 90):>7.0f}us {med / rtt:>8.1f}",
                      flush=True)
            ratio = statistics.median(gaps_rlock) / statistics.median(gaps_poll)
            print(f"   rlock run / redis-py Lock: {ratio:.2f}x the time from one command's end "
                  "to the next one's start")
            print()
        if "2" in sections:
            print(f"2) contended throughput: {a.procs} processes, empty critical section, "
                  f"{a.seconds} s each")
            print(f"{'client':<34} {'ops/s':>9} {'ops*hotRTT':>10} {'min/proc':>9} "
                  f"{'max/proc':>9} {'handoffs/s':>11} {'spread':>7}")
            loop = a.loop or os.path.join(os.path.dirname(a.rlock), "rlock_bench_loop")
            rows = []
            if os.access(loop, os.X_OK):
                rows += [
                    ("rlock's own client (C++)", native_throughput(srv, loop, a.procs, a.seconds,
                                                                   "tp-native")),
                    ("polling 100 ms, in C++", native_throughput(srv, loop, a.procs, a.seconds,
                                                                 "tp-native-poll", poll=True)),
                ]
            else:
                print(f"   (no {loop}: build the rlock_bench_loop target for the C++ rows)")
            rows += [
                ("rlock protocol (Python, EVALSHA)", throughput(srv, _rlock_worker, a.procs,
                                                                 a.seconds, "tp-rlock")),
                ("redis-py Lock (polling 100 ms)", throughput(srv, _poll_worker, a.procs,
                                                              a.seconds, "tp-poll")),
                ("rlock binary (shell loop)", shell_throughput(srv, a.rlock, a.procs,
                                                               a.seconds)),
            ]
            for label, (ops, counts, changes) in rows:
                ch = "-" if changes is None else f"{changes:.0f}"
                # Fairness: the largest distance of one process's count from
                # the mean, in percent of the mean (FIFO: within 10%).
                mean = sum(counts) / len(counts)
                spread = max(abs(c - mean) for c in counts) / max(mean, 1e-9) * 100
                print(f"{label:<34} {ops:>9.0f} {ops * hot / 1e6:>10.3f} {min(counts):>9} "
                      f"{max(counts):>9} {ch:>11} {spread:>6.0f}%")
            by = dict(rows)

            def versus(what, fifo_label, poll_label):
                fifo, poll = by[fifo_label], by[poll_label]
                print(f"   {what}: {fifo[0] / poll[0]:.2f}x the operations, "
                      f"{fifo[2] / max(poll[2], 1e-9):.1f}x the handoffs between processes, "
                      f"{min(fifo[1]) / max(min(poll[1]), 1):.1f}x the slowest process's "
                      "operations")
            if "rlock's own client (C++)" in by:
                versus("rlock's own client / redis-py Lock", "rlock's own client (C++)",
                       "redis-py Lock (polling 100 ms)")
                versus("the same, both in C++", "rlock's own client (C++)",
                       "polling 100 ms, in C++")
            versus("Python model of rlock / redis-py Lock", "rlock protocol (Python, EVALSHA)",
                   "redis-py Lock (polling 100 ms)")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
