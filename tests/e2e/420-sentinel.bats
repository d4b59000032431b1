#!/usr/bin/env bats
# rlock through Sentinel (redis-sentinel://) on a real topology: a master,
# two replicas, three Sentinels. Failovers are real (kill -9 of the master,
# SENTINEL FAILOVER); a watcher keeps trying to take the lock meanwhile and
# must never get in while the run holds it. Replica acknowledgement
# (--replicas, WAIT) is tested with a frozen replica.

load helpers
load sentinel
load watcher

setup_file() {
  start_sentinel_topology
  export RLOCK_URL
  RLOCK_URL="$(sentinel_url)"
}

teardown_file() {
  stop_sentinel_topology
}

setup() {
  wait_topology_healthy
  M="$BATS_TEST_TMPDIR"
}

teardown() {
  touch "$M/stop-watching"
  kill_bg_pids
  if [[ -e "$M/removed" ]]; then monitor_again "$(<"$M/removed")"; fi
}

# monitor_again PORT: every Sentinel monitors the master on PORT again
# (after SENTINEL REMOVE), with the topology's timings.
monitor_again() {
  local n
  for n in 1 2 3; do
    sentinel_cli "$n" SENTINEL MONITOR "$TOPO_NAME" 127.0.0.1 "$1" 2 >/dev/null
    sentinel_cli "$n" SENTINEL SET "$TOPO_NAME" down-after-milliseconds "$TOPO_DOWN_AFTER_MS" \
      failover-timeout "$TOPO_FAILOVER_TIMEOUT_MS" >/dev/null
  done
  rm -f "$M/removed"
}

# holder_expiry PORT NAME: the expiry (ms) the node PORT has for NAME's
# holder, empty if none.
holder_expiry() {
  redis_cmd "$1" ZRANGE "rlock:{$2}:h" 0 0 WITHSCORES 2>/dev/null || return 0
  echo "${redis_reply[1]:-}"
}

@test "sentinel: acquire, status and release through the Sentinel URL; the lock is on the master and both replicas" {
  local port
  rl 0 acquire ha -n -t 60s
  local token="$output"
  # The default --replicas all waited for both replicas: the lock is there
  # the moment acquire returns.
  for port in $(master_port) $(replica_ports); do
    run node_cli "$port" EXISTS 'rlock:{ha}:h'
    assert_output 1
  done
  rl 0 status ha
  assert_output --partial ha
  refute_stderr --partial 'may evict'
  # A master that may evict the lock's keys is named after the output.
  node_cli "$(master_port)" CONFIG SET maxmemory 100mb maxmemory-policy allkeys-lru >/dev/null
  rl 0 status ha
  node_cli "$(master_port)" CONFIG SET maxmemory 0 maxmemory-policy noeviction >/dev/null
  assert_stderr --partial "127.0.0.1:$(master_port)/0 may evict the keys of its locks"
  rl 0 release ha --token "$token"
  rl 1 status ha
}

@test "sentinel: a run with a 10 s TTL survives kill -9 of the master, exits 0, and a watcher never gets in" {
  local old new before killed_at renewed_at="" i
  run_section survive 14 -t 10s
  start_watcher survive --replicas 0
  sleep 1
  old="$(master_port)"
  before="$(holder_expiry "$old" survive)"
  [[ -n "$before" ]] || fail "no holder on the master"
  killed_at="$(now_us)"
  kill_master >/dev/null
  new="$(wait_for_new_master "$old" 15)"
  # The first renewal on the new master raises the holder's expiry there.
  for ((i = 0; i < 300; i++)); do
    local e
    e="$(holder_expiry "$new" survive)"
    if [[ -n "$e" ]] && ((e > before)); then
      renewed_at="$(now_us)"
      break
    fi
    nap 0.05
  done
  [[ -n "$renewed_at" ]] || fail "no renewal reached the new master within 15 s"
  echo "# old master killed -> first renewal on the new master: $(((renewed_at - killed_at) / 1000)) ms" >&3
  bg_wait job 0 25
  stop_watcher
  check_watcher_kept_out
}

