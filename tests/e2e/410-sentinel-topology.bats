#!/usr/bin/env bats
# The Sentinel topology of sentinel.bash, proved on its own: it comes up
# healthy, replicates what rlock writes on the master, follows SENTINEL
# FAILOVER and a killed master, and shows a frozen replica lagging. rlock is
# used only through a plain redis:// URL to the current master.

load helpers
load sentinel

setup_file() {
  start_sentinel_topology
}

teardown_file() {
  stop_sentinel_topology
}

setup() {
  wait_topology_healthy
}

# master_url: a redis:// URL to the current master.
master_url() {
  echo "redis://127.0.0.1:$(master_port)/0"
}

# fence_on PORT NAME: acquires NAME (-n) on the node PORT, prints the fence.
fence_on() {
  RLOCK_URL="redis://127.0.0.1:$1/0" rl 0 acquire "$2" -n -t 60s --json
  json 'd["fence"]'
}

# write_and_wait PORT TIMEOUT_MS: one write on the master PORT, then WAIT 2
# on the same connection (WAIT counts acknowledgements of the connection's
# own writes); prints how many replicas acknowledged it. Replication is in
# order, so they also have everything written before.
write_and_wait() {
  printf 'INCR rlock-e2e:ack\nWAIT 2 %s\n' "$2" |
    timeout -k 1 5 redis-cli -h 127.0.0.1 -p "$1" | tail -n 1
}

# replicas_ack PORT: fails the test unless both replicas of master PORT
# acknowledge everything written so far within 1 s.
replicas_ack() {
  assert_equal "$(write_and_wait "$1" 1000)" 2
}

# forget_fences NAME: deletes NAME's fence counter on both replicas only, as
# if they had never seen its increments (what a promoted replica that
# missed the last grants looks like).
forget_fences() {
  local r
  for r in $(replica_ports); do
    node_cli "$r" CONFIG SET replica-read-only no >/dev/null
    assert_equal "$(node_cli "$r" DEL "rlock:{$1}:f")" 1
    node_cli "$r" CONFIG SET replica-read-only yes >/dev/null
  done
}

@test "topology: one master, two in-sync replicas, three Sentinels with a quorum" {
  local m replicas p n
  m="$(master_port)"
  assert_regex " $TOPO_NODE_PORTS " " $m "
  replicas="$(replica_ports | paste -sd' ')"
  assert_equal "$(wc -w <<<"$replicas")" 2
  for p in $replicas; do
    assert_equal "$(node_cli "$p" ROLE | head -n 1)" slave
  done
  assert_equal "$(node_cli "$m" ROLE | head -n 1)" master
  for n in 1 2 3; do
    assert_regex "$(sentinel_cli "$n" SENTINEL CKQUORUM "$TOPO_NAME")" '^OK 3 usable Sentinels'
  done
  assert_equal "$(sentinel_url)" \
    "redis-sentinel://$(sentinel_ports | sed 's/^/127.0.0.1:/' | paste -sd,)/0#$TOPO_NAME"
  assert_regex "$(sentinel_url)" '^redis-sentinel://127\.0\.0\.1:[0-9]+,127\.0\.0\.1:[0-9]+,127\.0\.0\.1:[0-9]+/0#'
}

@test "topology: a lock acquired on the master reaches both replicas, fence included" {
  local m fence r
  m="$(master_port)"
  fence="$(fence_on "$m" replicated)"
  replicas_ack "$m"
  for r in $(replica_ports); do
    assert_equal "$(node_cli "$r" EXISTS 'rlock:{replicated}:h' 'rlock:{replicated}:i' 'rlock:{replicated}:m')" 3
    # The replica holds the very counter the master handed out (the script
    # is replicated by its effects, TIME included).
    assert_equal "$(node_cli "$r" GET 'rlock:{replicated}:f')" "$fence"
  done
  RLOCK_URL="$(master_url)" rl 0 release replicated --force
}

@test "topology: SENTINEL FAILOVER moves the master; the lock and a greater fence follow" {
  local old new fence
  old="$(master_port)"
  fence="$(fence_on "$old" moved)"
  replicas_ack "$old"
  forget_fences moved
  new="$(failover_by_sentinel)"
  assert [ "$new" != "$old" ]
  assert_equal "$(master_port)" "$new"
  assert_equal "$(node_cli "$new" ROLE | head -n 1)" master
  # The lock is still held on the new master.
  RLOCK_URL="redis://127.0.0.1:$new/0" rl 75 acquire moved -n
  RLOCK_URL="redis://127.0.0.1:$new/0" rl 0 release moved --force
  # The new master never saw the counter, yet the next fence is greater.
  assert_greater "$(fence_on "$new" moved)" "$fence"
  # The old master becomes a replica of the new one.
  wait_topology_healthy 15
  assert_equal "$(node_cli "$old" ROLE | head -n 1)" slave
}

@test "topology: a frozen replica does not acknowledge and shows up as lagging" {
  local m r lag i
  m="$(master_port)"
  r="$(replica_ports | head -n 1)"
  freeze_node "$r"
  assert_equal "$(write_and_wait "$m" 300)" 1
  # The master's view of it: the lag (seconds since its last ACK) grows.
  for ((i = 0; i < 60; i++)); do
    lag="$(node_cli "$m" INFO replication | sed -n "s/^slave[0-9]*:.*port=$r,.*lag=\([0-9]*\).*/\1/p")"
    ((${lag:-0} >= 2)) && break
    nap 0.1
  done
  assert_greater "${lag:-0}" 1
  thaw_node "$r"
  assert_equal "$(write_and_wait "$m" 2000)" 2
}

@test "topology: kill -9 of the master gives a new master within ~5 s; the old one rejoins as a replica" {
  local old new fence start elapsed
  old="$(master_port)"
  fence="$(fence_on "$old" killed)"
  replicas_ack "$old"
  forget_fences killed
  start="$(now_ms)"
  assert_equal "$(kill_master)" "$old"
  new="$(wait_for_new_master "$old" 10)"
  elapsed=$(($(now_ms) - start))
  # ~1 s to be seen down, then election and promotion: about 3 s; the
  # bound leaves room for a loaded machine.
  if ((elapsed > 6000)); then fail "the new master took ${elapsed} ms"; fi
  RLOCK_URL="redis://127.0.0.1:$new/0" rl 75 acquire killed -n
  RLOCK_URL="redis://127.0.0.1:$new/0" rl 0 release killed --force
  assert_greater "$(fence_on "$new" killed)" "$fence"
  # The old master is down until it is restarted, then a replica again.
  run ! node_cli "$old" PING
  restart_node "$old"
  local info i
  for ((i = 0; i < 100; i++)); do
    info="$(node_cli "$old" INFO replication)"
    [[ "$(info_field "$info" master_link_status)" == up ]] && break
    nap 0.1
  done
  assert_equal "$(info_field "$info" role)" slave
  assert_equal "$(info_field "$info" master_port)" "$new"
  assert_equal "$(info_field "$info" master_link_status)" up
}
