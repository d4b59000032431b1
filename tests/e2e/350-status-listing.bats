#!/usr/bin/env bats
# `rlock status` (every lock) reads the locks with plain pipelined reads, not
# one lock script per lock; each lock must still be listed exactly as the
# script describes it: `rlock status NAME` runs the script, and its JSON must
# equal the listing's entry, times apart. What the reads cannot reproduce
# exactly (a foreign key, a limit Lua would parse its own way) goes to the
# script, and reads as it always did.

load helpers

teardown() {
  kill_bg_pids
}

# strip_times: stdin's JSON without the fields that tick (age, ttl, ...).
strip_times() {
  "$PYTHON" -c '
import json, sys
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if not k.endswith("_ms")}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
print(json.dumps(strip(json.load(sys.stdin)), sort_keys=True))'
}

@test "status listing: every lock as the lock script describes it, broken ones as broken" {
  rl 0 acquire plain -t 1h
  rl 0 acquire sem --limit 3 -t 1h
  rl 0 acquire sem --limit 3 -t 30m
  rl 0 acquire sh --shared -t 1h
  rl 0 acquire sh --shared -t 2h
  bg_rlock w-sh acquire sh -w 20s -t 1h
  bg_rlock w-plain acquire plain -w 20s -t 1h
  bg_rlock w-plain2 acquire plain --shared -w 20s -t 1h
  wait_waiters sh 1
  wait_waiters plain 2
  rl 0 acquire forced -t 1h
  rl 0 release forced --force
  rl 0 acquire forced -t 1h
  # A limit Lua's tonumber cannot read (the script shows 1): left to the script.
  rl 0 acquire odd-limit -t 1h
  rcli HSET 'rlock:{odd-limit}:m' limit abc >/dev/null
  # A holder score that is not an integer: left to the script too.
  rl 0 acquire odd-score -t 1h
  rcli ZADD 'rlock:{odd-score}:h' XX 99999999999999.5 "$(rcli ZRANGE 'rlock:{odd-score}:h' 0 0)" >/dev/null
  # Broken: a foreign meta key; and a record hash of the wrong type.
  rcli SET 'rlock:{foreign}:m' x >/dev/null
  rl 0 acquire bad-records -t 1h
  rcli SET 'rlock:{bad-records}:i' x >/dev/null

  rl 0 --json status
  local listing="$output"
  local names
  names="$("$PYTHON" -c 'import json,sys; print(" ".join(l["name"] for l in json.load(sys.stdin)["locks"]))' <<<"$listing")"
  assert_equal "$names" "forced odd-limit odd-score plain sem sh"
  local name
  for name in forced odd-limit odd-score plain sem sh; do
    rl 0 --json status "$name"
    local single listed
    single="$(strip_times <<<"$output")"
    listed="$("$PYTHON" -c 'import json,sys; print(json.dumps([l for l in json.load(sys.stdin)["locks"] if l["name"] == sys.argv[1]][0]))' "$name" <<<"$listing" | strip_times)"
    assert_equal "$listed" "$single"
  done
  output="$listing"
  assert_equal "$(json '[b["name"] for b in d["broken"]]')" '["bad-records", "foreign"]'
  assert_equal "$(json '[b["error"] for b in d["broken"] if b["name"] == "foreign"][0]')" \
    "WRONGTYPE key rlock:{foreign}:m holds a string, not part of an rlock lock"
  # The script's own error, not a plain read's: the lock went to the script.
  run json '[b["error"] for b in d["broken"] if b["name"] == "bad-records"][0]'
  assert_output --regexp '^WRONGTYPE .*@user_script'
  output="$listing"
  assert_equal "$(json '[l["limit"] for l in d["locks"] if l["name"] == "odd-limit"][0]')" 1
  assert_equal "$(json '[l["limit"] for l in d["locks"] if l["name"] == "sem"][0]')" 3
  assert_equal "$(json '[len(l["waiters"]) for l in d["locks"] if l["name"] == "plain"][0]')" 2

  # And the text listing carries the same rows.
  rl 0 status
  assert_line --index 0 --regexp '^NAME +MODE'
  assert_line --regexp '^foreign +broken'
  assert_line --regexp '^sem +semaphore/3 +2 '

  local tag
  for tag in w-sh w-plain w-plain2; do
    kill -TERM "$(<"$BATS_TEST_TMPDIR/$tag.pid")"
    bg_wait "$tag" 143
  done
}

