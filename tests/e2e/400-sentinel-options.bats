#!/usr/bin/env bats
# The options of Sentinel deployments and replica acknowledgement: what is
# accepted and how bad input is refused. (Sentinel itself, failover and WAIT
# are tested against real Sentinels elsewhere.)

load helpers

# A failed assertion must not leave a test's Sentinel running.
teardown() {
  kill_bg_pids
}

# conf TEXT: writes TEXT to a private config file and prints its path.
conf() {
  local file="$BATS_TEST_TMPDIR/rlock.conf"
  (umask 077 && printf '%s\n' "$1" >"$file")
  echo "$file"
}

# start_sentinel NAME MASTER_PORT: one Sentinel on a free port monitoring
# NAME at MASTER_PORT (quorum 1), its port in SENTINEL_PORT once it answers;
# teardown stops it (its pid in sentinel.pid).
start_sentinel() {
  local dir="$BATS_TEST_TMPDIR/sentinel" i
  SENTINEL_PORT="$(free_port)"
  mkdir -p "$dir"
  printf 'port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %s 1\n' \
    "$SENTINEL_PORT" "$dir" "$1" "$2" >"$dir/sentinel.conf"
  "${RLOCK_E2E_SERVER:-redis-server}" "$dir/sentinel.conf" --sentinel >"$dir/log" 2>&1 </dev/null 3>&- &
  echo "$!" >"$BATS_TEST_TMPDIR/sentinel.pid"
  for ((i = 0; i < 100; i++)); do
    [[ "$(redis-cli -p "$SENTINEL_PORT" PING 2>/dev/null)" == PONG ]] && return 0
    nap 0.05
  done
  fail "the Sentinel did not start: $(<"$dir/log")"
}

@test "replicas: all and 0 are accepted, on the command line and in the config file" {
  rl 0 --replicas all acquire replicas-all -n
  rl 0 --replicas 0 release replicas-all --force
  local file
  file="$(conf "replicas = 0")"
  rl 0 --config "$file" acquire replicas-file -n
}

@test "replicas: a bad --replicas is a usage error on one line naming the option" {
  for bad in many -1 1.5 '' 1001 ' 1' ALL; do
    rl_usage_error --replicas "$bad" status x
    assert_stderr --regexp '^rlock: error: --replicas: '
  done
}

@test "replicas: a bad replicas in the config file is a config error naming file:line" {
  local file
  for bad in 'replicas = most' 'replicas = -2' 'replicas = 2x'; do
    file="$(conf "# first line
$bad")"
    rl 78 --config "$file" status x
    assert_stderr --regexp "^rlock: error: $file:2: replicas: "
  done
}

@test "sentinel: a redis-sentinel URL without #MASTER is a usage error" {
  for url in 'redis-sentinel://127.0.0.1:26379,127.0.0.1:26380/0' 'rediss-sentinel://127.0.0.1#'; do
    rl_usage_error -u "$url" status x
    assert_stderr --partial 'master'
    RLOCK_URL="$url" rl_usage_error status x
    assert_stderr --regexp '^rlock: error: RLOCK_URL: '
  done
  rl_usage_error -u 'redis://127.0.0.1:6379/0#mymaster' status x
  assert_stderr --partial 'only for redis-sentinel'
}

@test "sentinel: a bad host in a list of Sentinels is a usage error" {
  local -A problems=(
    ['redis-sentinel://a:1,,b:2#m']='empty host in the list'
    ['redis-sentinel://a:1,b:0#m']='port must be a number'
    ['redis-sentinel://a,[::1#m']='unterminated IPv6 address'
  )
  local url
  for url in "${!problems[@]}"; do
    rl_usage_error -u "$url" status x
    assert_stderr --partial "${problems[$url]}"
  done
}

