#!/usr/bin/env bats
# What is stored in Redis about a command (and shown by status to every lock
# user): the program name only, unless --show-command (or the config key
# show-command) asks for the full command line, which may hold secrets.

load helpers

setup() {
  flush_redis
  M="$BATS_TEST_TMPDIR"
}

teardown() {
  kill_bg_pids
}

# redis_mentions TEXT: prints every key of the server (db 0) whose name or
# value contains TEXT, whatever the key's type; prints nothing if none does.
redis_mentions() {
  "$PYTHON" - "$REDIS_PORT" "$1" <<'EOF'
import sys
import redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
text = sys.argv[2].encode()
for key in r.scan_iter(count=1000):
    kind = r.type(key).decode()
    if kind == "string":
        values = [r.get(key) or b""]
    elif kind == "hash":
        values = [b for kv in r.hgetall(key).items() for b in kv]
    elif kind == "zset":
        values = [m for m, _ in r.zrange(key, 0, -1, withscores=True)]
    elif kind == "list":
        values = r.lrange(key, 0, -1)
    elif kind == "set":
        values = list(r.smembers(key))
    else:
        values = [r.dump(key) or b""]
    if text in key or any(text in v for v in values):
        print(key.decode(errors="replace"))
EOF
}

# wait_held NAME: until NAME has a holder.
wait_held() {
  local i
  for ((i = 0; i < 100; i++)); do
    "$RLOCK" status "$1" >/dev/null 2>&1 && return 0
    nap 0.05
  done
  fail "lock '$1' was never held"
}

@test "privacy: a run's arguments are in neither Redis nor status; the program name is" {
  rl_bg job run private -- sh -c 'touch "$0"; sleep 3' "$M/ready" --password=hunter2
  wait_for_file "$M/ready"
  wait_held private
  rl 0 status private
  refute_output --partial hunter2
  assert_output --partial ' sh'
  rl 0 status
  refute_output --partial hunter2
  rl 0 --json status private
  refute_output --partial hunter2
  assert_equal "$(json 'd["holders"][0]["command"]')" sh
  assert_equal "$(redis_mentions hunter2)" ""
  rl_bg shell run private-c -c "touch '$M/ready-c'; sleep 3 # mysql -phunter2"
  wait_for_file "$M/ready-c"
  wait_held private-c
  rl 0 --json status private-c
  refute_output --partial hunter2
  assert_equal "$(redis_mentions hunter2)" ""
  rl_wait job 0
  rl_wait shell 0
}

@test "privacy: acquire and release --force store the caller's program name, not its arguments" {
  # The caller is a shell whose own command line holds the secret.
  run bash -c '"$0" acquire -t 30s private-acquire >/dev/null; true' "$RLOCK" --password=hunter2
  assert_success
  rl 0 --json status private-acquire
  refute_output --partial hunter2
  assert_equal "$(json 'd["holders"][0]["command"]')" bash
  run bash -c '"$0" release --force private-acquire >/dev/null; true' "$RLOCK" --password=hunter2
  assert_success
  rl 1 status private-acquire
  refute_output --partial hunter2
  assert_equal "$(redis_mentions hunter2)" ""
}

@test "privacy: --show-command or show-command = yes stores the full command line" {
  rl_bg job --show-command run shown-flag -- sh -c 'touch "$0"; sleep 3' "$M/ready" visible-arg
  wait_for_file "$M/ready"
  wait_held shown-flag
  rl 0 status shown-flag
  assert_output --partial visible-arg
  printf 'show-command = yes\n' >"$M/rlock.conf"
  rl_bg conf --config "$M/rlock.conf" run shown-conf -- sh -c 'touch "$0"; sleep 3' "$M/ready2" \
    conf-arg
  wait_for_file "$M/ready2"
  wait_held shown-conf
  rl 0 status shown-conf
  assert_output --partial conf-arg
  rl_wait job 0
  rl_wait conf 0
}

