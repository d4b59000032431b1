#!/usr/bin/env bats
# rlock on a real Redis Cluster (three masters, three replicas): a redis://
# URL to any one node is enough, locks land on the master of their slot,
# `status` lists every shard, and a shard failover (CLUSTER FAILOVER, kill
# -9 of the master) during a run never lets a second holder in.

load helpers
load cluster
load watcher

setup_file() {
  start_cluster
  local first="${CLUSTER_PORTS%% *}"
  export SEED="$first"
  export RLOCK_URL
  RLOCK_URL="$(cluster_url "$first")"
}

teardown_file() {
  stop_cluster
  stop_all_redis
}

setup() {
  # The full health check (a second or so) only after a test that failed
  # over or killed a node (it leaves $BATS_FILE_TMPDIR/damaged), or when a
  # node is not running: the suite stays short.
  local p
  for p in $CLUSTER_PORTS; do
    running "$(cluster_node_pid "$p")" || touch "$BATS_FILE_TMPDIR/damaged"
  done
  if [[ -e "$BATS_FILE_TMPDIR/damaged" ]]; then
    wait_cluster_healthy
    rm -f "$BATS_FILE_TMPDIR/damaged"
  fi
  M="$BATS_TEST_TMPDIR"
  # (An error reply is tolerated, as redis-cli's exit status did; no answer is not.)
  for p in $(cluster_masters); do redis_cmd "$p" FLUSHALL >/dev/null 2>&1 || (($? == 2)); done
}

teardown() {
  # Whatever a test left half done on the Cluster (a slot migrating).
  if [[ -s "$M/undo" ]]; then bash "$M/undo" >/dev/null 2>&1 || true; fi
  touch "$M/stop-watching"
  stop_sessions
  kill_bg_pids
}

# locks_on PORT: how many lock meta keys the node PORT holds.
locks_on() {
  cluster_cli "$1" --scan --pattern 'rlock:{*}:m' | wc -l
}

# holder_expiry PORT NAME: the expiry (ms) the node PORT has for NAME's
# holder, empty if none.
holder_expiry() {
  redis_cmd "$1" ZRANGE "rlock:{$2}:h" 0 0 WITHSCORES 2>/dev/null || return 0
  echo "${redis_reply[1]:-}"
}

# wait_renewed PORT NAME BEFORE: waits (bounded, 10 s) until the node PORT
# has NAME's holder expiring after BEFORE (a renewal reached it); prints
# when, in microseconds.
wait_renewed() {
  local port="$1" name="$2" before="$3" k e
  for ((k = 0; k < 200; k++)); do
    e="$(holder_expiry "$port" "$name")"
    if [[ -n "$e" ]] && ((e > before)); then
      now_us
      return 0
    fi
    nap 0.05
  done
  fail "no renewal reached the new master $port within 10 s"
}

@test "cluster: 30 locks through one seed land on every master, each on its slot's master" {
  local n name masters m
  # Not `i`: bats' `run` (inside rl) assigns a global i. Not rl either: 30
  # times its overhead is seconds.
  for ((n = 0; n < 30; n++)); do
    timeout -k 1 "$RL_TIMEOUT" "$RLOCK" acquire "spread-$n" -n -t 60s >/dev/null ||
      fail "acquire spread-$n exited $?"
  done
  masters="$(cluster_masters)"
  assert_equal "$(wc -l <<<"$masters")" 3
  local total=0 held
  for m in $masters; do
    held="$(locks_on "$m")"
    if ((held == 0)); then fail "master $m holds none of the 30 locks"; fi
    total=$((total + held))
  done
  assert_equal "$total" 30
  # Each lock on the master of its slot.
  for n in 0 7 19 29; do
    name="spread-$n"
    m="$(master_of_lock "$name")"
    assert_equal "$(cluster_cli "$m" EXISTS "rlock:{$name}:m")" 1
  done
}