@test "sentinel: SENTINEL FAILOVER during a run: no second holder, the run exits 0 or 79, the next fence is greater" {
  run_section moved 8 -t 4s
  start_watcher moved --replicas 0
  sleep 0.5
  failover_by_sentinel 15 >/dev/null
  bg_wait job 0,79 20
  local run_status="$status" run_stderr="$stderr"
  stop_watcher
  check_no_second_holder
  # A run that ended as lost (79) may leave its lease behind on the new
  # master until it expires (its release went where it could); one that
  # ended 0 released it there.
  if ((run_status == 0)); then
    rl 0 acquire moved -n --json
  else
    echo "# the run ended 79: $run_stderr" >&3
    rl 0 acquire moved -w 6s --json
  fi
  assert_greater "$(json 'd["fence"]')" "$(<"$M/section.fence")"
}

# releases_across_failover PREFIX: takes 12 locks, asks the Sentinels for a
# failover and releases (odd) or forces (even) each, 150 ms apart, while it
# goes on; the exit statuses in $M/PREFIX.K.rc. Returns 1 when no new master
# came within 15 s (a failover the Sentinels aborted on a busy machine).
releases_across_failover() {
  local p="$1" k old rc
  for ((k = 1; k <= 12; k++)); do
    rl 0 acquire "$p-$k" -t 60s
    echo "$output" >"$M/$p.$k.token"
  done
  old="$(master_port)"
  until_ok 75 sentinel_cli 1 SENTINEL FAILOVER "$TOPO_NAME" || fail "SENTINEL FAILOVER: $reply"
  for ((k = 1; k <= 12; k++)); do
    rc=0
    if ((k % 2)); then
      "$RLOCK" release "$p-$k" --token "$(<"$M/$p.$k.token")" >/dev/null 2>"$M/$p.$k.err" || rc=$?
    else
      "$RLOCK" release "$p-$k" --force >/dev/null 2>"$M/$p.$k.err" || rc=$?
    fi
    echo "$rc" >"$M/$p.$k.rc"
    nap 0.15
  done
  _new_master "$old" 15 >/dev/null
}

@test "sentinel: a release or forced release that exits 0 during SENTINEL FAILOVER has freed the lock on the new master" {
  # A write that lands on the old master after its replica was promoted,
  # before the Sentinels demote it, is lost. A release (or force) is only
  # reported done once the replicas of the master that has it acknowledge.
  local p=fo k code
  if ! releases_across_failover fo; then
    echo "# the Sentinels gave up the failover; once more" >&3
    wait_topology_healthy
    p=fo2
    releases_across_failover fo2 || fail "no failover in two tries"
  fi
  for ((k = 1; k <= 12; k++)); do
    code="$(<"$M/$p.$k.rc")"
    echo "# $p-$k: exit $code $(<"$M/$p.$k.err")" >&3
    case "$code" in
      0) rl 1 status "$p-$k" ;;
      69) ;; # not confirmed, as documented: check with status
      *) fail "release of $p-$k exited $code: $(<"$M/$p.$k.err")" ;;
    esac
  done
}

@test "sentinel: fences keep increasing across a failover" {
  local first second
  rl 0 acquire fenced -n --json
  first="$(json 'd["fence"]')"
  rl 0 release fenced --token "$(json 'd["token"]')"
  failover_by_sentinel 15 >/dev/null
  rl 0 acquire fenced -n --json
  second="$(json 'd["fence"]')"
  assert_greater "$second" "$first"
}

@test "sentinel: a frozen replica makes acquire exit 69 naming the count; the lock is given back" {
  local replica
  replica="$(replica_ports | head -n 1)"
  freeze_node "$replica"
  # A 10 s TTL gives the replicas 1 s (TTL/10) to acknowledge: the live
  # one must make it even on a loaded machine (200 ms once did not).
  rl 69 acquire lagging -n -t 10s
  assert_regex "$stderr" "1 of 2 replicas acknowledged"
  [[ "$(echo "$stderr" | wc -l)" == 1 ]] || fail "more than one line on stderr: $stderr"
  rl 1 status lagging
  # --replicas 1 is met by the other replica; 0 does not wait at all.
  rl 0 acquire lagging -n -t 10s --replicas 1
  local token="$output"
  # A release waits for the replicas as the acquire did: all of them (the
  # default) cannot confirm it, so it is not said to be done (69), although
  # the master has done it (the token holds nothing there any more).
  rl 69 release lagging --token "$token"
  assert_regex "$stderr" "the release of lock 'lagging' is not confirmed .*1 of 2 replicas acknowledged"
  rl 1 release lagging --token "$token" --replicas 1
  rl 1 status lagging
  rl 0 acquire lagging -n -t 10s --replicas 0
  rl 0 release lagging --token "$output" --replicas 0
  # A plain redis:// URL to a master with replicas waits for them too.
  RLOCK_URL="redis://127.0.0.1:$(master_port)/0" rl 69 acquire lagging -n -t 10s
  assert_regex "$stderr" "1 of 2 replicas acknowledged"
  # More than are connected can never be met.
  thaw_node "$replica"
  rl 69 acquire lagging -n -t 10s --replicas 3
  assert_regex "$stderr" "2 of 3 replicas acknowledged"
}

