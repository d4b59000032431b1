# shellcheck shell=bash
# A quorum of independent redis-servers for the quorum suites (load after
# helpers). Member K (1..Q_N) listens on $Q_PORT_K; its current pid is in
# $BATS_FILE_TMPDIR/member.K.pid (a restart changes it).

# The TTL the suites use: a member restarted without data does not count
# until it has been up this long (the delayed-restart rule), so the servers
# must be that old before a test starts (q_heal waits for it).
Q_TTL=3s
Q_MIN_UPTIME=3

# start_quorum N: N redis-servers; exports Q_N, Q_PORT_K, Q_DIR_K and
# RLOCK_URL, the comma list of their URLs (which makes rlock a quorum).
start_quorum() {
  local n="$1" k urls=""
  for ((k = 1; k <= n; k++)); do
    start_redis || return 1
    export "Q_PORT_$k=$REDIS_PORT" "Q_DIR_$k=$REDIS_DIR"
    echo "$REDIS_PID" >"$BATS_FILE_TMPDIR/member.$k.pid"
    urls+="${urls:+,}redis://127.0.0.1:$REDIS_PORT/0"
  done
  export Q_N="$n" RLOCK_URL="$urls"
  q_wait_uptime
}

q_port() {
  local v="Q_PORT_$1"
  echo "${!v}"
}

q_pid() {
  echo "$(<"$BATS_FILE_TMPDIR/member.$1.pid")"
}

# qcli K ARGS...: redis-cli against member K.
qcli() {
  local k="$1"
  shift
  redis-cli -p "$(q_port "$k")" "$@" </dev/null
}

q_kill() {
  touch "$BATS_FILE_TMPDIR/disturbed"
  kill -KILL "$(q_pid "$1")" && wait_gone "$(q_pid "$1")"
}
q_freeze() {
  touch "$BATS_FILE_TMPDIR/disturbed"
  kill -STOP "$(q_pid "$1")"
}
q_thaw() { kill -CONT "$(q_pid "$1")"; }

# _q_py SCRIPT ARGS...: python with the members' ports in PORTS (one
# process for what would otherwise be a redis-cli call per member).
_q_py() {
  local script="$1" k ports=()
  shift
  for ((k = 1; k <= Q_N; k++)); do ports+=("$(q_port "$k")"); done
  PYTHONPATH="$E2E_PY" "$PYTHON" -c "import miniredis as redis, sys, time
PORTS = [int(p) for p in '${ports[*]}'.split()]
def member(p): return redis.Redis(host='127.0.0.1', port=p, socket_timeout=2)
$script" "$@"
}

# wait_gone PID: until PID no longer runs (bounded, 5 s).
wait_gone() {
  local i
  for ((i = 0; i < 100; i++)); do
    running "$1" || return 0
    nap 0.05
  done
  return 1
}

# q_restart K: kills member K (if it runs) and starts it again, empty, on
# the same port.
q_restart() {
  local k="$1" dir="Q_DIR_$1"
  touch "$BATS_FILE_TMPDIR/disturbed"
  if running "$(q_pid "$k")"; then q_kill "$k"; fi
  _launch_redis "${!dir}" --port "$(q_port "$k")" || return 1
  echo "$_REDIS_PID" >"$BATS_FILE_TMPDIR/member.$k.pid"
}

# q_wait_uptime [S]: until rlock counts every member as up S (Q_MIN_UPTIME)
# seconds: INFO's uptime_in_seconds may say one second more than the
# server has been up, so rlock takes one off, and this waits for S + 1.
_q_wait_uptime_py() {
  local s=$((${1:-$Q_MIN_UPTIME} + 1))
  echo "
for p in PORTS:
    for _ in range(10 * $s + 50):
        if member(p).info('server')['uptime_in_seconds'] >= $s: break
        time.sleep(0.1)"
}
q_wait_uptime() {
  _q_py "$(_q_wait_uptime_py "$@")"
}

# q_heal: every member running (restarted if dead, resumed if frozen),
# empty, and old enough to count.
q_heal() {
  local k
  if [[ -e "$BATS_FILE_TMPDIR/disturbed" ]]; then
    for ((k = 1; k <= Q_N; k++)); do
      kill -CONT "$(q_pid "$k")" 2>/dev/null || true
      if ! running "$(q_pid "$k")"; then q_restart "$k"; fi
    done
    rm -f "$BATS_FILE_TMPDIR/disturbed"
  fi
  # One Python process for both steps.
  _q_py "
for p in PORTS: member(p).flushall()
$(_q_wait_uptime_py)"
}

# q_queue_len NAME: the shortest queue of lock NAME over the members that
# hold it (how many waiters every member with a holder has queued). A
# member where the lock is free does not queue: it grants, and the waiter
# gives that grant back when it has no majority.
q_queue_len() {
  local k port min=""
  for ((k = 1; k <= Q_N; k++)); do
    port="Q_PORT_$k"
    if REDIS_CMD_TIMEOUT=2 redis_cmd "${!port}" ZCARD "rlock:{$1}:h" 2>/dev/null &&
      ((redis_reply[0] > 0)); then
      REDIS_CMD_TIMEOUT=2 redis_cmd "${!port}" ZCARD "rlock:{$1}:q" 2>/dev/null || redis_reply=(0)
      if [[ -z "$min" ]] || ((redis_reply[0] < min)); then min="${redis_reply[0]}"; fi
    fi
  done
  echo "${min:-0}"
}

# q_holding NAME: how many members have a holder of lock NAME (a member
# out of reach counts as not holding).
q_holding() {
  local k port n=0
  for ((k = 1; k <= Q_N; k++)); do
    port="Q_PORT_$k"
    # Over /dev/tcp (no process: the suites poll this), with the 2 s
    # timeout the members' Python clients have.
    if REDIS_CMD_TIMEOUT=2 redis_cmd "${!port}" ZCARD "rlock:{$1}:h" 2>/dev/null &&
      ((redis_reply[0] > 0)); then
      n=$((n + 1))
    fi
  done
  echo "$n"
}

# q_evicts K NAME: until member K no longer has NAME's holders (a forced
# release it carries out on resuming), 5 s at most; fails if it still has.
q_evicts() {
  local i
  for ((i = 0; i < 50; i++)); do
    [[ "$(qcli "$1" EXISTS "rlock:{$2}:h")" == 0 ]] && return 0
    nap 0.1
  done
  echo "member $1 still holds $2" >&2
  return 1
}