@test "cluster: --json status lists the held locks of every shard" {
  local m name
  for m in $(cluster_masters); do
    name="$(lock_on_master "$m" listed)"
    rl 0 acquire "$name" -n -t 60s --owner "on-$m"
    echo "$name" >>"$M/names"
  done
  rl 0 status --json
  assert_json
  run --separate-stderr "$PYTHON" -c '
import json, sys
d = json.loads(sys.argv[1])
locks = d if isinstance(d, list) else d.get("locks", d)
print("\n".join(sorted(l["name"] for l in locks)))' "$output"
  assert_output "$(LC_ALL=C sort "$M/names")"
  # And the text listing names all three.
  rl 0 status
  while read -r name; do assert_output --partial "$name"; done <"$M/names"
}

@test "cluster: MOVED is followed: a lock on another master's slot, through a master and through a replica" {
  local name owner replica
  name="$(lock_not_on_master "$SEED" moved)"
  owner="$(master_of_lock "$name")"
  # The seed itself refuses the key with MOVED: what rlock must follow.
  run cluster_cli "$SEED" SET "rlock:{$name}:probe" 1
  assert_output --partial MOVED
  rl 0 acquire "$name" -n -t 60s
  local token="$output"
  assert_equal "$(cluster_cli "$owner" EXISTS "rlock:{$name}:m")" 1
  assert_equal "$(cluster_cli "$SEED" DBSIZE)" 0
  rl 75 acquire "$name" -n
  # Through a replica as the only seed: every command is redirected.
  replica="$(replica_of "$owner")"
  RLOCK_URL="$(cluster_url "$replica")" rl 0 status "$name"
  RLOCK_URL="$(cluster_url "$replica")" rl 0 release "$name" --token "$token"
  rl 1 status "$name"
}

@test "cluster: a seed list whose first node is down works, and none reachable is 69" {
  local dead name m
  dead="$(free_port)"
  export RLOCK_URL="redis://127.0.0.1:$dead,127.0.0.1:$SEED/0"
  for m in $(cluster_masters); do
    name="$(lock_on_master "$m" seeded)"
    rl 0 acquire "$name" -n -t 60s
    echo "$name" >>"$M/names"
    assert_equal "$(cluster_cli "$m" EXISTS "rlock:{$name}:m")" 1
  done
  rl 0 status --json
  for name in $(<"$M/names"); do assert_output --partial "\"$name\""; done
  RLOCK_URL="redis://127.0.0.1:$dead,127.0.0.1:$(free_port)/0" rl 69 status
  assert_stderr --partial "127.0.0.1:$dead"
}

@test "cluster: a database other than 0 is the same configuration error through one node or a seed list" {
  local second="${CLUSTER_PORTS#* }"
  second="${second%% *}"
  # A configuration error (78), named: before, 76 with Redis' words, a
  # refusal scripts take for the server's.
  rl 78 -u "redis://127.0.0.1:$SEED/2" acquire db2 -n
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "cannot select database 2 on redis://127.0.0.1:$SEED/2: a Redis Cluster has only database 0 (end the URL with /0)"
  rl 78 -u "redis://127.0.0.1:$SEED/2" status
  # Every seed answered, refusing the database: before, 69 "no node of the
  # Cluster answered", which scripts retry as an outage.
  rl 78 -u "redis://127.0.0.1:$SEED,127.0.0.1:$second/2" acquire db2 -n
  assert_stderr --partial "a Redis Cluster has only database 0"
}

@test "cluster: a hung seed first in the list costs its share of the time, and the next one answers" {
  local scheme="${RLOCK_URL%%://*}"
  start_hung_server
  export RLOCK_URL="$scheme://127.0.0.1:$HUNG_PORT,127.0.0.1:$SEED/0"
  rl 0 acquire hungseed -t 10s
  rl 0 release hungseed --token "$output"
  rl 0 status --json
  assert_equal "$stderr" ""
  stop_hung_server
}