@test "sentinel: with -w, an unacknowledged acquire is retried until the replica catches up" {
  local replica
  replica="$(replica_ports | head -n 1)"
  freeze_node "$replica"
  bg_rlock waiter acquire caught -w 10s -t 2s
  sleep 1.5
  # Still waiting: every grant so far was given back.
  running "$(<"$M/waiter.pid")" || fail "the waiter ended: $(<"$M/waiter.err")"
  thaw_node "$replica"
  bg_wait waiter 0 15
  rl 0 status caught
}

@test "sentinel: a run whose replicas stop acknowledging ends as a lost lock (79) before its lease could expire" {
  local port before end
  run_section unconfirmed 30 -t 3s
  for port in $(replica_ports); do freeze_node "$port"; done
  # The lease of the last renewal the replicas acknowledged ends at most
  # here (read at once: a renewal after the freeze may still reach the
  # master, but is never confirmed, and only moves this later).
  before="$(holder_expiry "$(master_port)" unconfirmed)"
  bg_wait job 79 10
  assert_regex "$stderr" "replicas acknowledged"
  end="$(<"$M/section.end")"
  assert_greater "$before" $((end / 1000))
}

@test "sentinel: an unknown master name is a config error naming it, at once" {
  RLOCK_URL="${RLOCK_URL%#*}#nosuchmaster" rl 78 acquire x -n
  assert_regex "$stderr" "nosuchmaster"
}

@test "sentinel: no Sentinel reachable is unavailable (69)" {
  local a b
  a="$(free_port)"
  b="$(free_port)"
  RLOCK_URL="redis-sentinel://127.0.0.1:$a,127.0.0.1:$b/0#$TOPO_NAME" rl 69 acquire x -n
  assert_regex "$stderr" "Sentinel"
}

@test "sentinel: a hung Sentinel first in the URL costs its share of the time, and the next one answers" {
  local url="$RLOCK_URL"
  start_hung_server
  export RLOCK_URL="${url%%://*}://127.0.0.1:$HUNG_PORT,${url#*://}"
  rl 0 acquire hung -t 10s
  rl 0 release hung --token "$output"
  rl 0 run hung -t 10s -- true
  assert_equal "$stderr" ""
  stop_hung_server
}

@test "sentinel: a frozen master is a failover: acquire -w takes the lock on the promoted replica" {
  local old new pid
  old="$(master_port)"
  pid="$(node_pid "$old")"
  # SIGSTOP: the master accepts connections and never answers (a hang, not
  # a crash) until the Sentinels promote a replica; setup thaws it.
  freeze_node "$old"
  rl 0 acquire frozen -w 30s -t 10s --replicas 0
  new="$(wait_for_new_master "$old" 15)"
  assert_not_equal "$new" "$old"
  assert_equal "$(node_cli "$new" EXISTS 'rlock:{frozen}:m')" 1
  rl 0 release frozen --token "$output" --replicas 0
  thaw_node "$old"
}

@test "sentinel: a master name the Sentinels stop knowing for a while (REMOVE, then MONITOR) is an outage a queued waiter rides out, not 78" {
  local master n
  master="$(master_port)"
  rl_bg holder run forgotten -t 10s -- sleep 3
  for ((n = 0; n < 50; n++)); do
    run "$RLOCK" status forgotten
    ((status == 0)) && break
    nap 0.1
  done
  RL_TIMEOUT=40 rl_bg waiter run forgotten -w 30s -t 10s -- echo waiter-ran
  nap 0.5
  for n in 1 2 3; do sentinel_cli "$n" SENTINEL REMOVE "$TOPO_NAME" >/dev/null; done
  # Its connections cut, the waiter asks the Sentinels again: none knows
  # the name now. A process that never found the master is told so (78).
  node_cli "$master" CLIENT KILL TYPE normal >/dev/null
  rl 78 acquire forgotten-fresh -n
  nap 1.5
  monitor_again "$master"
  rl_wait waiter 0
  assert_output waiter-ran
  rl_wait holder 0,79
}

