#!/usr/bin/env bats
# Reconnecting and retrying against a real server: a connection the server
# closed while idle, transient refusals (BUSY, LOADING), and what a missing
# password looks like.

load helpers

teardown() {
  if [[ -f "$BATS_TEST_TMPDIR/frozen" ]]; then kill -CONT "$(<"$BATS_TEST_TMPDIR/frozen")" || true; fi
  release_client_slot
  # A busy script left by a failed test would make every later test BUSY.
  rcli SCRIPT KILL >/dev/null 2>&1 || true
  rcli CONFIG SET busy-reply-threshold 5000 >/dev/null 2>&1 || true
  rcli CONFIG SET timeout 0 >/dev/null 2>&1 || true
  kill_bg_pids
}

@test "reconnect: the release after a command that outlived the server's idle timeout frees the lock at once" {
  rcli CONFIG SET timeout 1 >/dev/null
  rl 0 run -t 30s idle -- sleep 3
  refute_stderr --partial warning
  # Free now, not in 30 s.
  rl 1 status idle
}

@test "reconnect: --min-hold after an idle period still keeps the lock for the rest of the hold" {
  rcli CONFIG SET timeout 1 >/dev/null
  rl 0 run -t 5s --min-hold 20s idle-hold -- sleep 3
  refute_stderr --partial warning
  rl 0 status idle-hold --json
  # Renewed to the rest of --min-hold (about 17 s), beyond the 5 s TTL.
  assert_greater "$(json 'd["holders"][0]["ttl_ms"]')" 10000
}

@test "reconnect: the heartbeat renews across an idle timeout shorter than its interval" {
  rcli CONFIG SET timeout 1 >/dev/null
  # Renewals every 1 s with connections the server closes after 1 s idle;
  # the lock must stay held for the whole 4 s command.
  rl 0 run -t 3s idle-beat -- sleep 4
  refute_stderr --partial warning
}

@test "retry: acquire rides out a BUSY script instead of exiting 76" {
  rcli CONFIG SET busy-reply-threshold 100 >/dev/null
  # A script that keeps the server busy for 2 s.
  rcli EVAL "local t = tonumber(redis.call('TIME')[1]) + 2
    while tonumber(redis.call('TIME')[1]) < t do end" 0 >/dev/null &
  local busy=$!
  sleep 0.5
  rl 0 acquire busy -n
  wait "$busy" || true
}

@test "retry: status of every lock rides out a BUSY script as status NAME does" {
  rl 0 acquire listed -n
  rcli CONFIG SET busy-reply-threshold 100 >/dev/null
  rcli EVAL "local t = tonumber(redis.call('TIME')[1]) + 2
    while tonumber(redis.call('TIME')[1]) < t do end" 0 >/dev/null &
  local busy=$!
  sleep 0.5
  rl 0 status
  assert_output --partial listed
  rl 0 status --json
  assert_output --partial '"listed"'
  wait "$busy" || true
}

@test "retry: a server still BUSY at the deadline is reported as such (76)" {
  rcli CONFIG SET busy-reply-threshold 100 >/dev/null
  rcli EVAL "local t = tonumber(redis.call('TIME')[1]) + 8
    while tonumber(redis.call('TIME')[1]) < t do end" 0 >/dev/null &
  local busy=$!
  sleep 0.5
  rl 76 acquire busy2 -n
  # After the 5 s command timeout (3 s to 9.999 s: no timing is tight on a
  # shared machine): how long the server refused, not a last backoff slice.
  assert_stderr --regexp "^rlock: error: redis://127\.0\.0\.1:[0-9]+/0 still answers BUSY after [3-9](\.[0-9]+)?s: BUSY "
  rcli SCRIPT KILL >/dev/null
  wait "$busy" || true
}

# take_client_slot: lowers maxclients to 1 and holds that one connection
# (bash's /dev/tcp), so every new connection is refused with "ERR max number
# of clients reached". release_client_slot undoes it.
take_client_slot() {
  rcli CONFIG SET maxclients 1 >/dev/null
  exec {CLIENT_SLOT}<>"/dev/tcp/127.0.0.1/$REDIS_PORT"
  # The held connection answers: the server counts it.
  printf 'PING\r\n' >&"$CLIENT_SLOT"
  local pong
  read -r -t 5 pong <&"$CLIENT_SLOT"
  [[ "$pong" == +PONG* ]]
}

release_client_slot() {
  if [[ -n "${CLIENT_SLOT:-}" ]]; then
    exec {CLIENT_SLOT}>&-
    CLIENT_SLOT=
    until_ok 50 rcli CONFIG SET maxclients 10000
  fi
}

