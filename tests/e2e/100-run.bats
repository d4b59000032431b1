#!/usr/bin/env bats
# rlock run: mutual exclusion, exit statuses, parsing, environment, nesting,
# --min-hold / --max-hold, and what status shows meanwhile.

load helpers

# A test that failed before collecting what it started in the background.
teardown() {
  kill_bg_pids
}

# wait_held NAME: waits (up to 10 s) until `status NAME` says held.
wait_held() {
  local i
  for ((i = 0; i < 200; i++)); do
    "$RLOCK" status "$1" >/dev/null 2>&1 && return 0
    nap 0.05
  done
  fail "lock '$1' was never taken"
}

# --- mutual exclusion ----------------------------------------------------------

@test "run: of ten racing run -n, exactly one runs; the others exit 75 silently" {
  RL_GATE="$BATS_TEST_TMPDIR/go"
  local ran="$BATS_TEST_TMPDIR/ran" i winners=0
  for i in {1..10}; do
    rl_bg "r$i" run race -n -- sh -c "echo $i >>'$ran'; sleep 1"
  done
  touch "$RL_GATE"
  for i in {1..10}; do
    rl_wait "r$i" 0,75
    if ((status == 0)); then winners=$((winners + 1)); fi
    # Busy with -n and stderr not a terminal: silent (cron mails output).
    assert_stderr ''
  done
  assert_equal "$winners" 1
  assert_equal "$(wc -l <"$ran")" 1
}

@test "run: with -E 0 the skipped runs exit 0, and still only one runs" {
  RL_GATE="$BATS_TEST_TMPDIR/go"
  local ran="$BATS_TEST_TMPDIR/ran" i
  for i in {1..10}; do
    rl_bg "r$i" run race0 -n -E 0 -- sh -c "echo $i >>'$ran'; sleep 1"
  done
  touch "$RL_GATE"
  for i in {1..10}; do
    rl_wait "r$i" 0
  done
  assert_equal "$(wc -l <"$ran")" 1
}

@test "run: eight waiting read-modify-write runs lose no update" {
  RL_GATE="$BATS_TEST_TMPDIR/go"
  local counter="$BATS_TEST_TMPDIR/counter" i
  echo 0 >"$counter"
  for i in {1..8}; do
    rl_bg "c$i" run counter -w 30s -- sh -c "v=\$(cat '$counter'); sleep 0.2; echo \$((v + 1)) >'$counter'"
  done
  touch "$RL_GATE"
  for i in {1..8}; do
    rl_wait "c$i" 0
  done
  assert_equal "$(<"$counter")" 8
}

@test "run: a 2s lease is renewed throughout a 7s command; nobody else gets it" {
  local started
  # 2 s, not 1: under ASan on a loaded machine a 1 s lease (renewal budget
  # ~370 ms) was lost once in three full runs.
  rl_bg holder run renewed -t 2s -- sleep 7
  wait_held renewed
  started="$(now_ms)"
  # Well past two TTLs, and stopping short of the command's end.
  while (($(now_ms) - started < 5600)); do
    rl 75 acquire renewed -n
    nap 0.2
  done
  rl_wait holder 0
  rl 1 status renewed
}

# --- exit statuses and I/O -------------------------------------------------------

@test "run: the command's exit status passes through (0, 3, 42)" {
  rl 0 run st -- true
  rl 3 run st -- sh -c 'exit 3'
  rl 42 run st -- sh -c 'exit 42'
  rl 1 status st
}

@test "run: a command that does not exist exits 127 and the lock is released" {
  # `run -127` (not rl): tells bats that 127 is expected here.
  run -127 --separate-stderr timeout -k 5 "$RL_TIMEOUT" "$RLOCK" run missing -- \
    /nonexistent/command-rlock-test
  assert_stderr --partial "rlock: error: cannot run '/nonexistent/command-rlock-test'"
  run -127 --separate-stderr timeout -k 5 "$RL_TIMEOUT" "$RLOCK" run missing -- \
    no-such-command-rlock-test
  rl 1 status missing
}

@test "run: a file that is not executable exits 126 and the lock is released" {
  local file="$BATS_TEST_TMPDIR/not-executable"
  printf '#!/bin/sh\necho hi\n' >"$file"
  chmod 644 "$file"
  rl 126 run noexec -- "$file"
  rl 1 status noexec
}

@test "run: a script without a #! line is run by /bin/sh, as execvp does" {
  local file="$BATS_TEST_TMPDIR/no-shebang"
  printf 'echo "from sh: $1"\n' >"$file"
  chmod 755 "$file"
  rl 0 run noshebang -- "$file" arg
  assert_output "from sh: arg"
  rl 1 status noshebang
}