@test "cluster: a slot being migrated: ASK is followed, TRYAGAIN waited out, and the lock taken once the slot moved" {
  local src dst name slot src_id dst_id p
  src="$(cluster_masters | head -n 1)"
  dst="$(cluster_masters | tail -n 1)"
  name="$(lock_on_master "$src" migrating)"
  slot="$(cluster_cli "$src" CLUSTER KEYSLOT "rlock:{$name}:m")"
  src_id="$(cluster_cli "$src" CLUSTER MYID)"
  dst_id="$(cluster_cli "$dst" CLUSTER MYID)"
  # If the test stops half way, the slot goes back to the source, stable.
  printf 'redis-cli -p %s CLUSTER SETSLOT %s STABLE\nredis-cli -p %s CLUSTER SETSLOT %s STABLE\n' \
    "$dst" "$slot" "$src" "$slot" >"$M/undo"
  touch "$BATS_FILE_TMPDIR/damaged"
  assert_equal "$(cluster_cli "$dst" CLUSTER SETSLOT "$slot" IMPORTING "$src_id")" OK
  assert_equal "$(cluster_cli "$src" CLUSTER SETSLOT "$slot" MIGRATING "$dst_id")" OK
  # The source has none of the lock's keys, so it answers ASK; the
  # destination, asked with ASKING, has none of them either and answers
  # TRYAGAIN (a multi-key command while the slot is half moved): rlock
  # retries until the migration ends, then follows MOVED.
  run cluster_cli "$src" EXISTS "rlock:{$name}:m"
  assert_output "ASK $slot 127.0.0.1:$dst"
  # A short wait names what it waited out: the destination's TRYAGAIN,
  # asked with ASKING (without it, a MOVED back to the source, and a loop).
  # (Timed in ms: bash's SECONDS counts whole seconds of the clock, and read
  # 1 once after rlock had waited 1.945 s of its 2.)
  local started="${EPOCHREALTIME/./}"
  rl 76 acquire "$name" -w 2s -t 60s
  assert_stderr --partial "still answers TRYAGAIN"
  local waited_ms=$(((${EPOCHREALTIME/./} - started) / 1000))
  ((waited_ms >= 1500)) || fail "gave up after ${waited_ms} ms: $stderr"
  bg_rlock acquirer acquire "$name" -n -t 60s
  sleep 1.5
  running "$(<"$M/acquirer.pid")" || fail "acquire did not wait for the migration: $(<"$M/acquirer.err")"
  for p in $(cluster_masters); do
    assert_equal "$(cluster_cli "$p" CLUSTER SETSLOT "$slot" NODE "$dst_id")" OK
  done
  : >"$M/undo"
  bg_wait acquirer 0 10
  local token="$output"
  assert_equal "$(cluster_cli "$dst" EXISTS "rlock:{$name}:m")" 1
  rl 0 release "$name" --token "$token"
  rl 1 status "$name"
}

@test "cluster: status NAME and release --force work on a lock of every shard" {
  local m name
  for m in $(cluster_masters); do
    name="$(lock_on_master "$m" forced)"
    rl 0 acquire "$name" -n -t 60s --owner "holder-$m"
    rl 0 status "$name"
    assert_output --partial "holder-$m"
    rl 0 release "$name" --force
    rl 1 status "$name"
    assert_equal "$(cluster_cli "$m" EXISTS "rlock:{$name}:h")" 0
  done
}

@test "cluster: 8 waiting runs doing read-modify-write of a counter lose no update" {
  local counter="$M/counter" i
  echo 0 >"$counter"
  for i in 1 2 3 4 5 6 7 8; do
    rl_bg "c$i" run counter -w 30s -- sh -c "v=\$(cat '$counter'); sleep 0.2; echo \$((v + 1)) >'$counter'"
  done
  for i in 1 2 3 4 5 6 7 8; do rl_wait "c$i" 0; done
  assert_equal "$(<"$counter")" 8
}

