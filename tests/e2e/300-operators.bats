#!/usr/bin/env bats
# Operator features: listing every lock, forced release and its audit record,
# evicting one holder of a semaphore, and --version.

load helpers

# A test that froze the server must not leave it frozen for the next.
teardown() {
  kill -CONT "$REDIS_PID" 2>/dev/null || true
  rcli CLIENT UNPAUSE >/dev/null 2>&1 || true
  rcli ACL DELUSER reader >/dev/null 2>&1 || true
  rcli CONFIG SET maxmemory 0 maxmemory-policy noeviction >/dev/null 2>&1 || true
}

# make_locks PREFIX COUNT: COUNT held locks under PREFIX, named bulk-00001...,
# plus three names that need escaping in keys, made in one `redis-cli --pipe`
# that runs the real lock script (EVALSHA, same KEYS and ARGV as rlock), so
# that thousands of locks take a second instead of thousands of processes.
make_locks() {
  local prefix="$1" count="$2" sha
  sha="$(redis-cli -p "$REDIS_PORT" -x SCRIPT LOAD <"$REPO/src/lock/scripts/lock.lua")"
  "$PYTHON" - "$prefix" "$count" "$sha" <<'EOF' >"$BATS_TEST_TMPDIR/pipe.resp"
import sys
prefix, count, sha = sys.argv[1], int(sys.argv[2]), sys.argv[3]
out = sys.stdout.buffer

def netstrings(*fields):
    return "".join(f"{len(f.encode())}:{f}" for f in fields)

def escape(name):
    return name.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")

def command(*args):
    parts = [a.encode() for a in args]
    out.write(b"*%d\r\n" % len(parts))
    for p in parts:
        out.write(b"$%d\r\n%s\r\n" % (len(p), p))

names = [f"bulk-{i:05d}" for i in range(1, count + 1)]
names += ["bulk {braces}", "bulk 100%", "bulk %7B not escaped"]
for i, name in enumerate(names):
    base = f"{prefix}{{{escape(name)}}}:"
    keys = [base + s for s in "h s q x l i m f a".split()]
    blob = netstrings("bulk-owner", "gen-host", str(1000 + i), f"job {i}")
    command("EVALSHA", sha, "9", *keys, "acquire", f"{i:032x}", "exclusive", "1",
            "600000", blob, "0", "3000")
EOF
  run redis-cli -p "$REDIS_PORT" --pipe <"$BATS_TEST_TMPDIR/pipe.resp"
  assert_success
  assert_output --partial "errors: 0, replies: $((count + 3))"
}

@test "status: with no lock prints nothing, and --json an empty list" {
  rl 0 status
  assert_output ''
  rl 0 status --json
  assert_json
  assert_equal "$(json 'd["locks"]')" '[]'
}

@test "status --ttl: accepted on one server (it only matters to a quorum), checked like any duration" {
  rl 0 status -t 5s
  rl 1 status --ttl 1m free-one
  rl 64 status -t soon free-one
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "--ttl: invalid duration 'soon'"
  rl 64 status -t 10ms
  assert_stderr --partial "--ttl must be at least 100ms"
}

@test "status: lists 3000 locks as text, one row each, sorted by name" {
  make_locks bulk: 3000
  rl 0 --prefix bulk: status
  # A header, then one row per lock.
  assert_equal "${#lines[@]}" 3004
  assert_regex "${lines[0]}" '^NAME +MODE +HOLDERS +OWNER'
  assert_regex "${lines[1]}" '^bulk %7B not escaped +exclusive +1 +bulk-owner'
  assert_regex "${lines[4]}" '^bulk-00001 +exclusive +1 +bulk-owner '
  assert_regex "${lines[3003]}" '^bulk-03000 +exclusive +1 +bulk-owner '
  assert_equal "$(printf '%s\n' "${lines[@]:1}" | grep -c ' bulk-owner ')" 3003
  # Locks under another prefix are not listed.
  rl 0 status
  assert_output ''
}

