#!/usr/bin/env bats
# Usage errors (64), an unreachable server (69) and server errors (76).

load helpers

teardown() {
  # The OOM test lowers maxmemory; never let that leak into the next test.
  rcli CONFIG SET maxmemory 0 >/dev/null || true
  kill_bg_pids
}

@test "usage: malformed durations exit 64 with one error line" {
  local bad
  for bad in 5x -1s '' ms 1.5.5s; do
    rl_usage_error acquire dur -t "$bad"
  done
  rl_usage_error acquire dur -w 5x
  rl_usage_error --connect-timeout 5x status dur
}

@test "usage: malformed URLs exit 64 with one error line" {
  local url
  for url in ftp://x redis://host:99999 redis://:abc; do
    rl_usage_error -u "$url" acquire url-lock -n
  done
}

@test "usage: an empty name exits 64 for every command" {
  rl_usage_error acquire ''
  rl_usage_error status ''
  rl_usage_error release '' --force
  rl_usage_error renew '' --token 0123456789abcdef0123456789abcdef
}

@test "usage: a name over 512 bytes exits 64, in bytes not characters" {
  rl_usage_error acquire "$(printf 'a%.0s' {1..513})"
  # 257 two-byte characters: 514 bytes.
  rl_usage_error acquire "$(printf 'ü%.0s' {1..257})"
}

@test "usage: unknown commands and options exit 64" {
  rl_usage_error frobnicate
  rl_usage_error acquire opt --frobnicate
  rl_usage_error --frobnicate status
}

@test "usage: release needs --token or --force, renew needs --token" {
  rl_usage_error release no-token
  rl_usage_error renew no-token
}

@test "usage errors are reported before contacting Redis" {
  local closed
  closed="$(free_port)"
  rl_usage_error -u "redis://127.0.0.1:$closed" acquire early -t 5x
}

@test "unreachable: nothing listening exits 69 within the connect timeout" {
  local closed start elapsed_ms
  closed="$(free_port)"
  start="$(date +%s%N)"
  rl 69 -u "redis://127.0.0.1:$closed" --connect-timeout 500ms acquire down -n
  elapsed_ms=$((($(date +%s%N) - start) / 1000000))
  # A hang guard, not a performance assertion.
  assert_greater 5000 "$elapsed_ms"
  assert_output ''
  assert_stderr --regexp '^rlock: error: '
  assert_stderr --partial "127.0.0.1:$closed"
}

# The data layout is the implementation's to choose: learn which keys a lock
# uses, then put a key of another type at each of them in turn.
@test "server errors: a key of another type at a lock's key is never overwritten" {
  rl 0 acquire typed
  local token="$output" keys=() types=() i before after tried=0
  mapfile -t keys < <(lock_keys)
  assert_not_equal "${#keys[@]}" 0
  for i in "${!keys[@]}"; do
    types[i]="$(rcli TYPE "${keys[i]}")"
  done
  rl 0 release typed --token "$token"
  for i in "${!keys[@]}"; do
    # A key named after this holder's token will not be reused by the next.
    [[ "${keys[i]}" == *"$token"* ]] && continue
    rcli FLUSHALL >/dev/null
    if [[ "${types[i]}" == string ]]; then
      rcli RPUSH "${keys[i]}" intruder >/dev/null
    else
      rcli SET "${keys[i]}" intruder >/dev/null
    fi
    before="$(key_snapshot)"
    rl 75,76 acquire typed -n
    after="$(key_snapshot)"
    assert_equal "$after" "$before"
    # Refused with the key named (the lock is free, so the type check ran).
    if [[ "$status" == 76 ]]; then assert_stderr --partial "WRONGTYPE key ${keys[i]} holds a"; fi
    tried=$((tried + 1))
  done
  # Not vacuous: at least one key was not skipped.
  assert_greater "$tried" 0
}

