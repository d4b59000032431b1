#!/usr/bin/env bats
# Config, password and token files: what they may contain, how big they may
# be, and who may write them (they choose where our password goes).

load helpers

# conf TEXT: writes TEXT to a private config file and prints its path.
conf() {
  local file="$BATS_TEST_TMPDIR/rlock.conf"
  (umask 077 && printf '%s\n' "$1" >"$file")
  echo "$file"
}

@test "config: --config naming a directory is a config error" {
  rl 78 --config "$BATS_TEST_TMPDIR" status x
  assert_stderr --partial 'directory'
  RLOCK_CONFIG="$BATS_TEST_TMPDIR" rl 78 status x
}

@test "config: a bad value in the file is a config error naming file:line" {
  local file
  for bad in 'connect-timeout = soon' 'url = ftp://x' 'prefix = a{b' 'tls = maybe'; do
    file="$(conf "# first line
$bad")"
    rl 78 --config "$file" status x
    assert_stderr --regexp "^rlock: error: $file:2: "
    refute_stderr --partial -- '--connect-timeout'
  done
}

@test "config: a trailing # comment is not part of the value" {
  local file
  file="$(conf "url = $RLOCK_URL   # the lock server
connect-timeout = 3s # generous")"
  RLOCK_URL='' rl 0 --config "$file" acquire commented -n
  rl 0 status commented
}

@test "config: /dev/zero and huge files are refused, without hanging" {
  rl 78 --config /dev/zero status x
  head -c 70000 /dev/zero | tr '\0' '#' >"$BATS_TEST_TMPDIR/big.conf"
  chmod 600 "$BATS_TEST_TMPDIR/big.conf"
  rl 78 --config "$BATS_TEST_TMPDIR/big.conf" status x
  assert_stderr --partial '64 KiB'
}

@test "config: a file others can write, or another user owns, is refused" {
  local file
  file="$(conf "url = $RLOCK_URL")"
  chmod 620 "$file"
  rl 78 --config "$file" status x
  assert_stderr --partial "$file"
  assert_stderr --partial 'chmod go-w'
  chmod 602 "$file"
  rl 78 --config "$file" status x
  chmod 600 "$file"
  chown nobody "$file"
  rl 78 --config "$file" status x
  assert_stderr --partial 'owned by another user'
  # The default file obeys the same rules.
  mkdir -p "$HOME/.config/rlock"
  cp "$file" "$HOME/.config/rlock/rlock.conf"
  chmod 666 "$HOME/.config/rlock/rlock.conf"
  rl 78 status x
  rm -r "$HOME/.config/rlock"
}

@test "config: --password-file naming a directory or an empty file is an error" {
  rl 64 --password-file "$BATS_TEST_TMPDIR" status x
  assert_stderr --partial 'directory'
  : >"$BATS_TEST_TMPDIR/empty"
  chmod 600 "$BATS_TEST_TMPDIR/empty"
  rl 78 --password-file "$BATS_TEST_TMPDIR/empty" status x
  assert_stderr --partial 'empty'
}

@test "config: a password file others can write or another user owns is refused" {
  local pw="$BATS_TEST_TMPDIR/pw" file
  (umask 077 && echo secret >"$pw")
  chmod 622 "$pw"
  rl 78 --password-file "$pw" status x
  assert_stderr --partial 'chmod go-w'
  chmod 600 "$pw"
  chown nobody "$pw"
  rl 78 --password-file "$pw" status x
  # Named by the config file: the error says where.
  file="$(conf "password-file = $pw")"
  rl 78 --config "$file" status x
  assert_stderr --partial "$file:1"
}

@test "config: a config file others can read that holds a password in its URL is warned of" {
  local file url="${RLOCK_URL/redis:\/\//redis://:not-needed@}"
  file="$(conf "url = $url")"
  # The test server has no password: AUTH fails with 77 or is accepted.
  RLOCK_URL='' rl 0,77 --config "$file" status x
  refute_stderr --partial 'readable by others'
  chmod 644 "$file"
  RLOCK_URL='' rl 0,77 --config "$file" status x
  assert_stderr --partial "config file '$file' holds a password and is readable by others"
  assert_stderr --partial "chmod o-r '$file'"
  refute_stderr --partial 'not-needed'
}

@test "config: a relative path in the config file is the file's neighbour, wherever rlock runs" {
  local dir="$BATS_TEST_TMPDIR/etc"
  mkdir -p "$dir/tls"
  (umask 077 && echo not-needed >"$dir/pw")
  (umask 077 && printf 'password-file = pw\n' >"$dir/rlock.conf")
  # From elsewhere (cron runs in $HOME): found beside the file, so the
  # password is sent (77 or accepted), not 78 "cannot read 'pw'".
  cd /
  rl 0,77 --config "$dir/rlock.conf" status x
  refute_stderr --partial 'cannot read'
  # The TLS files too: the error names the path beside the file.
  (umask 077 && printf 'tls = yes\ncacert = tls/ca.pem\n' >"$dir/tls.conf")
  rl 64,78 --config "$dir/tls.conf" status x
  assert_stderr --partial "$dir/tls/ca.pem"
  # An absolute path is kept.
  (umask 077 && printf 'password-file = %s\n' "$dir/pw" >"$dir/abs.conf")
  rl 0,77 --config "$dir/abs.conf" status x
  refute_stderr --partial 'cannot read'
  cd "$BATS_TEST_DIRNAME"
}