@test "status listing: of several names, a broken one is shown as broken and the others still are (76)" {
  rl 0 acquire good -t 30s
  rcli SET 'rlock:{foreign}:m' foreign >/dev/null
  rl 76 status good foreign free-one --json
  assert_equal "$(json '[l["name"] for l in d["locks"]]')" '["good", "free-one"]'
  assert_equal "$(json '[b["name"] for b in d["broken"]]')" '["foreign"]'
  assert_stderr --regexp "^rlock: error: .*WRONGTYPE key rlock:\{foreign\}:m holds a string"
  assert_equal "${#stderr_lines[@]}" 1
  rl 76 status good foreign free-one
  assert_line "lock 'free-one': free (last fence 0)"
  assert_line --regexp "^lock 'good': held"
  assert_stderr --partial 'rlock:{foreign}:m'
  # Alone, it is the error it always was.
  rl 76 status foreign
  assert_output ""
}

@test "status listing: many locks, in batches, all listed once" {
  # 2500 locks: three batches of plain reads.
  "$PYTHON" - "$REDIS_PORT" <<'PY'
import sys, redis
r = redis.Redis(port=int(sys.argv[1]))
p = r.pipeline(transaction=False)
for i in range(2500):
    base = f"rlock:{{many-{i:04d}}}:"
    p.zadd(base + "h", {f"{i:040x}": 4102444800000})
    p.hset(base + "i", f"{i:040x}", f"{i + 1}\n1700000000000\nexclusive\n3600000\n5:owner2:vm1:11:x")
    p.hset(base + "m", mapping={"limit": "1", "seq": "1"})
    p.set(base + "f", str(1795350950866118 + i))  # fences have 16 digits
p.execute()
PY
  rcli CONFIG RESETSTAT >/dev/null
  rl 0 --json status
  run "$PYTHON" -c '
import json, sys
locks = json.load(sys.stdin)["locks"]
print(len(locks), locks[1234]["name"], locks[1234]["fence"], locks[2499]["holders"][0]["id"])' <<<"$output"
  assert_output "2500 many-1234 1795350950867352 $(printf '%040x' 2499 | cut -c1-8)"
  # Read, not scripted: not one run of the lock script.
  run rcli INFO commandstats
  assert_output --partial 'cmdstat_zrange:'
  refute_output --partial 'cmdstat_evalsha:'
}

# Right after the script cache is emptied (a restart, a failover, SCRIPT
# FLUSH), the first lock that needs the script loads it through EVAL; when
# that lock is broken, its answer is an error, but the script ran and is
# cached: the listing goes on (before: 76, nothing listed, once after every
# flush).
@test "status listing: right after SCRIPT FLUSH, a broken lock first in line does not fail the listing" {
  rl 0 acquire aa-broken -t 1h
  rl 0 acquire zz-good -t 1h
  rcli SET 'rlock:{aa-broken}:q' 'not a zset' >/dev/null
  rcli SCRIPT FLUSH >/dev/null
  rl 0 status
  assert_output --regexp 'aa-broken +broken'
  assert_output --regexp 'zz-good +exclusive'
  rcli DEL 'rlock:{aa-broken}:q' >/dev/null
}

# fence_ends: the column where each table line's FENCE header or fence
# value ends (a fence is the line's one number of 16 digits), one per line;
# status NAME's first line ("lock ...: held ..., last fence N") is no row.
fence_ends() {
  "$PYTHON" -c '
import re, sys
for line in sys.stdin:
    if line.startswith("lock "):
        continue
    m = re.search(r"FENCE|\b[0-9]{16}\b", line)
    if m:
        print(m.end())'
}

# AGE and TTL were 7 wide whatever they held: a TTL of 100 hours or more
# (a week is allowed) pushed the row's FENCE, WAITERS and COMMAND out of
# line with the others and with the header.
@test "status: a TTL of 100 hours or more keeps the columns in line, in the listing and for one lock" {
  rl 0 acquire -t 160h long-lease
  rl 0 acquire -t 10s short-lease
  rl 0 acquire -t 10s -l 2 long-semaphore
  rl 0 acquire -t 160h -l 2 long-semaphore
  rl 0 status
  assert_output --partial '159h59m'
  assert_equal "$(fence_ends <<<"$output" | sort -u | wc -l)" 1
  rl 0 status long-semaphore
  assert_equal "$(fence_ends <<<"$output" | sort -u | wc -l)" 1
}
