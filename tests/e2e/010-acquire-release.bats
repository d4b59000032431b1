#!/usr/bin/env bats
# acquire / renew / release / status against one private redis-server.

load helpers

# A token nobody was ever given: the same shape as a real one, 128 bits of hex.
FOREIGN_TOKEN=0123456789abcdef0123456789abcdef

@test "acquire: prints the token alone on stdout" {
  rl 0 acquire alone
  assert_equal "${#lines[@]}" 1
  assert_output --regexp '^[^[:space:]]{22,}$'
  assert_stderr ''
}

@test "acquire: two acquisitions get different tokens" {
  rl 0 acquire first
  local first="$output"
  rl 0 acquire second
  assert_not_equal "$output" "$first"
}

@test "acquire: --json reports name, token, fence, ttl_ms, mode and limit" {
  rl 0 acquire json-lock -t 30s --json
  assert_json
  assert_equal "$(json 'd["name"]')" json-lock
  assert_regex "$(json 'd["token"]')" '^[^[:space:]]{22,}$'
  assert_regex "$(json 'd["fence"]')" '^[0-9]+$'
  # The lease left as the caller can count on it: the TTL less the time
  # the acquire took and a margin for clock drift.
  assert_greater "$(json 'd["ttl_ms"]')" 29000
  assert_greater 30001 "$(json 'd["ttl_ms"]')"
  assert_equal "$(json '"mode" in d and "limit" in d')" true
}

@test "acquire: exactly one of ten racing acquirers wins, the others exit 75 silently" {
  RL_GATE="$BATS_TEST_TMPDIR/go"
  local i winners=0
  for i in {1..10}; do
    rl_bg "racer$i" acquire race -n -t 30s
  done
  touch "$RL_GATE"
  for i in {1..10}; do
    rl_wait "racer$i" 0,75
    if ((status == 0)); then
      winners=$((winners + 1))
      assert_output --regexp '^[^[:space:]]{22,}$'
    else
      # Busy with -n and stderr not a terminal: silent (cron mails output).
      assert_output ''
      assert_stderr ''
    fi
  done
  assert_equal "$winners" 1
}

@test "acquire: with -E 3, the nine losing racers exit 3" {
  RL_GATE="$BATS_TEST_TMPDIR/go"
  local i winners=0
  for i in {1..10}; do
    rl_bg "racer$i" acquire race-e -n -E 3 -t 30s
  done
  touch "$RL_GATE"
  for i in {1..10}; do
    rl_wait "racer$i" 0,3
    if ((status == 0)); then winners=$((winners + 1)); fi
  done
  assert_equal "$winners" 1
}

@test "acquire: -n on a held lock exits 75, -E changes that code" {
  rl 0 acquire held
  rl 75 acquire held -n
  rl 3 acquire held -n -E 3
}

@test "release: the owner's token releases the lock" {
  rl 0 acquire rel
  local token="$output"
  rl 0 release rel --token "$token"
  rl 1 status rel
  rl 0 acquire rel -n
}

@test "release: a foreign token exits 1 and leaves the owner's lock untouched" {
  rl 0 acquire guarded --owner alice
  local token="$output"
  rl 1 release guarded --token "$FOREIGN_TOKEN"
  rl 0 status guarded
  assert_output --partial alice
  rl 75 acquire guarded -n
  rl 0 release guarded --token "$token"
}

@test "renew: a foreign token exits 1 and leaves the owner's lock untouched" {
  rl 0 acquire guarded-renew -t 30s
  local token="$output"
  rl 1 renew guarded-renew --token "$FOREIGN_TOKEN" --ttl 60s
  rl 0 status guarded-renew
  rl 0 renew guarded-renew --token "$token"
  rl 0 release guarded-renew --token "$token"
}

@test "renew: the owner's token extends the lease" {
  rl 0 acquire extend -t 2s
  local token="$output"
  rl 0 renew extend --token "$token" --ttl 20s
  rl 0 status extend --json
  assert_greater "$(json 'd["holders"][0]["ttl_ms"]')" 10000
}

@test "renew: without --ttl the lease is renewed for the TTL it was acquired with" {
  rl 0 acquire keep-ttl -t 5m
  local token="$output"
  rl 0 renew keep-ttl --token "$token" --json
  assert_equal "$(json 'd["ttl_ms"]')" 300000
  rl 0 status keep-ttl --json
  assert_greater "$(json 'd["holders"][0]["ttl_ms"]')" 290000
}

@test "renew: a shorter --ttl never shortens the lease (it extends only)" {
  rl 0 acquire no-shorten -t 30s
  local token="$output"
  rl 0 renew no-shorten --token "$token" --ttl 1s --json
  # The reply is the lease left: still about 30 s.
  assert_greater "$(json 'd["ttl_ms"]')" 20000
  sleep 1.5
  rl 0 status no-shorten --json
  assert_greater "$(json 'd["holders"][0]["ttl_ms"]')" 20000
  rl 75 acquire no-shorten -n
}

