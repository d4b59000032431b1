# shellcheck shell=bash
# A real Redis Cluster for the e2e suites: three masters and three replicas
# on free loopback ports (each port's cluster bus, port + 10000, free too),
# made by `redis-cli --cluster create`. Load it after helpers:
#
#   load helpers
#   load cluster
#   setup_file() { start_cluster; }
#   teardown_file() { stop_cluster; }
#   setup() { wait_cluster_healthy; }
#
# Everything lives under one directory ($CLUSTER_DIR), a directory per node
# (n-PORT) with its pid file, log and nodes.conf. Pids change when a test
# restarts a node, so they are always read from the pid files. The ports
# never change within a file: CLUSTER_PORTS (six, in start order) is
# exported by start_cluster. Nodes keep no data (no RDB, no AOF) but keep
# their nodes.conf: a killed node restarted comes back as the same node,
# learns it was failed over, and resynchronises as a replica.
#
# With RLOCK_E2E_TLS=1 exported before start_cluster (see helpers.bash),
# every node listens on TLS only, the Cluster bus and replication are TLS
# too (`tls-cluster yes`), the ports are the TLS ports, and cluster_url
# gives a rediss:// URL.

# The node timeout: a killed master is failed over within ~2-3 s.
CLUSTER_NODE_TIMEOUT_MS=1000

# cluster_cli PORT ARGS...: redis-cli against one node (no redirections
# followed), bounded (a frozen node would otherwise hang it).
cluster_cli() {
  local port="$1"
  shift
  e2e_tls_args "$port"
  timeout -k 1 3 redis-cli "${E2E_TLS_CLI[@]}" -h 127.0.0.1 -p "$port" "$@" </dev/null
}

