# shellcheck shell=bash
# A real Sentinel topology for the e2e suites: a master, two replicas and
# three Sentinels on free loopback ports. Load it after helpers:
#
#   load helpers
#   load sentinel
#   setup_file() { start_sentinel_topology; }
#   teardown_file() { stop_sentinel_topology; }
#   setup() { wait_topology_healthy; }
#
# Everything lives under one directory ($TOPO_DIR): a directory per data
# node (n-PORT) and per Sentinel (s-PORT), each with its pid file, log and,
# for a Sentinel, its config file (writable: Sentinel rewrites it). Pids
# change when a test restarts a node, so they are always read from the pid
# files, never from variables. The ports never change within a file:
# TOPO_NODE_PORTS (three data nodes, in start order), TOPO_SENTINEL_PORTS and
# TOPO_NAME (the master's name) are exported by start_sentinel_topology.
# Nodes keep no data (no RDB, no AOF): a restarted node resynchronises from
# the master, and a test that wants persistence runs its own server.
#
# With RLOCK_E2E_TLS=1 exported before start_sentinel_topology (see
# helpers.bash), the nodes and the Sentinels listen on TLS only, replication
# and the Sentinels' links to the nodes and to each other are TLS too
# (`tls-replication yes`), the ports are the TLS ports, and sentinel_url
# gives a rediss-sentinel:// URL.

# The Sentinel timings: quick enough that a failover ends within ~5 s.
TOPO_DOWN_AFTER_MS=1000
TOPO_FAILOVER_TIMEOUT_MS=4000

# node_cli PORT ARGS...: redis-cli against a data node, bounded (a frozen
# node would otherwise hang it).
node_cli() {
  local port="$1"
  shift
  e2e_tls_args "$port"
  timeout -k 1 3 redis-cli "${E2E_TLS_CLI[@]}" -h 127.0.0.1 -p "$port" "$@" </dev/null
}

# sentinel_ports: the three Sentinels' ports, one a line.
sentinel_ports() {
  tr ' ' '\n' <<<"$TOPO_SENTINEL_PORTS"
}

# sentinel_cli N ARGS...: redis-cli against Sentinel N (1, 2 or 3), bounded.
sentinel_cli() {
  local n="$1" ports
  shift
  read -r -a ports <<<"$TOPO_SENTINEL_PORTS"
  node_cli "${ports[n - 1]}" "$@"
}

# sentinel_url: the redis-sentinel:// URL of the topology (database 0;
# rediss-sentinel:// with TLS).
sentinel_url() {
  local p hosts=() scheme=redis-sentinel
  for p in $TOPO_SENTINEL_PORTS; do hosts+=("127.0.0.1:$p"); done
  if e2e_tls; then scheme=rediss-sentinel; fi
  local IFS=,
  echo "$scheme://${hosts[*]}/0#$TOPO_NAME"
}

# _sentinel_master N: the master's port according to Sentinel N (empty when
# it does not answer).
# (Asked over /dev/tcp, no process: the failover waits poll this.)
_sentinel_master() {
  local ports
  read -r -a ports <<<"$TOPO_SENTINEL_PORTS"
  redis_cmd "${ports[$1 - 1]}" SENTINEL GET-MASTER-ADDR-BY-NAME "$TOPO_NAME" 2>/dev/null || return 0
  echo "${redis_reply[1]:-}"
}

# master_port: the master's port, asking the Sentinels in turn (fails when
# none answers).
master_port() {
  local n port
  for n in 1 2 3; do
    port="$(_sentinel_master "$n")"
    if [[ "$port" =~ ^[0-9]+$ ]]; then
      echo "$port"
      return 0
    fi
  done
  echo "master_port: no Sentinel answered" >&2
  return 1
}

# replica_ports: the data nodes other than the master, one a line.
replica_ports() {
  local master p
  master="$(master_port)" || return 1
  for p in $TOPO_NODE_PORTS; do
    if [[ "$p" != "$master" ]]; then echo "$p"; fi
  done
}

# node_pid PORT: the pid of the data node or Sentinel on PORT.
node_pid() {
  if [[ -f "$TOPO_DIR/n-$1/pid" ]]; then echo "$(<"$TOPO_DIR/n-$1/pid")"; else echo "$(<"$TOPO_DIR/s-$1/pid")"; fi
}

