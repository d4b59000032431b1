#!/usr/bin/env bats
# rlock run when the lock is lost: forced release, a frozen server, a server
# restarted empty. The command (and its children) must be terminated, and
# dead before the lease could have expired; rlock exits 79.

load helpers

setup() {
  flush_redis
  M="$BATS_TEST_TMPDIR"
}

teardown() {
  # A frozen server must not stay frozen for the next test, and nothing a
  # failed test started may keep running.
  kill -CONT "$REDIS_PID" 2>/dev/null || true
  kill_bg_pids
}

# A command that records when SIGTERM reached it (ns), starts a background
# grandchild (its pid in $M/grandchild.pid), and otherwise runs for 30 s.
timed_command() {
  echo "trap 'date +%s%N >\"$M/trapped\"; exit 143' TERM
        sleep 60 & echo \$! >\"$M/grandchild.pid\"
        touch \"$M/ready\"
        sleep 30 & wait"
}

@test "run: release --force terminates the command and its children; exit 79" {
  bg_rlock job run forced -t 3s -- bash -c "$(timed_command)"
  wait_for_file "$M/ready"
  rl 0 release forced --force
  # Noticed at the next renewal, TTL/3 = 1s later.
  bg_wait job 79 5
  # Said by the server at that renewal (not found out at the lease's end,
  # as a renewal that went unanswered would be).
  assert_stderr --partial "rlock: error: lost lock 'forced': lock 'forced' is not held by this token"
  assert_equal "${#stderr_lines[@]}" 1
  [[ -s "$M/trapped" ]] || fail "the command did not get SIGTERM"
  # The backgrounded grandchild is in the command's process group: gone too.
  local grandchild
  grandchild="$(<"$M/grandchild.pid")"
  if running "$grandchild"; then
    kill -KILL "$grandchild"
    fail "the command's child survived the lock loss"
  fi
}

@test "run: release --force reaches the command within a round trip or so, not at the next renewal" {
  # A 30 s TTL: renewals every 10 s. Before, the evicted command ran on
  # until then, beside whoever took the lock (probes E and F); the run now
  # waits on its wake list between renewals, where the force pushes.
  local forced_ns trap_ns waited_ms
  bg_rlock job run forced-fast -t 30s -- bash -c "$(timed_command)"
  wait_for_file "$M/ready"
  # Past the heartbeat's start (100 ms into the command) and its first wait.
  nap 0.5
  forced_ns="$(date +%s%N)"
  rl 0 release forced-fast --force
  bg_wait job 79 15
  assert_stderr --partial "lock 'forced-fast' is not held by this token"
  trap_ns="$(<"$M/trapped")"
  waited_ms=$(((trap_ns - forced_ns) / 1000000))
  echo "# forced -> SIGTERM: ${waited_ms} ms" >&3
  ((waited_ms < 3000)) || fail "the command got SIGTERM ${waited_ms} ms after the force"
  # Forced as soon as the command is up, perhaps before the heartbeat
  # waits: the word stays in the list, and its first wait finds it.
  rm -f "$M/ready" "$M/trapped"
  bg_rlock early run forced-early -t 30s -- bash -c "$(timed_command)"
  wait_for_file "$M/ready"
  forced_ns="$(date +%s%N)"
  rl 0 release forced-early --force
  bg_wait early 79 15
  trap_ns="$(<"$M/trapped")"
  waited_ms=$(((trap_ns - forced_ns) / 1000000))
  ((waited_ms < 3000)) || fail "forced early: SIGTERM ${waited_ms} ms after the force"
}

@test "run --json: a lock lost while the command ran still gets its document, saying why" {
  bg_rlock job --json run forced-json -t 3s -- bash -c "$(timed_command)"
  wait_for_file "$M/ready"
  rl 0 release forced-json --force
  bg_wait job 79 5
  assert_json
  assert_equal "$(json 'd["name"], d["exit_code"], d["signal"], d["released"]')" "('forced-json', 143, None, False)"
  assert_equal "$(json 'd["lost"] is None')" false
  assert_stderr --partial "rlock: error: lost lock 'forced-json': $(json 'd["lost"]')"
}