@test "retry: a server at maxclients is out of reach (69) and says so" {
  take_client_slot
  run redis-cli -p "$REDIS_PORT" PING
  assert_output --partial "max number of clients reached"
  rl 69 status maxed
  assert_stderr --partial "max number of clients reached"
  # The refusal races the pipelined request: the server may have closed the
  # connection before the request arrived ('Connection reset by peer', or
  # the rest of the pipeline unanswered), but its refusal was read first
  # and is the reason given. A refused force was not carried out, so it
  # does not say that it may still be.
  local k
  for ((k = 0; k < 3; k++)); do
    rl 69 acquire maxed
    assert_stderr --partial "max number of clients reached"
    rl 69 run -n maxed -- true
    assert_stderr --partial "max number of clients reached"
    rl 69 release maxed --token 0123456789abcdef0123456789abcdef
    assert_stderr --partial "max number of clients reached"
    rl 69 release maxed --force
    assert_stderr --partial "max number of clients reached"
    refute_stderr --partial "may still be carried out"
  done
}

@test "retry: a queued waiter rides out a restart whose dataset takes seconds to LOAD" {
  # Enough keys that loading them, slowed by key-load-delay, takes seconds.
  rcli EVAL "for i = 1, 20000 do redis.call('SET', 'filler:' .. i, i) end" 0 >/dev/null
  rl 0 acquire -t 60s load
  local token="$output"
  rl_bg waiter run -w 40s load -- true
  wait_waiters load 1
  rcli SAVE >/dev/null
  # Stop the server without removing its directory (and dump.rdb) ...
  kill -TERM "$REDIS_PID"
  local i
  for ((i = 0; i < 100; i++)); do
    kill -0 "$REDIS_PID" 2>/dev/null || break
    nap 0.05
  done
  # ... and start it again on the same port and directory, slowly loading
  # (and answering clients meanwhile, rather than only every 2 MB loaded).
  "${RLOCK_E2E_SERVER:-redis-server}" --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$REDIS_DIR" --save '' \
    --appendonly no --key-load-delay 100 --loading-process-events-interval-bytes 1024 --logfile "$REDIS_DIR/redis.log" </dev/null \
    >/dev/null 2>&1 3>&- &
  export REDIS_PID=$!
  echo "$REDIS_PID $REDIS_DIR" >>"$BATS_FILE_TMPDIR/redis-servers"
  # The server answers LOADING for a while: the waiter must still be waiting.
  local saw_loading=0
  for ((i = 0; i < 200; i++)); do
    if [[ "$(rcli GET probe 2>&1)" == LOADING* ]]; then
      saw_loading=1
    elif ((saw_loading)); then
      break
    fi
    nap 0.05
  done
  ((saw_loading)) || fail "the restarted server never answered LOADING"
  [[ ! -e "$BATS_TEST_TMPDIR/bg.waiter.rc" ]] || fail "the waiter ended during LOADING: $(<"$BATS_TEST_TMPDIR/bg.waiter.err")"
  # The lock survived in dump.rdb; its release lets the waiter in.
  rl 0 release load --token "$token"
  rl_wait waiter 0
}

@test "retry: run's heartbeat rides out a restart within the lease (renewals refused, then answered): exit 0" {
  # A renewal that fails outright (connection refused) is tried again while
  # the lease lasts, not given up after the first: the command runs on.
  bg_rlock job run blip -t 9s -- sleep 7
  local i
  for ((i = 0; i < 50; i++)); do
    "$RLOCK" status blip >/dev/null 2>&1 && break
    nap 0.1
  done
  local held="$EPOCHREALTIME"
  # The lock is kept in dump.rdb across the restart; the server is down
  # across the first renewal (3 s in) and back, 3.6 s in, well before the
  # command would have to go (about 6.5 s in).
  rcli SAVE >/dev/null
  # The server's own pid: a test before may have restarted it (and one that
  # is slow to shut down is waited for: the time counts from `held`).
  local pid
  pid="$(rcli INFO server | tr -d '\r' | sed -n 's/^process_id://p')"
  [[ -n "$pid" ]] || fail "no process_id from the server"
  kill -TERM "$pid"
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    nap 0.05
  done
  nap "$("$PYTHON" -c 'import sys, time; print(max(0.0, float(sys.argv[1]) + 3.6 - time.time()))' "$held")"
  "${RLOCK_E2E_SERVER:-redis-server}" --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$REDIS_DIR" --save '' \
    --appendonly no --logfile "$REDIS_DIR/redis.log" </dev/null >/dev/null 2>&1 3>&- &
  export REDIS_PID=$!
  echo "$REDIS_PID $REDIS_DIR" >>"$BATS_FILE_TMPDIR/redis-servers"
  bg_wait job 0 15
}