@test "privacy: --show-command stores no URL's password, neither rlock's own nor the command's" {
  local password=s3cret-shown-pw url
  start_redis --requirepass "$password"
  url="redis://:$password@127.0.0.1:$REDIS_PORT/0"
  # The caller's command line holds rlock's own URL with its password: it
  # was stored as it stood, shown by status and kept 24 h in the audit.
  run bash -c '"$0" -u "$1" --show-command acquire -t 30s shown-url >/dev/null; true' \
    "$RLOCK" "$url"
  assert_success
  run bash -c '"$0" -u "$1" --show-command release --force shown-url >/dev/null; true' \
    "$RLOCK" "$url"
  assert_success
  run bash -c '"$0" -u "$1" --show-command acquire -t 30s shown-url >/dev/null; true' \
    "$RLOCK" "$url"
  RLOCK_PASSWORD="$password" rl 0 -u "redis://127.0.0.1:$REDIS_PORT/0" --json status shown-url
  refute_output --partial "$password"
  # The line is kept, without the password only: the holder's, the forced
  # release's and the evicted holder's.
  local kept="--show-command acquire -t 30s shown-url >/dev/null; true $RLOCK redis://127.0.0.1:$REDIS_PORT/0"
  assert_equal "$(json 'd["holders"][0]["command"]')" "bash -c \"\$0\" -u \"\$1\" $kept"
  assert_equal "$(json 'd["forced"]["evicted"][0]["command"]')" "bash -c \"\$0\" -u \"\$1\" $kept"
  assert_output --partial "--show-command release --force shown-url >/dev/null; true $RLOCK redis://127.0.0.1:$REDIS_PORT/0"
  # The command of a run, which may name a URL with a password too.
  rl_bg job -u "$url" --show-command run shown-run -- sh -c 'touch "$0"; sleep 3' "$M/ready" \
    "redis://user:$password@127.0.0.1:$REDIS_PORT/0" \
    "redis://127.0.0.1:1,redis://:pa/ss?#x@127.0.0.1:$REDIS_PORT/0"
  wait_for_file "$M/ready"
  RLOCK_PASSWORD="$password" rl 0 -u "redis://127.0.0.1:$REDIS_PORT/0" --json status shown-run
  refute_output --partial "$password"
  assert_output --partial "redis://user@127.0.0.1:$REDIS_PORT/0"
  # A password with '/', '?' and '#' unencoded, after a URL without one.
  refute_output --partial "pa/ss"
  assert_output --partial "redis://127.0.0.1:1,redis://127.0.0.1:$REDIS_PORT/0"
  rl_wait job 0
  local found
  found="$(REDIS_PASSWORD="$password" "$PYTHON" - "$REDIS_PORT" "$password" <<'EOF2'
import os, sys
import redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), password=os.environ["REDIS_PASSWORD"])
for key in r.scan_iter(count=1000):
    if r.type(key) == b"hash":
        values = [b for kv in r.hgetall(key).items() for b in kv]
    elif r.type(key) == b"string":
        values = [r.get(key) or b""]
    else:
        values = []
    if any(sys.argv[2].encode() in v for v in values):
        print(key.decode())
EOF2
)"
  assert_equal "$found" ""
  stop_redis
}

# rlock knows its own passwords: one in the caller's command line (`env
# RLOCK_PASSWORD=... rlock ...`) or in the command's arguments was stored as
# it stood, for every lock user to read.
@test "privacy: --show-command stores none of rlock's own passwords, wherever it appears" {
  local password=s3cret-own-pw
  start_redis --requirepass "$password"
  local plain="redis://127.0.0.1:$REDIS_PORT/0"
  run bash -c 'env RLOCK_PASSWORD="$1" "$0" -u "$2" --show-command acquire -t 30s own-env >/dev/null; true' \
    "$RLOCK" "$password" "$plain"
  assert_success
  echo "$password" >"$M/pw"
  chmod 600 "$M/pw"
  rl_bg job -u "$plain" --password-file "$M/pw" --show-command run own-run -- \
    sh -c 'touch "$0"; sleep 3' "$M/ready" "--password=$password"
  wait_for_file "$M/ready"
  RLOCK_PASSWORD="$password" rl 0 -u "$plain" --json status own-env own-run
  refute_output --partial "$password"
  assert_output --partial " *** $plain"
  assert_output --partial -- '--password=***'
  rl_wait job 0
  stop_redis
}

@test "privacy: rlock -v run and -v acquire never print the token on stderr" {
  # The token releases the lock: only the command's RLOCK_TOKEN (run) and
  # stdout (acquire) carry it.
  rl 0 -v run verbose-token -- sh -c 'echo "$RLOCK_TOKEN" >"$1/token"' sh "$M"
  local token
  token="$(<"$M/token")"
  assert_regex "$token" '^[0-9a-f]{32}$'
  refute_stderr --partial "$token"
  refute_output --partial "$token"
  rl 0 -v acquire verbose-token
  token="$output"
  refute_stderr --partial "$token"
  rl 0 release verbose-token --token "$token"
}

@test "privacy: the token comes from getrandom (the OS CSPRNG), byte for byte" {
  # getrandom interposed by a preload that fills with 0xab: a token made
  # from anything else (the time, the pid, a counter) would not read abab....
  command -v cc >/dev/null || skip "no C compiler"
  if readelf -d "$RLOCK" | grep -q 'libasan\|libtsan'; then skip "sanitizer build"; fi
  cat >"$M/fixed.c" <<'C'
#include <string.h>
#include <sys/types.h>
ssize_t getrandom(void *buf, size_t len, unsigned flags) {
  (void)flags;
  memset(buf, 0xab, len);
  return (ssize_t)len;
}
C
  cc -shared -fPIC -o "$M/fixed.so" "$M/fixed.c"
  run env LD_PRELOAD="$M/fixed.so" "$RLOCK" acquire from-getrandom
  assert_success
  assert_output abababababababababababababababab
  rl 0 release from-getrandom --token abababababababababababababababab
}
