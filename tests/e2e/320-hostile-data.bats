#!/usr/bin/env bats
# Data in Redis is not trusted: whoever may write a lock's keys can forge
# records, leases, audit entries and key names. status and every message must
# survive them: no crash, no escape sequence reaching the terminal, a broken
# lock listed as such without hiding the others, JSON that is always valid.

load helpers

teardown() {
  # A waiter a test stopped must not outlive it.
  local f
  for f in "$BATS_TEST_TMPDIR"/*.pid; do
    if [[ -e "$f" ]]; then kill -CONT "$(<"$f")" 2>/dev/null || true; fi
  done
  kill_bg_pids
}

# member NAME: the (hashed) holder member of lock NAME's exclusive set.
member() {
  rcli ZRANGE "rlock:{$1}:h" 0 0
}

# no_raw_controls FILE: fails if FILE holds ESC, BEL, a C1 control (raw byte
# or UTF-8) or a bidi override.
# Leaves $output alone.
no_raw_controls() {
  local found
  found="$("$PYTHON" - "$1" <<'EOF2'
import re, sys
data = open(sys.argv[1], "rb").read()
bad = re.findall(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]", data)
print(bad if bad else "")
EOF2
)"
  if [[ -n "$found" ]]; then
    batslib_print_kv_single_or_multi 6 file "$1" found "$found" |
      batslib_decorate "raw control characters reach the terminal" | fail
  fi
}

@test "hostile data: a forged infinite lease and an absurd since do not crash status" {
  rl 0 acquire forged-lease -t 60s
  local m
  m="$(member forged-lease)"
  rcli ZADD 'rlock:{forged-lease}:h' +inf "$m" >/dev/null
  rcli HSET 'rlock:{forged-lease}:i' "$m" $'99999999999999999999\n-9223372036854775808\nexclusive\n1\n5:owner4:host2:-13:cmd' >/dev/null
  rl 0 status forged-lease
  assert_line --partial 'owner'
  rl 0 status
  assert_line --regexp '^forged-lease +exclusive'
  rl 0 status forged-lease --json
  assert_json
  # Clamped: never negative, never wrapped.
  assert_equal "$(json 'd["holders"][0]["age_ms"] >= 0 and d["holders"][0]["ttl_ms"] > 0')" true
  assert_equal "$(json 'd["holders"][0]["pid"]')" 0
}

@test "hostile data: a holder whose record was deleted or evicted shows no age, not fifty years" {
  rl 0 acquire unrecorded -t 60s
  rcli DEL 'rlock:{unrecorded}:i' >/dev/null
  rl 0 status unrecorded
  # Its line: the id, no owner, host or mode, PID and AGE "?", the TTL,
  # FENCE "?" (not a pid or fence 0, which read as real ones).
  assert_line --regexp '^  [0-9a-f]{8} +\? +\? +[0-9.]+s +\? *$'
  refute_output --regexp '[0-9]h'
  rl 0 status
  assert_line --regexp '^unrecorded +exclusive +1 +\? +[0-9.]+s'
  rl 0 status unrecorded --json
  assert_equal "$(json '(h := d["holders"][0])["age_ms"] is None and h["ttl_ms"] > 0 and h["pid"] is None and h["fence"] is None')" true
  rl 0 status --json
  assert_equal "$(json '(h := d["locks"][0]["holders"][0])["age_ms"] is None and h["pid"] is None and h["fence"] is None')" true
  # A busy acquire names the holder without an empty host or an age.
  rl 75 -v acquire unrecorded -n
  refute_stderr --partial ' on '
  refute_stderr --partial ' for '
  # A forced release says whom it evicted without an empty host or fence 0.
  rl 0 release --force unrecorded
  assert_output --regexp "^evicted [0-9a-f]{8} from lock 'unrecorded': a holder without a record$"
}

@test "hostile data: a foreign key at a lock's name is listed as broken, not fatal" {
  rl 0 acquire good-one -t 60s
  rl 0 acquire good-two -t 60s
  # A string where the lock's meta hash should be.
  rcli SET 'rlock:{foreign}:m' 'not a hash' >/dev/null
  rl 0 status
  assert_line --regexp '^foreign +broken .*WRONGTYPE'
  assert_line --regexp '^good-one +exclusive +1 '
  assert_line --regexp '^good-two +exclusive +1 '
  rl 0 status --json
  assert_json
  assert_equal "$(json '[l["name"] for l in d["locks"]]')" '["good-one", "good-two"]'
  assert_equal "$(json '[b["name"] for b in d["broken"]]')" '["foreign"]'
  # Asked for by name, it is an error (76) on one line.
  rl 76 status foreign
  assert_equal "${#stderr_lines[@]}" 1
}

@test "hostile data: a name typed to look like an escaped one is shown apart, and each is given back as shown" {
  local real=$'job\e]0;x\a' typed='job\x1b]0;x\x07'
  rl 0 acquire --owner alice "$real"
  rl 0 acquire --owner bob "$typed"
  rl 0 acquire --owner carol "it's"
  rl 0 status
  assert_line --regexp "^\\\$'job\\\\x1b\]0;x\\\\x07' +exclusive +1 +alice "
  assert_line --regexp "^\\\$'job\\\\\\\\x1b\]0;x\\\\\\\\x07' +exclusive +1 +bob "
  assert_line --regexp "^\\\$'it\\\\'s' +exclusive +1 +carol "
  # Each row's name, pasted into a shell, names its own lock.
  local shown
  shown="$(awk '/ bob /{print $1}' <<<"$output")"
  eval "rl 0 release --force $shown"
  assert_output --regexp "^evicted [0-9a-f]{8} from lock \\\$'job\\\\\\\\x1b\]0;x\\\\\\\\x07': bob "
  rl 0 status "$real"
  assert_line --index 0 --regexp "^lock \\\$'job\\\\x1b\]0;x\\\\x07': held "
  rl 1 status "$typed"
  rl 0 status "it's"
  assert_line --index 0 --regexp "^lock \\\$'it\\\\'s': held "
}

@test "hostile data: names that differ only by a space at either end are told apart in the listing" {
  rl 0 acquire --owner plain x
  rl 0 acquire --owner trailing "x "
  rl 0 acquire --owner leading " x"
  rl 0 status
  assert_line --regexp "^x +exclusive +1 +plain "
  assert_line --regexp "^\\\$'x ' +exclusive +1 +trailing "
  assert_line --regexp "^\\\$' x' +exclusive +1 +leading "
  local shown
  shown="$(grep ' trailing ' <<<"$output" | cut -d"'" -f1-2)'"
  eval "rl 0 release --force $shown"
  assert_output --regexp "from lock \\\$'x ': trailing "
  rl 0 status x
  rl 0 status " x"
  rl 1 status "x "
}

@test "hostile data: escape sequences in a key name never reach the terminal" {
  local name=$'\e]0;pwned\a\e[2J\xc2\x9b31m'
  rcli SET "rlock:{$name}:m" x >/dev/null
  # The error line quotes the key: escaped.
  rl 76 status "$name"
  printf '%s' "$stderr" >"$BATS_TEST_TMPDIR/err"
  no_raw_controls "$BATS_TEST_TMPDIR/err"
  assert_stderr --partial '\x1b]0;pwned\x07\x1b[2J\u{009b}31m'
  # And the listing row that reports it broken.
  rl 0 status
  printf '%s' "$output" >"$BATS_TEST_TMPDIR/out"
  no_raw_controls "$BATS_TEST_TMPDIR/out"
}

@test "hostile data: C1 controls and bidi overrides in a forged record are shown escaped" {
  rl 0 acquire forged-record -t 60s
  local m owner=$'mallory\xc2\x9b2J\xe2\x80\xaetxt.exe' mode=$'exclusive\e[31m'
  local command=$'rm -rf /\xe2\x81\xa6 # \xe2\x81\xa9'
  m="$(member forged-record)"
  local blob
  # Netstring lengths count bytes, not characters.
  blob="$(printf '%s' "$owner" | wc -c):${owner}4:host2:42$(printf '%s' "$command" | wc -c):${command}"
  rcli HSET 'rlock:{forged-record}:i' "$m" "1"$'\n'"$(($(date +%s) * 1000))"$'\n'"$mode"$'\n'"60000"$'\n'"$blob" >/dev/null
  rl 0 status forged-record
  printf '%s' "$output" >"$BATS_TEST_TMPDIR/out"
  no_raw_controls "$BATS_TEST_TMPDIR/out"
  # The owner column is clipped to 20 columns, never inside an escape (the
  # next one, \u{202e}, does not fit whole), the command is not.
  assert_output --partial 'mallory\u{009b}2J~  '
  assert_output --partial 'rm -rf /\u{2066} # \u{2069}'
  rl 0 status
  printf '%s' "$output" >"$BATS_TEST_TMPDIR/out"
  no_raw_controls "$BATS_TEST_TMPDIR/out"
  # JSON keeps the exact characters (as \u escapes), still valid.
  rl 0 status forged-record --json
  assert_json
  printf '%s' "$output" >"$BATS_TEST_TMPDIR/json"
  no_raw_controls "$BATS_TEST_TMPDIR/json"
  assert_equal "$(json 'd["holders"][0]["owner"] == "mallory\u009b2J\u202etxt.exe"')" true
}

@test "hostile data: --json keeps names that are not UTF-8 apart, and they round-trip" {
  rl 0 acquire $'bin\xff' -t 60s
  rl 0 acquire $'bin\xfe' -t 60s
  rl 0 acquire 'plain' -t 60s
  rl 0 status --json
  assert_json
  run "$PYTHON" -c '
import base64, json, sys
locks = json.load(sys.stdin)["locks"]
raw = sorted(base64.b64decode(l["name_b64"]) for l in locks if "name_b64" in l)
print(raw, [l["name"] for l in locks if "name_b64" not in l])
' <<<"$output"
  assert_output "[b'bin\\xfe', b'bin\\xff'] ['plain']"
  # A decoded name names the same lock again.
  rl 0 status $'bin\xff' --json
  assert_equal "$(json 'd["name_b64"]')" "$(printf 'bin\xff' | base64)"
}

@test "hostile data: a fence counter that is not an integer fails cleanly and writes nothing" {
  rcli SET 'rlock:{bad-fence}:f' 'not a number' >/dev/null
  rl 76 acquire bad-fence
  # Nothing else was written: no meta key left without an expiry.
  assert_equal "$(lock_keys)" 'rlock:{bad-fence}:f'
  assert_stderr --partial 'fence counter'
  # Once the counter is repaired, the lock works, above the counter.
  rcli SET 'rlock:{bad-fence}:f' 7 >/dev/null
  rl 0 acquire bad-fence --json
  assert_greater "$(json 'd["fence"]')" 7
}

# status NAME read such a counter as 0 (or rounded one beyond 2^53) and
# called the lock free (1) while every write to it exited 76.
@test "hostile data: a fence counter acquire refuses makes status NAME say broken (76), not free" {
  local counter
  for counter in 'not a number' -5 9007199254740993; do
    rcli SET 'rlock:{bad-counter}:f' "$counter" >/dev/null
    rl 76 status bad-counter
    assert_stderr --partial 'fence counter'
    rl 76 acquire bad-counter -n
  done
  # Held, then its counter overwritten: the listing says broken too.
  rcli SET 'rlock:{bad-counter}:f' 7 >/dev/null
  rl 0 acquire bad-counter -t 30s
  rcli SET 'rlock:{bad-counter}:f' 'not a number' >/dev/null
  rl 76 status bad-counter
  rl 0 --json status
  assert_equal "$(json 'd["broken"][0]["name"]')" bad-counter
  rcli DEL 'rlock:{bad-counter}:f' >/dev/null
  rl 0 status bad-counter
}

# wait_queued NAME: waits (5 s at most) until lock NAME has a waiter.
wait_queued() {
  local i
  for ((i = 0; i < 50; i++)); do
    [[ "$(rcli ZCARD "rlock:{$1}:q")" -gt 0 ]] && return 0
    nap 0.1
  done
  fail "no waiter queued for $1"
}

@test "hostile data: a limit that is not a positive integer fails a write before it changes anything" {
  local limit token before
  for limit in abc 1.5 0 -3 99999999999; do
    rcli FLUSHALL >/dev/null
    rl 0 acquire forged-limit -t 60s
    token="$output"
    bg_rlock waiter acquire forged-limit -w 20s
    wait_queued forged-limit
    rcli HSET 'rlock:{forged-limit}:m' limit "$limit" >/dev/null
    before="$(key_snapshot)"
    rl 76 release forged-limit --token "$token"
    assert_stderr --partial 'holds a limit that is not a positive integer'
    assert_equal "$(key_snapshot)" "$before"
    rl 76 release forged-limit --force
    assert_equal "$(key_snapshot)" "$before"
    kill_bg_pids
  done
}

@test "hostile data: another application's hash at a lock's meta key is refused, not filled and deleted" {
  # A hash-tagged key of another application ({cart7}:m) under an empty
  # --prefix: before, run took it over and deleted it when it ended.
  rcli HSET '{cart7}:m' item1 3 item2 5 >/dev/null
  local before
  before="$(rcli HGETALL '{cart7}:m')"
  rl 76 --prefix '' run -t 2s cart7 -- echo ran
  refute_output --partial ran
  assert_stderr --partial 'holds a hash without a limit, not part of an rlock lock'
  rl 76 --prefix '' acquire cart7 -n
  # status says what every write says, not "free"; the listing shows it
  # as broken, not hidden (probe F).
  rl 76 --prefix '' status cart7
  assert_stderr --partial 'holds a hash without a limit, not part of an rlock lock'
  rl 0 --prefix '' status --json
  assert_equal "$(json '[b["name"] for b in d["broken"]]')" '["cart7"]'
  rl 0 --prefix '' status
  assert_output --partial 'cart7'
  assert_equal "$(rcli HGETALL '{cart7}:m')" "$before"
  assert_equal "$(rcli PTTL '{cart7}:m')" -1
}

@test "hostile data: a lock kept by an rlock of another layout is refused by every operation, with nothing changed" {
  # A later rlock that keeps a lock differently marks its meta key with its
  # layout and no limit (ARCHITECTURE, "m anchors the layout"). Here a
  # layout-1 lock with a waiter is dressed up as one.
  rl 0 acquire other-layout -t 60s
  local token="$output" before
  bg_rlock waiter acquire other-layout -w 20s
  wait_queued other-layout
  rcli HSET 'rlock:{other-layout}:m' layout 7 >/dev/null
  rcli HDEL 'rlock:{other-layout}:m' limit >/dev/null
  before="$(key_snapshot)"
  rl 76 acquire other-layout -n
  assert_stderr --partial 'is in use by an rlock of another lock layout (7; this rlock reads layout 1): nothing was changed'
  rl 76 acquire other-layout -w 1s
  rl 76 run other-layout -n -- echo ran
  refute_output --partial ran
  rl 76 release other-layout --token "$token"
  rl 76 release other-layout --force
  rl 76 status other-layout
  assert_stderr --partial 'another lock layout (7'
  assert_equal "$(key_snapshot)" "$before"
  # The listing shows it as broken beside the others.
  rl 0 acquire plain-one -t 60s
  rl 0 status --json
  assert_equal "$(json '[l["name"] for l in d["locks"]]')" '["plain-one"]'
  assert_equal "$(json '[b["name"] for b in d["broken"]]')" '["other-layout"]'
  assert_output --partial 'another lock layout (7'
  # The meta key's layout 1 (or none) is this rlock's own.
  rcli HSET 'rlock:{other-layout}:m' layout 1 limit 1 >/dev/null
  rl 0 release other-layout --token "$token"
}

@test "hostile data: a foreign key at a waiter's wake list gets it no grant, and the release is whole" {
  rl 0 acquire forged-wake -t 60s
  local token="$output" member
  bg_rlock waiter acquire forged-wake -w 20s
  wait_queued forged-wake
  # Between two of its waits (stopped), the waiter's wake list is forged.
  kill -STOP "$(<"$BATS_TEST_TMPDIR/waiter.pid")"
  member="$(rcli ZRANGE 'rlock:{forged-wake}:q' 0 0)"
  rcli SET "rlock:{forged-wake}:w:$member" intruder >/dev/null
  rl 0 release forged-wake --token "$token"
  rl 1 status --json forged-wake
  assert_equal "$(json 'd["holders"]')" '[]'
  assert_equal "$(rcli GET "rlock:{forged-wake}:w:$member")" intruder
  # Resumed, the waiter either meets the foreign key in its next wait, says
  # so (76) and leaves, or, still blocked in the wait it began before the
  # forgery, takes the free lock at its re-check (0).
  local pid i
  pid="$(<"$BATS_TEST_TMPDIR/waiter.pid")"
  kill -CONT "$pid"
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    nap 0.1
  done
  local rc=0
  wait "$pid" || rc=$?
  if ((rc == 0)); then
    rl 0 release forged-wake --token "$(<"$BATS_TEST_TMPDIR/waiter.out")"
  else
    assert_equal "$rc" 76
    grep -q WRONGTYPE "$BATS_TEST_TMPDIR/waiter.err"
  fi
  assert_equal "$(rcli ZCARD 'rlock:{forged-wake}:q')" 0
  rl 0 acquire forged-wake -n
}

@test "hostile data: a forged fence in a granted waiter's record never reaches the command" {
  local forged member record rc
  for forged in 99999999999999999999 9007199254740993 0; do
    rcli FLUSHALL >/dev/null
    rl 0 acquire forged-fence -t 60s
    local token="$output"
    : >"$BATS_TEST_TMPDIR/waiter.out"
    bg_rlock waiter run -w 20s forged-fence -- sh -c 'echo "FENCE=$RLOCK_FENCE"'
    wait_queued forged-fence
    kill -STOP "$(<"$BATS_TEST_TMPDIR/waiter.pid")"
    # A wait it had begun ends now (the confirmation behind it runs while
    # the lock is still held), so the grant waits for its next wait, which
    # reads the record forged below.
    local id
    for id in $(rcli CLIENT LIST | sed -n 's/^id=\([0-9]*\) .*cmd=blpop.*/\1/p'); do
      rcli CLIENT UNBLOCK "$id" >/dev/null
    done
    nap 0.2
    member="$(rcli ZRANGE 'rlock:{forged-fence}:q' 0 0)"
    rl 0 release forged-fence --token "$token"
    # The grant is the waiter's now: forge the fence its record holds.
    record="$(rcli HGET 'rlock:{forged-fence}:i' "$member")"
    assert_not_equal "$record" ""
    rcli HSET 'rlock:{forged-fence}:i' "$member" "$forged"$'\n'"${record#*$'\n'}" >/dev/null
    kill -CONT "$(<"$BATS_TEST_TMPDIR/waiter.pid")"
    rc=0
    wait "$(<"$BATS_TEST_TMPDIR/waiter.pid")" || rc=$?
    assert_equal "$rc" 76
    grep -q 'holds no valid fence' "$BATS_TEST_TMPDIR/waiter.err"
    run cat "$BATS_TEST_TMPDIR/waiter.out"
    refute_output --partial FENCE=
  done
}

