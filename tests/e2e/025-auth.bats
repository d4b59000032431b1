#!/usr/bin/env bats
# Passwords and ACL users (77 on failure); no secret ever appears in output.

load helpers

PASSWORD=s3cret-default-pw
USER_PASSWORD=s3cret-locker-pw

setup_file() {
  start_redis --requirepass "$PASSWORD"
  # A lock-only user: keys under the default prefix, any channel.
  # Checked: the tests that expect this user to be refused would pass
  # without it.
  [[ "$(acli ACL SETUSER locker on ">$USER_PASSWORD" '~rlock:*' '&*' '+@all')" == OK ]]
}

# redis-cli as the default user of this file's server.
acli() {
  REDISCLI_AUTH="$PASSWORD" redis-cli -p "$REDIS_PORT" "$@" </dev/null
}

setup() {
  acli FLUSHALL >/dev/null
}

# Fails if a password of this file shows up on stdout or stderr.
refute_secrets() {
  refute_output --partial s3cret
  refute_stderr --partial s3cret
}

@test "auth: no password against a server that requires one exits 77" {
  rl 77 acquire pw -n
  refute_secrets
}

@test "auth: a wrong password in RLOCK_PASSWORD exits 77" {
  RLOCK_PASSWORD=s3cret-wrong rl 77 acquire pw -n
  assert_stderr --regexp '^rlock: error: '
  refute_secrets
}

@test "auth: a wrong password in --password-file exits 77" {
  echo s3cret-wrong >"$BATS_TEST_TMPDIR/pw"
  rl 77 --password-file "$BATS_TEST_TMPDIR/pw" acquire pw -n
  refute_secrets
}

@test "auth: the right password in RLOCK_PASSWORD works" {
  RLOCK_PASSWORD="$PASSWORD" rl 0 acquire pw
  local token="$output"
  refute_stderr --partial s3cret
  RLOCK_PASSWORD="$PASSWORD" rl 0 release pw --token "$token"
}

@test "auth: the right password in --password-file works" {
  echo "$PASSWORD" >"$BATS_TEST_TMPDIR/pw"
  rl 0 --password-file "$BATS_TEST_TMPDIR/pw" acquire pw
  refute_secrets
}

@test "auth: the right password in REDISCLI_AUTH works" {
  REDISCLI_AUTH="$PASSWORD" rl 0 acquire pw
  refute_stderr --partial s3cret
}

@test "auth: a password in the URL works but warns that it is on the command line" {
  rl 0 -u "redis://:$PASSWORD@127.0.0.1:$REDIS_PORT/0" acquire pw
  refute_secrets
  local output="${stderr,,}"
  assert_output --partial password
  assert_output --regexp 'command.line|argv'
}

@test "auth: a wrong password in the URL exits 77 and is never printed" {
  rl 77 -u "redis://:s3cret-wrong@127.0.0.1:$REDIS_PORT/0" acquire pw -n
  refute_secrets
}

@test "auth: an ACL user with --user and its password works" {
  RLOCK_PASSWORD="$USER_PASSWORD" rl 0 --user locker acquire acl
  local token="$output"
  RLOCK_PASSWORD="$USER_PASSWORD" rl 0 --user locker status acl
  RLOCK_PASSWORD="$USER_PASSWORD" rl 0 --user locker release acl --token "$token"
  refute_secrets
}

@test "auth: a command-line or RLOCK_URL URL's user and password beat the config file's user and password-file" {
  local conf="$BATS_TEST_TMPDIR/rlock.conf" pw="$BATS_TEST_TMPDIR/pw" url
  (umask 077 && echo s3cret-wrong >"$pw" && printf 'user = default\npassword-file = %s\n' "$pw" >"$conf")
  url="redis://locker:$USER_PASSWORD@127.0.0.1:$REDIS_PORT/0"
  rl 1 --config "$conf" -u "$url" status acl-order
  RLOCK_URL="$url" rl 1 --config "$conf" status acl-order
  # Only the user from the URL: the password from --password-file.
  (umask 077 && echo "$USER_PASSWORD" >"$BATS_TEST_TMPDIR/user-pw")
  rl 1 --config "$conf" -u "redis://locker@127.0.0.1:$REDIS_PORT/0" \
    --password-file "$BATS_TEST_TMPDIR/user-pw" status acl-order
  # --user still beats the URL's user, and a URL in the config file comes
  # after its own user and password-file.
  rl 77 --config "$conf" --user default -u "$url" status acl-order
  printf 'url = %s\n' "$url" >>"$conf"
  RLOCK_URL='' rl 77 --config "$conf" status acl-order
  refute_secrets
}

@test "auth: an ACL user with a wrong password exits 77" {
  RLOCK_PASSWORD="$PASSWORD" rl 77 --user locker acquire acl -n
  refute_secrets
}

@test "auth: an ACL user without access to the lock's keys exits 77, and is told which keys" {
  RLOCK_PASSWORD="$USER_PASSWORD" rl 77 --user locker --prefix elsewhere: acquire acl -n
  assert_stderr --partial "this lock's keys are elsewhere:{acl}:*: the user's ACL must allow them, for writing too (~PATTERN)"
  refute_secrets
  RLOCK_PASSWORD="$USER_PASSWORD" rl 77 --user locker --prefix elsewhere: run -n acl -- true
  assert_stderr --partial "this lock's keys are elsewhere:{acl}:*"
  RLOCK_PASSWORD="$USER_PASSWORD" rl 77 --user locker --prefix elsewhere: status acl
  assert_stderr --partial "this lock's keys are elsewhere:{acl}:*"
}

