"""The servers of the chaos soak (tests/chaos/soak): redis-server processes on
127.0.0.1, and the two scale-out topologies it can run against, each with the
faults that hit it for real:

- SentinelTopology: a master, two replicas and three Sentinels (quorum 2);
- ClusterTopology: a Cluster of three masters with a replica each, made by
  `redis-cli --cluster create`; each fault hits the shard that serves one
  of the soak's locks (aim()).

A fault that makes the topology fail over (or restarts one of its nodes)
waits until it is healthy again before it returns, so that faults do not
pile up into a double failure that no configuration survives; its detail
says how long that took, or that it did not recover.
"""

import os
import random
import signal
import socket
import subprocess
import time


def free_port(bus=False):
    """A free port outside the ephemeral range (an outgoing connection may
    take a port in it while a server is down for a restart); with `bus`,
    also port + 10000, a Cluster node's bus port, which must stay free for
    the node's restarts as much as its own."""
    lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())

    def usable(port):
        if port > 65535 or lo <= port <= hi:
            return False
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
        return True

    for _ in range(2000):
        port = random.randint(20000, 60000)
        if usable(port) and (not bus or usable(port + 10000)):
            return port
    raise SystemExit("soak: no free port")


def key_slot(name):
    """The Cluster slot of lock `name`'s keys (they share the hash tag
    {name}): CRC16 (XMODEM) of the name, modulo 16384."""
    crc = 0
    for byte in name.encode():
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
    return crc % 16384


def resp_command(port, *args, timeout=5.0):
    """One command on a fresh connection; returns the decoded reply (errors
    as RuntimeError). Enough RESP for PING, CLIENT LIST, DEBUG SLEEP, ..."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        out = f"*{len(args)}\r\n".encode()
        for a in args:
            a = str(a).encode()
            out += f"${len(a)}\r\n".encode() + a + b"\r\n"
        s.sendall(out)
        f = s.makefile("rb")

        def read():
            line = f.readline()
            if not line:
                raise ConnectionError("connection closed")
            kind, rest = line[:1], line[1:-2].decode("latin-1")
            if kind == b"+":
                return rest
            if kind == b"-":
                raise RuntimeError(rest)
            if kind == b":":
                return int(rest)
            if kind == b"$":
                n = int(rest)
                return None if n < 0 else f.read(n + 2)[:-2].decode("latin-1")
            if kind == b"*":
                n = int(rest)
                return None if n < 0 else [read() for _ in range(n)]
            raise RuntimeError(f"bad reply {line!r}")

        return read()


def ask(port, *args, timeout=1.0):
    """resp_command, or None when the server does not answer (down, frozen,
    restarting) or refuses."""
    try:
        return resp_command(port, *args, timeout=timeout)
    except (OSError, RuntimeError, ConnectionError):
        return None


def info(port, section):
    """INFO SECTION as a dict, or {} when the server does not answer."""
    text = ask(port, "INFO", section) or ""
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def wait_until(pred, timeout):
    """Polls pred every 50 ms; its first true value, or None after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value or time.monotonic() >= deadline:
            return value or None
        time.sleep(0.05)


class Redis:
    """A redis-server on 127.0.0.1 that the soak starts, freezes, kills and
    restarts. By default persistent (AOF, fsync always: a crash loses no
    acknowledged write); `args` are more options (e.g. --replicaof), or the
    whole command line after the config file for a Sentinel (`conf`)."""

    def __init__(self, workdir, port, persistent=True, args=(), conf=None, bus=False):
        self.dir, self.port, self.proc, self.bus = workdir, port, None, bus
        self.persistent, self.args, self.conf = persistent, list(args), conf
        self.started = False
        os.makedirs(workdir, exist_ok=True)

    def command(self):
        if self.conf:
            return ["redis-server", self.conf, "--sentinel"]
        persist = (["--appendonly", "yes", "--appendfsync", "always"] if self.persistent
                   else ["--appendonly", "no"])
        return ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.dir, "--save", "", *persist, "--enable-debug-command", "local",
                "--repl-diskless-sync-delay", "0",
                "--logfile", os.path.join(self.dir, "redis.log"), *self.args]

    def start(self, args=None):
        if args is not None:
            self.args = list(args)
        for attempt in range(3):
            if self._launch():
                self.started = True
                return
            # A port found free can be taken before the server binds it
            # (other tests run beside the soak): a first start moves to
            # another; a restart keeps its port (its identity).
            if self.started or "Address already in use" not in self.log_tail():
                break
            self.port = free_port(self.bus)
            if self.conf:
                with open(self.conf) as f:
                    lines = f.read().split("\n")
                lines[0] = f"port {self.port}"
                with open(self.conf, "w") as f:
                    f.write("\n".join(lines))
        raise SystemExit(f"soak: redis-server did not start on port {self.port} "
                         f"(see {self.dir}): {self.log_tail()[-300:]}")

    def log_tail(self):
        try:
            with open(os.path.join(self.dir, "redis.log"), errors="replace") as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def _launch(self):
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def answers():
            try:
                # LOADING counts: the server is up, reading its data.
                resp_command(self.port, "PING", timeout=1)
                return True
            except RuntimeError:
                return True
            except (OSError, ConnectionError):
                return self.proc.poll() is not None
        return wait_until(answers, 20) and self.proc.poll() is None

    def send(self, sig):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, sig=signal.SIGTERM):
        if self.proc:
            self.send(signal.SIGCONT)
            self.send(sig)
            self.proc.wait()

    def pause(self, seconds):
        self.send(signal.SIGSTOP)
        time.sleep(seconds)
        self.send(signal.SIGCONT)
        return f"{seconds:.2f}s"


