#!/usr/bin/env bats
# Credentials through Sentinel: a master with its own password, and one
# Sentinel with another (requirepass). The URL's password is the master's;
# the Sentinel's comes from --sentinel-password-file or
# RLOCK_SENTINEL_PASSWORD, and is never passed on to a command.

load helpers

setup_file() {
  start_redis --requirepass master-secret
  local dir port
  dir="$BATS_FILE_TMPDIR/sentinel"
  mkdir -p "$dir"
  port="$(free_port)"
  cat >"$dir/sentinel.conf" <<EOF
port $port
bind 127.0.0.1
daemonize no
dir $dir
logfile $dir/sentinel.log
requirepass sentinel-secret
sentinel resolve-hostnames no
sentinel monitor guarded 127.0.0.1 $REDIS_PORT 1
sentinel auth-pass guarded master-secret
EOF
  "${RLOCK_E2E_SERVER:-redis-server}" "$dir/sentinel.conf" --sentinel </dev/null >"$dir/stdout.log" 2>&1 3>&- &
  echo "$!" >"$dir/pid"
  local i
  for ((i = 0; i < 100; i++)); do
    [[ "$(redis-cli -p "$port" -a sentinel-secret --no-auth-warning PING 2>/dev/null)" == PONG ]] && break
    nap 0.1
  done
  export SENTINEL_PORT="$port"
  export RLOCK_URL="redis-sentinel://127.0.0.1:$port/0#guarded"
  echo master-secret >"$BATS_FILE_TMPDIR/master.pass"
  echo sentinel-secret >"$BATS_FILE_TMPDIR/sentinel.pass"
  echo wrong >"$BATS_FILE_TMPDIR/wrong.pass"
  chmod 600 "$BATS_FILE_TMPDIR"/*.pass
}

teardown_file() {
  kill "$(<"$BATS_FILE_TMPDIR/sentinel/pid")" 2>/dev/null || true
  stop_all_redis
}

setup() {
  rcli -a master-secret --no-auth-warning FLUSHALL >/dev/null
  P="$BATS_FILE_TMPDIR"
}

@test "sentinel auth: without the Sentinel's password, exit 77 naming the Sentinel" {
  rl 77 --password-file "$P/master.pass" acquire a -n
  # The password it wants is the Sentinels', not the master's given here.
  assert_stderr "rlock: error: redis://127.0.0.1:$SENTINEL_PORT/0 (a Sentinel) needs a password: set RLOCK_SENTINEL_PASSWORD or --sentinel-password-file"
}

@test "sentinel auth: every Sentinel refusing is said of them all, not of the last one asked" {
  # Two entries for the one Sentinel (127.0.0.1 and localhost): both refuse.
  # Before, the message named the last one asked only (probe K).
  RLOCK_URL="redis-sentinel://127.0.0.1:$SENTINEL_PORT,localhost:$SENTINEL_PORT/0#guarded" \
    rl 77 --password-file "$P/master.pass" acquire a -n
  assert_stderr --regexp "^rlock: error: every Sentinel refused the credentials \(2 asked\); redis://[a-z0-9.]+:$SENTINEL_PORT/0 \(a Sentinel\) needs a password"
}

@test "sentinel auth: a wrong Sentinel password is 77 too" {
  rl 77 --password-file "$P/master.pass" --sentinel-password-file "$P/wrong.pass" acquire a -n
  assert_stderr --partial "(the Sentinels' password is --sentinel-password-file or RLOCK_SENTINEL_PASSWORD)"
}

@test "sentinel auth: one Sentinel refusing while the others do not answer is an outage (69), not 77" {
  start_hung_server
  # A waiter that asks again after a short outage of the good Sentinels
  # must not take one refusal for the answer of all (it gave up, 77).
  RLOCK_URL="redis-sentinel://127.0.0.1:$HUNG_PORT,127.0.0.1:$SENTINEL_PORT/0#guarded" \
    rl 69 --connect-timeout 1s --password-file "$P/master.pass" \
    --sentinel-password-file "$P/wrong.pass" acquire a -n
  assert_stderr --partial "no master 'guarded' found through the Sentinels"
  assert_stderr --partial "(the Sentinels' password is --sentinel-password-file"
  stop_hung_server
}

@test "sentinel auth: --sentinel-password-file and RLOCK_SENTINEL_PASSWORD both work" {
  rl 0 --password-file "$P/master.pass" --sentinel-password-file "$P/sentinel.pass" acquire a -n
  RLOCK_SENTINEL_PASSWORD=sentinel-secret rl 0 --password-file "$P/master.pass" acquire b -n
  RLOCK_SENTINEL_PASSWORD=sentinel-secret RLOCK_PASSWORD=master-secret rl 0 status a
}

@test "sentinel auth: the Sentinel's password is not the master's (and the other way round)" {
  # The master's password in the URL, none for the Sentinel: refused by the Sentinel.
  RLOCK_URL="redis-sentinel://:master-secret@127.0.0.1:$SENTINEL_PORT/0#guarded" \
    rl 77 acquire c -n
  # The Sentinel's password only: refused by the master.
  RLOCK_SENTINEL_PASSWORD=sentinel-secret rl 77 acquire c -n
}

@test "sentinel auth: the command run gets neither password" {
  RLOCK_SENTINEL_PASSWORD=sentinel-secret RLOCK_PASSWORD=master-secret rl 0 run env-check -- env
  refute_output --partial sentinel-secret
  refute_output --partial master-secret
  assert_output --partial "RLOCK_URL=redis-sentinel://127.0.0.1:$SENTINEL_PORT/0#guarded"
}

@test "sentinel auth: a Sentinel whose ACL lacks the command is 77, and not blamed on the password" {
  redis-cli -p "$SENTINEL_PORT" -a sentinel-secret --no-auth-warning ACL SETUSER default '-sentinel|get-master-addr-by-name' >/dev/null
  rl 77 --password-file "$P/master.pass" --sentinel-password-file "$P/sentinel.pass" acquire a -n
  redis-cli -p "$SENTINEL_PORT" -a sentinel-secret --no-auth-warning ACL SETUSER default +@all >/dev/null
  assert_stderr --partial "NOPERM"
  assert_stderr --partial "(a Sentinel's ACL)"
  refute_stderr --partial "password is"
}
