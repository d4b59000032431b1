#!/usr/bin/env bats
# A quorum of five independent redis-servers (Redlock): the lock is held
# when a majority holds it, members are asked in parallel, fences stay
# monotonic across changing majorities, and a member restarted without its
# data does not let a second holder in.

load helpers
load quorum

setup_file() {
  start_quorum 5
}

setup() {
  q_heal
}

teardown() {
  stop_sessions
  kill_bg_pids
  local k
  for ((k = 1; k <= Q_N; k++)); do
    q_thaw "$k" 2>/dev/null || true
    qcli "$k" -a other --no-auth-warning CONFIG SET requirepass '' >/dev/null 2>&1 || true
    qcli "$k" REPLICAOF NO ONE >/dev/null 2>&1 || true
    qcli "$k" CONFIG SET replica-read-only yes >/dev/null 2>&1 || true
    qcli "$k" CLIENT UNPAUSE >/dev/null 2>&1 || true
    qcli "$k" ACL DELUSER oldacl >/dev/null 2>&1 || true
  done
}

# --- tests -------------------------------------------------------------------

@test "quorum: the lock is on at least three members, and gone from all after release" {
  rl 0 acquire q1 -t "$Q_TTL"
  local token="$output"
  local n
  n="$(q_holding q1)"
  ((n >= 3)) || fail "the lock is on $n members"
  rl 0 status -t "$Q_TTL" q1
  rl 75 acquire q1 -n -t "$Q_TTL"
  rl 0 release q1 --token "$token"
  assert_equal "$(q_holding q1)" 0
  rl 1 status -t "$Q_TTL" q1
}

@test "quorum: several --url options are a quorum too" {
  local urls=() k
  for ((k = 1; k <= Q_N; k++)); do urls+=(-u "redis://127.0.0.1:$(q_port "$k")/0"); done
  RLOCK_URL='' rl 0 "${urls[@]}" acquire q2 -t "$Q_TTL"
  local n
  n="$(q_holding q2)"
  ((n >= 3)) || fail "the lock is on $n members"
  # One of them alone sees it held.
  RLOCK_URL="redis://127.0.0.1:$(q_port 1)/0" rl 0,1 status -t "$Q_TTL" q2
}

@test "quorum: a frozen member does not slow acquire down to its timeout" {
  q_freeze 2
  local start end
  start="$(now_ms)"
  rl 0 acquire q3 -n -t "$Q_TTL"
  end="$(now_ms)"
  local token="$output"
  echo "# acquire with one of five members frozen: $((end - start)) ms" >&3
  # The command timeout is 5 s: waiting for the frozen member would take it.
  ((end - start < 4000)) || fail "acquire took $((end - start)) ms"
  start="$(now_ms)"
  rl 0 release q3 --token "$token"
  end="$(now_ms)"
  echo "# release with one of five members frozen: $((end - start)) ms" >&3
  ((end - start < 4000)) || fail "release took $((end - start)) ms"
}

@test "quorum: a frozen member does not slow status NAME or release --force down to its timeout; the listing leaves it out" {
  # Held for longer than the test takes (members are older than Q_TTL only).
  rl 0 acquire q3s -t "$Q_TTL"
  rl 0 renew q3s --token "$output" --ttl 30s
  # Its script cache emptied too: nobody is left to answer its NOSCRIPT
  # when it resumes, so the forced release must not need the cache.
  qcli 2 SCRIPT FLUSH >/dev/null
  q_freeze 2
  local start end what
  for what in "status q3s -t $Q_TTL" "status -t $Q_TTL" "release q3s --force"; do
    start="$(now_ms)"
    # shellcheck disable=SC2086 # the words of the command
    run --separate-stderr "$RLOCK_BIN" $what
    end="$(now_ms)"
    echo "# $what with one of five members frozen: $((end - start)) ms, exit $status" >&3
    # The command timeout is 5 s; once a majority has answered, the others
    # get as long again (a second at least). The listing waits for every
    # member (one with many keys lists them for seconds): for a frozen one
    # its uptime's timeout, once.
    [[ "$what" == "status -t"* ]] || ((end - start < 4000)) || fail "$what took $((end - start)) ms"
    case "$what" in
      "status q3s"*)
        assert_equal "$status" 0
        assert_output --regexp "unreachable +redis://127\.0\.0\.1:$(q_port 2)/0  holders -  last fence 0: no answer in time"
        ;;
      status*)
        assert_equal "$status" 69
        assert_output --partial q3s
        assert_stderr --partial "quorum member redis://127.0.0.1:$(q_port 2)/0 left out (timed out after"
        ;;
      *)
        assert_equal "$status" 0
        assert_output --partial "evicted"
        ;;
    esac
  done
  # The frozen member had the request on its socket: it evicts when it
  # resumes.
  q_thaw 2
  q_evicts 2 q3s
  assert_equal "$(q_holding q3s)" 0
}

@test "quorum: status NAME waits for a member busy for a second and a half when its answer decides" {
  # Held on members 1-3 only (a bare majority), member 3 busy with a
  # script when asked: the four others that answer at once cannot tell
  # (two hold, two do not), so member 3 is heard after hear_all's second,
  # not left out (69, "cannot tell").
  rl 0 acquire q-busy -t "$Q_TTL"
  rl 0 renew q-busy --token "$output" --ttl 30s
  local k
  for k in 4 5; do qcli "$k" DEL 'rlock:{q-busy}:h' 'rlock:{q-busy}:i' 'rlock:{q-busy}:m' >/dev/null; done
  qcli 3 EVAL "local t = redis.call('TIME') local s = t[1] * 1e6 + t[2]
    repeat local n = redis.call('TIME') until n[1] * 1e6 + n[2] - s > 1500000 return 1" 0 >/dev/null &
  nap 0.1
  rl 0 status q-busy -t "$Q_TTL"
  assert_output --partial "lock 'q-busy': held"
  refute_output --partial "no answer"
  wait "$!"
}