@test "renew: a nested renew with a short --ttl cannot let a second holder in under run" {
  # The command renews its own lock through RLOCK_TOKEN with a shorter TTL;
  # run's heartbeat counts on the lease it set, so nobody else may get in.
  rl 0 run nested-renew -t 9s -- env RL="$RLOCK" bash -c '
    "$RL" renew nested-renew --token "$RLOCK_TOKEN" --ttl 1s || exit 10
    sleep 1.5
    if "$RL" acquire nested-renew -n >/dev/null 2>&1; then exit 11; fi
    exit 0'
}

@test "release and renew: a stale token from an expired lease is refused, the new holder keeps it" {
  rl 0 acquire stale -t 1s
  local old="$output"
  sleep 1.5
  rl 0 acquire stale -n --owner newcomer
  local new="$output"
  rl 1 renew stale --token "$old"
  rl 1 release stale --token "$old"
  rl 0 status stale
  assert_output --partial newcomer
  rl 0 release stale --token "$new"
}

@test "acquire: a lock expires after its TTL and the next holder gets a greater fence" {
  # 3 s, not 1 s: on a busy machine the json helper alone can take a second,
  # and the "still held" check must come before the lease ends.
  rl 0 acquire ttl -t 3s --json
  local first
  first="$(json 'd["fence"]')"
  rl 75 acquire ttl -n
  sleep 3.2
  rl 0 acquire ttl -n --json
  assert_greater "$(json 'd["fence"]')" "$first"
}

@test "acquire: fences keep growing across release and release --force" {
  rl 0 acquire fenced --json
  local f1 f2 token
  f1="$(json 'd["fence"]')"
  token="$(json 'd["token"]')"
  rl 0 release fenced --token "$token"
  rl 0 acquire fenced -n --json
  f2="$(json 'd["fence"]')"
  assert_greater "$f2" "$f1"
  rl 0 release fenced --force
  rl 1 status fenced
  rl 0 acquire fenced -n --json
  assert_greater "$(json 'd["fence"]')" "$f2"
}

@test "release: --json reports the name and that it was released" {
  rl 0 acquire rel-json
  rl 0 release rel-json --token "$output" --json
  assert_json
  assert_equal "$(json 'd["name"]')" rel-json
  assert_equal "$(json 'd["released"]')" true
}

@test "status: a held lock exits 0 and shows the owner and a short id, never the token" {
  rl 0 acquire shown --owner "nightly backup"
  local token="$output"
  rl 0 status shown --json
  assert_json
  local id
  id="$(json 'd["holders"][0]["id"]')"
  assert_not_equal "$id" ""
  assert_not_equal "$id" "$token"
  refute_output --partial "$token"
  rl 0 status shown
  assert_output --partial "nightly backup"
  assert_output --partial "$id"
  refute_output --partial "$token"
}

@test "status: --json of a held lock has the documented fields" {
  rl 0 acquire fields --owner ci-job -t 30s
  rl 0 status fields --json
  assert_json
  assert_equal "$(json 'd["name"]')" fields
  assert_equal "$(json 'd["held"]')" true
  assert_equal "$(json 'len(d["holders"])')" 1
  assert_equal "$(json 'd["holders"][0]["owner"]')" ci-job
  assert_equal "$(json 'sorted(k for k in ["id", "owner", "host", "pid", "command", "mode", "age_ms", "ttl_ms", "fence"] if k not in d["holders"][0])')" '[]'
  assert_equal "$(json 'd["waiters"]')" '[]'
}

@test "status: a free lock exits 1, and --json still prints valid JSON" {
  rl 1 status nobody-holds-this
  rl 1 status nobody-holds-this --json
  assert_json
  assert_equal "$(json 'd["held"]')" false
  assert_equal "$(json 'd["holders"]')" '[]'
}

@test "scripts: every command still works after SCRIPT FLUSH" {
  rl 0 acquire flushed
  local token="$output"
  rcli SCRIPT FLUSH
  rl 0 renew flushed --token "$token"
  rcli SCRIPT FLUSH
  rl 0 status flushed
  rcli SCRIPT FLUSH
  rl 0 release flushed --token "$token"
  rcli SCRIPT FLUSH
  rl 0 acquire flushed -n
}

@test "renew: a lease that ran out is not brought back, even while another holder keeps the lock's keys alive" {
  # A semaphore's other holder keeps the keys: the lapsed lease's record is
  # still there, and must not count.
  rl 0 acquire lapsed --limit 2 -t 30s
  local keeper="$output"
  rl 0 acquire lapsed --limit 2 -t 1s
  local lapsed="$output"
  sleep 1.5
  rl 1 renew lapsed --token "$lapsed" -t 5s
  rl 0 status lapsed --json
  assert_equal "$(json 'len(d["holders"])')" 1
  rl 0 release lapsed --token "$keeper"
}