# failover_during_run PREFIX SECONDS: a 10 s-TTL run of SECONDS on a lock
# (PREFIX-N) of a shard other than the seed's, a watcher, then CLUSTER
# FAILOVER of that shard; returns once a renewal reached the new master.
# Sets name, old and new (the masters' ports).
failover_during_run() {
  local before
  name="$(lock_not_on_master "$SEED" "$1")"
  old="$(master_of_lock "$name")"
  touch "$BATS_FILE_TMPDIR/damaged"
  run_section "$name" "$2" -t 10s
  start_watcher "$name"
  sleep 1
  before="$(holder_expiry "$old" "$name")"
  [[ -n "$before" ]] || fail "no holder on the lock's master"
  new="$(failover_shard "$old" 10)"
  wait_renewed "$new" "$name" "$before" >/dev/null
}

@test "cluster: CLUSTER FAILOVER of the lock's shard during a 10 s-TTL run: exits 0, the watcher never gets in" {
  local name old new
  failover_during_run failover 5
  bg_wait job 0 20
  stop_watcher
  check_watcher_kept_out
}

@test "cluster: kill -9 of the master the URL names, holding the lock, during a 10 s-TTL run: exits 0, the watcher never gets in" {
  local name old new before killed_at renewed_at other
  # The URL names the lock's own master, so no MOVED ever says it is a
  # Cluster: the run's heartbeat must find out by itself, and follow the
  # promoted replica once that node is gone.
  old="$(cluster_masters | head -n 1)"
  other="$(cluster_masters | tail -n 1)"
  name="$(lock_on_master "$old" killed)"
  touch "$BATS_FILE_TMPDIR/damaged"
  RLOCK_URL="$(cluster_url "$old")" run_section "$name" 8 -t 10s
  RLOCK_URL="$(cluster_url "$other")" start_watcher "$name"
  sleep 1
  before="$(holder_expiry "$old" "$name")"
  [[ -n "$before" ]] || fail "no holder on the lock's master"
  killed_at="$(now_us)"
  new="$(kill_shard_master "$old" 15)"
  renewed_at="$(wait_renewed "$new" "$name" "$before")"
  echo "# master killed -> first renewal on the new master: $(((renewed_at - killed_at) / 1000)) ms" >&3
  # The final release goes to the node the URL names, which is gone: a
  # warning, and the lock expires within its TTL.
  bg_wait job 0 20
  stop_watcher
  check_watcher_kept_out
}

@test "cluster: CLUSTER FAILOVER, then kill -9 of the new master (the first one is back, without a replica): a 10 s-TTL run exits 0" {
  local name old new back before k
  failover_during_run twice 14
  # The old master is the new one's replica now; with the new master gone,
  # it serves the slot again, and has no replica left to acknowledge.
  for ((k = 0; k < 100; k++)); do
    [[ "$(replica_of "$new")" == "$old" ]] && break
    nap 0.1
  done
  assert_equal "$(replica_of "$new")" "$old"
  before="$(holder_expiry "$new" "$name")"
  back="$(kill_shard_master "$new" 15)"
  assert_equal "$back" "$old"
  wait_renewed "$back" "$name" "$before" >/dev/null
  bg_wait job 0 25
  stop_watcher
  check_watcher_kept_out
}