@test "quorum: release --force waits for silent members when nobody was evicted elsewhere, and cannot say 'not held' without them" {
  local k
  # Held on member 2 alone (the others lost it), member 2 busy for 1.5 s:
  # the members that answer at once evicted nobody, so it is waited for.
  rl 0 acquire force-slow -t "$Q_TTL"
  rl 0 renew force-slow --token "$output" --ttl 30s
  for k in 1 3 4 5; do qcli "$k" DEL 'rlock:{force-slow}:h' 'rlock:{force-slow}:i' 'rlock:{force-slow}:m' >/dev/null; done
  qcli 2 EVAL "local t = redis.call('TIME') local s = t[1] * 1e6 + t[2]
    repeat local n = redis.call('TIME') until n[1] * 1e6 + n[2] - s > 1500000 return 1" 0 >/dev/null &
  nap 0.1
  rl 0 release force-slow --force
  assert_output --partial "evicted"
  wait "$!"
  # The same with member 2 frozen: it cannot be heard, so 69, not 1; it
  # evicts when it resumes.
  rl 0 acquire force-frozen -t "$Q_TTL"
  rl 0 renew force-frozen --token "$output" --ttl 30s
  for k in 1 3 4 5; do qcli "$k" DEL 'rlock:{force-frozen}:h' 'rlock:{force-frozen}:i' 'rlock:{force-frozen}:m' >/dev/null; done
  q_freeze 2
  rl 69 release force-frozen --force
  assert_stderr --partial "the forced release evicted nobody where it was answered"
  assert_stderr --partial "127.0.0.1:$(q_port 2)/0"
  q_thaw 2
  q_evicts 2 force-frozen
  # A lock nobody holds anywhere is still "not held" (1).
  rl 1 release force-nobody --force
}

@test "quorum: a release with three of five members frozen exits 0 without waiting them out" {
  rl 0 acquire q3f -t "$Q_TTL"
  local token="$output" start end
  q_freeze 1
  q_freeze 2
  q_freeze 3
  start="$(now_ms)"
  rl 0 release q3f --token "$token"
  end="$(now_ms)"
  echo "# release with three of five members frozen: $((end - start)) ms" >&3
  # Released on members 4 and 5; the frozen ones get a second, not the
  # 5 s command timeout.
  ((end - start < 4000)) || fail "release took $((end - start)) ms"
  q_thaw 1
  q_thaw 2
  q_thaw 3
  sleep 0.3
  rl 1 status -t "$Q_TTL" q3f
}

@test "quorum: a release exits 0 when the one member that held the lock answers after a majority said it was not held" {
  # A lock left on one member (taken through its URL alone). That member
  # answers 0.4 s after the others: before, the majority's "not held" was
  # taken at once, exit 1, although the release then freed it.
  rl 0 -u "redis://127.0.0.1:$(q_port 1)/0" acquire lone -t 60s
  local token="$output" thaw
  q_freeze 1
  (
    sleep 0.4
    q_thaw 1
  ) &
  thaw=$!
  rl 0 release lone --token "$token"
  wait "$thaw"
  assert_equal "$(qcli 1 EXISTS 'rlock:{lone}:h')" 0
}

@test "quorum: a lock three members hold for three different holders is neither held nor free (69), not 'free' beside an acquire that says busy" {
  local k
  for k in 1 2 3; do
    RLOCK_URL="redis://127.0.0.1:$(q_port "$k")/0" rl 0 acquire split -t "$Q_TTL"
  done
  rl 75 acquire split -n -t "$Q_TTL"
  rl 69 status split -t "$Q_TTL"
  assert_stderr --partial "lock 'split': neither held nor free: no holder is on a majority of the 5 quorum members, and only 2 show no holder"
  # The listing says the same of it (69), not a free row alone.
  rl 69 status -t "$Q_TTL"
  assert_stderr --partial "lock 'split': neither held nor free"
  # Two of five held apart: three can still grant it, so it is free.
  RLOCK_URL="redis://127.0.0.1:$(q_port 3)/0" rl 0 release split --force
  rl 1 status split -t "$Q_TTL"
}

@test "quorum: acquire -w waits out a majority frozen at its first try, as it waits for one server that does not answer" {
  # Before: 69 as soon as the first try (bounded by the TTL) ended without
  # a majority, although -w had seconds left.
  local k thaw
  for k in 1 2 3; do q_freeze "$k"; done
  (
    sleep 1.5
    for k in 1 2 3; do q_thaw "$k"; done
  ) &
  thaw=$!
  rl 0 acquire frozen-first -w 6s -t 1s
  wait "$thaw"
  # Members that refuse connections are an outage at once, as one server
  # down from the start is.
  q_kill 1
  q_kill 2
  q_kill 3
  SECONDS=0
  rl 69 acquire down-first -w 6s -t 1s
  ((SECONDS < 4)) || fail "gave up after ${SECONDS}s"
}

@test "quorum: fences increase when the majorities differ" {
  # Member 1's counter is far ahead of every clock: a grant on a majority
  # with member 1 hands out a fence above it, and a later majority without
  # member 1 must still go higher (it shares member 3 with the first, whose
  # counter was raised).
  qcli 1 SET 'rlock:{fence}:f' 5000000000000000 >/dev/null
  q_freeze 4
  q_freeze 5
  rl 0 acquire fence -n -t "$Q_TTL" --json
  local f1 t1
  f1="$(json 'd["fence"]')"
  t1="$(json 'd["token"]')"
  ((f1 > 5000000000000000)) || fail "first fence $f1"
  rl 0 release fence --token "$t1"
  q_thaw 4
  q_thaw 5
  q_freeze 1
  q_freeze 2
  rl 0 acquire fence -n -t "$Q_TTL" --json
  local f2 t2
  f2="$(json 'd["fence"]')"
  t2="$(json 'd["token"]')"
  ((f2 > f1)) || fail "fence went from $f1 to $f2 (majority 1-3, then 3-5)"
  rl 0 release fence --token "$t2"
  q_thaw 1
  q_thaw 2
  q_freeze 3
  q_freeze 5
  rl 0 acquire fence -n -t "$Q_TTL" --json
  local f3
  f3="$(json 'd["fence"]')"
  ((f3 > f2)) || fail "fence went from $f2 to $f3 (majority 3-5, then 1,2,4)"
}

