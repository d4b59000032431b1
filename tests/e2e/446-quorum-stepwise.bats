#!/usr/bin/env bats
# The quorum's parallel I/O without a thread per member (redis::Multiplexer):
# a call is queued on every member's connection and decided as replies
# arrive, connecting included (TCP, the TLS handshake, AUTH and SELECT
# written ahead of the first call), so a frozen member slows nothing down.

load helpers
load quorum

setup_file() {
  start_quorum 3
  local k
  for k in 1 2 3; do
    start_tls_redis optional
    export "T_PORT_$k=$TLS_PORT" "T_PID_$k=$TLS_PID"
    start_redis --requirepass s3cret
    export "P_PORT_$k=$REDIS_PORT"
  done
  # The quorum suites' TTL: the servers must be older than it (the
  # delayed-restart rule), and the last ones started just now. A server
  # counts its uptime as uptime_in_seconds less one (lock.lua), so one
  # second more, as q_wait_uptime waits: a TLS member still young made the
  # acquire with another member frozen wait for it (2.4 s).
  sleep "$((Q_MIN_UPTIME + 1))"
  export RLOCK_URL="$(q_urls)"
}

setup() {
  q_heal
}

teardown() {
  stop_sessions
  kill_bg_pids
  local k pid
  for k in 1 2 3; do
    pid="T_PID_$k"
    kill -CONT "${!pid}" 2>/dev/null || true
  done
}

# q_urls: the plain quorum's URLs as a comma list (start_quorum's RLOCK_URL,
# which the later start_redis calls replaced).
q_urls() {
  local k urls=""
  for ((k = 1; k <= Q_N; k++)); do urls+="${urls:+,}redis://127.0.0.1:$(q_port "$k")/0"; done
  echo "$urls"
}

# url_list PREFIX PORT_VAR SUFFIX: -u options for the three servers.
url_list() {
  local k port
  for k in 1 2 3; do
    port="$2_$k"
    printf -- '-u\n%s%s%s\n' "$1" "${!port}" "$3"
  done
}

# --- tests -------------------------------------------------------------------