@test "run: a frozen server: the command gets SIGTERM before the lease could expire" {
  local ttl_ms=2000 stop_ns trap_ns
  bg_rlock job run frozen -t 2s -- bash -c "$(timed_command)"
  wait_for_file "$M/ready"
  stop_ns="$(date +%s%N)"
  kill -STOP "$REDIS_PID"
  bg_wait job 79 10
  kill -CONT "$REDIS_PID"
  assert_stderr --partial "rlock: error: lost lock 'frozen': could not renew it"
  trap_ns="$(<"$M/trapped")"
  # The lease was last extended before the freeze, so it ends at the latest
  # TTL after it: the command must have been told to stop before that.
  assert_greater "$((stop_ns + ttl_ms * 1000000))" "$trap_ns"
  local grandchild
  grandchild="$(<"$M/grandchild.pid")"
  if running "$grandchild"; then
    kill -KILL "$grandchild"
    fail "the command's child survived the lock loss"
  fi
}

@test "run: after a frozen server, the renewal it had queued does not keep the lock for the dead command" {
  # The heartbeat's renewal reached the frozen server's socket and runs when
  # it thaws, inside the old lease: it extended the lease by a whole TTL
  # for a holder that had exited 79, and everybody else waited it out.
  bg_rlock job run queued -t 2s -- bash -c "$(timed_command)"
  wait_for_file "$M/ready"
  kill -STOP "$REDIS_PID"
  bg_wait job 79 10
  kill -CONT "$REDIS_PID"
  # Whatever order the thawed server takes the two in, the lock ends free:
  # the renewal finds it released, or the release comes after it.
  rl 1 status queued
  rl 0 acquire queued -t 5s
}

@test "run: a server restarted empty is a lost lock (79), not a silent re-acquire" {
  # A server of its own: the file's server must keep its pid for the others.
  start_redis
  local port="$REDIS_PORT" dir
  bg_rlock job run restarted -t 3s -- bash -c "$(timed_command)"
  wait_for_file "$M/ready"
  stop_redis
  dir="$(_redis_dir)"
  _launch_redis "$dir" --port "$port"
  REDIS_PID="$_REDIS_PID"
  bg_wait job 79 10
  assert_stderr --partial "rlock: error: lost lock 'restarted': "
  [[ -s "$M/trapped" ]] || fail "the command did not get SIGTERM"
  rl 1 status restarted
  stop_redis
}

@test "run: a short outage within the lease is ridden out" {
  bg_rlock job run blip -t 3s -- bash -c "touch '$M/ready'; sleep 2.5"
  wait_for_file "$M/ready"
  # Frozen for 0.8 s: renewals fail or stall, then succeed on a retry long
  # before termination would have to begin (3s - 150ms - 750ms).
  kill -STOP "$REDIS_PID"
  sleep 0.8
  kill -CONT "$REDIS_PID"
  bg_wait job 0 10
  rl 1 status blip
}

@test "run: the lease counts from a renewal's send, not its late reply: the command is dead before another holder gets in" {
  # The first renewal's reply comes 1.5 s late, then the link goes dead.
  # Counted from the reply, the command (which ignores SIGTERM) outlived
  # the lease by about that long, beside the next holder.
  start_reply_proxy late '$5\r\nrenew\r\n' 1.5
  RLOCK_URL="$PROXY_URL" bg_rlock job run late -t 6s --kill-after 1s -- bash -c \
    "trap '' TERM; while :; do date +%s%N >\"$M/alive.t\"; mv \"$M/alive.t\" \"$M/alive\"; sleep 0.01; done"
  wait_for_file "$M/alive"
  # A second client, straight to Redis, takes the lock as soon as it is free.
  local got="" i
  for ((i = 0; i < 750; i++)); do
    if "$RLOCK" acquire late -n -t 10s >/dev/null 2>&1; then
      got="$(date +%s%N)"
      break
    fi
    nap 0.02
  done
  [[ -n "$got" ]] || fail "the lock never came free"
  nap 0.3
  local last
  last="$(<"$M/alive")"
  ((last < got)) || fail "the command was alive $(((last - got) / 1000000)) ms after another holder took the lock"
  grep -q delivered "$M/proxy.log" || fail "the late reply was never delivered: $(<"$M/proxy.log")"
  bg_wait job 79 15
}