# _topo_wait_ping PORT PID DIR: waits (bounded, 10 s) until PORT answers
# PONG; fails with the log in DIR when the process died or never answered.
_topo_wait_ping() {
  local port="$1" pid="$2" dir="$3" i
  for ((i = 0; i < 200; i++)); do
    if ! running "$pid"; then
      echo "the server on port $port exited at start:" >&2
      cat "$dir/redis.log" "$dir/stdout.log" >&2 2>/dev/null
      return 1
    fi
    redis_cmd "$port" PING 2>/dev/null && [[ "${redis_reply[0]}" == PONG ]] && return 0
    nap 0.05
  done
  echo "the server on port $port did not answer within 10 s" >&2
  cat "$dir/redis.log" >&2 2>/dev/null
  return 1
}

# _topo_start_node PORT [MASTER_PORT]: starts the data node PORT (a replica
# of MASTER_PORT if given) in $TOPO_DIR/n-PORT and waits until it answers.
_topo_start_node() {
  local port="$1" master="${2:-}" dir="$TOPO_DIR/n-$1" args=()
  mkdir -p "$dir"
  [[ -n "$master" ]] && args=(--replicaof 127.0.0.1 "$master")
  e2e_tls_args "$port"
  args+=("${E2E_TLS_SERVER[@]}")
  # repl-diskless-sync-delay 0: a full sync starts at once instead of
  # waiting 5 s for more replicas. Any node may become master.
  "${RLOCK_E2E_SERVER:-redis-server}" --port "$port" --bind 127.0.0.1 --daemonize no --save '' --appendonly no \
    --dir "$dir" --logfile "$dir/redis.log" --repl-diskless-sync-delay 0 \
    "${args[@]}" </dev/null >"$dir/stdout.log" 2>&1 3>&- &
  echo "$!" >"$dir/pid"
  # No "Killed" job report when a test kills it on purpose.
  disown "$!"
  _topo_wait_ping "$port" "$!" "$dir"
}

