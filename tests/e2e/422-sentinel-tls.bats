#!/usr/bin/env bats
# rlock through Sentinel over TLS (rediss-sentinel://) on a real topology
# that speaks TLS only: a master, two replicas and three Sentinels, with
# replication and the Sentinels' own links over TLS. rlock talks TLS to the
# Sentinels and to the master they name, with the same CA; verification is
# on by default; a SENTINEL FAILOVER during a run never lets a second
# holder in.

load helpers
load sentinel
load watcher

setup_file() {
  export RLOCK_E2E_TLS=1
  start_sentinel_topology
  export CA="$TLS_DIR/ca.pem" RLOCK_URL
  RLOCK_URL="$(sentinel_url)"
}

# release_reached_master PORT NAME: lock NAME's holder is gone from the
# master the Sentinels name now: PORT, the one promoted, unless the loaded
# machine made them fail over again (then the release went to the next).
release_reached_master() {
  local now
  now="$(master_port)" || fail "no master"
  if [[ "$now" != "$1" ]]; then echo "# failed over again: $1 -> $now" >&3; fi
  run node_cli "$now" EXISTS "rlock:{$2}:h"
  assert_output 0
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
}

@test "sentinel tls: the Sentinels and nodes speak TLS only, and a plain redis-sentinel:// URL cannot reach them" {
  local first="${TOPO_SENTINEL_PORTS%% *}"
  run timeout -k 1 3 redis-cli -h 127.0.0.1 -p "$first" PING
  refute_output PONG
  RLOCK_URL="${RLOCK_URL/#rediss-sentinel:/redis-sentinel:}" rl 69 acquire plain -n --connect-timeout 1s
}

@test "sentinel tls: acquire, status and release through rediss-sentinel://; the lock is on the master and both replicas" {
  local port token
  rl 0 acquire ha -n -t 60s --cacert "$CA"
  token="$output"
  # The default --replicas all waited for both replicas, over TLS
  # replication.
  for port in $(master_port) $(replica_ports); do
    run node_cli "$port" EXISTS 'rlock:{ha}:h'
    assert_output 1
  done
  rl 75 acquire ha -n --cacert "$CA"
  rl 0 status ha --cacert "$CA"
  assert_output --partial ha
  rl 0 release ha --token "$token" --cacert "$CA"
  rl 1 status ha --cacert "$CA"
  run node_cli "$(master_port)" EXISTS 'rlock:{ha}:h'
  assert_output 0
}

@test "sentinel tls: verification is on by default: an unrelated CA, or none, is 77 with one line" {
  rl_tls_refused acquire wrong-ca -n
  # A certificate is no password's matter: no hint at the Sentinels' one.
  refute_stderr --partial password
  # Nothing was written.
  run node_cli "$(master_port)" --scan --pattern 'rlock:{wrong-ca}*'
  assert_output ''
}

@test "sentinel tls: kill -9 of the master during a 10 s-TTL run: exits 0, the watcher never gets in, the release reaches the new master" {
  local old new
  run_section survive 8 -t 10s --cacert "$CA"
  echo "cacert = $CA" >"$M/tls.conf"
  RLOCK_CONFIG="$M/tls.conf" start_watcher survive --replicas 0
  sleep 1
  old="$(kill_master)"
  new="$(wait_for_new_master "$old" 15)"
  bg_wait job 0 20
  # No warning: the heartbeat found the new master through the Sentinels,
  # over TLS, and kept renewing there.
  assert_equal "$stderr" ''
  stop_watcher
  check_watcher_kept_out
  [[ ! -s "$M/watcher.err" ]] || fail "the watcher saw errors: $(<"$M/watcher.err")"
  release_reached_master "$new" survive
}

@test "sentinel tls: SENTINEL FAILOVER during a 10 s-TTL run: exits 0, the watcher never gets in, the release reaches the new master" {
  local new
  run_section moved 6 -t 10s --cacert "$CA"
  # The CA from a config file: the watcher's releases take no options.
  echo "cacert = $CA" >"$M/tls.conf"
  RLOCK_CONFIG="$M/tls.conf" start_watcher moved --replicas 0
  sleep 0.5
  new="$(failover_by_sentinel 15)"
  bg_wait job 0 20
  # No warning: every renewal and the release found the master.
  assert_equal "$stderr" ''
  stop_watcher
  check_watcher_kept_out
  [[ ! -s "$M/watcher.err" ]] || fail "the watcher saw errors: $(<"$M/watcher.err")"
  release_reached_master "$new" moved
  # The next holder, on the new master, gets a greater fence.
  rl 0 acquire moved -n --json --cacert "$CA"
  assert_greater "$(json 'd["fence"]')" "$(<"$M/section.fence")"
}