# While the lock is held the other keys are the lock's own, unless something
# wrote over one since: every operation that may write must find that out
# before it changes anything (Redis keeps what a script wrote before an
# error), never leave half of its work behind.
@test "server errors: a key of another type at a held lock's key fails a write before it changes anything" {
  local token keys=() held=() types=() i k before after tried=0
  # Learn the keys of a held lock with a waiter queued behind it.
  rl 0 acquire typed -t 60s
  token="$output"
  mapfile -t held < <(lock_keys)
  bg_rlock waiter acquire typed -w 30s
  for ((i = 0; i < 50; i++)); do
    mapfile -t keys < <(lock_keys)
    ((${#keys[@]} > ${#held[@]})) && break
    nap 0.1
  done
  assert_greater "${#keys[@]}" "${#held[@]}"
  for i in "${!keys[@]}"; do types[i]="$(rcli TYPE "${keys[i]}")"; done
  kill_bg_pids
  for i in "${!keys[@]}"; do
    k="${keys[i]}"
    # Named after a token (a wake list): not a key the next holder shares.
    [[ "$k" == *:w:* ]] && continue
    rcli FLUSHALL >/dev/null
    rl 0 acquire typed -t 60s
    token="$output"
    rcli DEL "$k" >/dev/null
    if [[ "${types[i]}" == string ]]; then
      rcli RPUSH "$k" intruder >/dev/null
    else
      rcli SET "$k" intruder >/dev/null
    fi
    before="$(key_snapshot)"
    rl 75,76 acquire typed -w 1s
    if ((status == 76)); then
      assert_equal "$(key_snapshot)" "$before"
      assert_stderr --partial "WRONGTYPE key $k holds a"
      tried=$((tried + 1))
    fi
    before="$(key_snapshot)"
    rl 0,76 release typed --token "$token"
    if ((status == 76)); then
      assert_equal "$(key_snapshot)" "$before"
      assert_stderr --partial "WRONGTYPE key $k holds a"
      rl 0,76 release typed --force
      if ((status == 76)); then assert_equal "$(key_snapshot)" "$before"; fi
      tried=$((tried + 1))
    fi
  done
  # Not vacuous: some refusals were checked.
  assert_greater "$tried" 3
}

@test "server errors: acquire on a server out of memory exits 76 with the server's reason" {
  rcli CONFIG SET maxmemory-policy noeviction >/dev/null
  rcli CONFIG SET maxmemory 1 >/dev/null
  rl 76 acquire oom -n
  # One line naming the server that refused, in the server's words, without
  # the location inside rlock's script that Redis appends.
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --regexp "^rlock: error: redis://127\.0\.0\.1:[0-9]+/0: OOM command not allowed"
  refute_stderr --partial user_script
}

@test "server errors: a full server (noeviction) keeps the lock held and the waiter queued through renewals and the handover, and refuses new locks and new waiters" {
  # Redis refuses a command that may grow memory only as a script's first
  # write: before, a renewal began with one (ZADD) and the holder lost its
  # lock (79), and the queued waiter's re-check failed (76).
  rcli CONFIG SET maxmemory-policy noeviction >/dev/null
  bg_rlock holder run -t 1500ms full -- sh -c "echo >\"$BATS_TEST_TMPDIR/held\"; sleep 9"
  wait_for_file "$BATS_TEST_TMPDIR/held"
  bg_rlock waiter run -w 30s -t 1500ms full -- echo waiter-ran
  wait_waiters full 1
  rcli CONFIG SET maxmemory 1 >/dev/null
  rl 76 acquire other -n
  assert_stderr --partial 'OOM command not allowed'
  rl 76 acquire full -w 5s
  assert_stderr --partial 'OOM command not allowed'
  # Renewals every 0.5 s and the waiter's re-checks every second, for 9 s:
  # longer than two waiter leases, after which the queue's keys expired
  # under the waiter, which had to join again and was refused (probe D).
  bg_wait holder 0 15
  bg_wait waiter 0 15
  run cat "$BATS_TEST_TMPDIR/waiter.out"
  assert_output waiter-ran
}

# A server with a command the lock needs renamed away
# (rename-command): one line naming the command, 76, nothing written.
# (Before: TIME was blamed on the ACL, 77; the others gave "Invalid command
# passed to redis.acl_check_cmd()".)
@test "errors: a server without a command the lock needs (renamed away) is named, 76, nothing written" {
  local port="$REDIS_PORT" pid="$REDIS_PID" dir="$REDIS_DIR" url="$RLOCK_URL" command
  for command in TIME ZADD; do
    start_redis --rename-command "$command" ''
    local renamed="$RLOCK_URL" renamed_port="$REDIS_PORT"
    export REDIS_PORT="$port" REDIS_PID="$pid" REDIS_DIR="$dir" RLOCK_URL="$url"
    RLOCK_URL="$renamed" rl 76 acquire -n renamed
    assert_stderr --partial "this server has no '${command,,}' command (renamed or disabled)"
    RLOCK_URL="$renamed" rl 76 run -n renamed -- true
    assert_stderr --partial "this server has no '${command,,}' command (renamed or disabled)"
    assert_equal "$(redis-cli -p "$renamed_port" DBSIZE </dev/null)" 0
  done
  # ROLE (counts the replicas for the default --replicas all) and WAIT (any
  # other count): the grant is given back, and --replicas says what helps.
  for command in ROLE WAIT; do
    start_redis --rename-command "$command" ''
    local renamed="$RLOCK_URL"
    export REDIS_PORT="$port" REDIS_PID="$pid" REDIS_DIR="$dir" RLOCK_URL="$url"
    local replicas=all
    [[ "$command" == WAIT ]] && replicas=1
    RLOCK_URL="$renamed" rl 76 --replicas "$replicas" acquire -n renamed
    assert_stderr --partial "this server has no '${command,,}' command (renamed or disabled)"
    assert_stderr --partial "use --replicas"
    RLOCK_URL="$renamed" rl 1 status renamed
    RLOCK_URL="$renamed" rl 0 --replicas 0 run -n renamed -- true
  done
}

@test "errors: out of file descriptors is a local limit (70), never an unreachable server (69)" {
  local n seen=0
  for n in 4 5 6 7 8 9 10 11 12; do
    run bash -c 'ulimit -n "$1"; exec "$2" acquire "fd-limit-$1" -n' sh "$n" "$RLOCK" \
      3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
    case "$status" in
      0 | 70) ;;
      *) fail "ulimit -n $n: exit $status: $output" ;;
    esac
    [[ "$output" == *"Too many open files (a local limit: ulimit -n)"* ]] && seen=1
  done
  ((seen)) || fail "no run ran out of descriptors while connecting"
}

@test "errors: a wait that could not watch for signals (no descriptor for its pipe) fails at once (70), not deaf to SIGTERM" {
  rl 0 acquire deaf -t 30s
  local holder="$output"
  run timeout 10 bash -c 'ulimit -n 4; exec "$0" acquire deaf -t 5s -w 20s' "$RLOCK" \
    3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
  assert_equal "$status" 70
  assert_output --partial "pipe: Too many open files (a local limit: ulimit -n)"
  rl 0 release deaf --token "$holder"
}

@test "errors: a waiter granted while the queue fills the server's maxclients renews over the connection it queued on, where its heartbeat cannot open one" {
  # Four waiters take the server's four client places; the first granted
  # could not open its heartbeat's connection (ERR max number of clients
  # reached) and lost its lock (79) at its first renewal.
  local port="$REDIS_PORT" pid="$REDIS_PID" dir="$REDIS_DIR" url="$RLOCK_URL" i
  start_redis --maxclients 4
  rl 0 acquire crowded -t 1s
  for ((i = 0; i < 4; i++)); do bg_rlock "w$i" run -w 30s -t 1500ms crowded -- sleep 1.3; done
  for ((i = 0; i < 4; i++)); do bg_wait "w$i" 0 30; done
  # Commands that end before their first renewal: the release goes over the
  # connection the lock was taken on, not a new one the full server refuses
  # ("could not release lock ... for certain", the lock left to expire).
  for ((i = 0; i < 4; i++)); do bg_rlock "s$i" run -w 30s -t 1500ms short -- sleep 0.3; done
  for ((i = 0; i < 4; i++)); do
    bg_wait "s$i" 0 30
    refute_stderr --partial "could not release"
  done
  export REDIS_PORT="$port" REDIS_PID="$pid" REDIS_DIR="$dir" RLOCK_URL="$url"
}