def kill_clients(port, rng):
    """CLIENT KILL of 1-3 random normal clients (not replication links)."""
    listing = resp_command(port, "CLIENT", "LIST", "TYPE", "normal")
    ids = [f.split("=", 1)[1] for line in listing.splitlines() for f in line.split()
           if f.startswith("id=") and "cmd=client|list" not in line]
    victims = rng.sample(ids, min(len(ids), rng.randint(1, 3)))
    for v in victims:
        try:
            resp_command(port, "CLIENT", "KILL", "ID", v)
        except RuntimeError:
            pass  # gone meanwhile
    return f"{len(victims)} of {len(ids)}"


class Topology:
    """What the two scale-out topologies share: their nodes, the faults, and
    the wait for health after a fault that disturbed it."""

    # The faults, by weight. "failover" and the *_long / *_kill kinds make
    # the topology elect a new master.
    FAULTS = {
        "master_stop_short": 3,  # SIGSTOP the master for less than the failure timeout
        "master_stop_long": 2,  # ... for longer: a failover, then the old master resumes
        "master_client_kill": 3,  # CLIENT KILL of 1-3 clients on the master
        "master_script_flush": 1,  # SCRIPT FLUSH on the master
        "failover": 2,  # a planned failover (SENTINEL FAILOVER, CLUSTER FAILOVER)
        "master_kill": 2,  # kill -9 the master; restarted empty once replaced
        "replica_restart": 1,  # kill -9 a replica, restart it empty
        "replica_stop": 1,  # SIGSTOP a replica for up to a second
        "kill_wrapper": 3,  # kill -9 of a random rlock wrapper (the soak's own)
    }
    FAILURE_MS = 1000  # Sentinel's down-after-milliseconds, the Cluster's node timeout
    BUS = False  # whether a node has a bus port (port + 10000) to keep free
    HEALTHY_S = 40

    def __init__(self, workdir, rng_seed):
        self.workdir = workdir
        self.rng = random.Random(rng_seed)
        self.nodes = [Redis(os.path.join(workdir, f"node{k}"), free_port(self.BUS),
                            persistent=False, bus=self.BUS)
                      for k in range(self.NODES)]

    def node(self, port):
        return next(n for n in self.nodes if n.port == port)

    def recovered(self, t0, what):
        """Waits until the topology is healthy again; a detail for the log."""
        ok = wait_until(self.healthy, self.HEALTHY_S)
        took = time.monotonic() - t0
        return (f"{what}; healthy again after {took:.1f}s" if ok else
                f"{what}; NOT healthy after {took:.1f}s: {self.why}")

    # --- the faults (each returns its detail for the log) ---------------------

    def master_stop_short(self, rng):
        return self.node(self.master()).pause(rng.uniform(0.2, self.FAILURE_MS / 1000 * 0.6))

    def master_stop_long(self, rng):
        t0 = time.monotonic()
        old = self.master()
        seconds = rng.uniform(self.FAILURE_MS / 1000 * 2.5, self.FAILURE_MS / 1000 * 5)
        self.node(old).pause(seconds)
        return self.recovered(t0, f"master {old} frozen {seconds:.2f}s, master now "
                              f"{self.master()}")

    def master_client_kill(self, rng):
        return kill_clients(self.master(), rng)

    def master_script_flush(self, rng):
        resp_command(self.master(), "SCRIPT", "FLUSH")
        return ""

    def master_kill(self, rng):
        t0 = time.monotonic()
        old = self.master()
        node = self.node(old)
        node.stop(signal.SIGKILL)
        new = wait_until(lambda: (m := self.master()) != old and m, self.HEALTHY_S)
        time.sleep(rng.uniform(0, 2))
        # Restarted without its data (the nodes keep none), as the new
        # master's replica: what an operator's restart does once Sentinel or
        # the Cluster rewrote its configuration.
        self.restart_as_replica(node, new)
        return self.recovered(t0, f"master {old} killed, master now {new}")

    def replica_restart(self, rng):
        t0 = time.monotonic()
        master = self.master()
        node = self.node(rng.choice(self.replicas(master)))
        node.stop(signal.SIGKILL)
        time.sleep(rng.uniform(0, 1))
        self.restart_as_replica(node, master)
        return self.recovered(t0, f"replica {node.port} restarted")

    def replica_stop(self, rng):
        node = self.node(rng.choice(self.replicas(self.master())))
        return f"replica {node.port} " + node.pause(rng.uniform(0.2, 1.0))

    def stop(self):
        for n in self.nodes + getattr(self, "sentinels", []):
            n.stop()