# cluster_url [PORT...]: a redis:// URL (rediss:// with TLS) naming the
# nodes given (default: the first node); several ports make a seed list.
cluster_url() {
  local ports=("$@") hosts=() p
  ((${#ports[@]})) || ports=("${CLUSTER_PORTS%% *}")
  for p in "${ports[@]}"; do hosts+=("127.0.0.1:$p"); done
  local IFS=,
  local scheme=redis
  if e2e_tls; then scheme=rediss; fi
  echo "$scheme://${hosts[*]}/0"
}

# cluster_node_pid PORT: the pid of the node on PORT.
cluster_node_pid() {
  echo "$(<"$CLUSTER_DIR/n-$1/pid")"
}

# _cluster_free_ports N: N ports, one a line, free on 127.0.0.1 together
# with their bus ports (+10000), taken from helpers.bash's ledger (both
# recorded there) so no other file of this bats run gets either.
_cluster_free_ports() {
  "$PYTHON" - "$BATS_RUN_TMPDIR/ports-handed-out" "$1" <<'EOF'
import fcntl, random, socket, sys
lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
def usable(p):
    return 20000 <= p <= 65535 and not lo <= p <= hi
candidates = [p for p in range(20000, 55536) if usable(p) and usable(p + 10000)]
want = int(sys.argv[2])
def free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False
with open(sys.argv[1], "a+") as ledger:
    fcntl.flock(ledger, fcntl.LOCK_EX)
    ledger.seek(0)
    taken = {int(line) for line in ledger if line.strip()}
    found = []
    for port in random.sample(candidates, min(2000, len(candidates))):
        if port in taken or port + 10000 in taken or not free(port) or not free(port + 10000):
            continue
        taken.update((port, port + 10000))
        found.append(port)
        if len(found) == want:
            break
    else:
        raise SystemExit("_cluster_free_ports: not enough free port pairs")
    for port in found:
        ledger.write(f"{port}\n{port + 10000}\n")
    print("\n".join(map(str, found)))
EOF
}

# _cluster_wait_ping PORT: waits (bounded, 10 s) until the node PORT answers
# PONG; fails with its log when it died or never answered.
_cluster_wait_ping() {
  local port="$1" dir="$CLUSTER_DIR/n-$1" pid i
  pid="$(cluster_node_pid "$port")"
  for ((i = 0; i < 200; i++)); do
    if ! running "$pid"; then
      echo "the node on port $port exited at start:" >&2
      cat "$dir/redis.log" "$dir/stdout.log" >&2 2>/dev/null
      return 1
    fi
    redis_cmd "$port" PING 2>/dev/null && [[ "${redis_reply[0]}" == PONG ]] && return 0
    nap 0.05
  done
  echo "the node on port $port did not answer within 10 s" >&2
  cat "$dir/redis.log" >&2 2>/dev/null
  return 1
}

# _cluster_launch PORT: starts (or restarts) the node PORT from its
# directory and waits until it answers.
_cluster_launch() {
  local port="$1" dir="$CLUSTER_DIR/n-$1" tls=()
  mkdir -p "$dir"
  e2e_tls_args "$port"
  if e2e_tls; then tls=("${E2E_TLS_SERVER[@]}" --tls-cluster yes); fi
  # repl-diskless-sync-delay 0: a full sync starts at once instead of
  # waiting 5 s for more replicas. cluster-replica-validity-factor 0: a
  # replica may always be promoted, however long its link was down (a
  # test may kill a master right after a restart).
  "${RLOCK_E2E_SERVER:-redis-server}" --port "$port" --bind 127.0.0.1 --daemonize no --save '' --appendonly no \
    --dir "$dir" --logfile "$dir/redis.log" --repl-diskless-sync-delay 0 \
    --cluster-enabled yes --cluster-config-file "$dir/nodes.conf" \
    --cluster-node-timeout "$CLUSTER_NODE_TIMEOUT_MS" --cluster-replica-validity-factor 0 \
    "${tls[@]}" </dev/null >>"$dir/stdout.log" 2>&1 3>&- &
  echo "$!" >"$dir/pid"
  # No "Killed" job report when a test kills it on purpose.
  disown "$!"
  _cluster_wait_ping "$port"
}

# start_cluster: for setup_file. Starts six nodes, makes them a Cluster of
# three masters with one replica each, and waits until it is healthy. A
# port found free can be taken before the server binds it: one more try on
# new ports. On failure it stops whatever it started and returns 1 with the
# reason on stderr.
start_cluster() {
  local attempt
  e2e_tls_prepare || return 1
  for attempt in 1 2; do
    export CLUSTER_DIR="$BATS_FILE_TMPDIR/cluster$attempt"
    mkdir -p "$CLUSTER_DIR"
    _cluster_try_start && return 0
    echo "start_cluster: the Cluster did not come up (attempt $attempt)" >&2
    stop_cluster
  done
  return 1
}

_cluster_try_start() {
  local ports p nodes=()
  ports="$(_cluster_free_ports 6)" || return 1
  export CLUSTER_PORTS="${ports//$'\n'/ }"
  for p in $CLUSTER_PORTS; do
    _cluster_launch "$p" || return 1
    nodes+=("127.0.0.1:$p")
  done
  e2e_tls_args "${CLUSTER_PORTS%% *}"
  if ! timeout -k 1 30 redis-cli "${E2E_TLS_CLI[@]}" --cluster create "${nodes[@]}" --cluster-replicas 1 \
    --cluster-yes </dev/null >"$CLUSTER_DIR/create.log" 2>&1; then
    cat "$CLUSTER_DIR/create.log" >&2
    return 1
  fi
  _cluster_wait_healthy 30
}

# _cluster_check: one look at the Cluster, by one Python process. Healthy:
# every node answers with cluster_state:ok, knows all six nodes with no
# failure flag, and shows the same map: every slot served, three masters,
# each with exactly one replica whose link is up. Returns 1 with the reason
# in _CLUSTER_WHY otherwise; prints nothing else.
_cluster_check() {
  _CLUSTER_WHY="$(PYTHONPATH="$E2E_PY" "$PYTHON" - "$CLUSTER_PORTS" <<'PY'
import sys
import miniredis as redis

ports = sys.argv[1].split()

def conn(port):
    return redis.Redis(host="127.0.0.1", port=int(port), socket_timeout=2,
                       socket_connect_timeout=2, decode_responses=True)

def check():
    maps = set()
    for port in ports:
        r = conn(port)
        info = r.execute_command("CLUSTER", "INFO")
        if "cluster_state:ok" not in info:
            return f"node {port}: cluster_state is not ok"
        nodes = r.execute_command("CLUSTER", "NODES").strip().splitlines()
        if len(nodes) != 6:
            return f"node {port} knows {len(nodes)} nodes"
        for line in nodes:
            flags = line.split()[2]
            if "fail" in flags or "handshake" in flags or "noaddr" in flags:
                return f"node {port} sees {line.split()[1]} as {flags}"
        slots = r.execute_command("CLUSTER", "SLOTS")
        covered = sum(int(s[1]) - int(s[0]) + 1 for s in slots)
        if covered != 16384:
            return f"node {port}: {covered} slots served"
        shards = {}
        for s in slots:
            shards.setdefault(s[2][1], set()).update(n[1] for n in s[3:])
        maps.add(tuple(sorted((m, tuple(sorted(r))) for m, r in shards.items())))
        if len(shards) != 3 or any(len(r) != 1 for r in shards.values()):
            return f"node {port}: masters and replicas {shards}"
    if len(maps) != 1:
        return f"the nodes disagree on the map: {maps}"
    for master, replicas in next(iter(maps)):
        info = conn(master).info("replication")
        if info.get("role") != "master" or info.get("connected_slaves") != 1:
            return f"master {master}: role {info.get('role')}, {info.get('connected_slaves')} replicas"
        for replica in replicas:
            i = conn(replica).info("replication")
            if (i.get("role"), str(i.get("master_port")), i.get("master_link_status"),
                    i.get("master_sync_in_progress")) != ("slave", str(master), "up", 0):
                return (f"replica {replica}: role {i.get('role')}, master {i.get('master_port')}, "
                        f"link {i.get('master_link_status')}")
    return ""

try:
    print(check())
except (redis.RedisError, OSError) as e:
    print(f"{type(e).__name__}: {e}")
PY
  )"
  [[ -z "$_CLUSTER_WHY" ]]
}

# _cluster_wait_healthy SECONDS: waits until the check passes.
_cluster_wait_healthy() {
  local deadline=$((SECONDS + $1))
  until _cluster_check; do
    if ((SECONDS >= deadline)); then
      echo "the Cluster did not become healthy within $1 s: $_CLUSTER_WHY" >&2
      return 1
    fi
    nap 0.2
  done
}

# wait_cluster_healthy [SECONDS]: for setup (or after a test's damage).
# Thaws every frozen node, restarts every node that is not running (it
# rejoins as a replica), then waits (default 30 s) until the Cluster is
# healthy; fails the test with the reason otherwise.
wait_cluster_healthy() {
  local limit="${1:-30}" p
  for p in $CLUSTER_PORTS; do
    kill -CONT "$(cluster_node_pid "$p")" 2>/dev/null || true
  done
  for p in $CLUSTER_PORTS; do
    running "$(cluster_node_pid "$p")" || restart_cluster_node "$p" || return 1
  done
  _cluster_check && return 0
  _cluster_wait_healthy "$limit" || fail "wait_cluster_healthy: not healthy within ${limit}s: $_CLUSTER_WHY"
}

# restart_cluster_node PORT: starts the node PORT again after it was killed
# (it keeps its identity from nodes.conf and starts without data).
restart_cluster_node() {
  local port="$1" i
  if running "$(cluster_node_pid "$port")"; then
    echo "restart_cluster_node: the node on $port is running" >&2
    return 1
  fi
  for ((i = 0; i < 50; i++)); do
    redis_cmd "$port" PING >/dev/null 2>&1 || break
    nap 0.1
  done
  _cluster_launch "$port"
}

# _cluster_any: the port of a running node that answers.
_cluster_any() {
  local p
  for p in $CLUSTER_PORTS; do
    if redis_cmd "$p" PING 2>/dev/null && [[ "${redis_reply[0]}" == PONG ]]; then
      echo "$p"
      return 0
    fi
  done
  echo "_cluster_any: no node answers" >&2
  return 1
}

# cluster_masters: the ports of the masters serving slots, one a line
# (CLUSTER SLOTS of a running node).
cluster_masters() {
  _cluster_names masters - -
}

# _cluster_names MODE PORT PREFIX: one Python process. Loads the map
# (CLUSTER SLOTS of the first node that answers), then prints, by MODE:
#   masters    the masters serving slots, one a line (PORT, PREFIX unused)
#   master-of  the master serving lock PREFIX (PORT unused)
#   on         a name PREFIX-N on the master PORT
#   not-on     a name PREFIX-N on another master than PORT
# Slots are computed here (CRC16 of the hash tag, as Redis does), for
# names without braces or percent signs.
_cluster_names() {
  PYTHONPATH="$E2E_PY" "$PYTHON" - "$CLUSTER_PORTS" "$@" <<'PY'
import sys
import miniredis as redis

ports, mode, port, prefix = sys.argv[1].split(), sys.argv[2], sys.argv[3], sys.argv[4]

def crc16(data):
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc

ranges = None
for p in ports:
    try:
        r = redis.Redis(host="127.0.0.1", port=int(p), socket_timeout=1, socket_connect_timeout=1)
        ranges = r.execute_command("CLUSTER", "SLOTS")
        break
    except (redis.RedisError, OSError):
        continue
if not ranges:
    sys.exit("no node answers CLUSTER SLOTS")

def master_of(name):
    slot = crc16(name.encode()) % 16384
    return next(str(r[2][1]) for r in ranges if r[0] <= slot <= r[1])

if mode == "masters":
    print("\n".join(sorted({str(r[2][1]) for r in ranges})))
    sys.exit(0)
if mode == "master-of":
    print(master_of(prefix))
    sys.exit(0)
for n in range(1000):
    name = f"{prefix}-{n}"
    if (master_of(name) == port) == (mode == "on"):
        print(name)
        sys.exit(0)
sys.exit(f"no name {prefix}-N {mode} master {port}")
PY
}

# master_of_lock NAME: the port of the master holding lock NAME's slot.
master_of_lock() {
  _cluster_names master-of - "$1"
}

# replica_of MASTER: the port of the replica of the master MASTER.
replica_of() {
  cluster_cli "$1" INFO replication | sed -n 's/^slave0:.*port=\([0-9]*\),.*/\1/p'
}

# lock_on_master PORT [PREFIX]: prints a lock name (PREFIX-N) whose slot the
# master PORT serves.
lock_on_master() {
  _cluster_names on "$1" "${2:-lock}" || fail "lock_on_master: no name on master $1"
}

# lock_not_on_master PORT [PREFIX]: a lock name whose slot is on another master.
lock_not_on_master() {
  _cluster_names not-on "$1" "${2:-lock}" || fail "lock_not_on_master: every name is on master $1"
}

# _cluster_wait_master_of SLOT OLD SECONDS: waits until every running node
# names a master other than OLD for SLOT, that master says it is one, and
# its own cluster_state is ok; prints its port.
_cluster_wait_master_of() {
  local slot="$1" old="$2" limit="$3" deadline new
  deadline=$((${EPOCHREALTIME/./} + limit * 1000000))
  while ((${EPOCHREALTIME/./} < deadline)); do
    new="$(PYTHONPATH="$E2E_PY" "$PYTHON" - "$CLUSTER_PORTS" "$slot" "$old" <<'PY' 2>/dev/null
import sys
import miniredis as redis
ports, slot, old = sys.argv[1].split(), int(sys.argv[2]), sys.argv[3]
seen = set()
for port in ports:
    try:
        r = redis.Redis(host="127.0.0.1", port=int(port), socket_timeout=1, socket_connect_timeout=1)
        for s in r.execute_command("CLUSTER", "SLOTS"):
            if s[0] <= slot <= s[1]:
                seen.add(str(s[2][1]))
    except (redis.RedisError, OSError):
        continue
if len(seen) == 1 and old not in seen:
    new = seen.pop()
    r = redis.Redis(host="127.0.0.1", port=int(new), socket_timeout=1, decode_responses=True)
    if r.execute_command("ROLE")[0] == "master" and "cluster_state:ok" in r.execute_command("CLUSTER", "INFO"):
        print(new)
PY
    )"
    if [[ -n "$new" ]]; then
      echo "$new"
      return 0
    fi
    nap 0.1
  done
  fail "no new master (other than $old) for slot $slot within ${limit}s"
}

# failover_shard MASTER [SECONDS]: CLUSTER FAILOVER on MASTER's replica, then
# waits (default 10 s) until every node names the replica as the shard's
# master; prints its port.
failover_shard() {
  local master="$1" replica slot reply
  replica="$(replica_of "$master")"
  [[ -n "$replica" ]] || fail "failover_shard: master $master has no replica"
  slot="$(cluster_cli "$master" --json CLUSTER SLOTS | "$PYTHON" -c '
import json, sys
print(next(s[0] for s in json.load(sys.stdin) if str(s[2][1]) == sys.argv[1]))' "$master")"
  until_ok 25 cluster_cli "$replica" CLUSTER FAILOVER ||
    fail "failover_shard: CLUSTER FAILOVER answered: $reply"
  _cluster_wait_master_of "$slot" "$master" "${2:-10}"
}

# kill_shard_master MASTER [SECONDS]: SIGKILLs MASTER, then waits (default
# 15 s) until its replica took over; prints the new master's port.
kill_shard_master() {
  local master="$1" slot
  slot="$(cluster_cli "$master" --json CLUSTER SLOTS | "$PYTHON" -c '
import json, sys
print(next(s[0] for s in json.load(sys.stdin) if str(s[2][1]) == sys.argv[1]))' "$master")"
  kill -KILL "$(cluster_node_pid "$master")"
  _cluster_wait_master_of "$slot" "$master" "${2:-15}"
}

# stop_cluster: for teardown_file. Stops every node started for this file
# (thawing frozen ones first; SIGKILL after 5 s) and checks none is left.
stop_cluster() {
  [[ -n "${CLUSTER_DIR:-}" && -d "$CLUSTER_DIR" ]] || return 0
  local f p pid left=()
  for f in "$CLUSTER_DIR"/*/pid; do
    [[ -e "$f" ]] || continue
    pid="$(<"$f")"
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  done
  for f in "$CLUSTER_DIR"/*/pid; do
    [[ -e "$f" ]] || continue
    _stop_pid "$(<"$f")"
  done
  for f in "$CLUSTER_DIR"/*/pid; do
    [[ -e "$f" ]] || continue
    pid="$(<"$f")"
    if running "$pid"; then left+=("$pid"); fi
  done
  for p in ${CLUSTER_PORTS:-}; do
    pid="$(pgrep -f "^(\S*/)?(redis|valkey)-server 127\.0\.0\.1:$p( |$)")" && left+=("$pid (port $p)")
  done
  if ((${#left[@]})); then
    echo "stop_cluster: still running: ${left[*]}" >&2
    return 1
  fi
}

# slot_of_master MASTER: the first slot the master MASTER serves.
slot_of_master() {
  cluster_cli "$1" --json CLUSTER SLOTS | "$PYTHON" -c '
import json, sys
print(next(s[0] for s in json.load(sys.stdin) if str(s[2][1]) == sys.argv[1]))' "$1"
}

# wait_promoted SLOT OLD [SECONDS]: after a test killed the master OLD
# itself, waits (default 15 s) until every running node names another
# master for SLOT (slot_of_master OLD, taken before); prints its port.
wait_promoted() {
  _cluster_wait_master_of "$1" "$2" "${3:-15}"
}

# cluster_config_set PARAMETER VALUE: CONFIG SET on every running node (a
# node restarted later starts with the default again).
cluster_config_set() {
  local p
  for p in $CLUSTER_PORTS; do
    running "$(cluster_node_pid "$p")" || continue
    [[ "$(cluster_cli "$p" CONFIG SET "$1" "$2")" == OK ]] ||
      fail "cluster_config_set: node $p refused $1 $2"
  done
}