@test "quorum: the fence handed out is the one every granting member records, late ones included" {
  # Member 5's counter is far ahead: whenever it grants, in the majority or
  # a little after it (a late grant is kept), its fence is the highest and
  # must be the one handed out, raised on every member that holds.
  qcli 5 SET 'rlock:{late}:f' 6000000000000000 >/dev/null
  local i fence
  for ((i = 0; i < 20; i++)); do
    rl 0 acquire late -n -t "$Q_TTL" --json
    fence="$(json 'd["fence"]')"
    local token
    token="$(json 'd["token"]')"
    rl 0 status -t "$Q_TTL" late --json
    assert_equal "$(json 'd["holders"][0]["fence"]')" "$fence"
    # Every member that shows the holder shows its fence as the counter.
    assert_equal "$(json '",".join(sorted({str(m["fence"]) for m in d["members"] if m["holders"]}))')" "$fence"
    rl 0 release late --token "$token"
  done
}

@test "quorum: status NAME names every member and marks the dead one" {
  q_kill 5
  rl 0 acquire q5 -t "$Q_TTL"
  rl 0 status -t "$Q_TTL" q5
  local k
  for ((k = 1; k <= Q_N; k++)); do assert_output --partial "127.0.0.1:$(q_port "$k")"; done
  assert_output --regexp "unreachable +redis://127\.0\.0\.1:$(q_port 5)/0"
  rl 0 status -t "$Q_TTL" q5 --json
  run "$PYTHON" -c '
import json, sys
v = json.loads(sys.argv[1])
states = [m["state"] for m in v["members"]]
assert len(states) == 5, states
assert states[4] == "unreachable", states
assert states.count("ok") >= 3, states
print(v["members"][4]["error"])' "$output"
  assert_success
  # The listing too shows the lock, and says which member it left out.
  rl 69 status -t "$Q_TTL"
  assert_output --partial q5
  assert_stderr --partial "quorum member redis://127.0.0.1:$(q_port 5)/0 left out"
}

@test "quorum: a member that does not answer is named once in the error, not again in front of its reason" {
  q_freeze 3
  q_freeze 4
  q_freeze 5
  RL_TIMEOUT=20 rl 69 status -t "$Q_TTL" --connect-timeout 1s
  local k
  for k in 3 4 5; do
    assert_stderr --partial "redis://127.0.0.1:$(q_port "$k")/0: "
    refute_stderr --partial "redis://127.0.0.1:$(q_port "$k")/0: redis://127.0.0.1:$(q_port "$k")/0"
  done
  q_thaw 3
  q_thaw 4
  q_thaw 5
}

@test "quorum: a renewal three dead members fail counts the two that did extend it" {
  local token tries
  for ((tries = 0; tries < 5; tries++)); do
    rl 0 acquire renewed-by-two -t "$Q_TTL"
    token="$output"
    # On a loaded machine a member slower than the others may have its
    # grant given back (it would hold a lock the client never counted):
    # this test needs the lock on all five.
    (($(q_holding renewed-by-two) == 5)) && break
    rl 0,1 release renewed-by-two --token "$token"
  done
  assert_equal "$(q_holding renewed-by-two)" 5
  q_kill 1
  q_kill 2
  q_kill 3
  # The refused connections decide at once; the live members' answers are
  # still counted and named for what they said.
  rl 69 renew renewed-by-two --token "$token"
  assert_stderr --partial "the renewal of lock 'renewed-by-two' was confirmed by 2 of 5"
  refute_stderr --partial 'no answer yet'
  # Each dead member named once, before its reason.
  assert_stderr --partial ': cannot connect: Connection refused'
  refute_stderr --partial 'cannot connect to'
}

@test "quorum: two members killed, the lock still works; three, and it refuses with nothing held" {
  q_kill 4
  q_kill 5
  rl 0 acquire q6 -n -t "$Q_TTL"
  local token="$output"
  assert_equal "$(q_holding q6)" 3
  rl 0 release q6 --token "$token"
  q_kill 3
  rl 69 acquire q6 -n -t "$Q_TTL"
  assert_equal "$(q_holding q6)" 0
  rl 69,75 acquire q6 -w 1s -t "$Q_TTL"
  assert_equal "$(q_holding q6)" 0
}

@test "quorum: a run keeps its lock while a member is frozen, and a watcher never gets in" {
  # A 2 s TTL: renewals every ~670 ms, five of them with the member frozen,
  # and room for a loaded machine (with 1 s a renewal delayed by the load
  # once lost the lock: 2 of 5 confirmed in time).
  bg_rlock holder run q7 -t 2s -- sleep 4
  local i
  for ((i = 0; i < 100; i++)); do
    (($(q_holding q7) >= 3)) && break
    nap 0.05
  done
  q_freeze 1
  local end=$(($(now_ms) + 2500))
  # The watcher tries every 50 ms or so: often enough to get in if it could,
  # without turning the test into a load of its own.
  while (($(now_ms) < end)); do
    rl 75 acquire q7 -n -t 1s
    nap 0.05
  done
  bg_wait holder 0 10
}

@test "quorum: read-modify-write by 8 waiting runs x 3 sections loses nothing" {
  echo 0 >"$BATS_TEST_TMPDIR/counter"
  local i
  for i in 1 2 3 4 5 6 7 8; do
    session "w$i" "for s in 1 2 3; do
        \"\$RLOCK\" run counter -w 50s -t $Q_TTL -c 'n=\$(cat \"\$DIR/counter\"); sleep 0.02; echo \$((n + 1)) >\"\$DIR/counter\"' || exit 9
      done"
  done
  wait_sessions
  assert_equal "$(<"$BATS_TEST_TMPDIR/counter")" 24
}