@test "hostile data: a renewal replaces a lease forged beyond any TTL" {
  rl 0 acquire forged-lease -t 60s
  local token="$output" member
  member="$(member forged-lease)"
  rcli ZADD 'rlock:{forged-lease}:h' XX inf "$member" >/dev/null
  rl 0 renew forged-lease --token "$token" -t 30s
  [[ "$(rcli ZSCORE 'rlock:{forged-lease}:h' "$member")" != inf ]]
  rl 0 status --json forged-lease
  assert_greater 30001 "$(json 'd["holders"][0]["ttl_ms"]')"
}

@test "status: semaphore holders are labelled semaphore" {
  rl 0 acquire pool -l 3
  rl 0 acquire pool -l 3 --json
  local acquired="$output"
  rl 0 status pool
  assert_line --index 0 --partial 'held (semaphore/3), 2 holders'
  assert_line --regexp '^  [0-9a-f]{8}  semaphore '
  refute_output --partial 'exclusive'
  rl 0 status pool --json
  assert_equal "$(json '[h["mode"] for h in d["holders"]]')" '["semaphore", "semaphore"]'
  output="$acquired"
  assert_equal "$(json 'd["mode"]')" semaphore
}

@test "waiting line: says how long the holder has held the lock, by the server's clock" {
  rl 0 acquire aged -t 60s
  sleep 1.5
  rl 75 -v acquire aged -w 0.3s
  assert_stderr --regexp "held by .* since (1\.[5-9][0-9]*|[2-9](\.[0-9]+)?)s ago"
}