class SentinelTopology(Topology):
    NODES = 3
    NAME = "chaos"

    def __init__(self, workdir, rng_seed):
        super().__init__(workdir, rng_seed)
        self.sentinels = []
        for k in range(3):
            d = os.path.join(workdir, f"sentinel{k}")
            port = free_port()
            self.sentinels.append(Redis(d, port, conf=os.path.join(d, "sentinel.conf")))
        self.why = ""

    def urls(self):
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return [f"redis-sentinel://{hosts}/0#{self.NAME}"]

    def start(self):
        first = self.nodes[0]
        first.start()
        for n in self.nodes[1:]:
            n.start(["--replicaof", "127.0.0.1", str(first.port)])
        if not wait_until(lambda: self.replication(first.port), 20):
            raise SystemExit(f"soak: replication did not start: {self.why}")
        for s in self.sentinels:
            with open(s.conf, "w") as f:
                f.write(f"port {s.port}\nbind 127.0.0.1\ndaemonize no\ndir {s.dir}\n"
                        f"logfile {os.path.join(s.dir, 'redis.log')}\n"
                        f"sentinel resolve-hostnames no\n"
                        f"sentinel monitor {self.NAME} 127.0.0.1 {first.port} 2\n"
                        f"sentinel down-after-milliseconds {self.NAME} {self.FAILURE_MS}\n"
                        f"sentinel failover-timeout {self.NAME} 4000\n"
                        f"sentinel parallel-syncs {self.NAME} 1\n")
            s.start()
        if not wait_until(self.healthy, 30):
            raise SystemExit(f"soak: the Sentinel topology is not healthy: {self.why}")

    def master(self):
        """The master's port as the Sentinels name it (asked in turn)."""
        for s in self.sentinels:
            addr = ask(s.port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.NAME)
            if addr:
                return int(addr[1])
        return None

    def replicas(self, master):
        return [n.port for n in self.nodes if n.port != master]

    def replication(self, master):
        """The node `master` is a master, and every other node an online
        replica of it with its link up."""
        i = info(master, "replication")
        if i.get("role") != "master":
            self.why = f"node {master} is not a master: {i.get('role')}"
            return False
        online = [v for k, v in i.items() if k.startswith("slave") and "state=online" in v]
        if len(online) != self.NODES - 1:
            self.why = f"master {master}: {len(online)} replicas online"
            return False
        for port in self.replicas(master):
            r = info(port, "replication")
            if (r.get("role"), r.get("master_port"), r.get("master_link_status")) != \
                    ("slave", str(master), "up"):
                self.why = f"node {port}: {r.get('role')} of {r.get('master_port')}, link " \
                    f"{r.get('master_link_status')}"
                return False
        return True

    def healthy(self):
        named = set()
        for s in self.sentinels:
            addr = ask(s.port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.NAME)
            named.add(int(addr[1]) if addr else None)
        if len(named) != 1 or None in named:
            self.why = f"the Sentinels name {sorted(map(str, named))}"
            return False
        master = named.pop()
        if not self.replication(master):
            return False
        for s in self.sentinels:
            m = ask(s.port, "SENTINEL", "MASTER", self.NAME)
            flags = dict(zip(m[::2], m[1::2])).get("flags") if m else None
            if flags != "master":
                self.why = f"Sentinel {s.port}: master flags {flags}"
                return False
            replicas = ask(s.port, "SENTINEL", "REPLICAS", self.NAME) or []
            rflags = sorted(dict(zip(r[::2], r[1::2])).get("flags") for r in replicas)
            if rflags != ["slave"] * (self.NODES - 1):
                self.why = f"Sentinel {s.port}: replica flags {rflags}"
                return False
        return True

    def restart_as_replica(self, node, master):
        node.start(["--replicaof", "127.0.0.1", str(master)] if master else [])

    def failover(self, rng):
        t0 = time.monotonic()
        old = self.master()
        s = rng.choice(self.sentinels)
        resp_command(s.port, "SENTINEL", "FAILOVER", self.NAME)
        wait_until(lambda: self.master() != old, self.HEALTHY_S)
        return self.recovered(t0, f"via Sentinel {s.port}: master {old} -> {self.master()}")

    def sentinel_restart(self, rng):
        s = rng.choice(self.sentinels)
        s.stop(signal.SIGKILL)
        time.sleep(rng.uniform(0, 2))
        s.start()
        return f"Sentinel {s.port}"