# _topo_start_sentinel PORT MASTER_PORT: writes a Sentinel config watching
# MASTER_PORT and starts `redis-server CONF --sentinel` on PORT.
_topo_start_sentinel() {
  local port="$1" master="$2" dir="$TOPO_DIR/s-$1" listen="port $1" k
  mkdir -p "$dir"
  # With TLS: the options e2e_tls_args gives a node, as config lines.
  e2e_tls_args "$port"
  if e2e_tls; then
    listen=""
    for ((k = 0; k < ${#E2E_TLS_SERVER[@]}; k += 2)); do
      listen+="${E2E_TLS_SERVER[k]#--} ${E2E_TLS_SERVER[k + 1]}"$'\n'
    done
  fi
  cat >"$dir/sentinel.conf" <<EOF
$listen
bind 127.0.0.1
daemonize no
dir $dir
logfile $dir/redis.log
sentinel resolve-hostnames no
sentinel monitor $TOPO_NAME 127.0.0.1 $master 2
sentinel down-after-milliseconds $TOPO_NAME $TOPO_DOWN_AFTER_MS
sentinel failover-timeout $TOPO_NAME $TOPO_FAILOVER_TIMEOUT_MS
sentinel parallel-syncs $TOPO_NAME 1
EOF
  chmod u+w "$dir/sentinel.conf"
  _topo_launch_sentinel "$port"
}

# _topo_launch_sentinel PORT: starts the Sentinel PORT from its config file
# (the one Sentinel keeps rewriting) and waits until it answers.
_topo_launch_sentinel() {
  local port="$1" dir="$TOPO_DIR/s-$1"
  "${RLOCK_E2E_SERVER:-redis-server}" "$dir/sentinel.conf" --sentinel </dev/null >>"$dir/stdout.log" 2>&1 3>&- &
  echo "$!" >"$dir/pid"
  disown "$!"
  _topo_wait_ping "$port" "$!" "$dir"
}

# start_sentinel_topology [NAME]: for setup_file. Starts a master, two
# replicas of it and three Sentinels (quorum 2) watching it, on free
# loopback ports, and waits until the topology is healthy. A port found
# free can be taken before the server binds it: one more try on new ports.
# On failure it stops whatever it started and returns 1 with the reason on
# stderr.
start_sentinel_topology() {
  export TOPO_NAME="${1:-rlockmaster}"
  local attempt
  e2e_tls_prepare || return 1
  for attempt in 1 2; do
    export TOPO_DIR="$BATS_FILE_TMPDIR/topo$attempt"
    mkdir -p "$TOPO_DIR"
    _topo_try_start && return 0
    echo "start_sentinel_topology: the topology did not come up (attempt $attempt)" >&2
    stop_sentinel_topology
  done
  return 1
}

_topo_try_start() {
  local ports=() sports=() pids=() i
  # Six ports at once (free_port's ledger is locked; each call starts Python).
  for i in 1 2 3 4 5 6; do
    free_port >"$TOPO_DIR/port$i" &
    pids+=("$!")
  done
  for i in "${pids[@]}"; do wait "$i" || return 1; done
  for i in 1 2 3; do ports+=("$(<"$TOPO_DIR/port$i")"); done
  for i in 4 5 6; do sports+=("$(<"$TOPO_DIR/port$i")"); done
  export TOPO_NODE_PORTS="${ports[*]}" TOPO_SENTINEL_PORTS="${sports[*]}"
  _topo_start_node "${ports[0]}" &&
    _topo_start_node "${ports[1]}" "${ports[0]}" &&
    _topo_start_node "${ports[2]}" "${ports[0]}" &&
    _topo_wait_replication "${ports[0]}" 10 &&
    _topo_start_sentinel "${sports[0]}" "${ports[0]}" &&
    _topo_start_sentinel "${sports[1]}" "${ports[0]}" &&
    _topo_start_sentinel "${sports[2]}" "${ports[0]}" &&
    _topo_wait_healthy 20
}

# info_field TEXT FIELD: the value of FIELD in INFO output TEXT.
info_field() {
  sed -n "s/^$2:\([^\r]*\)\r\?$/\1/p" <<<"$1" | head -n 1
}

# _topo_check replication MASTER | healthy: one look at the topology, by
# one Python process (a few dozen redis-cli calls are slow on a loaded
# machine). `replication`: the node MASTER is a master with both other nodes
# connected and online, each replicating it with the link up. `healthy`:
# every Sentinel names the same master, replication is as above, and every
# Sentinel sees a plain master with two replicas and two other Sentinels,
# none flagged down, and has its quorum. Returns 1 with the reason in
# _TOPO_WHY otherwise.
_topo_check() {
  _TOPO_WHY="$(PYTHONPATH="$E2E_PY" "$PYTHON" - "$TOPO_NAME" "$TOPO_NODE_PORTS" "$TOPO_SENTINEL_PORTS" "$@" <<'PY'
import sys
import miniredis as redis

name, nodes, sentinels, what = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4]

def conn(port):
    return redis.Redis(host="127.0.0.1", port=int(port), socket_timeout=2,
                       socket_connect_timeout=2, decode_responses=True)

def pairs(flat):
    return dict(zip(flat[::2], flat[1::2]))

def check():
    if what == "replication":
        master = sys.argv[5]
    else:
        masters = []
        for n, port in enumerate(sentinels, 1):
            addr = conn(port).execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)
            masters.append(addr[1] if addr else None)
        if len(set(masters)) != 1 or masters[0] is None:
            return f"the Sentinels disagree on the master: {masters}"
        master = masters[0]
    info = conn(master).info("replication")
    if info.get("role") != "master":
        return f"node {master} is not a master: {info.get('role')}"
    online = [k for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)
              and v.get("state") == "online"]
    if info.get("connected_slaves") != 2 or len(online) != 2:
        return f"master {master} has {info.get('connected_slaves')} replicas, {len(online)} online"
    for port in nodes:
        if port == master:
            continue
        i = conn(port).info("replication")
        if (i.get("role"), str(i.get("master_port")), i.get("master_link_status")) != ("slave", master, "up"):
            return (f"node {port}: role {i.get('role')}, master port {i.get('master_port')}, "
                    f"link {i.get('master_link_status')}")
    if what == "replication":
        return ""
    for n, port in enumerate(sentinels, 1):
        s = conn(port)
        flags = pairs(s.execute_command("SENTINEL", "MASTER", name)).get("flags")
        if flags != "master":
            return f"Sentinel {n}: master flags {flags!r}"
        flags = sorted(pairs(r).get("flags") for r in s.execute_command("SENTINEL", "REPLICAS", name))
        if flags != ["slave", "slave"]:
            return f"Sentinel {n}: replica flags {flags}"
        flags = sorted(pairs(r).get("flags") for r in s.execute_command("SENTINEL", "SENTINELS", name))
        if flags != ["sentinel", "sentinel"]:
            return f"Sentinel {n}: other Sentinels' flags {flags}"
        try:
            s.execute_command("SENTINEL", "CKQUORUM", name)
        except redis.ResponseError as e:
            return f"Sentinel {n}: CKQUORUM says {e}"
    return ""

try:
    print(check())
except (redis.RedisError, OSError) as e:
    print(f"{type(e).__name__}: {e}")
PY
  )"
  [[ -z "$_TOPO_WHY" ]]
}

