#!/usr/bin/env bats
# Fences never go backwards: the next fence is max(counter + 1, server TIME
# in µs), so it stays above every earlier one for the name also when Redis
# comes back without its data, after a reload, and when the counter was set
# ahead of the clock.

load helpers

teardown() {
  kill_bg_pids
}

# server_us: the server's TIME in microseconds.
server_us() {
  local t
  t="$(rcli TIME)" || return
  local -a parts
  mapfile -t parts <<<"$t"
  echo $((parts[0] * 1000000 + parts[1]))
}

# fence_of_acquire NAME [ARGS...]: acquires NAME (-n, --json) and prints the
# fence; fails the test if it was not granted.
fence_of_acquire() {
  local name="$1"
  shift
  rl 0 acquire "$name" -n --json "$@"
  json 'd["fence"]'
}

# restart_same_port DIR [redis-server args...]: stops the server of the last
# start_redis and starts it again on its port, in DIR (a fresh directory
# means without its data).
restart_same_port() {
  local dir="$1"
  shift
  _stop_pid "$REDIS_PID"
  _launch_redis "$dir" --port "$REDIS_PORT" "$@" || fail "redis did not come back on port $REDIS_PORT"
  export REDIS_PID="$_REDIS_PID" REDIS_DIR="$dir" REDIS_SOCK="$dir/redis.sock"
}

@test "fence: strictly increasing across grants, releases, a handoff, semaphore and shared holders" {
  local prev=0 f i
  for i in 1 2 3; do
    f="$(fence_of_acquire seq -t 10s)"
    assert_greater "$f" "$prev"
    prev="$f"
    rl 0 release seq --force
  done
  # A handoff: the queued waiter is granted on release, above the holder.
  rl 0 acquire seq -t 10s --json
  local token
  token="$(json 'd["token"]')"
  f="$(json 'd["fence"]')"
  assert_greater "$f" "$prev"
  prev="$f"
  rl_bg waiter acquire seq -w 10s --json
  wait_waiters seq 1
  rl 0 release seq --token "$token"
  rl_wait waiter 0
  f="$(json 'd["fence"]')"
  assert_greater "$f" "$prev"
  prev="$f"
  rl 0 release seq --force
  # Semaphore and shared holders draw from the same counter.
  for i in 1 2; do
    f="$(fence_of_acquire seq -l 2)"
    assert_greater "$f" "$prev"
    prev="$f"
  done
  rl 0 release seq --force
  for i in 1 2; do
    f="$(fence_of_acquire seq --shared)"
    assert_greater "$f" "$prev"
    prev="$f"
  done
}

@test "fence: at least the server's TIME in µs at the grant, and stored exactly as returned" {
  local before after f
  before="$(server_us)"
  f="$(fence_of_acquire clocked)"
  after="$(server_us)"
  # before <= f <= after
  assert_greater "$f" "$((before - 1))"
  assert_greater "$((after + 1))" "$f"
  # The counter, the holder's record and status all carry the same digits
  # (no exponent form, no rounding).
  assert_equal "$(rcli GET 'rlock:{clocked}:f')" "$f"
  rl 0 status clocked --json
  assert_equal "$(json 'd["fence"]')" "$f"
  assert_equal "$(json 'd["holders"][0]["fence"]')" "$f"
  # The next acquisition accepts what this one stored.
  rl 0 release clocked --force
  assert_greater "$(fence_of_acquire clocked)" "$f"
}

@test "fence: greater after Redis restarts without its data" {
  local f i
  # A server of this test's own, since it is restarted.
  start_redis
  # Several grants first, so that a counter starting again would be behind.
  for i in 1 2 3; do
    f="$(fence_of_acquire lost -t 60s)"
    rl 0 release lost --force
  done
  restart_same_port "$(_redis_dir)"
  assert_equal "$(rcli DBSIZE)" 0
  assert_greater "$(fence_of_acquire lost)" "$f"
}

@test "fence: a counter ahead of the clock is respected (+1), also across DEBUG RELOAD and an AOF restart" {
  local ahead
  start_redis --enable-debug-command local
  ahead=$(($(server_us) + 10 ** 12))
  rcli SET 'rlock:{ahead}:f' "$ahead" >/dev/null
  assert_equal "$(fence_of_acquire ahead)" "$((ahead + 1))"
  rl 0 release ahead --force

  rcli DEBUG RELOAD >/dev/null
  assert_equal "$(fence_of_acquire ahead)" "$((ahead + 2))"
  rl 0 release ahead --force

  # The same with AOF: the counter comes back from the file.
  rcli CONFIG SET appendonly yes >/dev/null
  # Wait (bounded) for the AOF rewrite that CONFIG SET started.
  local i
  for ((i = 0; i < 100; i++)); do
    [[ "$(rcli INFO persistence)" == *"aof_rewrite_in_progress:0"* &&
      "$(rcli INFO persistence)" != *"aof_rewrite_scheduled:1"* ]] && break
    nap 0.05
  done
  assert_equal "$(fence_of_acquire ahead)" "$((ahead + 3))"
  rl 0 release ahead --force
  restart_same_port "$REDIS_DIR" --appendonly yes
  assert_equal "$(rcli GET 'rlock:{ahead}:f')" "$((ahead + 3))"
  assert_equal "$(fence_of_acquire ahead)" "$((ahead + 4))"
}

@test "fence: a counter that could not grow exactly as a double (2^53 - 1 and beyond) is refused" {
  # The largest counter that still gives an exact next fence.
  rcli SET 'rlock:{edge}:f' 9007199254740990 >/dev/null
  assert_equal "$(fence_of_acquire edge)" 9007199254740991
  rl 0 release edge --force
  # Now the next fence would be 2^53, where doubles stop being exact.
  rl 76 acquire edge -n
  assert_stderr --partial 'fence counter'
  assert_equal "$(rcli GET 'rlock:{edge}:f')" 9007199254740991
  rcli SET 'rlock:{edge}:f' 12345678901234567 >/dev/null
  rl 76 acquire edge -n
}
