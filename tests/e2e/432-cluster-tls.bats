#!/usr/bin/env bats
# rlock on a real Redis Cluster that speaks TLS only (three masters, three
# replicas, `tls-cluster yes`, as managed Redis with in-transit encryption
# runs it): rediss:// seeds, MOVED followed to other shards over TLS with
# the same CA, verification on by default, `status` listing every shard,
# and a shard failover during a run that never lets a second holder in.

load helpers
load cluster
load watcher

setup_file() {
  export RLOCK_E2E_TLS=1
  start_cluster
  local ports
  read -r -a ports <<<"$CLUSTER_PORTS"
  export SEED="${ports[0]}" CA="$TLS_DIR/ca.pem"
  # Two seeds: any one answering is enough.
  export RLOCK_URL
  RLOCK_URL="$(cluster_url "${ports[0]}" "${ports[1]}")"
}

teardown_file() {
  stop_cluster
}

setup() {
  # The full health check only after a failover (it leaves
  # $BATS_FILE_TMPDIR/damaged): the suite stays short.
  if [[ -e "$BATS_FILE_TMPDIR/damaged" ]]; then
    wait_cluster_healthy
    rm -f "$BATS_FILE_TMPDIR/damaged"
  fi
  M="$BATS_TEST_TMPDIR"
  local p
  for p in $(cluster_masters); do redis_cmd "$p" FLUSHALL >/dev/null || fail "FLUSHALL on $p"; done
}

teardown() {
  touch "$M/stop-watching"
  kill_bg_pids
}

@test "cluster tls: the nodes speak TLS only, and a plain redis:// URL cannot reach them" {
  # What the suite stands on: no plain port at all, so every rlock
  # connection below, to a seed or to a redirected node, is TLS.
  run timeout -k 1 3 redis-cli -h 127.0.0.1 -p "$SEED" PING
  refute_output PONG
  RLOCK_URL="redis://127.0.0.1:$SEED/0" rl 69 acquire plain -n --connect-timeout 1s
}

@test "cluster tls: acquire, status and release on every shard through rediss:// seeds, MOVED followed over TLS" {
  local m name token names=()
  for m in $(cluster_masters); do
    name="$(lock_on_master "$m" tls)"
    names+=("$name")
    rl 0 acquire "$name" -n -t 60s --cacert "$CA"
    token="$output"
    # On the master of its slot (for two of the three, the seeds redirected).
    assert_equal "$(cluster_cli "$m" EXISTS "rlock:{$name}:m")" 1
    rl 75 acquire "$name" -n --cacert "$CA"
    rl 0 status "$name" --cacert "$CA"
    rl 0 release "$name" --token "$token" --cacert "$CA"
    rl 1 status "$name" --cacert "$CA"
    assert_equal "$(cluster_cli "$m" EXISTS "rlock:{$name}:m")" 0
  done
  # A lock on the seed's own shard and two that are not: MOVED was needed.
  assert_equal "${#names[@]}" 3
  # Asked over TLS, the seed redirects to the owner's TLS port.
  name="$(lock_not_on_master "$SEED" tls)"
  run cluster_cli "$SEED" SET "rlock:{$name}:probe" 1
  assert_output --regexp "MOVED [0-9]+ 127\.0\.0\.1:$(master_of_lock "$name")\$"
  # Through one replica as the only node named: every command is redirected.
  name="${names[0]}"
  m="$(master_of_lock "$name")"
  RLOCK_URL="$(cluster_url "$(replica_of "$m")")" rl 0 acquire "$name" -n -t 60s --cacert "$CA"
  assert_equal "$(cluster_cli "$m" EXISTS "rlock:{$name}:m")" 1
  RLOCK_URL="$(cluster_url "$(replica_of "$m")")" rl 0 status "$name" --cacert "$CA"
}

@test "cluster tls: verification is on by default: an unrelated CA, or none, is 77 with one line" {
  rl_tls_refused acquire wrong-ca -n
  # Nothing was written anywhere.
  local m
  for m in $(cluster_masters); do assert_equal "$(cluster_cli "$m" DBSIZE)" 0; done
}

@test "cluster tls: status with no name lists the locks of every shard" {
  local m name
  for m in $(cluster_masters); do
    name="$(lock_on_master "$m" listed)"
    rl 0 acquire "$name" -n -t 60s --cacert "$CA"
    echo "$name" >>"$M/names"
  done
  rl 0 status --json --cacert "$CA"
  assert_json
  assert_equal "$(json '"\n".join(sorted(l["name"] for l in d["locks"]))')" "$(LC_ALL=C sort "$M/names")"
}

@test "cluster tls: CLUSTER FAILOVER of the lock's shard during a 10 s-TTL run: exits 0, the watcher never gets in" {
  local name old new
  name="$(lock_not_on_master "$SEED" failover)"
  old="$(master_of_lock "$name")"
  touch "$BATS_FILE_TMPDIR/damaged"
  run_section "$name" 5 -t 10s --cacert "$CA"
  # The CA from a config file: the watcher's releases take no options.
  echo "cacert = $CA" >"$M/tls.conf"
  RLOCK_CONFIG="$M/tls.conf" start_watcher "$name" --cacert "$CA"
  sleep 1
  assert_equal "$(cluster_cli "$old" EXISTS "rlock:{$name}:m")" 1
  new="$(failover_shard "$old" 10)"
  bg_wait job 0 20
  # No warning: every renewal and the release found the shard's master.
  assert_equal "$stderr" ''
  stop_watcher
  check_watcher_kept_out
  # The run's renewals and its release reached the promoted master (and so
  # did the watcher's, over TLS): the lock is gone from it, not left to
  # expire.
  assert_equal "$(cluster_cli "$new" EXISTS "rlock:{$name}:m")" 0
  [[ ! -s "$M/watcher.err" ]] || fail "the watcher saw errors: $(<"$M/watcher.err")"
}

@test "cluster tls: kill -9 of the master the URL names, holding the lock, during a 10 s-TTL run: exits 0, the watcher never gets in" {
  local old other name
  # The URL names the lock's own master alone, so no MOVED says it is a
  # Cluster: the run's heartbeat finds out by itself, over TLS, and follows
  # the promoted replica once that node is gone.
  old="$(cluster_masters | head -n 1)"
  other="$(cluster_masters | tail -n 1)"
  name="$(lock_on_master "$old" killed)"
  touch "$BATS_FILE_TMPDIR/damaged"
  RLOCK_URL="$(cluster_url "$old")" run_section "$name" 8 -t 10s --cacert "$CA"
  echo "cacert = $CA" >"$M/tls.conf"
  RLOCK_CONFIG="$M/tls.conf" RLOCK_URL="$(cluster_url "$other")" start_watcher "$name"
  sleep 1
  kill_shard_master "$old" 15 >/dev/null
  # The final release goes to the node the URL names, which is gone: a
  # warning, and the lock expires within its TTL.
  bg_wait job 0 20
  stop_watcher
  check_watcher_kept_out
}