@test "auth: a server that needs a password says so, not in Redis' words" {
  rcli CONFIG SET requirepass s3cret >/dev/null
  rl 77 acquire pw -n
  assert_stderr "rlock: error: $RLOCK_URL: this server needs a password: set RLOCK_PASSWORD or --password-file"
  RLOCK_PASSWORD=s3cret rl 0 status
  redis-cli -p "$REDIS_PORT" -a s3cret --no-auth-warning CONFIG SET requirepass '' >/dev/null
}

@test "retry: a server that freezes while a waiter is queued ends -w 2s by its wait, not a command timeout later" {
  rl 0 acquire frozen -t 30s
  # 2 s: on a busy machine the lines below took more than 1 s, and the
  # waiter gave up (75) before the server froze.
  bg_rlock waiter acquire frozen -w 2s -t 5s
  local i
  for ((i = 0; i < 100; i++)); do
    [[ "$(rcli ZCARD 'rlock:{frozen}:q')" == 1 ]] && break
    nap 0.02
  done
  # The server's own pid: a test before may have restarted it.
  local start pid
  pid="$(rcli INFO server | tr -d '\r' | sed -n 's/^process_id://p')"
  [[ -n "$pid" ]] || fail "no process_id from the server"
  echo "$pid" >"$BATS_TEST_TMPDIR/frozen"
  start="$(now_ms)"
  kill -STOP "$pid"
  bg_wait waiter 69 10
  local took=$(($(now_ms) - start))
  kill -CONT "$pid"
  rm "$BATS_TEST_TMPDIR/frozen"
  assert_stderr --partial "timed out"
  # The wait's end (2 s) plus at most k_min_try (1 s) for the answer; before,
  # the block's answer had the whole command timeout (~7 s in all).
  ((took < 4500)) || fail "took ${took} ms after the freeze"
}

@test "retry: a caller that gives up on a frozen server leaves no grant behind when it thaws" {
  # What the caller sent sat in the frozen server's socket and ran when it
  # thawed: the queued waiter's try, or a -n try, took the lock for the
  # whole TTL (30 s here) on behalf of a process that had exited 69.
  rl 0 acquire ghost -t 1500ms
  bg_rlock waiter acquire ghost -w 2s -t 30s
  local i pid
  for ((i = 0; i < 100; i++)); do
    [[ "$(rcli ZCARD 'rlock:{ghost}:q')" == 1 ]] && break
    nap 0.02
  done
  pid="$(rcli INFO server | tr -d '\r' | sed -n 's/^process_id://p')"
  [[ -n "$pid" ]] || fail "no process_id from the server"
  echo "$pid" >"$BATS_TEST_TMPDIR/frozen"
  kill -STOP "$pid"
  bg_wait waiter 69 10
  # A caller that cannot wait, on the same frozen server (the command
  # timeout, 5 s).
  rl 69 acquire ghost-n -n -t 30s
  kill -CONT "$pid"
  rm "$BATS_TEST_TMPDIR/frozen"
  # The holder's 1.5 s lease ended during the freeze: both locks are free.
  rl 1 status ghost
  rl 1 status ghost-n
  rl 0 acquire ghost -n -t 5s
  rl 0 acquire ghost-n -n -t 5s
}

@test "retry: ... also when the server needs a password and the lock is in database 1 (no new connection can be opened to it frozen)" {
  # The parting release went on a new connection, whose AUTH (and SELECT,
  # and TLS handshake) the frozen server never answered: it was never sent.
  # It now goes behind the stuck request, on that request's own stream.
  local password=ghost-pw url
  start_redis --requirepass "$password"
  url="redis://127.0.0.1:$REDIS_PORT/1"
  export RLOCK_PASSWORD="$password"
  rl 0 -u "$url" acquire ghost -t 1500ms
  bg_rlock waiter -u "$url" acquire ghost -w 2s -t 30s
  local i pid
  for ((i = 0; i < 100; i++)); do
    [[ "$(REDISCLI_AUTH="$password" redis-cli -p "$REDIS_PORT" -n 1 ZCARD 'rlock:{ghost}:q')" == 1 ]] && break
    nap 0.02
  done
  pid="$(REDISCLI_AUTH="$password" redis-cli -p "$REDIS_PORT" INFO server | tr -d '\r' | sed -n 's/^process_id://p')"
  [[ -n "$pid" ]] || fail "no process_id from the server"
  echo "$pid" >"$BATS_TEST_TMPDIR/frozen"
  kill -STOP "$pid"
  bg_wait waiter 69 10
  kill -CONT "$pid"
  rm "$BATS_TEST_TMPDIR/frozen"
  rl 1 -u "$url" status ghost
  rl 0 -u "$url" acquire ghost -n -t 5s
  unset RLOCK_PASSWORD
  stop_redis
}