# _topo_wait_replication MASTER SECONDS: waits until the replication check
# passes.
_topo_wait_replication() {
  local deadline=$((SECONDS + $2))
  until _topo_check replication "$1"; do
    if ((SECONDS >= deadline)); then
      echo "replication did not settle within $2 s: $_TOPO_WHY" >&2
      return 1
    fi
    nap 0.1
  done
}

# _topo_wait_healthy SECONDS: waits until the healthy check passes.
_topo_wait_healthy() {
  local deadline=$((SECONDS + $1))
  until _topo_check healthy; do
    if ((SECONDS >= deadline)); then
      echo "the Sentinel topology did not become healthy within $1 s: $_TOPO_WHY" >&2
      return 1
    fi
    nap 0.2
  done
}

# _role PORT: the role (master, slave, sentinel) the node PORT answers to
# ROLE; empty when it does not answer.
_role() {
  redis_cmd "$1" ROLE 2>/dev/null && echo "${redis_reply[0]}"
  return 0
}

# _sentinel_master_flags N: the flags Sentinel N shows for the master
# (SENTINEL MASTER); empty when it does not answer.
_sentinel_master_flags() {
  local ports k
  read -r -a ports <<<"$TOPO_SENTINEL_PORTS"
  redis_cmd "${ports[$1 - 1]}" SENTINEL MASTER "$TOPO_NAME" 2>/dev/null || return 0
  for ((k = 0; k + 1 < ${#redis_reply[@]}; k += 2)); do
    if [[ "${redis_reply[k]}" == flags ]]; then
      echo "${redis_reply[k + 1]}"
      return 0
    fi
  done
}

# _topo_demote_old_masters: when all three Sentinels agree on a master and
# none has a failover in progress, every other node that still says it is a
# master (an old master after SENTINEL FAILOVER) is made a replica of it at
# once: Sentinel itself does so only after the node has reported the wrong
# role for 8 s.
_topo_demote_old_masters() {
  local n m master="" flags p
  for n in 1 2 3; do
    m="$(_sentinel_master "$n")"
    [[ -n "$m" && (-z "$master" || "$m" == "$master") ]] || return 0
    master="$m"
    flags="$(_sentinel_master_flags "$n")"
    [[ "$flags" == master ]] || return 0
  done
  [[ "$(_role "$master")" == master ]] || return 0
  for p in $TOPO_NODE_PORTS; do
    [[ "$p" != "$master" ]] || continue
    if [[ "$(_role "$p")" == master ]]; then
      node_cli "$p" REPLICAOF 127.0.0.1 "$master" >/dev/null 2>&1 || true
    fi
  done
}

# wait_topology_healthy [SECONDS]: for setup (or after a test's damage).
# Thaws every frozen process, restarts every Sentinel and data node that is
# not running (a node as a replica of the current master), then waits (default 25 s) for one
# master and two in-sync replicas that all three Sentinels agree on (see
# _topo_demote_old_masters for the one shortcut it takes); fails
# the test with the reason otherwise.
wait_topology_healthy() {
  local limit="${1:-25}" p
  for p in $TOPO_NODE_PORTS $TOPO_SENTINEL_PORTS; do
    kill -CONT "$(node_pid "$p")" 2>/dev/null || true
  done
  for p in $TOPO_SENTINEL_PORTS $TOPO_NODE_PORTS; do
    running "$(node_pid "$p")" || restart_node "$p" || return 1
  done
  _topo_check healthy && return 0
  _topo_demote_old_masters
  _topo_wait_healthy "$limit" || fail "wait_topology_healthy: topology not healthy within ${limit}s: $_TOPO_WHY"
}

# _new_master OLD_PORT SECONDS: waits until all three Sentinels name the
# same master other than OLD_PORT and that node answers ROLE as a master;
# prints its port, or returns 1 when SECONDS pass first.
_new_master() {
  local old="$1" limit="$2" n m first role deadline
  deadline=$((${EPOCHREALTIME/./} + limit * 1000000))
  while ((${EPOCHREALTIME/./} < deadline)); do
    first="$(_sentinel_master 1)"
    if [[ -n "$first" && "$first" != "$old" ]]; then
      for n in 2 3; do
        m="$(_sentinel_master "$n")"
        [[ "$m" == "$first" ]] || continue 2
      done
      role="$(_role "$first")"
      if [[ "$role" == master ]]; then
        echo "$first"
        return 0
      fi
    fi
    nap 0.1
  done
  return 1
}

# wait_for_new_master OLD_PORT [SECONDS]: _new_master (default 10 s), and
# fails the test when there is none.
wait_for_new_master() {
  _new_master "$1" "${2:-10}" ||
    fail "wait_for_new_master: no new master (other than $1) within ${2:-10}s; Sentinels say $(_sentinel_master 1) $(_sentinel_master 2) $(_sentinel_master 3)"
}

# failover_by_sentinel [SECONDS]: SENTINEL FAILOVER through Sentinel 1
# (retried while it answers an error, ~15 s), then waits like
# wait_for_new_master; prints the new master's port. A failover the
# Sentinels abort (the promotion took longer than the failover timeout on a
# busy machine) is asked for once more.
failover_by_sentinel() {
  local old reply attempt
  old="$(master_port)" || fail "failover_by_sentinel: no master"
  for attempt in 1 2; do
    # NOGOODSLAVE / INPROG right after an earlier event (a Sentinel learns
    # of the replicas' new state from their INFO, polled every few seconds
    # on a busy machine): retry (bounded, ~15 s).
    until_ok 75 sentinel_cli 1 SENTINEL FAILOVER "$TOPO_NAME" ||
      fail "failover_by_sentinel: SENTINEL FAILOVER answered: $reply"
    _new_master "$old" "${1:-10}" && return 0
    echo "# failover_by_sentinel: attempt $attempt gave no new master within ${1:-10}s" >&2
  done
  fail "failover_by_sentinel: no new master (other than $old) after two SENTINEL FAILOVERs; Sentinels say $(_sentinel_master 1) $(_sentinel_master 2) $(_sentinel_master 3)"
}

# kill_master: SIGKILLs the current master and prints its port at once
# (follow with wait_for_new_master).
kill_master() {
  local port
  port="$(master_port)" || fail "kill_master: no master"
  kill -KILL "$(node_pid "$port")"
  echo "$port"
}

# restart_node PORT: starts the data node PORT again after it was killed:
# as a replica of the master the Sentinels name, or as a master when they
# still name PORT itself (no failover happened). It starts empty and
# resynchronises. A Sentinel's PORT restarts that Sentinel from its
# rewritten config file.
restart_node() {
  local port="$1" master="" i
  if running "$(node_pid "$port")"; then
    echo "restart_node: the node on $port is running" >&2
    return 1
  fi
  if [[ -d "$TOPO_DIR/s-$port" ]]; then
    _topo_launch_sentinel "$port"
    return
  fi
  master="$(master_port)" || return 1
  [[ "$master" == "$port" ]] && master=""
  # The killed process's socket is gone, but wait (bounded) in case the
  # port is still being released.
  for ((i = 0; i < 50; i++)); do
    redis_cmd "$port" PING >/dev/null 2>&1 || break
    nap 0.1
  done
  _topo_start_node "$port" "$master"
}

# freeze_node PORT / thaw_node PORT: SIGSTOP / SIGCONT the node or Sentinel
# on PORT.
freeze_node() {
  kill -STOP "$(node_pid "$1")"
}
thaw_node() {
  kill -CONT "$(node_pid "$1")"
}

# stop_sentinel_topology: for teardown_file. Stops every node and Sentinel
# started for this file (thawing frozen ones first; SIGKILL after 5 s) and
# checks that none is left.
stop_sentinel_topology() {
  [[ -n "${TOPO_DIR:-}" && -d "$TOPO_DIR" ]] || return 0
  local f p pid left=()
  # SIGTERM to all first (a frozen one cannot act on it before SIGCONT),
  # then wait for each (SIGKILL after 5 s).
  for f in "$TOPO_DIR"/*/pid; do
    [[ -e "$f" ]] || continue
    pid="$(<"$f")"
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  done
  for f in "$TOPO_DIR"/*/pid; do
    [[ -e "$f" ]] || continue
    _stop_pid "$(<"$f")"
  done
  for f in "$TOPO_DIR"/*/pid; do
    [[ -e "$f" ]] || continue
    pid="$(<"$f")"
    if running "$pid"; then left+=("$pid"); fi
  done
  # Also anything on our ports that a pid file does not name.
  for p in $TOPO_NODE_PORTS $TOPO_SENTINEL_PORTS; do
    pid="$(pgrep -f "^(\S*/)?(redis|valkey)-server 127\.0\.0\.1:$p( |$)")" && left+=("$pid (port $p)")
  done
  if ((${#left[@]})); then
    echo "stop_sentinel_topology: still running: ${left[*]}" >&2
    return 1
  fi
}