# column_end HEADER ROW TITLE: whether TITLE in HEADER and the word of ROW
# below it end in the same column (a right-aligned number under its title).
column_end() {
  local header="$1" row="$2" title="$3"
  local before="${header%%"$title"*}"
  local end=$((${#before} + ${#title}))
  # The cell ends at `end`: its last character is not a blank, the next one is.
  [[ "${row:end-1:1}" != ' ' && "${row:end:1}" == ' ' ]]
}

@test "status: the FENCE column is as wide as a fence, in the listing and in status NAME" {
  rl 0 acquire fenced-column -t 60s
  rl 0 status
  local fence
  fence="$(awk 'NR == 2 { print $7 }' <<<"$output")"
  # Fences are times in microseconds: 16 digits.
  assert_regex "$fence" '^[0-9]{16}$'
  column_end "${lines[0]}" "${lines[1]}" FENCE
  column_end "${lines[0]}" "${lines[1]}" WAITERS
  rl 0 status fenced-column
  column_end "${lines[1]}" "${lines[2]}" FENCE
  assert_regex "${lines[2]}" " $fence  "
}

@test "status: long names are listed whole, so that each can be named back" {
  local a=nightly-backup-of-database-alpha b=nightly-backup-of-database-beta-and-more
  local c=$'nightly-backup-of-\xe6\x97\xa5-database'
  local name
  for name in "$a" "$b" "$c" short; do rl 0 --prefix long: acquire "$name"; done
  rl 0 --prefix long: status
  assert_equal "${#lines[@]}" 5
  assert_regex "${lines[1]}" "^$a +exclusive "
  assert_regex "${lines[2]}" "^$b +exclusive "
  assert_regex "${lines[3]}" "^$c +exclusive "
  # One column for every row: MODE starts two after the widest name.
  local listing=("${lines[@]}") mode_at
  mode_at="${listing[0]%%MODE*}"
  assert_equal "${#mode_at}" "$((${#b} + 2))"
  assert_equal "${listing[4]:${#mode_at}:9}" exclusive
  # Each name as listed is a lock status finds held.
  local row
  for row in "${listing[@]:1}"; do rl 0 --prefix long: status "${row%% *}"; done
}

@test "status --json: lists 3000 locks as one valid JSON document" {
  make_locks bulk: 3000
  rl 0 --prefix bulk: --json status
  assert_json
  # $output is too large for an argument: python reads it on stdin.
  run "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)
locks = d["locks"]
names = [l["name"] for l in locks]
assert names == sorted(names), "not sorted"
assert all(l["held"] and len(l["holders"]) == 1 for l in locks), "a lock is not held"
h = locks[-1]["holders"][0]
print(len(locks), names[0], names[1], names[2], "|", h["owner"], h["host"], h["command"])
' <<<"$output"
  assert_success
  assert_output "3003 bulk %7B not escaped bulk 100% bulk {braces} | bulk-owner gen-host job 2999"
}

@test "release --force: prints the evicted holder, and status shows who forced it" {
  rl 0 acquire stuck --owner alice-deploy -t 60s
  local token="$output"
  sleep 0.3
  rl 0 release stuck --force --json
  assert_json
  # The evicted holder's age is its real age, not zero.
  assert_greater "$(json 'd["evicted"][0]["age_ms"]')" 250
  local first_fence fence
  first_fence="$(json 'd["evicted"][0]["fence"]')"
  rl 0 acquire stuck --owner alice-deploy -t 60s
  token="$output"
  # The second holder's fence: the counter, above the first holder's.
  fence="$(rcli GET 'rlock:{stuck}:f')"
  assert_greater "$fence" "$first_fence"
  rl 0 release stuck --force
  assert_output --regexp "^evicted [0-9a-f]{8} from lock 'stuck': alice-deploy \(pid [0-9]+"
  assert_equal "${#lines[@]}" 1
  # The evicted holder's token no longer holds anything.
  rl 1 renew stuck --token "$token"

  rl 1 status stuck
  assert_line --index 0 "lock 'stuck': free (last fence $fence)"
  assert_line --regexp "^  force-released [0-9.]+m?s ago by $(id -un)@$(hostname) on $(hostname): [0-9a-f]{8} alice-deploy"

  rl 1 status stuck --json
  assert_json
  assert_equal "$(json 'd["held"]')" false
  assert_equal "$(json 'd["forced"]["by"]["owner"]')" "$(id -un)@$(hostname)"
  assert_equal "$(json 'd["forced"]["evicted"][0]["owner"]')" alice-deploy
  assert_equal "$(json 'd["forced"]["evicted"][0]["fence"]')" "$fence"
}

@test "release --force: a free lock evicts nobody and exits 1" {
  rl 1 release nobody-home --force --json
  assert_json
  assert_equal "$(json 'd["released"]')" false
  assert_equal "$(json 'd["evicted"]')" '[]'
  # One error line, as for a release whose token holds nothing; -q too.
  assert_equal "$stderr" "rlock: error: lock 'nobody-home' was not held; nothing released"
  rl 1 -q release nobody-home --force
  assert_output ''
  assert_equal "$stderr" "rlock: error: lock 'nobody-home' was not held; nothing released"
  rl 1 status nobody-home --json
  assert_equal "$(json 'd["forced"]')" null
}

@test "release --force --holder: evicts only that holder of a --limit 2 lock" {
  rl 0 acquire pool -l 2 --owner first --json
  local token1 id1
  token1="$(json 'd["token"]')"
  id1="$(json 'd["id"]')"
  rl 0 acquire pool -l 2 --owner second --json
  local token2 id2
  token2="$(json 'd["token"]')"
  id2="$(json 'd["id"]')"

  # Given in upper case, as one may copy it: the same id.
  rl 0 release pool --force --holder "${id1^^}"
  assert_output --regexp "^evicted $id1 from lock 'pool': first "
  assert_equal "${#lines[@]}" 1

  rl 0 status pool --json
  assert_equal "$(json '[h["id"] for h in d["holders"]]')" "[\"$id2\"]"
  assert_equal "$(json 'd["mode"]')" semaphore/2
  assert_equal "$(json '[h["owner"] for h in d["forced"]["evicted"]]')" '["first"]'
  rl 1 renew pool --token "$token1"
  rl 0 renew pool --token "$token2"
  # The freed place can be taken again.
  rl 0 acquire pool -l 2 -n
}

@test "release --force --holder '': an empty id (an unset variable) evicts nobody: exit 64" {
  rl 0 acquire emptied -l 3
  rl 0 acquire emptied -l 3
  local id=""
  rl_usage_error release emptied --force --holder "$id"
  assert_equal "$stderr" "rlock: error: --holder: the id is empty ('rlock status NAME' shows each holder's id; --force without --holder evicts every holder)"
  rl_usage_error --json release emptied --force --holder "$id"
  rl 0 status emptied --json
  assert_equal "$(json 'len(d["holders"])')" 2
}

@test "release --force --holder: an unknown id evicts nobody and exits 1" {
  rl 0 acquire kept -l 2
  rl 1 release kept --force --holder 00000000
  assert_output ''
  assert_equal "$stderr" "rlock: error: lock 'kept' has no holder with id 00000000; nothing released"
  rl 0 status kept --json
  assert_equal "$(json 'len(d["holders"])')" 1
}

@test "--version: prints the version, the commit, and the hiredis and OpenSSL versions" {
  rl 0 --version
  local version
  version="$(sed -n 's/^project(rlock VERSION \([0-9.]*\).*/\1/p' "$REPO/CMakeLists.txt")"
  assert_line --index 0 --regexp "^rlock $version \(commit ([0-9a-f]{7,40}|unknown)\)$"
  assert_line --index 1 --regexp '^hiredis [0-9]+\.[0-9]+\.[0-9]+, OpenSSL [0-9]+\.[0-9]+\.[0-9]+'
  assert_stderr ''
}

@test "release --force against a frozen server: 69 says the release may still happen, and to check before forcing again" {
  rl 0 acquire frozen-force -t 60s
  kill -STOP "$REDIS_PID"
  rl 69 release frozen-force --force
  kill -CONT "$REDIS_PID"
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "timed out"
  assert_stderr --partial "may still be carried out when the request reaches the server: check with status before forcing again"
}

# A server whose writes are paused (CLIENT PAUSE WRITE; FAILOVER and a
# Cluster's manual failover pause them too) still serves reads: a status
# is one, and must not wait for the pause to end (before: 'timed out after
# 5s', exit 69). The script cache is emptied first, so that the script is
# loaded in its read-only form too; and a broken lock (a string at its meta
# key) makes the listing run the script for it.
@test "status: answers while the server's writes are paused, NAME and the listing" {
  rl 0 acquire -t 60s paused-lock
  local token="$output"
  rcli SET 'rlock:{paused-odd}:m' 'not a hash' >/dev/null
  rcli SCRIPT FLUSH >/dev/null
  assert_equal "$(rcli CLIENT PAUSE 60000 WRITE)" OK
  rl 0 status paused-lock
  assert_output --partial "lock 'paused-lock': held (exclusive), 1 holder"
  rl 1 status paused-free
  rl 0 status
  assert_output --partial 'paused-lock'
  assert_output --partial 'paused-odd'
  # Writes still wait: the pause was real.
  run timeout 1 redis-cli -p "$REDIS_PORT" SET paused-write x
  assert_equal "$status" 124
  rcli CLIENT UNPAUSE >/dev/null
  rl 0 release paused-lock --token "$token"
  rcli DEL 'rlock:{paused-odd}:m' >/dev/null
}

# A user granted EVALSHA but not EVALSHA_RO (the minimum ACL of earlier
# releases) gets the same status from the plain form.
@test "status: a user without +evalsha_ro and +eval_ro gets the same answer" {
  rl 0 acquire -t 60s ro-refused
  local token="$output"
  rcli ACL SETUSER reader on '>reader-pw' resetkeys '~rlock:*' resetchannels -@all \
    +evalsha +eval +scan +time +type +exists +get +hget +zrange +zrangebyscore +zscore >/dev/null
  printf 'reader-pw\n' >"$BATS_TEST_TMPDIR/pw"
  chmod 600 "$BATS_TEST_TMPDIR/pw"
  rcli SCRIPT FLUSH >/dev/null
  rl 0 --user reader --password-file "$BATS_TEST_TMPDIR/pw" status ro-refused
  assert_output --partial "lock 'ro-refused': held (exclusive), 1 holder"
  rcli SET 'rlock:{ro-odd}:m' 'not a hash' >/dev/null
  rl 0 --user reader --password-file "$BATS_TEST_TMPDIR/pw" status
  assert_output --partial 'ro-refused'
  assert_output --partial 'ro-odd'
  rcli DEL 'rlock:{ro-odd}:m' >/dev/null
  rl 0 release ro-refused --token "$token"
}

@test "status: a server that may evict the lock's keys is warned of after what it shows; noeviction, no maxmemory and -q say nothing" {
  rl 0 acquire evictable -t 60s
  rl 0 status
  refute_stderr --partial 'may evict'
  rcli CONFIG SET maxmemory 100mb >/dev/null
  rl 0 status evictable
  refute_stderr --partial 'may evict'
  rcli CONFIG SET maxmemory-policy volatile-lru >/dev/null
  rl 0 status evictable
  assert_stderr --partial "may evict the keys of its locks (maxmemory 104857600 bytes, maxmemory-policy volatile-lru)"
  assert_output --partial evictable
  rl 0 status --json
  assert_stderr --partial 'maxmemory-policy volatile-lru'
  json 'd["locks"][0]["name"]' >/dev/null
  rcli CONFIG SET maxmemory-policy allkeys-random >/dev/null
  rl 1 status not-held
  assert_stderr --partial 'maxmemory-policy allkeys-random'
  rl 0 -q status evictable
  refute_stderr --partial 'may evict'
  rcli CONFIG SET maxmemory-policy noeviction >/dev/null
  rcli CONFIG SET maxmemory 0 >/dev/null
}
