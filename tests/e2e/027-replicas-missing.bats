#!/usr/bin/env bats
# A deployment that cannot give the replica acknowledgements asked for is
# unavailable: an acquire without -w says so (69) after riding it out like
# any outage, instead of taking and giving back the lock forever.

load helpers

@test "replicas: without -w, a grant no replica can acknowledge ends in 69, not a wait forever" {
  # This server has no replica at all; --replicas 1 can never be met.
  RL_TIMEOUT=60 rl 69 --replicas 1 acquire never-acked -t 5s
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "0 of 1 replicas acknowledged"
  # Nothing is left held: the grant was given back each time.
  rl 1 status never-acked
  # -n gives up at once, as before.
  rl 69 --replicas 1 acquire never-acked -n
}

# start_replica [OPTION...]: a replica of this file's server (REDIS_PORT),
# on REPLICA_PORT with its pid in REPLICA_PID, online when this returns.
start_replica() {
  local port="$REDIS_PORT" pid="$REDIS_PID" dir="$REDIS_DIR" url="$RLOCK_URL" i
  start_redis --replicaof 127.0.0.1 "$port" "$@" || return 1
  export REPLICA_PORT="$REDIS_PORT" REPLICA_PID="$REDIS_PID"
  export REDIS_PORT="$port" REDIS_PID="$pid" REDIS_DIR="$dir" RLOCK_URL="$url"
  for ((i = 0; i < 100; i++)); do
    [[ "$(rcli INFO replication)" == *state=online* ]] && return 0
    nap 0.1
  done
  return 1
}

@test "replicas: a replica shut down for good keeps the waiters queued then for seconds, not forever" {
  start_replica
  rl_bg holder run gone -t 6s -- sleep 2
  local i
  for ((i = 0; i < 50; i++)); do
    run "$RLOCK" status gone
    ((status == 0)) && break
    nap 0.1
  done
  # Two waiters without -w, queued while the master has its replica: it
  # is the most they have seen it with.
  RL_TIMEOUT=40 rl_bg first run gone -t 6s -- echo first-ran
  nap 0.3
  RL_TIMEOUT=40 rl_bg second run gone -t 6s -- echo second-ran
  nap 0.5
  redis-cli -p "$REPLICA_PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  # The master shows one replica fewer from now on: after 10 s of that the
  # waiters take it as the deployment's (before: they took the lock and
  # gave it back without end).
  rl_wait first 0
  assert_output first-ran
  rl_wait second 0
  assert_output second-ran
  rl_wait holder 0
  stop_redis "$REPLICA_PID"
}

@test "replicas: WAIT refused by the ACL: the acquire is given back (77), a release stands (0)" {
  start_replica
  rcli ACL SETUSER nowait on '>pw-nowait' '~rlock:*' +@all -wait >/dev/null
  printf 'pw-nowait\n' >"$BATS_TEST_TMPDIR/pw"
  chmod 600 "$BATS_TEST_TMPDIR/pw"
  # Before: 77, and the grant kept for its whole TTL with no token printed.
  rl 77 --user nowait --password-file "$BATS_TEST_TMPDIR/pw" run -t 30s wait-refused -- echo ran
  refute_output --partial ran
  assert_stderr --partial "WAIT was refused"
  rl 1 status wait-refused
  # Before: the release was done, and said 77.
  rl 0 acquire wait-released -t 30s
  local token="$output"
  rl 0 --user nowait --password-file "$BATS_TEST_TMPDIR/pw" release wait-released --token "$token"
  rl 1 status wait-released
}

@test "replicas: a replica that takes writes (replica-read-only no) is no lock server: 76, given back" {
  start_replica --replica-read-only no
  local replica="redis://127.0.0.1:$REPLICA_PORT/0"
  # Before: a second holder through the replica while the master's ran.
  rl 76 -u "$replica" run -t 10s on-replica -- echo ran
  refute_output --partial ran
  assert_stderr --partial "is a replica that takes writes"
  rl 1 -u "$replica" status on-replica
  rl 76 -u "$replica" acquire on-replica -n
  # The master takes it, as ever.
  rl 0 run -n on-replica -- echo on-master
  assert_output on-master
}

@test "replicas: status read from a replica cut off from its master says so on stderr" {
  # A master of its own (this file's server stays up for the others).
  start_redis
  start_replica
  local replica_url="redis://127.0.0.1:$REPLICA_PORT/0"
  rl 0 acquire held-on-master -t 1h
  local i
  for ((i = 0; i < 50; i++)); do
    [[ "$(redis-cli -p "$REPLICA_PORT" EXISTS 'rlock:{held-on-master}:h')" == 1 ]] && break
    nap 0.1
  done
  # Linked: its copy is the master's, and nothing is said.
  rl 0 -u "$replica_url" status held-on-master
  refute_stderr
  # Cut off (the master gone): the lock still shows, but could as well be
  # free, or gone long ago; status says so, once, naming the master.
  stop_redis "$REDIS_PID"
  for ((i = 0; i < 50; i++)); do
    [[ "$(redis-cli -p "$REPLICA_PORT" ROLE | sed -n 4p)" != connected ]] && break
    nap 0.1
  done
  rl 0 -u "$replica_url" status held-on-master
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "is a replica whose link to its master 127.0.0.1:$REDIS_PORT is down"
  rl 1 -u "$replica_url" status never-taken
  assert_stderr --partial "what it shows may be out of date"
  rl 0 -u "$replica_url" status
  assert_stderr --partial "ask the master"
  rl 0 -q -u "$replica_url" status
  refute_stderr
  stop_redis "$REPLICA_PID"
}