@test "run: the command starts with the caller's signal mask and ignored set (SIGPIPE not ignored)" {
  # rlock blocks the signals it forwards and ignores SIGPIPE for itself:
  # none of that may reach the command, which gets what rlock was given.
  # /proc shows the mask and the ignored set of the process that execs
  # (grep itself); the same grep without rlock gives the expected lines.
  local expected
  expected="$(timeout -k 5 "$RL_TIMEOUT" grep -E '^Sig(Blk|Ign):' /proc/self/status)"
  rl 0 run sigstate -- grep -E '^Sig(Blk|Ign):' /proc/self/status
  assert_output "$expected"
  # A pipeline in the command ends when its reader does.
  rl 0 run sigpipe -- sh -c 'yes | head -n 1'
  assert_output "y"
}

@test "run: stdin and stdout pass through to the command" {
  rl 0 run io -- cat <<<"hello through rlock"
  assert_output "hello through rlock"
}

@test "run: a command killed by a signal gives 128+N" {
  rl 137 run sig -- sh -c 'kill -KILL $$'
  rl 1 status sig
}

# --- parsing -----------------------------------------------------------------------

@test "run: options after -- belong to the command (-l is not --limit)" {
  rl 0 run parse -- ls -l -d /
  assert_output --regexp '^d.* /$'
}

@test "run: options after the command word belong to the command, even without --" {
  rl 0 run parse ls -l -d /
  assert_output --regexp '^d.* /$'
  rl 0 run parse -t 5s sh -c 'echo "$0 $1"' -t -v
  assert_output "-t -v"
}

@test "run: global options work before and after run" {
  rl 0 -v run parse -- true
  assert_stderr --partial "acquired lock 'parse'"
  rl 0 run -v parse -- true
  assert_stderr --partial "acquired lock 'parse'"
  rl 0 run parse -v -- true
  assert_stderr --partial "acquired lock 'parse'"
  rl 0 run parse -u "$RLOCK_URL" -v true
  assert_stderr --partial "released lock 'parse'"
}

@test "run: -c runs a shell command that sees RLOCK_NAME" {
  rl 0 run shell-lock -c 'echo "name=$RLOCK_NAME"'
  assert_output "name=shell-lock"
}

@test "run: usage errors: no command, both -c and a command, kill-after too long" {
  rl_usage_error run nocmd
  rl_usage_error run both -c 'true' -- true
  rl_usage_error run tight --kill-after 10s --ttl 5s -- true
  assert_stderr --partial "--kill-after"
  assert_stderr --partial "2/3 of the TTL"
  rl_usage_error run bad --kill-after soon -- true
  rl_usage_error run bad --max-hold 0 -- true
}

@test "run: the default kill-after fits even the shortest TTL" {
  # Accepted, not refused as a usage error (64). A sanitizer build on a busy
  # machine may miss a 100 ms lease; that is a lost lock (79), as it should.
  rl 0,79 run short -t 100ms -- true
}

# --- environment -----------------------------------------------------------------

@test "run: the command sees RLOCK_NAME, RLOCK_TOKEN and a growing RLOCK_FENCE" {
  rl 0 run fenced -- sh -c 'echo "$RLOCK_NAME $RLOCK_FENCE $RLOCK_TOKEN"'
  read -r name first token <<<"$output"
  assert_equal "$name" fenced
  assert_regex "$token" '^[0-9a-f]{32}$'
  rl 0 run fenced -- sh -c 'echo "$RLOCK_FENCE"'
  assert_greater "$output" "$first"
}

@test "run: no secret reaches the command's environment" {
  local password=s3cret-run-pw
  start_redis --requirepass "$password"
  export RLOCK_PASSWORD="$password" REDISCLI_AUTH="$password"
  rl 0 run secret -- env
  assert_output --partial "RLOCK_NAME=secret"
  refute_output --partial "RLOCK_PASSWORD"
  refute_output --partial "REDISCLI_AUTH"
  refute_output --partial "$password"
  unset RLOCK_PASSWORD REDISCLI_AUTH
  # A password in the URL: the child gets the URL without it.
  RLOCK_URL="redis://:$password@127.0.0.1:$REDIS_PORT/0" rl 0 run secret -- env
  assert_output --partial "RLOCK_URL=redis://127.0.0.1:$REDIS_PORT/0"
  refute_output --partial "$password"
  stop_redis
}