@test "auth: a listing refused by the ACL names the server, as every other refusal does" {
  [[ "$(acli ACL SETUSER narrow on ">$USER_PASSWORD" '~rlock:{deploy-*}:*' '&*' '+@all')" == OK ]]
  RLOCK_PASSWORD="$PASSWORD" rl 0 acquire other -t 30s
  RLOCK_PASSWORD="$USER_PASSWORD" rl 77 --user narrow status
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "rlock: error: redis://127.0.0.1:$REDIS_PORT/0: NOPERM"
  refute_secrets
}

# A server whose AUTH is renamed away answers "unknown command", and Redis
# echoes the first arguments of an unknown command: the password (and the
# user); where EVAL is renamed, the lock script's source. Neither is ever
# said back (the server was started within the test, without a password).
@test "auth: a server with AUTH or EVAL renamed away: refused, with no password or script echoed" {
  local port="$REDIS_PORT" pid="$REDIS_PID" dir="$REDIS_DIR" url="$RLOCK_URL"
  start_redis --rename-command AUTH '' --rename-command EVAL ''
  local renamed="$RLOCK_URL"
  export REDIS_PORT="$port" REDIS_PID="$pid" REDIS_DIR="$dir" RLOCK_URL="$url"
  RLOCK_URL="$renamed" RLOCK_PASSWORD=s3cret-renamed rl 77 acquire renamed -n
  assert_stderr --partial "unknown command 'AUTH'"
  refute_secrets
  RLOCK_URL="$renamed" rl 77 --user locker --password-file <(echo s3cret-renamed) acquire renamed -n
  refute_secrets
  refute_stderr --partial locker
  # No password: the EVAL fallback after NOSCRIPT is refused (76), its
  # words without the script.
  RLOCK_URL="$renamed" rl 76 acquire renamed -n
  assert_stderr --partial "unknown command 'EVAL'"
  refute_stderr --partial 'rlock: every operation'
  refute_stderr --partial 'with args'
}

# rlock opens a password file anew, so a descriptor the caller passed it
# through (`/dev/stdin < FILE`, `/dev/fd/7 7< FILE`) still read the password
# from its start, and run's command inherited it: `cat` printed it.
@test "auth: a password file passed as an inherited descriptor does not reach run's command" {
  echo "$PASSWORD" >"$BATS_TEST_TMPDIR/pw"
  chmod 600 "$BATS_TEST_TMPDIR/pw"
  run bash -c '"$0" --password-file /dev/stdin run pw-stdin -- sh -c "cat; echo end" <"$1"' \
    "$RLOCK" "$BATS_TEST_TMPDIR/pw"
  assert_success
  assert_output end
  run bash -c '"$0" --password-file /dev/fd/7 run pw-fd -- sh -c \
    "if [ -e /proc/\$\$/fd/7 ]; then echo fd 7 is open; cat <&7; fi; echo end" 7<"$1"' \
    "$RLOCK" "$BATS_TEST_TMPDIR/pw"
  assert_success
  assert_output end
  # The same file open on another descriptor too (the caller's copy).
  run bash -c '"$0" --password-file "$1" run pw-copy -- sh -c \
    "if [ -e /proc/\$\$/fd/8 ]; then echo fd 8 is open; fi; cat; echo end" 8<"$1" <"$1"' \
    "$RLOCK" "$BATS_TEST_TMPDIR/pw"
  assert_success
  assert_output end
  # A pipe is drained by the read, and a command's own stdin is untouched
  # when the password comes from a file.
  run bash -c 'echo "$1" | "$0" --password-file /dev/stdin run pw-pipe -- sh -c "cat; echo end"' \
    "$RLOCK" "$PASSWORD"
  assert_success
  assert_output end
  run bash -c 'echo input | "$0" --password-file "$1" run pw-file -- cat' \
    "$RLOCK" "$BATS_TEST_TMPDIR/pw"
  assert_success
  assert_output input
}

# A URL rlock cannot parse was echoed whole: a REDIS_URL set for another
# program (StackExchange.Redis options, a ;-option, a fragment) printed its
# password into cron mail and CI logs.
@test "auth: a URL that does not parse is named without what may be a password" {
  for url in 'cache.internal:6380,password=s3cret-se,ssl=True' 'redis://cache/0;password=s3cret-semi' \
    'redis://cache:6379/0#s3cret-fragment'; do
    REDIS_URL="$url" RLOCK_URL= rl 64 status
    assert_stderr --partial 'rlock: error: REDIS_URL: invalid URL '
    refute_secrets
  done
  printf 'url = cache:6379,password=s3cret-file,ssl=True\n' >"$BATS_TEST_TMPDIR/conf"
  RLOCK_URL= rl 78 --config "$BATS_TEST_TMPDIR/conf" status
  assert_stderr --partial 'invalid URL cache:6379,password...'
  refute_secrets
}