@test "quorum: a member restarted without data does not let a second holder in" {
  # The TTL is 5 s: the members must have been up that long to count.
  q_wait_uptime 5
  # The holder is on members 1-3 only (4 and 5 frozen while it acquires).
  q_freeze 4
  q_freeze 5
  rl 0 acquire q9 -n -t 5s
  local token="$output"
  q_thaw 4
  q_thaw 5
  # The acquire sent to 4 and 5 was in their sockets and runs when they
  # resume: wipe what it left there, so that the holder holds 1-3 only.
  sleep 0.2
  qcli 4 FLUSHALL >/dev/null
  qcli 5 FLUSHALL >/dev/null
  assert_equal "$(q_holding q9)" 3
  # Member 3 loses everything: 3, 4 and 5 would be a majority without the
  # holder, but 3 has not been up for the TTL and does not count.
  q_restart 3
  rl 75 acquire q9 -n -t 5s
  # The holder still holds on 1 and 2 only, a minority: its release takes
  # those away, and says "released" (0) or "not held" (1) by whichever
  # answers form a majority first (1 and 2 with one other, or 3, 4 and 5).
  rl 0,1 release q9 --token "$token"
  assert_equal "$(q_holding q9)" 0
}

@test "quorum: status lists a lock one member holds alone, and release --force clears every member" {
  # Members up for less than the locks' 10 s TTL could not vouch for "free".
  q_wait_uptime 10
  RLOCK_URL="redis://127.0.0.1:$(q_port 2)/0" rl 0 acquire lone -t 10s
  rl 0 acquire both -t 10s
  rl 0 status -t "$Q_TTL"
  assert_output --partial lone
  assert_output --partial both
  rl 1 status -t "$Q_TTL" lone
  assert_output --regexp "disagrees +redis://127\.0\.0\.1:$(q_port 2)/0"
  rl 0 release lone --force
  rl 0 release both --force
  assert_equal "$(q_holding lone)" 0
  assert_equal "$(q_holding both)" 0
}

# status took the forced releases from the first member alone: one that was
# down during the release --force (or restarted since) hid it (probe D).
@test "quorum: status shows a forced release the first member missed" {
  rl 0 acquire forced-first -t "$Q_TTL"
  rl 0 release forced-first --force
  qcli 1 DEL 'rlock:{forced-first}:a' >/dev/null
  rl 1 --json status -t "$Q_TTL" forced-first
  assert_equal "$(json 'd["forced"] is not None')" true
  assert_equal "$(json 'len(d["forced_history"])')" 1
  rl 1 status -t "$Q_TTL" forced-first
  assert_output --partial 'force-released'
}

@test "quorum: a run takes its lock again on a member that lost it" {
  bg_rlock holder run q11 -t 1s -- sh -c 'echo "$RLOCK_FENCE" >"$0"; sleep 6' "$BATS_TEST_TMPDIR/fence"
  local i
  for ((i = 0; i < 100; i++)); do
    (($(q_holding q11) == 5)) && break
    nap 0.05
  done
  assert_equal "$(q_holding q11)" 5
  # Member 1 forgets everything (as after a restart, but old enough to count).
  qcli 1 FLUSHALL >/dev/null
  # Renewals come every TTL/3: within a second member 1 holds it again (3 s
  # allowed: a loaded machine once took longer than 1.5 s).
  local until=$(($(now_ms) + 3000))
  while (($(now_ms) < until)); do
    (($(q_holding q11) == 5)) && break
    nap 0.05
  done
  assert_equal "$(q_holding q11)" 5
  # Member 1 has a record of its own now (a fence and an age of its own):
  # status shows the holder as most members have it, with the command's
  # fence.
  rl 0 status -t "$Q_TTL" q11 --json
  assert_equal "$(json 'd["holders"][0]["fence"]')" "$(<"$BATS_TEST_TMPDIR/fence")"
  bg_wait holder 0 10
  # The last member, whose answer usually comes after the majority's, was
  # never taken again (the renewal did not wait to hear it): with a 3 s
  # TTL, renewals come every second, and the first after the loss retakes
  # (2.8 s allowed: a loaded machine).
  bg_rlock holder run q12 -t 3s -- sleep 5
  for ((i = 0; i < 100; i++)); do
    (($(q_holding q12) == 5)) && break
    nap 0.05
  done
  qcli 5 FLUSHALL >/dev/null
  until=$(($(now_ms) + 2800))
  while (($(now_ms) < until)); do
    (($(q_holding q12) == 5)) && break
    nap 0.05
  done
  assert_equal "$(q_holding q12)" 5
  bg_wait holder 0 10
}

@test "quorum: with a member dead, waiters on a busy lock queue and get it; -n says busy" {
  rl 0 acquire dq -t "$Q_TTL"
  local token="$output"
  # The last member: its refusal comes first and, before the fix, decided
  # "out of reach" while three live members had yet to answer.
  q_kill 5
  local i
  for ((i = 0; i < 5; i++)); do rl 75 acquire dq -n -t "$Q_TTL"; done
  bg_rlock waiter run dq -w 20s -t "$Q_TTL" -- true
  nap 1
  rl 0 release dq --token "$token"
  bg_wait waiter 0 20
}

@test "quorum: waiters are served in the order they came, also with a member where the lock is free" {
  # The holder is on members 1-4 only (5 frozen while it acquires, and
  # wiped of the acquire it runs when it resumes): on 5 each waiter is
  # granted and gives the grant back, queued on 1-4 only. The TTL is long
  # enough for a loaded machine to start five waiters (and the members must
  # have been up that long to count).
  q_wait_uptime 10
  q_freeze 5
  rl 0 acquire fq -t 10s
  local token="$output" i
  q_thaw 5
  sleep 0.2
  qcli 5 FLUSHALL >/dev/null
  assert_equal "$(q_holding fq)" 4
  for i in 1 2 3 4 5; do
    session "w$i" "\"\$RLOCK\" run fq -w 50s -t $Q_TTL -c 'echo $i >>\"\$DIR/order\"'"
    # Each waiter queued on every member before the next arrives (a loaded
    # machine can take longer than any fixed pause to start one).
    local tries=0
    until (($(q_queue_len fq) >= i)); do
      ((++tries < 200)) || fail "waiter $i not queued on every member"
      nap 0.05
    done
  done
  rl 0 release fq --token "$token"
  wait_sessions
  assert_equal "$(tr '\n' ' ' <"$BATS_TEST_TMPDIR/order")" "1 2 3 4 5 "
}