@test "cluster: a frozen master is a failover: acquire -w takes the lock on the promoted replica, and release finds it" {
  local old other name slot new pid token
  old="$(cluster_masters | head -n 1)"
  other="$(cluster_masters | tail -n 1)"
  name="$(lock_on_master "$old" frozen)"
  slot="$(slot_of_master "$old")"
  touch "$BATS_FILE_TMPDIR/damaged"
  pid="$(cluster_node_pid "$old")"
  # SIGSTOP: the node accepts connections and never answers (a hang, not
  # a crash), until its replica is promoted. SIGKILLed by kill_bg_pids if
  # the test fails; the next setup starts it again.
  kill -STOP "$pid"
  echo "$pid" >"$M/frozen.pid"
  export RLOCK_URL
  RLOCK_URL="$(cluster_url "$other")"
  rl 0 acquire "$name" -w 30s -t 10s
  token="$output"
  new="$(wait_promoted "$slot" "$old")"
  assert_equal "$(cluster_cli "$new" EXISTS "rlock:{$name}:m")" 1
  rl 0 release "$name" --token "$token"
  assert_equal "$(cluster_cli "$new" EXISTS "rlock:{$name}:m")" 0
  kill -CONT "$pid"
  rm "$M/frozen.pid"
}

# run_to_freeze PREFIX SECONDS TTL: a run of SECONDS on a lock (PREFIX-N)
# of the first master, through the last one (RLOCK_URL), which is not
# frozen. Sets old (the lock's master), name and slot.
run_to_freeze() {
  old="$(cluster_masters | head -n 1)"
  name="$(lock_on_master "$old" "$1")"
  slot="$(cluster_cli "$old" CLUSTER KEYSLOT "rlock:{$name}:m")"
  touch "$BATS_FILE_TMPDIR/damaged"
  export RLOCK_URL
  RLOCK_URL="$(cluster_url "$(cluster_masters | tail -n 1)")"
  run_section "$name" "$2" -t "$3"
}

@test "cluster: a run whose lock's master freezes releases on the promoted replica, with no warning" {
  local old name pid slot new
  run_to_freeze frozen-run 3 9s
  pid="$(cluster_node_pid "$old")"
  kill -STOP "$pid"
  echo "$pid" >"$M/frozen.pid"
  # The release is due while the shard fails over (~2-3 s): it must reach
  # the promoted replica, not time out on the frozen master.
  bg_wait job 0 25
  assert_equal "$stderr" ""
  new="$(wait_promoted "$slot" "$old")"
  assert_equal "$(cluster_cli "$new" EXISTS "rlock:{$name}:h")" 0
  kill -CONT "$pid"
  rm "$M/frozen.pid"
}

@test "cluster: a run that outlives its master's freeze releases on the promoted replica at once, without waiting out the frozen master" {
  local old name pid slot new before ended exited ms
  run_to_freeze outlives 7 6s
  before="$(holder_expiry "$old" "$name")"
  [[ -n "$before" ]] || fail "no holder on the lock's master"
  pid="$(cluster_node_pid "$old")"
  kill -STOP "$pid"
  echo "$pid" >"$M/frozen.pid"
  new="$(wait_promoted "$slot" "$old")"
  # The heartbeat follows the lock to the promoted replica while the
  # command runs; the release when it ends must go there too.
  wait_renewed "$new" "$name" "$before" >/dev/null
  bg_wait job 0 20
  exited="$(now_us)"
  assert_equal "$stderr" ""
  ended="$(<"$M/section.end")"
  ms=$(((exited - ended) / 1000))
  echo "# the command ended -> rlock exited: ${ms} ms" >&3
  assert_equal "$(cluster_cli "$new" EXISTS "rlock:{$name}:h")" 0
  # A release sent to the frozen master first waits out its silence, then
  # finds the new master (4.5 s here before the fix, 50 ms after).
  if ((ms > 2500)); then fail "rlock took ${ms} ms to release after the command ended"; fi
  kill -CONT "$pid"
  rm "$M/frozen.pid"
}

