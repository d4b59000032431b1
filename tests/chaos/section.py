#!/usr/bin/python3
"""The critical section of the chaos soak, run by `rlock run` as its direct
child (so the read-modify-write is done by the process rlock supervises, not
by a grandchild). Appends its records to the shared log, sleeps a random
10 ms - 3 s between reading and writing the counter, and writes the counter by
rename so that a section killed mid-write leaves the old value, never a torn
file.

A section run as a shared holder (ROLE "read") only reads the counter, and
one of a semaphore's ("enter") does not touch it: their holders may be
inside together, so only an exclusive holder ("write", the default) does the
read-modify-write whose lost updates the checker counts.

Usage: section.py LOG COUNTER WORKER [write|read|enter [LOCK]]
(LOCK: the name of the lock its wrapper holds, "chaos" unless given; each
lock of a soak has its own COUNTER.)
"""
import json
import os
import random
import sys
import time

log_path, counter_path, worker = sys.argv[1], sys.argv[2], int(sys.argv[3])
role = sys.argv[4] if len(sys.argv) > 4 else "write"
lock = sys.argv[5] if len(sys.argv) > 5 else "chaos"
log = os.open(log_path, os.O_WRONLY | os.O_APPEND)
pid = os.getpid()


def record(ev, **fields):
    # One write(2) per record on an O_APPEND descriptor: records of concurrent
    # sections never interleave within a line.
    fields.update(ev=ev, pid=pid, t=time.clock_gettime_ns(time.CLOCK_MONOTONIC))
    os.write(log, (json.dumps(fields) + "\n").encode())


# The wrapper (rlock run, this process's parent) is named, so that the
# checker can tell that every wrapper which exited 0 did run its command.
record("start", fence=int(os.environ["RLOCK_FENCE"]), worker=worker, pgid=os.getpgid(0),
       wrapper=os.getppid(), role=role, launched=int(os.environ.get("CHAOS_LAUNCHED", "0")),
       lock=lock)
if role != "enter":
    with open(counter_path) as f:
        value = int(f.read() or "0")
    record("read", value=value)
time.sleep(random.uniform(0.010, 3.0))
if role == "write":
    tmp = f"{counter_path}.{pid}"
    with open(tmp, "w") as f:
        f.write(str(value + 1))
    os.rename(tmp, counter_path)
    record("rmw", value=value + 1)
record("end")