# q_live_count KEY N: whether members 1-4 each have N members in zset KEY;
# $seen says what they have.
q_live_count() {
  local k n=0
  seen=""
  for k in 1 2 3 4; do
    REDIS_CMD_TIMEOUT=2 redis_cmd "$(q_port "$k")" ZCARD "$1" 2>/dev/null || redis_reply=(none)
    seen+=" ${redis_reply[0]}"
    [[ "${redis_reply[0]}" == "$2" ]] && n=$((n + 1))
  done
  ((n == 4))
}

# q_live_queued NAME N: until members 1-4 each have N waiters of lock NAME
# queued (member 5 is frozen in the test below).
q_live_queued() {
  local tries=0 seen
  until q_live_count "rlock:{$1}:q" "$2"; do
    ((++tries < 200)) || fail "not $2 waiters of $1 queued on members 1-4 (queues:$seen)"
    nap 0.05
  done
}

@test "quorum: waiters the members rank in opposite orders both get the lock while a member is frozen" {
  # Members 1 and 2 have waiter a first, 3 and 4 have b first (their
  # queues reordered by hand), and member 5 is frozen: the release hands
  # the lock to a on 1-2 and to b on 3-4, and only the frozen member could
  # make either pair a majority. Each waiter used to wait for it until the
  # command timeout (5 s) holding its pair, give the grants back, be
  # handed the other pair (the same split, mirrored) and wait again:
  # nobody got the lock while the member stayed frozen (probe: 1 entry in
  # 10 s from six looping runs). The TTL is long enough for a loaded
  # machine to queue both waiters (the members must be up that long).
  q_wait_uptime 10
  # The holder on every member: a member slower than the others may be
  # given back its grant (on a loaded machine), and would then grant to
  # each waiter in turn rather than queue it.
  local token k q seen
  for ((k = 0; ; k++)); do
    rl 0 acquire sq -t 10s
    token="$output"
    q_live_count 'rlock:{sq}:h' 1 && break
    ((k < 5)) || fail "the holder is not on every member (holders:$seen)"
    rl 0 release sq --token "$token"
  done
  q_freeze 5
  # The command timeout goes up to 10 s with the connect timeout: how long
  # the waiters used to wait for the frozen member each time.
  session a "\"\$RLOCK\" --connect-timeout 10s run sq -w 30s -t 10s -c 'echo a >>\"\$DIR/order\"'"
  q_live_queued sq 1
  session b "\"\$RLOCK\" --connect-timeout 10s run sq -w 30s -t 10s -c 'echo b >>\"\$DIR/order\"'"
  q_live_queued sq 2
  for k in 3 4; do
    mapfile -t q < <(qcli "$k" ZRANGE 'rlock:{sq}:q' 0 -1 WITHSCORES)
    ((${#q[@]} == 4)) || fail "member $k queue: ${q[*]}"
    # a (q[0], arrival q[1]) and b (q[2], q[3]) swap their places.
    qcli "$k" ZADD 'rlock:{sq}:q' "${q[3]}" "${q[0]}" "${q[1]}" "${q[2]}" >/dev/null
    qcli "$k" ZADD 'rlock:{sq}:x' "${q[3]}" "${q[0]}" "${q[1]}" "${q[2]}" >/dev/null
  done
  local start elapsed i done=0
  start="$(now_ms)"
  rl 0 release sq --token "$token"
  # Both within 5 s (a fraction of a second unloaded); before the fix,
  # neither within 10 s.
  for ((i = 0; i < 100; i++)); do
    [[ -f "$BATS_TEST_TMPDIR/order" ]] && done="$(wc -l <"$BATS_TEST_TMPDIR/order")"
    ((done == 2)) && break
    nap 0.05
  done
  elapsed=$(($(now_ms) - start))
  echo "# two waiters split 2/2 with a member frozen: $done done in $elapsed ms" >&3
  ((done == 2)) || fail "after $elapsed ms, $done of the 2 waiters got the lock"
  wait_sessions
  # The frozen member then runs what it was sent, in order: every grant it
  # makes is given back behind it, and no majority holds the lock.
  q_thaw 5
  nap 0.5
  rl 0 acquire sq -n -t "$Q_TTL"
}

@test "quorum: status NAME and release --force answered by a minority exit 69, naming the members" {
  # Held on members 3-5 only (1 and 2 frozen while it is taken, and given
  # it back when they resume)...
  q_freeze 1
  q_freeze 2
  rl 0 acquire mq -t "$Q_TTL"
  q_thaw 1
  q_thaw 2
  sleep 0.2
  # ... and only 1 and 2 answer: they would say "free".
  q_kill 3
  q_kill 4
  q_kill 5
  rl 69 status -t "$Q_TTL" mq
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "only 2 answered of 5 quorum members"
  assert_stderr --partial "127.0.0.1:$(q_port 4)/0"
  rl 69 status -t "$Q_TTL" mq --json
  rl 69 release mq --force
  assert_stderr --partial "the forced release was answered by only 2 of 5"
}

@test "quorum: a holder the dead member could make a majority one is in doubt: status NAME and the listing say so (69)" {
  # Held on members 1-3 only (4 and 5 frozen while it is taken, and wiped
  # of the acquire they run when they resume), then 2 dies: 1 and 3 name
  # the holder, 4 and 5 do not, and 2 would decide. "free" would be false.
  # A 10 s TTL, for a loaded machine (the members must be as old).
  q_wait_uptime 10
  q_freeze 4
  q_freeze 5
  rl 0 acquire dq2 -t 10s
  q_thaw 4
  q_thaw 5
  sleep 0.2
  qcli 4 FLUSHALL >/dev/null
  qcli 5 FLUSHALL >/dev/null
  # `sure` on all five (under load a slow member's grant may come too late
  # and be given back, and then losing member 2 leaves it in doubt too).
  local tries
  for ((tries = 0; tries < 10; tries++)); do
    rl 0 acquire sure -t 10s
    (($(q_holding sure) == 5)) && break
    rl 0 release sure --token "$output"
  done
  (($(q_holding sure) == 5)) || fail "lock 'sure' never got onto all five members"
  q_kill 2
  rl 69 status -t "$Q_TTL" dq2
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "lock 'dq2': cannot tell whether it is held: holder"
  assert_stderr --partial "is on 2 of 5 quorum members"
  assert_stderr --partial "127.0.0.1:$(q_port 2)/0"
  # A lock the live members can answer for is told as before.
  rl 0 status -t "$Q_TTL" sure
  # The listing shows what the others hold and names the member left out.
  rl 69 status -t "$Q_TTL"
  assert_output --partial dq2
  assert_output --partial sure
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "listing incomplete: quorum member redis://127.0.0.1:$(q_port 2)/0 left out"
  rl 69 status -t "$Q_TTL" --json
  assert_equal "$(json 'len(d["unlisted"])')" 1
}

@test "quorum: a member restarted within the TTL cannot vouch that a lock is free: status NAME and the listing cannot tell (69)" {
  # The probe's case: held on members 1-3 (4 and 5 frozen while it was
  # taken, so their grants were given back), then 3 restarts empty. 1 and 2
  # name the holder, 3, 4 and 5 do not: "free" (exit 1) was false, acquire
  # refused it as busy at the same moment.
  q_wait_uptime 6
  q_freeze 4
  q_freeze 5
  rl 0 acquire restarted -t 5s
  q_thaw 4
  q_thaw 5
  rl 0 acquire other -t 5s
  q_restart 3
  rl 69 status -t 5s restarted
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "lock 'restarted': cannot tell whether it is held: holder"
  assert_stderr --partial "is on 2 of 5 quorum members; 1 of the others has been up for less than the TTL (5s)"
  rl 75 acquire restarted -n -t 5s
  # A lock a majority holds is told as before, young member or not.
  rl 0 status -t 5s other
  # The listing shows what it can and says which member is too young.
  rl 69 status -t 5s
  assert_output --partial restarted
  assert_output --partial other
  assert_stderr --partial "listing incomplete: quorum member redis://127.0.0.1:$(q_port 3)/0 has been up for"
  assert_stderr --partial "less than the TTL (5s)"
  # Nobody named, two members out of reach and one too young: the two old
  # ones are no majority, so no "free" either.
  q_freeze 1
  q_freeze 2
  rl 69 status -t 5s nobody
  q_thaw 1
  q_thaw 2
  assert_stderr --partial "cannot tell whether it is held: no holder is named, but only 2 of 5 quorum members have been up for the TTL (5s), 1 for less, 2 did not answer"
}

@test "quorum: a lease lengthened by renew --ttl is not taken over when members restart: no second grant, status cannot tell" {
  # The probe's case: the delayed restart went by the newcomer's TTL (3 s)
  # while the holder had renewed itself for 60 s; three members restarted
  # empty, up for more than 3 s, granted a second holder, and status said
  # "free". A member younger than a holder others show no longer counts.
  rl 0 acquire lengthened -t "$Q_TTL"
  local token="$output"
  rl 0 renew lengthened --token "$token" --ttl 60s
  q_restart 3
  q_restart 4
  q_restart 5
  q_wait_uptime 4
  rl 75 acquire lengthened -n -t "$Q_TTL"
  rl 69 status -t "$Q_TTL" lengthened
  assert_stderr --partial "is on 2 of 5 quorum members; 3 of the others have been up for less than"
  # The listing says it of that lock (the members are old enough for the
  # TTL, so no member is left out).
  rl 69 status -t "$Q_TTL"
  assert_output --partial lengthened
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "listing incomplete: lock 'lengthened': cannot tell whether it is held"
  rl 0,1 release lengthened --token "$token"
}

@test "quorum: status NAME through two URLs of one server is refused (78), not a majority of one" {
  local urls="redis://127.0.0.1:$(q_port 1)/0,unix://$Q_DIR_1/redis.sock,redis://127.0.0.1:$(q_port 2)/0"
  # Held on that one server only: its two votes looked like a majority.
  RLOCK_URL="redis://127.0.0.1:$(q_port 1)/0" rl 0 acquire counted-twice -t 30s
  RLOCK_URL="$urls" rl 78 status counted-twice -t "$Q_TTL"
  assert_stderr --partial "are one Redis server"
  RLOCK_URL="$urls" rl 78 status counted-twice -t "$Q_TTL" --json
  assert_output ""
  # So is the listing: before, it showed the lock held by that one server.
  RLOCK_URL="$urls" rl 78 status -t "$Q_TTL"
  assert_stderr --partial "are one Redis server"
  refute_output --partial counted-twice
}

@test "quorum: one server reached through two URLs is refused at the first acquire (78), nothing held" {
  # Its TCP port and its unix socket: two names the URLs cannot tell apart,
  # whose two votes made a majority of three on their own.
  local urls="redis://127.0.0.1:$(q_port 1)/0,unix://$Q_DIR_1/redis.sock,redis://127.0.0.1:$(q_port 2)/0"
  q_freeze 2
  RLOCK_URL="$urls" rl 78 acquire twice -t "$Q_TTL"
  q_thaw 2
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "quorum members redis://127.0.0.1:$(q_port 1)/0 and unix://$Q_DIR_1/redis.sock are one Redis server"
  assert_equal "$(q_holding twice)" 0
  RLOCK_URL="$urls" rl 78 run twice -t "$Q_TTL" -- true
  # The same members once each are fine.
  RLOCK_URL="redis://127.0.0.1:$(q_port 1)/0,redis://127.0.0.1:$(q_port 3)/0,redis://127.0.0.1:$(q_port 2)/0" \
    rl 0 acquire twice -t "$Q_TTL"
}

@test "quorum: a member configured wrongly (a Sentinel URL naming a Redis server) is a configuration error (78), not a member down" {
  # Alone that URL is 78; in a quorum it was taken for a member out of
  # reach, and the lock quietly ran on the others, one failure from refusal.
  local urls="redis-sentinel://127.0.0.1:$(q_port 1)/0#mymaster,redis://127.0.0.1:$(q_port 2)/0,redis://127.0.0.1:$(q_port 3)/0"
  RLOCK_URL="$urls" rl 78 acquire misconfigured -n -t "$Q_TTL"
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "quorum member master 'mymaster' of Sentinels redis://127.0.0.1:$(q_port 1)/0"
  assert_stderr --partial "is not a Sentinel"
  assert_equal "$(q_holding misconfigured)" 0
}

@test "quorum: a member that is a read-only replica is named once per process, shown read-only in status, and never counted as a vote" {
  # Member 3 turned replica of member 1 (old enough to count, so its answer
  # is READONLY, not "too young"). The lock runs on the other four, which
  # one more failure would break: the operator is told, once per process.
  qcli 3 REPLICAOF 127.0.0.1 "$(q_port 1)" >/dev/null
  local warning="rlock: warning: quorum member redis://127.0.0.1:$(q_port 3)/0 is a read-only replica and cannot take a lock: 4 of 5 members can, so only 1 may fail (a majority is 3); give each deployment's master (or a redis-sentinel:// URL, which follows failovers)"
  rl 0 acquire replica-x -t "$Q_TTL"
  local token="$output"
  assert_equal "$stderr" "$warning"
  assert_equal "$(q_holding replica-x)" 4
  rl 0 status replica-x -t "$Q_TTL"
  assert_equal "$stderr" "$warning"
  assert_output --regexp "  read-only    redis://127\.0\.0\.1:$(q_port 3)/0  holders ([0-9a-f]{8}|-)  last fence [0-9]+: a read-only replica: it cannot take a lock"
  assert_output --regexp "  ok           redis://127\.0\.0\.1:$(q_port 1)/0  holders"
  rl 0 status replica-x -t "$Q_TTL" --json
  assert_equal "$(jq -r '.members[2].state' <<<"$output")" read-only
  rl 0 status -t "$Q_TTL"
  assert_equal "$stderr" "$warning"
  assert_output --partial replica-x
  rl 0 -q release replica-x --token "$token"
  assert_equal "$stderr" ""
  # Held on member 1 alone: the replica's copy is no second vote, so it is
  # not held; nor free, as member 2 alone could not grant it.
  RLOCK_URL="redis://127.0.0.1:$(q_port 1)/0" rl 0 acquire replica-alone -t "$Q_TTL"
  RLOCK_URL="redis://127.0.0.1:$(q_port 1)/0,redis://127.0.0.1:$(q_port 2)/0,redis://127.0.0.1:$(q_port 3)/0" \
    rl 69 status replica-alone -t "$Q_TTL"
  assert_stderr --partial "lock 'replica-alone': neither held nor free"
  # A run warns once, not again at each renewal (every second).
  rl 0 run replica-run -t "$Q_TTL" -- sleep 2.5
  assert_equal "$stderr" "$warning"
  # A second one turned replica during a run: told of once too, with the
  # count of both.
  rl_bg replica-run2 run replica-run2 -t "$Q_TTL" -- sleep 4
  nap 0.5
  qcli 5 REPLICAOF 127.0.0.1 "$(q_port 2)" >/dev/null
  rl_wait replica-run2 0
  assert_equal "${stderr_lines[0]}" "$warning"
  ((${#stderr_lines[@]} == 2)) || fail "stderr: $stderr"
  assert_equal "${stderr_lines[1]}" "rlock: warning: quorum member redis://127.0.0.1:$(q_port 5)/0 is a read-only replica and cannot take a lock: 3 of 5 members can, so none may fail (a majority is 3); give each deployment's master (or a redis-sentinel:// URL, which follows failovers)"
  qcli 5 REPLICAOF NO ONE >/dev/null
  # A replica that takes writes (replica-read-only no) grants, and counts.
  qcli 3 CONFIG SET replica-read-only no >/dev/null
  rl 0 acquire replica-writable -t "$Q_TTL"
  assert_equal "$stderr" ""
  rl 0 status replica-writable -t "$Q_TTL"
  refute_output --partial read-only
}

@test "quorum: a counting semaphore is refused before anything is sent (members cannot bound the total)" {
  rl 64 acquire sem -l 2 -t "$Q_TTL"
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "--limit 2: a quorum of deployments cannot keep a counting semaphore"
  rl 64 run sem -l 3 -t "$Q_TTL" -- true
  local k
  for ((k = 1; k <= Q_N; k++)); do assert_equal "$(qcli "$k" DBSIZE)" 0; done
  # An exclusive lock (--limit 1) and a shared one are fine.
  rl 0 run sem -l 1 -t "$Q_TTL" -- true
  rl 0 run sem -s -t "$Q_TTL" -- true
}

@test "quorum: members younger than the TTL make -n say why it cannot be taken (69), not busy" {
  # Up for seconds, not an hour: under the delayed-restart rule no member
  # counts for a 1 h lease, whatever the lock's state.
  rl 69 acquire young -n -t 1h
  # Every member that answers is too young; on a busy machine one may not
  # have answered by the time three refusals decided.
  assert_stderr --regexp "only 0 of 5 quorum members have been up for the TTL \(1h\), (5 for less|4 for less, 1 did not answer)"
  # A wait that ends so says the same, not "timed out waiting" (75); its
  # waiting line names no holder, as nobody holds the lock.
  rl 69 -v acquire young -w 1s -t 1h
  assert_stderr --partial "only 0 of 5 quorum members have been up for the TTL (1h)"
  assert_stderr --regexp "waiting [0-9.]+m?s for lock 'young'"
  refute_stderr --partial 'held by'

  rl 69 run young -w 1s -t 1h -- true
  assert_stderr --partial "only 0 of 5 quorum members"
  rl 1 status -t "$Q_TTL" young
  local k
  for ((k = 1; k <= Q_N; k++)); do assert_equal "$(qcli "$k" DBSIZE)" 0; done
  # Two members old enough, three restarted: the count is of every member
  # that answered, and says which did not (the old two frozen: the young
  # three decide alone).
  q_wait_uptime 6
  q_restart 3
  q_restart 4
  q_restart 5
  rl 69 acquire young2 -n -t 5s
  assert_stderr --partial "only 2 of 5 quorum members have been up for the TTL (5s), 3 for less: a majority is 3"
  q_freeze 1
  q_freeze 2
  rl 69 acquire young3 -n -t 5s
  q_thaw 1
  q_thaw 2
  assert_stderr --partial "only 0 of 5 quorum members have been up for the TTL (5s), 3 for less, 2 did not answer: a majority is 3"
}

@test "quorum: a member refusing our credentials is left out of the listing (69); a majority refusing is 77" {
  rl 0 acquire qa -t 10s --owner kept
  # Member 5 wants another password.
  qcli 5 CONFIG SET requirepass other >/dev/null
  rl 0 acquire qb -t 10s
  rl 69 status -t "$Q_TTL"
  assert_output --partial qa
  assert_output --partial qb
  assert_stderr --partial "quorum member redis://127.0.0.1:$(q_port 5)/0"
  assert_stderr --partial "this server needs a password"
  rl 69 status -t "$Q_TTL" --json
  assert_json
  assert_equal "$(json 'sorted(l["name"] for l in d["locks"])')" '["qa", "qb"]'
  # Three of five refusing: no majority until someone fixes the ACL.
  qcli 1 CONFIG SET requirepass other >/dev/null
  qcli 2 CONFIG SET requirepass other >/dev/null
  rl 77 status -t "$Q_TTL"
  assert_output ''
  rl 77 acquire qc -n -t "$Q_TTL"
  rl 77 status -t "$Q_TTL" qa
}

# majority_after SECONDS: members 4 and 5 frozen (the teardown thaws them),
# member 3 frozen for SECONDS: the majority (1, 2, 3) is there only once
# member 3 answers, and member 1's lease began before that.
majority_after() {
  q_freeze 4
  q_freeze 5
  q_freeze 3
  (sleep "$1" && kill -CONT "$(q_pid 3)") 3>&- &
}

@test "quorum: acquire --json reports the lease left after a slow majority, not the whole TTL" {
  majority_after 0.4
  rl 0 acquire slow-majority -t "$Q_TTL" -n --json
  local left pttl
  left="$(json 'd["ttl_ms"]')"
  pttl="$(qcli 1 PTTL 'rlock:{slow-majority}:h')"
  assert_greater "$left" 0
  # Never more than member 1 still has (read after it: 200 ms of slack).
  assert_greater $((pttl + 200)) "$left"
}

@test "quorum: a majority gathered late still leaves the grant valid: slower members are not waited for into the second half of the TTL" {
  majority_after 1.6
  rl 0 acquire late-majority -t "$Q_TTL" -n --json
  assert_greater "$(json 'd["ttl_ms"]')" 0
  rl 0 status late-majority -t "$Q_TTL"
}

# status runs the script as EVALSHA_RO: a member whose writes are paused
# (CLIENT PAUSE WRITE, a FAILOVER) still answers status NAME and the
# listing, the listing's uptime question included (before: that member
# left out after 5 s, exit 69). And a user without +evalsha_ro +eval_ro
# (the minimum ACL of earlier releases) gets the plain verbs from every
# member, not from the first to refuse alone (before: 77, "NOPERM ...
# 'evalsha_ro'" for the others).
@test "quorum: status answers while a member's writes are paused; without the read-only verbs every member falls back" {
  rl 0 acquire qpause -t "$Q_TTL"
  local token="$output" k
  rl 0 renew qpause --token "$token" --ttl 60s
  assert_equal "$(qcli 2 CLIENT PAUSE 60000 WRITE)" OK
  rl 0 status qpause -t "$Q_TTL"
  refute_output --partial unreachable
  rl 0 status -t "$Q_TTL"
  assert_output --partial qpause
  assert_equal "$(qcli 2 CLIENT UNPAUSE)" OK
  for ((k = 1; k <= Q_N; k++)); do
    assert_equal "$(qcli "$k" ACL SETUSER oldacl on '>old-pw' resetkeys '~rlock:*' resetchannels -@all \
      +evalsha +eval +scan +info +role +time +type +exists +get +hget +zrange +zrangebyscore +zscore)" OK
  done
  RLOCK_PASSWORD=old-pw rl 0 --user oldacl status qpause -t "$Q_TTL"
  refute_output --partial unreachable
  assert_output --partial "lock 'qpause': held"
  RLOCK_PASSWORD=old-pw rl 0 --user oldacl status -t "$Q_TTL"
  assert_output --partial qpause
  rl 0 release qpause --token "$token"
}

@test "quorum: a majority its replicas did not acknowledge (--replicas) is said so (69), not 'only 0 answered'" {
  rl 69 --replicas 2 acquire unacked -n -t "$Q_TTL"
  assert_stderr --partial "lock 'unacked': the lease was acknowledged by the replicas (--replicas) of only 0 of 5 quorum members"
  assert_stderr --partial "0 of 2 replicas acknowledged"
  assert_equal "$(q_holding unacked)" 0
}

@test "quorum: acquire --json reports the lease less the clock drift allowed (TTL/100 + 2 ms), not just less the time spent" {
  # Q_TTL is 3 s: 3000 - 30 - 2 ms at most (without the drift, a quick
  # majority reported ~2997).
  rl 0 acquire drift-left -t "$Q_TTL" -n --json
  local left
  left="$(json 'd["ttl_ms"]')"
  assert_greater 2969 "$left"
  assert_greater "$left" 2500
}