@test "run: another client's REDIS_URL that rlock cannot read reaches the command when it holds no secret" {
  # RLOCK_URL names the server: REDIS_URL is the job's own setting.
  local url
  for url in 'redis://cache:6379/0?timeout=5' 'valkey://cache:6379' 'redis://valkey:6379/0?timeout=5' \
    'unix:///run/redis/redis.sock?timeout=5'; do
    REDIS_URL="$url" rl 0 run env-url -- sh -c 'echo "${REDIS_URL-unset}"'
    assert_output "$url"
  done
  for url in 'redis://:s3cret@cache:6379/0?timeout=5' 'redis://cache/0?password=s3cret' 'redis://:s3cret' \
    'redis://default:123456' 'redis://cache/0?%70assword=s3cret'; do
    REDIS_URL="$url" rl 0 run env-url -- sh -c 'echo "${REDIS_URL-unset}"'
    assert_output unset
  done
}

# --- nesting -------------------------------------------------------------------------

@test "run: a nested run of the same lock runs at once and releases once" {
  rl 0 run nest -- "$RLOCK" run nest -w 5s -- sh -c 'echo "inner $RLOCK_FENCE"'
  assert_output --regexp '^inner [0-9]+$'
  # The outer run released it, without a "no longer held" complaint.
  assert_stderr ''
  rl 1 status nest
}

@test "run: a stale RLOCK_TOKEN in the environment does not count as holding" {
  RLOCK_NAME=stale RLOCK_TOKEN=0123456789abcdef0123456789abcdef rl 0 run stale -- \
    sh -c 'echo "$RLOCK_TOKEN"'
  # The command runs under a token of its own, not the stale one.
  assert_output --regexp '^[0-9a-f]{32}$'
  refute_output 0123456789abcdef0123456789abcdef
}

# --- min-hold / max-hold ---------------------------------------------------------------

@test "run: --min-hold keeps the lock after a quick command, then it expires" {
  local started
  started="$(now_ms)"
  # 6 s, so that a slow (sanitizer) build on a busy machine still makes both
  # checks inside it; returning within 2.5 s shows rlock did not wait for it.
  rl 0 run minhold --min-hold 6s -- true
  assert_greater 2500 "$(($(now_ms) - started))"
  rl 0 status minhold
  sleep 1.5
  rl 0 status minhold
  while (($(now_ms) - started < 6500)); do sleep 0.1; done
  rl 1 status minhold
}

@test "run: --max-hold terminates the command and exits 79" {
  local started elapsed
  started="$(now_ms)"
  rl 79 run maxhold --max-hold 1s -- sleep 10
  elapsed=$(($(now_ms) - started))
  assert_greater "$elapsed" 900
  assert_greater 4000 "$elapsed"
  assert_stderr --partial "rlock: error: lost lock 'maxhold': held for --max-hold 1s"
  rl 1 status maxhold
}

# --- status -------------------------------------------------------------------------------

@test "run: status shows the running program, and the command line with --show-command" {
  rl_bg holder run shown -- sleep 2.5
  wait_held shown
  rl 0 status shown
  assert_output --partial "sleep"
  refute_output --partial "sleep 2.5"
  rl_wait holder 0
  rl_bg holder --show-command run shown -- sleep 2.5
  wait_held shown
  rl 0 status shown
  assert_output --partial "sleep 2.5"
  rl_wait holder 0
}

@test "run: a standard descriptor closed for rlock is closed for the command too" {
  # As `echo hi >&-` fails to write, so does the command under rlock, rather
  # than writing to the /dev/null rlock held the descriptor on meanwhile.
  run bash -c '"$0" run closed-out -- /bin/echo hi >&-' "$RLOCK"
  assert_equal "$status" 1
  assert_output --partial 'write error'
  run bash -c '"$0" run closed-in -- bash -c "[ -e /proc/self/fd/0 ] && echo open || echo closed" <&-' "$RLOCK"
  assert_equal "$status" 0
  assert_output closed
  # Descriptors that were open stay as they were.
  rl 0 run open-out -- /bin/echo hi
  assert_output hi
}

# --- --json ------------------------------------------------------------------------

@test "run --json: one document after the command's own output: fence, exit code, release" {
  rl 0 --json run json-run -- echo out
  assert_equal "${#lines[@]}" 2
  assert_equal "${lines[0]}" out
  output="${lines[1]}"
  assert_json
  assert_equal "$(json 'd["name"]')" json-run
  assert_equal "$(json 'd["exit_code"]')" 0
  assert_equal "$(json 'd["signal"]')" null
  assert_equal "$(json 'd["released"]')" true
  assert_equal "$(json 'd["lost"]')" null
  assert_equal "$(json 'type(d["fence"]).__name__, type(d["held_ms"]).__name__')" "('int', 'int')"
  [[ "$(json 'd["id"]')" =~ ^[0-9a-f]{8}$ ]]
  rl 1 status json-run

  # The command's exit status and death by a signal; rlock's status stays the command's.
  rl 3 --json run json-run -- sh -c 'exit 3'
  assert_equal "$(json 'd["exit_code"], d["signal"]')" '(3, None)'
  rl 143 --json run json-run -- sh -c 'kill -TERM $$'
  assert_equal "$(json 'd["exit_code"], d["signal"]')" '(None, 15)'
  # --min-hold keeps the lock: not released.
  rl 0 --json run json-kept --min-hold 5s -- true
  assert_equal "$(json 'd["released"]')" false
  rl 0 status json-kept
}