@test "quorum over TLS: acquire, status and release, and a frozen member does not hold up the handshake" {
  local urls
  mapfile -t urls < <(url_list rediss://127.0.0.1: T_PORT /0)
  rl 0 "${urls[@]}" --cacert "$TLS_DIR/ca.pem" acquire tq -t "$Q_TTL"
  local token="$output"
  rl 0 "${urls[@]}" --cacert "$TLS_DIR/ca.pem" status tq
  rl 0 "${urls[@]}" --cacert "$TLS_DIR/ca.pem" release tq --token "$token"
  # A fresh process connects to every member at once: the frozen one's
  # handshake is left unfinished, not waited for.
  kill -STOP "$T_PID_2"
  local start elapsed
  start="$(now_ms)"
  rl 0 "${urls[@]}" --cacert "$TLS_DIR/ca.pem" acquire tq2 -t "$Q_TTL"
  elapsed=$(($(now_ms) - start))
  kill -CONT "$T_PID_2"
  echo "# TLS acquire with one of three members frozen: $elapsed ms" >&3
  ((elapsed < 1000)) || fail "acquire took $elapsed ms"
}

@test "quorum members with a password and a database: AUTH and SELECT go ahead of the first call" {
  local urls
  mapfile -t urls < <(url_list redis://:s3cret@127.0.0.1: P_PORT /3)
  rl 0 "${urls[@]}" acquire pq -t "$Q_TTL"
  local k held=0
  for k in 1 2 3; do
    port="P_PORT_$k"
    if [[ "$(redis-cli -p "${!port}" -a s3cret --no-auth-warning -n 3 exists 'rlock:{pq}:h')" == 1 ]]; then
      held=$((held + 1))
    fi
    assert_equal "$(redis-cli -p "${!port}" -a s3cret --no-auth-warning -n 0 exists 'rlock:{pq}:h')" 0
  done
  ((held >= 2)) || fail "the lock is in database 3 of $held members"
  mapfile -t urls < <(url_list redis://:wrong@127.0.0.1: P_PORT /3)
  # Every member refusing the password: an auth error, which no retry mends.
  rl 77 "${urls[@]}" acquire pq2 -n -t "$Q_TTL"
  assert_stderr --partial "authentication failed"
  rl 77 "${urls[@]}" status
}

@test "quorum: a waiter blocks on every member's wake list from one thread, and is woken" {
  rl 0 acquire wq -t 10s
  local token="$output" pid k i
  rl_bg waiter acquire wq -w 10s -t "$Q_TTL"
  pid="$(<"$BATS_TEST_TMPDIR/bg.waiter.pid")"
  # Until the waiter blocks (BLPOP) on every member.
  for ((i = 0; i < 100; i++)); do
    local blocked=0
    for ((k = 1; k <= Q_N; k++)); do
      if qcli "$k" client list | grep -q 'cmd=blpop'; then blocked=$((blocked + 1)); fi
    done
    ((blocked == Q_N)) && break
    nap 0.05
  done
  if ((blocked != Q_N)); then
    # What the waiter said and what each member saw, for the next reader.
    local seen=""
    for ((k = 1; k <= Q_N; k++)); do seen+=" member $k: $(qcli "$k" client list | grep -o 'cmd=[a-z|]*' | sort | uniq -c | tr -s ' \n' ' ');"; done
    fail "the waiter blocks on $blocked members (its stderr: $(<"$BATS_TEST_TMPDIR/bg.waiter.err");$seen)"
  fi
  # rl_bg runs rlock under timeout(1): the waiter is its child.
  local timeout_pid rlock_pid
  timeout_pid="$(pgrep -P "$pid" -x timeout)" || fail "no timeout process under $pid"
  rlock_pid="$(pgrep -P "$timeout_pid")" || fail "no rlock process under $timeout_pid"
  assert_equal "$(ls "/proc/$rlock_pid/task" | wc -l)" 1
  local start
  start="$(now_ms)"
  rl 0 release wq --token "$token"
  rl_wait waiter 0
  local elapsed=$(($(now_ms) - start))
  echo "# release to the waiter's grant: $elapsed ms" >&3
  ((elapsed < 1000)) || fail "the waiter took $elapsed ms to get the lock"
}

@test "quorum: a holder on a bare majority leaves the waiters blocked on the wake lists, not polling" {
  # The holder reaches two members of three (the third frozen while it
  # acquires); the third then grants every waiter's try, which gives it
  # back. That is no contention among waiters: the waiter must block until
  # the holder's release wakes it, not pause and ask all members again
  # every 10-150 ms for as long as the lock is held.
  q_freeze 3
  rl 0 acquire bq -t 10s
  local token="$output"
  q_thaw 3
  assert_equal "$(q_holding bq)" 2
  rl_bg waiter acquire bq -w 20s -t "$Q_TTL"
  nap 0.5
  local k before after
  before="$(qcli 1 info commandstats | grep -o 'cmdstat_evalsha:calls=[0-9]*' | cut -d= -f2)"
  nap 2
  after="$(qcli 1 info commandstats | grep -o 'cmdstat_evalsha:calls=[0-9]*' | cut -d= -f2)"
  # Blocked, it asks again once a second (its re-check), at most.
  ((after - before <= 4)) || fail "the waiter sent $((after - before)) acquires to member 1 in 2 s"
  for ((k = 1; k <= Q_N; k++)); do
    qcli "$k" client list | grep -q 'cmd=blpop' || fail "the waiter is not blocked on member $k"
  done
  rl 0 release bq --token "$token"
  rl_wait waiter 0
}

@test "quorum: a member whose host name does not resolve is told of once, a warning, not silently down" {
  if ! unshare -m true 2>/dev/null; then skip "unshare -m is not permitted"; fi
  # No lookup leaves the machine: in a mount namespace of its own, rlock's
  # resolver reads host names from files only, so the typo fails at once.
  local ns="$BATS_TEST_TMPDIR/nsswitch.conf"
  printf 'hosts: files\n' >"$ns"
  run --separate-stderr timeout -k 5 20 unshare -m sh -c 'mount --bind "$1" /etc/nsswitch.conf && shift && exec "$@"' _ "$ns" \
    "$RLOCK" -u "redis://127.0.0.1:$(q_port 1)/0" -u "redis://127.0.0.1:$(q_port 2)/0" \
    -u "redis://no-such-member.invalid:$(q_port 3)/0" run -t "$Q_TTL" typo -- echo ran
  assert_equal "$status" 0
  assert_output ran
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "quorum member redis://no-such-member.invalid:$(q_port 3)/0: its host name does not resolve (a typo?)"
  assert_stderr --partial "of the other 2, none may fail (a majority is 2)"
}

@test "quorum: run's heartbeat renews on every member without a thread per member" {
  bg_rlock holder run -t 1s hq -- sleep 2.5
  local pid="$(<"$BATS_TEST_TMPDIR/holder.pid")" i
  # Past the first renewals (TTL/3), which also ask each member whether it
  # is a Cluster node.
  sleep 1.5
  running "$pid" || fail "the run ended early"
  # The main thread and the heartbeat's.
  assert_equal "$(ls "/proc/$pid/task" | wc -l)" 2
  bg_wait holder 0
}