SentinelTopology.FAULTS = dict(Topology.FAULTS, sentinel_restart=1)


class ClusterTopology(Topology):
    NODES = 6
    BUS = True

    def __init__(self, workdir, rng_seed, names=("chaos",)):
        super().__init__(workdir, rng_seed)
        for n in self.nodes:
            n.args = ["--cluster-enabled", "yes",
                      "--cluster-config-file", os.path.join(n.dir, "nodes.conf"),
                      "--cluster-node-timeout", str(self.FAILURE_MS),
                      "--cluster-replica-validity-factor", "0"]
        # The slots of the soak's locks; a fault hits the shard of one of
        # them (self.slot, chosen by aim()), health covers them all.
        self.slots = sorted({key_slot(name) for name in names})
        self.why, self.slot = "", self.slots[0]

    def aim(self, rng):
        """Chooses the lock whose shard the next fault hits."""
        self.slot = rng.choice(self.slots)

    def urls(self):
        return ["redis://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)]

    def start(self):
        for n in self.nodes:
            n.start()
        create = subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
             "--cluster-replicas", "1", "--cluster-yes"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        if create.returncode != 0:
            raise SystemExit(f"soak: redis-cli --cluster create failed: {create.stdout[-2000:]}")
        if not wait_until(self.healthy, 40):
            raise SystemExit(f"soak: the Cluster is not healthy: {self.why}")

    def views(self, slot=None):
        """{node port: the master port it names for `slot` (the one aimed
        at)}, for the nodes that answer."""
        slot = self.slot if slot is None else slot
        seen = {}
        for n in self.nodes:
            for s in ask(n.port, "CLUSTER", "SLOTS") or []:
                if s[0] <= slot <= s[1]:
                    seen[n.port] = s[2][1]
        return seen

    def master(self, slot=None):
        """The slot's master as most answering nodes name it."""
        named = list(self.views(slot).values())
        return max(set(named), key=named.count) if named else None

    def replicas(self, master):
        i = info(master, "replication")
        return [int(v.split("port=")[1].split(",")[0]) for k, v in i.items()
                if k.startswith("slave") and "port=" in v]

    def healthy(self):
        masters = []
        for slot in self.slots:
            views = self.views(slot)
            named = set(views.values())
            if len(views) != self.NODES or len(named) != 1:
                self.why = f"nodes name {sorted(map(str, named))} for slot {slot} " \
                    f"({len(views)} answer)"
                return False
            masters.append(named.pop())
        for n in self.nodes:
            text = ask(n.port, "CLUSTER", "INFO") or ""
            if "cluster_state:ok" not in text:
                self.why = f"node {n.port}: cluster_state not ok"
                return False
            nodes = ask(n.port, "CLUSTER", "NODES") or ""
            if "fail" in nodes or nodes.count("\n") < self.NODES - 1:
                self.why = f"node {n.port} sees a failure or misses a node"
                return False
        for master in set(masters):
            i = info(master, "replication")
            online = [v for k, v in i.items() if k.startswith("slave") and "state=online" in v]
            if i.get("role") != "master" or len(online) != 1:
                self.why = f"master {master}: role {i.get('role')}, {len(online)} replicas online"
                return False
        return True

    def restart_as_replica(self, node, master):
        # It keeps nodes.conf (its identity); the Cluster makes it a replica
        # of the master that replaced it.
        node.start()

    def failover(self, rng):
        t0 = time.monotonic()
        old = self.master()
        replica = self.replicas(old)[0]
        resp_command(replica, "CLUSTER", "FAILOVER")
        wait_until(lambda: self.master() != old, self.HEALTHY_S)
        return self.recovered(t0, f"CLUSTER FAILOVER: master {old} -> {self.master()}")