@test "sentinel: a run with a 2 s TTL asks the Sentinels again each second: from a master they abandoned (split brain) it moves to the new one, or ends 79" {
  # What a partition leaves: a replica promoted, the Sentinels following
  # it, the old master never told and still taking writes. A run renewing
  # every 0.67 s never let its connection sit idle for the second after
  # which the Sentinels were asked again, and renewed on the old master for
  # the whole run, while its copy on the new master ran out and a second
  # holder could take it there.
  local old new n p before e moved=""
  old="$(master_port)"
  new="$(replica_ports | head -1)"
  bg_rlock job run split -t 2s --replicas 0 -- sleep 12
  for ((n = 0; n < 50; n++)); do
    before="$(holder_expiry "$new" split)"
    [[ -n "$before" ]] && break
    nap 0.1
  done
  [[ -n "$before" ]] || fail "the lock never reached the replica"
  node_cli "$new" REPLICAOF NO ONE >/dev/null
  before="$(holder_expiry "$new" split)"
  for n in 1 2 3; do sentinel_cli "$n" SENTINEL REMOVE "$TOPO_NAME" >/dev/null; done
  monitor_again "$new"
  # Within 3 s: a renewal on the new master (its copy's expiry raised), or
  # the run ended as lost.
  for ((n = 0; n < 60; n++)); do
    running "$(<"$M/job.pid")" || break
    e="$(holder_expiry "$new" split)"
    if [[ -n "$e" ]] && ((e > before)); then
      moved=1
      break
    fi
    nap 0.05
  done
  if [[ -z "$moved" ]]; then bg_wait job 79 1; fi
  kill_bg_pids
  # The topology made whole again around the new master.
  for p in $TOPO_NODE_PORTS; do
    [[ "$p" == "$new" ]] || node_cli "$p" REPLICAOF 127.0.0.1 "$new" >/dev/null
  done
}

@test "sentinel: asking the Sentinels again each second keeps the connections to the master and to the Sentinel that answered" {
  # Each renewal of a run under Sentinel asks them where the master is. It
  # used to connect to a Sentinel and to the master anew each time (a TCP
  # connection, a TLS handshake and AUTH for each, per renewal, for every
  # running job).
  local port n before=() after=()
  port="$(master_port)"
  connections() {
    info_field "$(node_cli "$port" INFO stats)" total_connections_received
    for n in 1 2 3; do info_field "$(sentinel_cli "$n" INFO stats)" total_connections_received; done
  }
  mapfile -t before < <(connections)
  rl 0 run keep -t 2s --replicas 0 -- sleep 6
  mapfile -t after < <(connections)
  # The run's two connections (the lock's, the heartbeat's), this
  # question's own, and two to spare (a Sentinel or replica reconnecting
  # on a loaded machine); the build before made 7: one more each time the
  # Sentinels were asked (every other renewal).
  n=$((after[0] - before[0]))
  ((n <= 5)) || fail "the master was connected to $n times during the run"
  # Likewise the Sentinels: the two connections, the three questions, two
  # to spare (the build before: 9).
  n=$((after[1] + after[2] + after[3] - before[1] - before[2] - before[3]))
  ((n <= 7)) || fail "the Sentinels were connected to $n times during the run"
}

@test "sentinel: a queued waiter that gives up on an outage at the end of -w says how long the outage lasted, not its last try" {
  local master n
  master="$(master_port)"
  rl 0 acquire outage-held -t 30s
  RL_TIMEOUT=20 rl_bg waiter acquire outage-held -w 4s -t 10s
  nap 0.5
  echo "$master" >"$M/removed"
  for n in 1 2 3; do sentinel_cli "$n" SENTINEL REMOVE "$TOPO_NAME" >/dev/null; done
  node_cli "$master" CLIENT KILL TYPE normal >/dev/null
  rl_wait waiter 69
  # "...: no usable master after 3.4s: ...": the 3.5 s of the wait left, not
  # the last try's second ("after 951ms" before).
  assert_stderr --regexp "no usable master after [0-9.]+s: "
  [[ "$stderr" =~ after\ ([0-9.]+)s: ]]
  echo "# the waiter said: $stderr" >&3
  (($(printf '%.0f' "${BASH_REMATCH[1]}") >= 2)) || fail "outage of ${BASH_REMATCH[1]} s"
  monitor_again "$master"
}
