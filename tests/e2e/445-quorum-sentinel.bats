#!/usr/bin/env bats
# A quorum whose members are not all single servers: one member is a
# Sentinel group (a master, two replicas, three Sentinels), the other two
# are plain redis-servers.

load helpers
load sentinel

setup_file() {
  start_sentinel_topology
  start_redis
  export PLAIN_1="$REDIS_PORT"
  start_redis
  export PLAIN_2="$REDIS_PORT" PLAIN_2_PID="$REDIS_PID"
  export RLOCK_URL
  RLOCK_URL="$(sentinel_url),redis://127.0.0.1:$PLAIN_1/0,redis://127.0.0.1:$PLAIN_2/0"
  # A member counts once it has been up for the TTL (3 s here: on a busy
  # machine a 1 s lease can end between two checks of one test).
  sleep 3.1
}

teardown_file() {
  stop_all_redis
  stop_sentinel_topology
}

@test "quorum with a Sentinel member: the lock is on a majority of the Sentinel's master and both servers, and gone from all after release" {
  rl 0 acquire qs -t 3s
  local token="$output"
  # A member slower than the majority by more than the acquire took so far
  # is given back its grant by design (the Sentinel member needs its
  # discovery first): only a majority is certain here. That the Sentinel
  # group counts in the majority is the next test's, with a server dead.
  local holders=0 held
  for held in "$(node_cli "$(master_port)" ZCARD 'rlock:{qs}:h')" \
    "$(redis-cli -p "$PLAIN_1" ZCARD 'rlock:{qs}:h')" "$(redis-cli -p "$PLAIN_2" ZCARD 'rlock:{qs}:h')"; do
    if [[ $held == 1 ]]; then holders=$((holders + 1)); fi
  done
  assert [ "$holders" -ge 2 ]
  # status names the Sentinel member by its group (ok, or disagrees when
  # it was the member left out), and at least a majority agrees.
  rl 0 status qs
  assert_output --regexp "(ok|disagrees) +master '$TOPO_NAME' of Sentinels"
  local agreeing
  agreeing="$(grep -cE '^ +ok ' <<<"$output" || true)"
  assert [ "$agreeing" -ge 2 ]
  rl 0 release qs --token "$token"
  assert_equal "$(node_cli "$(master_port)" EXISTS 'rlock:{qs}:h')" 0
  assert_equal "$(redis-cli -p "$PLAIN_1" EXISTS 'rlock:{qs}:h')" 0
  assert_equal "$(redis-cli -p "$PLAIN_2" EXISTS 'rlock:{qs}:h')" 0
}

@test "quorum with a Sentinel member: with one plain server dead, the Sentinel group and the other make the majority" {
  kill -KILL "$PLAIN_2_PID"
  rl 0 acquire qs2 -n -t 3s
  local token="$output"
  assert_equal "$(node_cli "$(master_port)" ZCARD 'rlock:{qs2}:h')" 1
  rl 0 release qs2 --token "$token"
  # A replica of the group that does not acknowledge (--replicas all, the
  # default): the group's lease does not count, and the other server alone
  # is no majority (69), where counting it let the lock be taken.
  local replica
  replica="$(replica_ports | head -1)"
  freeze_node "$replica"
  rl 69 acquire qs3 -n -t 3s
  thaw_node "$replica"
  assert_stderr --partial "replicas acknowledged"
  assert_equal "$(redis-cli -p "$PLAIN_1" EXISTS 'rlock:{qs3}:h')" 0
}
