#!/usr/bin/env bats
# shellcheck disable=SC2154 # stderr, stderr_lines: set by rl and rl_wait
# `status` with no name while a Redis Cluster shard is down: the listing
# rides out a failover (the dead master's slots are asked of the promoted
# replica within the command timeout), and a shard that stays down is left
# out loudly: the other shards' locks, one stderr line naming the shard,
# exit 69 (never a partial listing with exit 0).

load helpers
load cluster

setup_file() {
  start_cluster
}

teardown_file() {
  stop_cluster
}

setup() {
  wait_cluster_healthy
  local p
  for p in $(cluster_masters); do redis_cmd "$p" FLUSHALL >/dev/null 2>&1 || (($? == 2)); done
  M="$BATS_TEST_TMPDIR"
  # For taking the locks; a test names a node it keeps up for the rest.
  export RLOCK_URL
  RLOCK_URL="$(cluster_url)"
}

teardown() {
  kill_bg_pids
}

# hold_one_per_master: takes a lock on each master; "PORT NAME" lines in
# $M/held (map order). The URL names one node, whichever the test chose.
hold_one_per_master() {
  local m name
  for m in $(cluster_masters); do
    name="$(lock_on_master "$m" held)"
    rl 0 acquire "$name" -n -t 120s
    echo "$m $name" >>"$M/held"
  done
}

# hold_victim_shard: hold_one_per_master, then sets `victim` (the first
# master, the one a test fails), `slot` (one of its slots) and `all` (every
# name held, sorted), and points RLOCK_URL at the last master, which stays.
hold_victim_shard() {
  hold_one_per_master
  victim="$(head -n 1 "$M/held" | cut -d' ' -f1)"
  RLOCK_URL="$(cluster_url "$(tail -n 1 "$M/held" | cut -d' ' -f1)")"
  all="$(cut -d' ' -f2 "$M/held" | sort | tr '\n' ' ')"
  all="${all% }"
  slot="$(slot_of_master "$victim")"
}

# held_on PORT / held_off PORT: the names held on the master PORT / on the others.
held_on() { awk -v p="$1" '$1 == p { print $2 }' "$M/held"; }
held_off() { awk -v p="$1" '$1 != p { print $2 }' "$M/held"; }

# assert_listed NAME...: each NAME is a row of the text listing in $output.
assert_listed() {
  local name
  [[ -n "$output" ]] || fail "nothing listed (stderr: $stderr)"
  for name in "$@"; do assert_line --regexp "^$name +exclusive "; done
}

# assert_json_names NAMES...: $output parses as JSON and its locks are
# exactly NAMES (sorted as given), none broken.
assert_json_names() {
  assert_json
  assert_equal "$(json '" ".join(l["name"] for l in d["locks"])')" "$*"
  assert_equal "$(json 'len(d["broken"])')" 0
}