@test "sentinel: the Sentinels' password is never taken from argv, nor echoed" {
  for args in '--sentinel-password hunter2' '--sentinel-password=hunter2' '--password hunter2'; do
    # shellcheck disable=SC2086  # the option and its value as two words
    rl_usage_error $args status x
    refute_stderr --partial hunter2
    assert_stderr --regexp 'password-file or RLOCK_(SENTINEL_)?PASSWORD'
  done
  # After the command word too; a lock called --sentinel-password is just a name.
  rl_usage_error status x --sentinel-password hunter2
  refute_stderr --partial hunter2
  rl 1 status -- --sentinel-password
  assert_output --partial "free"
}

@test "sentinel: a password in a Sentinel URL on the command line warns" {
  # Nothing listens on port 1 of a Sentinel: the URL is accepted (the warning
  # comes first), then the connection fails.
  rl 69 -u 'redis-sentinel://:hunter2@127.0.0.1:1/0#mymaster' --connect-timeout 0.2 status x
  assert_stderr --partial 'password on the command line'
  refute_stderr --partial hunter2
}

@test "sentinel: --sentinel-password-file naming a missing file is an error naming the option" {
  rl 64 --sentinel-password-file "$BATS_TEST_TMPDIR/none" status x
  assert_stderr --partial -- "cannot read --sentinel-password-file '$BATS_TEST_TMPDIR/none'"
  local file
  file="$(conf "sentinel-password-file = $BATS_TEST_TMPDIR/none")"
  rl 78 --config "$file" status x
  assert_stderr --partial "cannot read sentinel-password-file (set at $file:1)"
}

@test "sentinel: a redis-sentinel URL naming a Redis server, not a Sentinel, is a configuration error (78)" {
  # It was 69 ("no master found through the Sentinels: ERR unknown command
  # 'SENTINEL'"), as if the Sentinels were out of reach: no retry helps.
  rl 78 -u "redis-sentinel://127.0.0.1:$REDIS_PORT/0#mymaster" acquire snt -n
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "127.0.0.1:$REDIS_PORT/0 is not a Sentinel (it does not know the SENTINEL command)"
  rl 78 -u "redis-sentinel://127.0.0.1:$REDIS_PORT/0#mymaster" status snt
}

@test "sentinel: a redis:// URL naming a Sentinel is a configuration error (78), not a refused script (76)" {
  local port
  start_sentinel mymaster "$REDIS_PORT"
  port="$SENTINEL_PORT"
  rl 78 -u "redis://127.0.0.1:$port/0" acquire snt -n
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "127.0.0.1:$port/0 is a Sentinel, not a Redis server: a Sentinel URL is redis-sentinel://"
  # The operator's tools too, which send no ROLE of their own: before, 76
  # with Redis' "unknown command 'SCAN'" (probe O).
  local args
  for args in "status" "status snt" "--json status snt" "release snt --force"; do
    # shellcheck disable=SC2086 # $args is a list of words
    rl 78 -u "redis://127.0.0.1:$port/0" $args
    assert_stderr --partial "is a Sentinel, not a Redis server"
  done
}

@test "cluster: seeds that are all plain servers are a configuration error (78), not a Cluster out of reach (69)" {
  rl 78 -u "redis://127.0.0.1:$REDIS_PORT,localhost:$REDIS_PORT/0" acquire seeds -n
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "127.0.0.1:$REDIS_PORT, localhost:$REDIS_PORT are not Cluster nodes (cluster support disabled)"
  # One seed a Cluster node would answer for is still only out of reach.
  rl 69 -u "redis://127.0.0.1:$REDIS_PORT,127.0.0.1:1/0" acquire seeds -n
}

@test "cluster: a comma list of hosts in one redis:// URL is one Cluster; no seed reachable is 69 at once" {
  # (430-cluster.bats tests seed lists against a real Cluster.)
  rl 69 -u 'redis://127.0.0.1:1,127.0.0.1:2' status x
  assert_stderr --partial 'Cluster'
  assert_stderr --partial '127.0.0.1:2'
  RLOCK_URL='redis://127.0.0.1:1,127.0.0.1:2/0' rl 69 acquire x -n
  assert_stderr --partial 'Cluster'
  local file
  file="$(conf "url = redis://127.0.0.1:1, 127.0.0.1:2")"
  RLOCK_URL='' rl 69 --config "$file" status x
  assert_stderr --partial 'Cluster'
}

