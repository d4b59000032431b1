#!/usr/bin/env bats
# Tokens at rest: Redis holds only a hash of each token (keys, members,
# values, wake lists), so reading the keyspace gives nothing that renews or
# releases someone else's lock.

load helpers

# everything_in_redis: every key name and every value (string, list
# elements, hash fields and values, zset members) of db 0, one per line.
everything_in_redis() {
  "$PYTHON" - "$REDIS_PORT" <<'EOF2'
import sys
import redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
out = sys.stdout.buffer
for key in r.scan_iter(count=1000):
    out.write(key + b"\n")
    kind = r.type(key)
    if kind == b"string":
        values = [r.get(key)]
    elif kind == b"list":
        values = r.lrange(key, 0, -1)
    elif kind == b"hash":
        values = [x for kv in r.hgetall(key).items() for x in kv]
    elif kind == b"zset":
        values = r.zrange(key, 0, -1)
    else:
        values = [b"?" + kind]
    for v in values:
        out.write(v + b"\n")
EOF2
}

@test "secrets at rest: no key or value holds the token of a holder or of a waiter" {
  rl 0 acquire at-rest -t 60s
  local holder="$output"
  rl_bg waiter acquire at-rest -w 15s -t 60s
  wait_waiters at-rest 1
  everything_in_redis >"$BATS_TEST_TMPDIR/while-queued"
  # The dump is not empty: the holder's and the waiter's hashes are there.
  run grep -c "$(printf '%s' "$holder" | sha1sum | cut -c1-40)" "$BATS_TEST_TMPDIR/while-queued"
  assert_output 2
  rl 0 release at-rest --token "$holder"
  rl_wait waiter 0
  local waiter="$output"
  everything_in_redis >"$BATS_TEST_TMPDIR/while-held"
  assert_equal "${#waiter}" 32
  run grep -F -e "$holder" -e "$waiter" "$BATS_TEST_TMPDIR/while-queued" "$BATS_TEST_TMPDIR/while-held"
  assert_failure 1
  assert_output ''
}

@test "secrets at rest: what the keys hold does not release or renew the lock" {
  rl 0 acquire guarded -t 60s --json
  local token id stored
  token="$(json 'd["token"]')"
  id="$(json 'd["id"]')"
  stored="$(rcli ZRANGE 'rlock:{guarded}:h' 0 -1)"
  assert_equal "$stored" "$(printf '%s' "$token" | sha1sum | cut -c1-40)"
  # The short id status shows is the start of that hash.
  assert_equal "$id" "${stored:0:8}"
  rl 1 renew guarded --token "$stored"
  rl 1 release guarded --token "$stored"
  rl 0 status guarded
  # The real token still works, and force by id still finds the holder.
  rl 0 renew guarded --token "$token"
  rl 0 release guarded --force --holder "$id"
  assert_output --regexp "^evicted $id from lock 'guarded'"
}