@test "config: a password file others can read works with a warning" {
  local pw="$BATS_TEST_TMPDIR/pw"
  echo not-needed >"$pw"
  chmod 644 "$pw"
  # The test server has no password: AUTH fails with 77 or is accepted
  # with a warning by Redis 6+, depending on version; the warning is ours.
  rl 0,77 --password-file "$pw" status x
  assert_stderr --partial 'readable by others'
  assert_stderr --partial 'chmod o-r'
  refute_stderr --partial 'not-needed'
}

@test "config: --insecure warns, and refuses --cacert" {
  local closed
  closed="$(free_port)"
  rl 69 -u "rediss://127.0.0.1:$closed" --insecure --connect-timeout 1s status x
  assert_stderr --partial 'not verified'
  rl_usage_error -u "rediss://127.0.0.1:$closed" --insecure --cacert /etc/ssl/certs/ca-certificates.crt status x
  assert_stderr --partial -- '--cacert'
}

@test "config: a FIFO nobody writes to neither hangs nor reads as empty; a process substitution works" {
  local fifo="$BATS_TEST_TMPDIR/fifo"
  mkfifo -m 600 "$fifo"
  # Empty would mean the defaults: a server the file never named.
  RL_TIMEOUT=5 rl 78 --config "$fifo" status fifo-free
  assert_stderr "rlock: error: cannot read config file '$fifo': it is a pipe that nothing was written to"
  RL_TIMEOUT=5 RLOCK_URL='' rl 78 --config "$fifo" status fifo-free
  rl 0 acquire fifo-held
  RLOCK_URL='' rl 0 --config <(echo "url = $RLOCK_URL") status fifo-held
}

@test "config: a key set twice is an error naming both lines" {
  local file
  file="$(conf "url = $RLOCK_URL
user = default
# a comment
user = other")"
  RLOCK_URL='' rl 78 --config "$file" status twice-x
  assert_equal "$stderr" "rlock: error: $file:4: user: set again (first on line 2); give each key once"
}

@test "config: --config /dev/null reads no config file (it is everyone's to write, and says nothing)" {
  rl 0 acquire devnull-held
  rl 0 --config /dev/null status devnull-held
  RLOCK_CONFIG=/dev/null rl 0 status devnull-held
  # A password file must say something.
  rl 78 --password-file /dev/null status devnull-held
  assert_stderr --partial "is empty"
}

@test "config: a cert without a key, or tls with a unix socket, in the file is a config error naming file:line" {
  local file
  file="$(conf "url = $RLOCK_URL
cert = /etc/hostname")"
  RLOCK_URL='' rl 78 --config "$file" status x
  assert_stderr --partial "$file:2: cert without key"
  file="$(conf "url = unix:///nonexistent/redis.sock
tls = yes")"
  RLOCK_URL='' rl 78 --config "$file" status x
  assert_stderr --partial "$file:2: tls = yes with a unix socket URL ($file:1)"
  # Given on the command line, it is a usage error as before.
  rl 64 --config /dev/null --cert /etc/hostname status x
}

@test "config: insecure = yes in the file and --cacert on the command line: the message names the file's line" {
  local file
  file="$(conf "insecure = yes")"
  rl_usage_error --config "$file" -u "rediss://127.0.0.1:$REDIS_PORT" --cacert /etc/hostname status x
  assert_equal "$stderr" "rlock: error: --cacert cannot be combined with insecure = yes from $file:1 (no verification): remove that line to verify with this CA"
  # And the other way round.
  file="$(conf "cacert = /etc/hostname")"
  rl_usage_error --config "$file" -u "rediss://127.0.0.1:$REDIS_PORT" --insecure status x
  assert_equal "$stderr" "rlock: error: --insecure (no verification) cannot be combined with the CA of $file:1 (verify with this CA): remove that line, or --insecure"
}

@test "config: a warning about several quorum members' URLs is said once" {
  rl 69 -u "redis://:pw@127.0.0.1:1/0" -u "redis://:pw@127.0.0.1:2/0" -u "redis://:pw@127.0.0.1:3/0" \
    --connect-timeout 1s status
  local warnings
  warnings="$(grep -c '^rlock: warning: using a password on the command line' <<<"$stderr")"
  assert_equal "$warnings" 1
}

# The error named the file's last url line, whichever held the duplicate.
@test "config: a quorum member given twice in the file is named on the line of the second" {
  printf 'url = redis://127.0.0.1:1/0\nurl = redis://127.0.0.1:1/2\nurl = redis://127.0.0.1:3/0\n' \
    >"$BATS_TEST_TMPDIR/dup.conf"
  RLOCK_URL= rl 78 --config "$BATS_TEST_TMPDIR/dup.conf" acquire dup -n
  assert_stderr --partial "dup.conf:2: redis://127.0.0.1:1/0 and redis://127.0.0.1:1/2 name the same server"
  printf 'url = redis://127.0.0.1:1/0,redis://127.0.0.1:1/1\nurl = redis://127.0.0.1:3/0\n' \
    >"$BATS_TEST_TMPDIR/dup.conf"
  RLOCK_URL= rl 78 --config "$BATS_TEST_TMPDIR/dup.conf" acquire dup -n
  assert_stderr --partial "dup.conf:1: redis://127.0.0.1:1/0 and redis://127.0.0.1:1/1 name the same server"
}
