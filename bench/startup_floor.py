#!/usr/bin/python3
"""What `rlock run x -- true` spends over `flock FILE true` that no start-up
work can remove: its round trips to Redis, measured in the same run.

On a private redis-server:
  1. rlock's own requests are captured (strace of one `rlock run`): the
     acquire (ROLE and the lock script, pipelined) and the release;
  2. they are replayed RUNS times, each round on a fresh TCP connection as
     rlock makes one: the connect, the acquire's round trip and the
     release's (the server's work included), medians;
  3. `flock FILE true`, `rlock run x -- true`, `rlock --version` and `true`
     run RUNS times each, interleaved (one of each in turn), wall-clock
     medians of the spawn-and-wait as this script sees it.
Prints the round trips next to the gap between rlock run and flock, and the
share of that gap they make. Never asserts anything.

Usage: bench/startup_floor.py [--runs N] [--rlock PATH]
Needs: strace, redis-server, python3-redis (bench.py's private server).
"""

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the private server)


def captured_requests(rlock, env, workdir):
    """The bytes of the first and the last request `rlock run` sends."""
    trace = os.path.join(workdir, "trace")
    subprocess.run(["strace", "-f", "-qq", "-s", "1000000", "-xx", "-e", "trace=sendto",
                    "-o", trace, rlock, "run", "floor", "--", "true"],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    sent = []
    with open(trace) as f:
        for line in f:
            m = re.search(r'sendto\(\d+, "((?:\\x[0-9a-f]{2})*)"', line)
            if m:
                sent.append(bytes.fromhex(m.group(1).replace("\\x", "")))
    if len(sent) < 2:
        raise SystemExit(f"expected an acquire and a release in the trace, found {len(sent)}")
    return sent[0], sent[-1]


def reply_end(buf, i):
    """The end of the RESP value that starts at buf[i], or None if incomplete."""
    j = buf.find(b"\r\n", i)
    if j < 0:
        return None
    kind, line, j = buf[i:i + 1], buf[i + 1:j], j + 2
    if kind in (b"+", b"-", b":"):
        return j
    if kind == b"$":
        n = int(line)
        return j if n < 0 else (j + n + 2 if len(buf) >= j + n + 2 else None)
    if kind == b"*":
        for _ in range(max(int(line), 0)):
            j = reply_end(buf, j)
            if j is None:
                return None
        return j
    raise SystemExit(f"unexpected reply {buf[i:i + 20]!r}")


def round_trip_us(sock, request, replies):
    """Sends `request` and waits for `replies` replies; microseconds."""
    began = time.perf_counter()
    sock.sendall(request)
    buf = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("the server closed the connection")
        buf += chunk
        end, count = 0, 0
        while count < replies:
            end = reply_end(buf, end)
            if end is None:
                break
            count += 1
        if count == replies:
            return (time.perf_counter() - began) * 1e6


def replay(port, acquire, release, runs):
    connects, acquires, releases = [], [], []
    for _ in range(runs):
        began = time.perf_counter()
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connects.append((time.perf_counter() - began) * 1e6)
        # ROLE and the script: two replies each.
        acquires.append(round_trip_us(sock, acquire, 2))
        releases.append(round_trip_us(sock, release, 2))
        sock.close()
        time.sleep(0.002)  # idle between rounds, as between two runs of a job
    return statistics.median(connects), statistics.median(acquires), statistics.median(releases)


def wall_medians(commands, runs, env):
    """posix_spawn and waitpid: the least this process adds to each."""
    times = {label: [] for label, _ in commands}
    devnull = os.open(os.devnull, os.O_WRONLY)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 1)]
    paths = {label: shutil.which(argv[0]) or argv[0] for label, argv in commands}
    try:
        for k in range(runs):
            for label, argv in commands[k % len(commands):] + commands[:k % len(commands)]:
                began = time.perf_counter()
                pid = os.posix_spawn(paths[label], argv, env, file_actions=actions)
                _, status = os.waitpid(pid, 0)
                times[label].append((time.perf_counter() - began) * 1e6)
                if status != 0:
                    raise SystemExit(f"{' '.join(argv)} failed: wait status {status}")
    finally:
        os.close(devnull)
    return {label: statistics.median(t) for label, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--rlock", default=os.environ.get("RLOCK_BIN", f"{repo}/build/rlock"))
    args = parser.parse_args()
    for tool in ("strace", "flock"):
        if not shutil.which(tool):
            raise SystemExit(f"needs {tool}")
    srv = bench.Server()
    workdir = tempfile.mkdtemp(prefix="rlock-floor.")
    try:
        env = {k: v for k, v in os.environ.items()
               if k not in ("REDIS_URL", "RLOCK_PREFIX", "RLOCK_PASSWORD", "REDISCLI_AUTH",
                            "RLOCK_CONFIG")}
        env.update(RLOCK_URL=srv.url, HOME=workdir)
        rlock = args.rlock
        subprocess.run([rlock, "run", "floor", "--", "true"], env=env, check=True)  # loads the script
        acquire, release = captured_requests(rlock, env, workdir)
        connect_us, acquire_us, release_us = replay(srv.port, acquire, release, args.runs)
        lockfile = os.path.join(workdir, "flock")
        wall = wall_medians([("flock", ["flock", lockfile, "true"]),
                             ("run", [rlock, "run", "floor", "--", "true"]),
                             ("version", [rlock, "--version"]),
                             ("true", ["true"])], args.runs, env)
    finally:
        srv.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(srv.dir, ignore_errors=True)
    trips = connect_us + acquire_us + release_us
    gap = wall["run"] - wall["flock"]
    start = wall["version"] - wall["true"]
    print(f"{args.runs} rounds each, medians; wall times are posix_spawn to waitpid")
    print(f"  connect {connect_us:7.0f} us   acquire {acquire_us:7.0f} us   "
          f"release {release_us:7.0f} us   (fresh connection, rlock's own requests)")
    print(f"  flock FILE true {wall['flock']:7.0f} us   rlock run x -- true {wall['run']:7.0f} us   "
          f"gap {gap:6.0f} us ({wall['run'] / wall['flock']:.2f}x)")
    print(f"  true {wall['true']:7.0f} us   rlock --version {wall['version']:7.0f} us   "
          f"rlock's own start over true's {start:6.0f} us")
    print(f"  round trips {trips:6.0f} us = {trips / gap:.0%} of the gap, "
          f"{trips / wall['flock']:.2f}x of flock; with rlock's own start: "
          f"{(trips + start) / gap:.0%} of the gap")


if __name__ == "__main__":
    main()