# assert_json_unlisted PORT...: $output's "unlisted" names exactly the
# masters PORT..., one entry each; none: a complete listing has no
# "unlisted" at all.
assert_json_unlisted() {
  if (($# == 0)); then
    assert_equal "$(json '"unlisted" in d')" false
    return
  fi
  assert_equal "$(json 'len(d["unlisted"])')" "$#"
  local port
  for port in "$@"; do
    assert_equal "$(json "sum('Cluster master 127.0.0.1:$port ' in u for u in d['unlisted'])")" 1
  done
}

@test "cluster status: a listing during a kill -9 failover completes once the replica is promoted" {
  local victim slot all new
  hold_victim_shard
  kill -KILL "$(cluster_node_pid "$victim")"
  # Started at once, while the master is gone and not yet replaced. The
  # promotion takes ~2-3 s (cluster-node-timeout 1 s) and may take longer
  # on a loaded machine: a 15 s budget (--connect-timeout raises the
  # command timeout) rides it out for certain...
  rl_bg long status --json --connect-timeout 15s
  # ... the default one (5 s) either does, or says which shard it left out.
  rl_bg text status
  rl_bg json status --json
  new="$(wait_promoted "$slot" "$victim" 15)"
  echo "# $victim failed over to $new" >&3
  rl_wait long 0
  # shellcheck disable=SC2086
  assert_json_names $all
  assert_json_unlisted
  rl_wait text 0,69
  if ((status == 0)); then
    # shellcheck disable=SC2086
    assert_listed $all
    assert_equal "$stderr" ""
  else
    echo "# the default budget ran out before the promotion" >&3
    # shellcheck disable=SC2046
    assert_listed $(held_off "$victim")
    refute_line --regexp "^$(held_on "$victim") "
    assert_stderr --regexp "^rlock: error: listing incomplete: .*Cluster master 127\.0\.0\.1:$victim "
  fi
  rl_wait json 0,69
  assert_json
  if ((status == 69)); then
    assert_stderr --partial "127.0.0.1:$victim"
    assert_json_unlisted "$victim"
  else
    assert_json_unlisted
  fi
  # Once promoted, the listing is complete at once.
  rl 0 status
  # shellcheck disable=SC2086
  assert_listed $all
  assert_equal "${#lines[@]}" 4
}

@test "cluster status: a shard whose master and replica are both down is left out: the rest, one line naming it, exit 69" {
  local victim replica seed live dead
  # Redis' default (cluster-require-full-coverage yes) has every master
  # refuse keys once a shard is down: nothing could be listed. With it
  # off, the other shards answer.
  cluster_config_set cluster-require-full-coverage no
  hold_one_per_master
  victim="$(head -n 1 "$M/held" | cut -d' ' -f1)"
  seed="$(tail -n 1 "$M/held" | cut -d' ' -f1)"
  replica="$(replica_of "$victim")"
  [[ -n "$replica" ]] || fail "master $victim has no replica"
  RLOCK_URL="$(cluster_url "$seed")"
  live="$(held_off "$victim" | sort | tr '\n' ' ')"
  live="${live% }"
  dead="$(held_on "$victim")"
  kill -KILL "$(cluster_node_pid "$replica")" "$(cluster_node_pid "$victim")"
  # Side by side: each one waits out its command timeout (5 s).
  rl_bg text status
  rl_bg json status --json
  rl_bg live status "$(held_off "$victim" | head -n 1)"
  rl_bg dead status "$dead"
  rl_wait text 69
  # shellcheck disable=SC2086
  assert_listed $live
  refute_line --regexp "^$dead "
  assert_equal "${#lines[@]}" 3
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --regexp "^rlock: error: listing incomplete: .*Cluster master 127\.0\.0\.1:$victim .*out of reach"
  rl_wait json 69
  # shellcheck disable=SC2086
  assert_json_names $live
  assert_json_unlisted "$victim"
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "127.0.0.1:$victim"
  # status NAME: a lock on a live shard is unaffected, one on the dead
  # shard is out of reach.
  rl_wait live 0
  assert_output --partial "held (exclusive)"
  rl_wait dead 69
  assert_stderr --partial "127.0.0.1:$victim"
}

@test "cluster status: a listing with a frozen master completes once its replica is promoted" {
  local victim slot all new pid
  hold_victim_shard
  pid="$(cluster_node_pid "$victim")"
  touch "$BATS_FILE_TMPDIR/damaged"
  # SIGSTOP: the master's reads time out (after the 5 s command timeout)
  # instead of failing at once; the promotion takes ~2-3 s meanwhile.
  kill -STOP "$pid"
  echo "$pid" >"$M/frozen.pid"
  rl 0 status --json
  # shellcheck disable=SC2086
  assert_json_names $all
  assert_json_unlisted
  new="$(wait_promoted "$slot" "$victim" 15)"
  echo "# $victim failed over to $new" >&3
  kill -CONT "$pid"
  rm "$M/frozen.pid"
}

@test "cluster status: while a slot migrates, a lock half moved waits for the move and is listed once, not broken" {
  local src dst name slot src_id dst_id p keys
  src="$(cluster_masters | head -n 1)"
  dst="$(cluster_masters | tail -n 1)"
  name="$(lock_on_master "$src" moving)"
  rl 0 acquire "$name" -n -t 60s
  rl 0 acquire still -n -t 60s
  slot="$(cluster_cli "$src" CLUSTER KEYSLOT "rlock:{$name}:m")"
  src_id="$(cluster_cli "$src" CLUSTER MYID)"
  dst_id="$(cluster_cli "$dst" CLUSTER MYID)"
  touch "$BATS_FILE_TMPDIR/damaged"
  assert_equal "$(cluster_cli "$dst" CLUSTER SETSLOT "$slot" IMPORTING "$src_id")" OK
  assert_equal "$(cluster_cli "$src" CLUSTER SETSLOT "$slot" MIGRATING "$dst_id")" OK
  # The middle of a reshard that moves one key at a time: one of the lock's
  # keys is on the destination, the others still on the source, whose lock
  # script answers TRYAGAIN (some keys here, some gone) until all moved.
  read -r -a keys <<<"$(cluster_cli "$src" KEYS "rlock:{$name}:*" | tr '\n' ' ')"
  ((${#keys[@]} >= 3)) || fail "keys of $name on $src: ${keys[*]}"
  assert_equal "$(cluster_cli "$src" MIGRATE 127.0.0.1 "$dst" "" 0 5000 KEYS "${keys[0]}")" OK
  rl_bg listing status --json
  sleep 1
  assert_equal "$(cluster_cli "$src" MIGRATE 127.0.0.1 "$dst" "" 0 5000 KEYS "${keys[@]:1}")" OK
  for p in $(cluster_masters); do
    assert_equal "$(cluster_cli "$p" CLUSTER SETSLOT "$slot" NODE "$dst_id")" OK
  done
  rl_wait listing 0
  assert_json
  assert_equal "$(json '" ".join(sorted(l["name"] for l in d["locks"]))')" "$name still"
  assert_equal "$(json 'len(d["broken"])')" 0
}

@test "cluster status: a listing rides out a master busy with a script (BUSY), as status NAME does" {
  local victim slot all
  hold_victim_shard
  redis_cmd "$victim" CONFIG SET busy-reply-threshold 100 >/dev/null
  # 1.5 s of script: shorter than a failover would need to notice.
  REDIS_CMD_TIMEOUT=10 redis_cmd "$victim" EVAL "local t = redis.call('TIME')
    local stop = tonumber(t[1]) * 1000000 + tonumber(t[2]) + 1500000
    repeat t = redis.call('TIME') until tonumber(t[1]) * 1000000 + tonumber(t[2]) >= stop" 0 \
    >/dev/null &
  local busy=$!
  sleep 0.4
  rl 0 status --json
  # shellcheck disable=SC2086
  assert_json_names $all
  assert_json_unlisted
  wait "$busy" || true
  redis_cmd "$victim" CONFIG SET busy-reply-threshold 5000 >/dev/null
}

@test "cluster: a waiter rides out a shard left without a master (CLUSTERDOWN) within its -w, not 76 after 5 s" {
  local victim replica name seed i
  cluster_config_set cluster-require-full-coverage yes
  victim="$(cluster_masters | head -n 1)"
  replica="$(replica_of "$victim")"
  [[ -n "$replica" ]] || fail "master $victim has no replica"
  # A lock on a healthy shard, through a node of that shard.
  name="$(lock_not_on_master "$victim" down)"
  seed="$(master_of_lock "$name")"
  RLOCK_URL="$(cluster_url "$seed")"
  # Its replica frozen, the shard cannot fail over: once its master is seen
  # failed, every node answers CLUSTERDOWN (full coverage required).
  kill -STOP "$(cluster_node_pid "$replica")"
  kill -KILL "$(cluster_node_pid "$victim")"
  for ((i = 0; i < 100; i++)); do
    redis_cmd "$seed" GET "{$name}" >/dev/null 2>&1 || true
    [[ "${redis_reply[0]:-}" == CLUSTERDOWN* ]] && break
    nap 0.1
  done
  [[ "${redis_reply[0]:-}" == CLUSTERDOWN* ]] || fail "no CLUSTERDOWN: ${redis_reply[*]}"
  # Without -w too, an operation retries CLUSTERDOWN within its deadline
  # (the command timeout, 5 s), as the Cluster may settle, before it gives
  # up naming it: not a refusal at once.
  SECONDS=0
  rl 0,69,76 acquire "$name" -n -t 30s
  ((status != 0)) || fail "acquired on a shard without a master"
  ((SECONDS >= 3)) || fail "gave up after ${SECONDS}s: $stderr"
  assert_stderr --partial CLUSTERDOWN
  RL_TIMEOUT=60 rl_bg waiter acquire "$name" -w 40s -t 30s
  # Longer than a command's 5 s: the waiter is still waiting.
  sleep 7
  running "$(<"$BATS_TEST_TMPDIR/bg.waiter.pid")" ||
    fail "the waiter ended: $(<"$BATS_TEST_TMPDIR/bg.waiter.err")"
  # The replica thawed takes over; the waiter then gets the lock.
  kill -CONT "$(cluster_node_pid "$replica")"
  rl_wait waiter 0
  rl 0 status "$name"
}