@test "cluster: a master refusing our credentials is left out of the listing (69); all refusing is 77" {
  local m name refusing="" kept=()
  for m in $(cluster_masters); do
    name="$(lock_on_master "$m" refused)"
    rl 0 acquire "$name" -n -t 60s
    # One master other than the seed wants another password.
    if [[ -z "$refusing" && "$m" != "$SEED" ]]; then refusing="$m" refused_name="$name"; else kept+=("$name"); fi
  done
  touch "$BATS_FILE_TMPDIR/damaged"
  for m in $(cluster_masters); do
    echo "redis-cli -p $m -a other --no-auth-warning CONFIG SET requirepass ''" >>"$M/undo"
  done
  cluster_cli "$refusing" CONFIG SET requirepass other >/dev/null
  rl 69 status
  for name in "${kept[@]}"; do assert_output --partial "$name"; done
  refute_output --partial "$refused_name"
  assert_stderr --partial "listing incomplete: Cluster master 127.0.0.1:$refusing left out (it refused our credentials)"
  # Every master refusing: an auth error, and nothing listed.
  for m in $(cluster_masters); do cluster_cli "$m" CONFIG SET requirepass other >/dev/null 2>&1 || true; done
  rl 77 status
  assert_output ''
}

@test "cluster: a master refusing SCAN while the other shards are out of reach: each named, exit 69, not 77" {
  local masters refusing m p frozen=()
  masters="$(cluster_masters)"
  refusing="$(head -1 <<<"$masters")"
  touch "$BATS_FILE_TMPDIR/damaged"
  echo "redis-cli -p $refusing ACL SETUSER default +scan" >>"$M/undo"
  cluster_cli "$refusing" ACL SETUSER default -scan >/dev/null
  # Both other shards frozen, master and replica: out of reach, not refusing.
  for m in $(tail -n +2 <<<"$masters"); do
    for p in "$m" "$(replica_of "$m")"; do frozen+=("$(cluster_node_pid "$p")"); done
  done
  printf 'kill -CONT %s\n' "${frozen[@]}" >>"$M/undo"
  kill -STOP "${frozen[@]}"
  RLOCK_URL="$(cluster_url "$refusing")" rl 69 --connect-timeout 1s status
  kill -CONT "${frozen[@]}"
  assert_stderr --partial "rlock: error: listing incomplete: Cluster master 127.0.0.1:$refusing left out (it refused our credentials): NOPERM"
  for m in $(tail -n +2 <<<"$masters"); do
    assert_stderr --partial "listing incomplete: Cluster master 127.0.0.1:$m left out (still out of reach"
  done
}

@test "cluster as a quorum member: a Cluster and two servers are a quorum; with one server dead, the Cluster and the other make the majority" {
  local plain1 plain2 plain2_pid q token
  start_redis
  plain1="$REDIS_PORT"
  start_redis
  plain2="$REDIS_PORT" plain2_pid="$REDIS_PID"
  # A member counts once it has been up for the TTL (2 s), which a server
  # says a second late (INFO's uptime_in_seconds, rounded down).
  sleep 3.5
  q="$(cluster_url),redis://127.0.0.1:$plain1/0,redis://127.0.0.1:$plain2/0"
  RLOCK_URL="$q" rl 0 acquire qc -n -t 2s
  token="$output"
  RLOCK_URL="$q" rl 0 status qc -t 2s
  assert_output --regexp "(ok|disagrees) +redis://127\.0\.0\.1:${CLUSTER_PORTS%% *}/0  holders"
  RLOCK_URL="$q" rl 0 release qc --token "$token"
  kill -KILL "$plain2_pid"
  RLOCK_URL="$q" rl 0 acquire qc2 -n -t 2s
  token="$output"
  # The Cluster's vote is in the majority: the lock is on its master.
  assert_equal "$(cluster_cli "$(master_of_lock qc2)" EXISTS 'rlock:{qc2}:h')" 1
  RLOCK_URL="$q" rl 75 acquire qc2 -n -t 2s
  RLOCK_URL="$q" rl 0 release qc2 --token "$token"
  assert_equal "$(cluster_cli "$(master_of_lock qc2)" EXISTS 'rlock:{qc2}:h')" 0
}