@test "run --json: a run that did not run its command prints nothing on stdout" {
  rl 0 acquire json-busy
  rl 75 --json run json-busy -n -- echo never
  assert_output ''
  rl 127 --json run json-none -- no-such-command-here
  assert_output ''
  assert_stderr "rlock: error: cannot run 'no-such-command-here': No such file or directory"
}

@test "run: a server that may evict the lock's keys (maxmemory with an evicting policy) is warned of once; -q silences it" {
  local port="$REDIS_PORT" pid="$REDIS_PID" dir="$REDIS_DIR" url="$RLOCK_URL" evicting evicting_port
  start_redis --maxmemory 100mb --maxmemory-policy volatile-lru
  evicting="$RLOCK_URL" evicting_port="$REDIS_PORT"
  export REDIS_PORT="$port" REDIS_PID="$pid" REDIS_DIR="$dir" RLOCK_URL="$url"
  # The warning comes from the heartbeat, which starts 100 ms into the command.
  rl 0 -u "$evicting" run -t 3s evicting -- sleep 0.5
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "may evict its keys (maxmemory 104857600 bytes, maxmemory-policy volatile-lru)"
  assert_stderr --partial "noeviction"
  rl 0 -q -u "$evicting" run -t 3s evicting -- sleep 0.5
  assert_equal "$stderr" ""
  # noeviction, or no maxmemory at all (this file's server): nothing to say.
  redis-cli -p "$evicting_port" CONFIG SET maxmemory-policy noeviction >/dev/null
  rl 0 -u "$evicting" run -t 3s evicting -- sleep 0.5
  assert_equal "$stderr" ""
  rl 0 run -t 3s not-evicting -- sleep 0.5
  assert_equal "$stderr" ""
}

# A release carried out whose reply is lost (the connection cut right
# after): rlock sends it again on a new connection, which finds nothing to
# release. That is its own release, not a lost lock (before: "warning: lock
# 'rr' was no longer held when the command ended" and "released":false).
@test "run: a release whose reply is lost is still reported as released" {
  start_reply_proxy drop '$7\r\nrelease\r\n' 1
  RLOCK_URL="$PROXY_URL" rl 0 run --json rr -- true
  # The proxy did drop a reply: otherwise this test would test nothing.
  grep -q dropped "$BATS_TEST_TMPDIR/proxy.log"
  refute_stderr --partial 'no longer held'
  assert_output --partial '"released":true'
  rl 1 status rr
  kill "$(<"$BATS_TEST_TMPDIR/proxy.pid")"
  rm -f "$BATS_TEST_TMPDIR/proxy.pid"
}

# rlock stopped (SIGSTOP) while its command ends, and resumed after the
# lease: the lock ran out before rlock could release it, which is what it
# says (before: "was no longer held when the command ended", as if the lock
# had been lost while the command ran).
@test "run: a lease that ran out while rlock itself was stopped is not called lost while the command ran" {
  # The command ends once rlock is stopped (a gate file), long before the
  # guardian would have to kill it; the lease runs out meanwhile. (It
  # ended after 0.5 s before: a loaded machine could get there before the
  # stop, and then nothing had run out.)
  bg_rlock st run -t 2s st -- sh -c \
    'while [ ! -e "$1/go" ]; do sleep 0.02; done' sh "$BATS_TEST_TMPDIR"
  wait_held st
  kill -STOP "$(<"$BATS_TEST_TMPDIR/st.pid")"
  touch "$BATS_TEST_TMPDIR/go"
  nap 3
  kill -CONT "$(<"$BATS_TEST_TMPDIR/st.pid")"
  bg_wait st 0
  assert_stderr --partial "lock 'st' ran out before it could be released (rlock was held up past its lease)"
  refute_stderr --partial 'no longer held'
}

@test "run: a small stack (ulimit -s 32) is enough, and the lock is free after" {
  # Before: a 17 KB frame on the connection's read path crashed rlock
  # (SIGSEGV) under this limit, at times with the lock taken. A sanitizer
  # runtime needs far more stack than rlock does.
  if readelf -d "$RLOCK" | grep -q 'libasan\|libtsan'; then skip "sanitizer build"; fi
  local i
  for i in 1 2 3 4 5; do
    run bash -c 'ulimit -s 32; exec "$0" run small-stack -- echo ran' "$RLOCK"
    assert_success
    assert_output ran
  done
  rl 1 status small-stack
}