@test "quorum: several deployments in RLOCK_URL are a quorum, not a usage error" {
  RLOCK_URL='redis://127.0.0.1:1/0,redis-sentinel://127.0.0.1:2,127.0.0.1:3#m' \
    rl 69 status x
  assert_stderr --partial 'quorum members'
}

# A plain URL that names a read-only replica got Redis' READONLY words
# alone (76), where a writable replica, or the same one in a quorum, is told
# what to give instead (probe D).
@test "a plain URL that names a read-only replica is refused (76), saying to give the master or the Sentinels" {
  local port="$REDIS_PORT" pid="$REDIS_PID" dir="$REDIS_DIR" url="$RLOCK_URL" replica replica_pid
  start_redis --replicaof 127.0.0.1 "$port"
  replica="$REDIS_PORT" replica_pid="$REDIS_PID"
  export REDIS_PORT="$port" REDIS_PID="$pid" REDIS_DIR="$dir" RLOCK_URL="$url"
  for what in "acquire on-replica -n" "release on-replica --force" "run on-replica -n -- true"; do
    # shellcheck disable=SC2086 # the words of each command
    rl 76 -u "redis://127.0.0.1:$replica/0" $what
    assert_stderr --partial "READONLY You can't write against a read only replica: this server is a read-only replica; give the master's URL, or the Sentinels' (redis-sentinel://)"
    refute_stderr --partial 'script:'
  done
  stop_redis "$replica_pid"
}

@test "sentinel: a node a Sentinel names as the master but that is a replica (one that takes writes) is refused (69), nothing written there" {
  # A stale or misconfigured Sentinel: it monitors a replica as the master.
  # With replica-read-only no the script would run there: without the ROLE
  # check, acquire exited 0 with the lock on a replica its master never
  # sees.
  local port="$REDIS_PORT" pid="$REDIS_PID" dir="$REDIS_DIR" url="$RLOCK_URL" replica
  start_redis --replicaof 127.0.0.1 "$port" --replica-read-only no
  replica="$REDIS_PORT"
  export REDIS_PORT="$port" REDIS_PID="$pid" REDIS_DIR="$dir" RLOCK_URL="$url"
  local sport
  start_sentinel mm "$replica"
  sport="$SENTINEL_PORT"
  rl 69 -u "redis-sentinel://127.0.0.1:$sport/0#mm" --replicas 0 acquire named-replica -n -t 30s
  assert_stderr --partial "127.0.0.1:$replica"
  assert_equal "$(redis-cli -p "$replica" EXISTS 'rlock:{named-replica}:h')" 0
  rl 69 -u "redis-sentinel://127.0.0.1:$sport/0#mm" status named-replica
}

@test "sentinel: a master at its maxclients is named as the one that refused, not the Sentinels" {
  local port="$REDIS_PORT" pid="$REDIS_PID" dir="$REDIS_DIR" url="$RLOCK_URL" master
  start_redis
  master="$REDIS_PORT"
  export REDIS_PORT="$port" REDIS_PID="$pid" REDIS_DIR="$dir" RLOCK_URL="$url"
  local sport i n
  start_sentinel mm "$master"
  sport="$SENTINEL_PORT"
  # The Sentinel's own connections (commands and hello channel) are the last
  # the master takes.
  for ((i = 0; i < 100; i++)); do
    (($(redis-cli -p "$master" CLIENT LIST | grep -c 'name=sentinel-') >= 2)) && break
    nap 0.05
  done
  n="$(redis-cli -p "$master" CLIENT LIST | wc -l)"
  redis-cli -p "$master" CONFIG SET maxclients "$((n - 1))" >/dev/null
  rl 69 -u "redis-sentinel://127.0.0.1:$sport/0#mm" acquire full-master -n
  assert_stderr --partial "the master they name, redis://127.0.0.1:$master/0: ERR max number of clients reached"
}
