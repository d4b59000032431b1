#!/usr/bin/env bats
# Lock names are opaque identities; database indexes and unix sockets.

load helpers

# Names that a naive key layout (hash tags, ':' separators) could confuse.
NAMES=('a{b}c' '{' '}' '{}' 'x:y' 'x' 'with space' 'ünïcødé' 'plain')

@test "names: holding one lock never blocks another with a similar name" {
  local name
  for name in "${NAMES[@]}"; do
    rl 0 acquire "$name" -n
  done
  for name in "${NAMES[@]}"; do
    rl 0 status "$name"
    rl 75 acquire "$name" -n
  done
}

@test "names: each name's keys are its own, and releasing one touches no other's" {
  local -A own token
  local name other shared before after changed stray
  # Learn each name's keys alone on an empty server.
  for name in "${NAMES[@]}"; do
    rcli FLUSHALL >/dev/null
    rl 0 acquire "$name"
    own[$name]="$(lock_keys)"
    assert_not_equal "${own[$name]}" ''
  done
  # Keys that every name creates (an index, say) are shared by design.
  shared="${own[${NAMES[0]}]}"
  for name in "${NAMES[@]}"; do
    shared="$(LC_ALL=C comm -12 <(printf '%s\n' "$shared") <(printf '%s\n' "${own[$name]}"))"
  done
  for name in "${NAMES[@]}"; do
    for other in "${NAMES[@]}"; do
      [[ "$name" < "$other" ]] || continue
      assert_equal "$(LC_ALL=C comm -12 <(printf '%s\n' "${own[$name]}") \
        <(printf '%s\n' "${own[$other]}") | LC_ALL=C comm -23 - <(printf '%s\n' "$shared"))" ''
    done
  done
  # Hold them all, then release one at a time (a long TTL: on a busy
  # machine the snapshots below take longer than the default 30 s).
  rcli FLUSHALL >/dev/null
  for name in "${NAMES[@]}"; do
    rl 0 acquire "$name" -n -t 10m
    token[$name]="$output"
  done
  for name in "${NAMES[@]}"; do
    before="$(key_snapshot)"
    rl 0 release "$name" --token "${token[$name]}"
    after="$(key_snapshot)"
    changed="$(diff <(printf '%s\n' "$before") <(printf '%s\n' "$after") |
      sed -n 's/^[<>] //p' | cut -f1 | grep -vF -- "${token[$name]}" | LC_ALL=C sort -u)"
    stray="$(LC_ALL=C comm -23 <(printf '%s\n' "$changed") \
      <(printf '%s\n' "${own[$name]}" "$shared" | LC_ALL=C sort -u) | sed '/^$/d')"
    if [[ -n "$stray" ]]; then
      fail "releasing '$name' changed keys that are not its own: $stray"
    fi
    token[$name]=''
    # Every lock not yet released is still held.
    for other in "${NAMES[@]}"; do
      if [[ -n "${token[$other]}" ]]; then
        rl 0 status "$other"
      fi
    done
  done
}

@test "names: a name of exactly 512 bytes works" {
  local name
  name="$(printf 'n%.0s' {1..512})"
  rl 0 acquire "$name"
  rl 0 release "$name" --token "$output"
  name="$(printf 'ü%.0s' {1..256})"
  rl 0 acquire "$name"
  rl 0 release "$name" --token "$output"
}

@test "db: a lock taken in db 3 over the unix socket lives only in db 3" {
  rl 0 -u "unix://$REDIS_SOCK?db=3" acquire db-lock
  run lock_keys -n 3
  assert_output --partial db-lock
  run lock_keys -n 0
  assert_output ''
  # The same name in db 0 is a different lock...
  rl 0 acquire db-lock -n
  # ...while db 3 over TCP is the same server and database as the socket.
  rl 75 -u "redis://127.0.0.1:$REDIS_PORT/3" acquire db-lock -n
}

@test "db: status and release over the unix socket see the lock" {
  rl 0 -u "unix://$REDIS_SOCK" acquire sock-lock
  local sock_token="$output"
  rl 0 -u "unix://$REDIS_SOCK" status sock-lock
  rl 0 -u "unix://$REDIS_SOCK" release sock-lock --token "$sock_token"
  rl 1 status sock-lock
}
