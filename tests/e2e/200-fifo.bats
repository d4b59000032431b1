#!/usr/bin/env bats
# Waiting done right: waiters queue in arrival order, are woken by a push (not
# a poll), a killed waiter stops blocking the queue within its lease, and
# nothing but the fencing counter stays in Redis once everyone is gone.

load helpers

teardown() {
  stop_sessions
  kill_bg_pids
}

# --- tests -------------------------------------------------------------------

@test "fifo: waiters started one after another acquire in exactly that order" {
  rl 0 acquire fifo -t 30s
  local holder="$output" i
  for i in 1 2 3 4 5; do
    session "w$i" "T=\$(\"\$RLOCK\" acquire fifo -w 40s --owner W$i) || exit 9
      echo W$i >>\"\$DIR/order\"
      \"\$RLOCK\" release fifo --token \"\$T\""
    wait_waiters fifo "$i"
  done
  rl 0 release fifo --token "$holder"
  wait_sessions
  run cat "$BATS_TEST_TMPDIR/order"
  assert_output "$(printf 'W%s\n' 1 2 3 4 5)"
  rl 1 status fifo
}

@test "fifo: waiters queued longer than two waiter leases keep their order and their place" {
  # The queue's keys (Q, X) must be extended by the waiters' re-checks. They
  # were not while the lease key L outlived them (extended first by every
  # re-check, since it must be at a full server, and by the holder's
  # renewals): Q and X expired about 6 s after the last waiter joined, every
  # waiter joined again at its next re-check, in no particular order, and at
  # a full server was refused (76). Probe D: 3 of 3, served W2 W3 W1.
  local i
  # A holder that renews (every second), as a run's does.
  session h "\"\$RLOCK\" run kept -t 3s -- sleep 14"
  for ((i = 0; i < 50; i++)); do
    [[ "$(rcli EXISTS 'rlock:{kept}:h')" == 1 ]] && break
    nap 0.1
  done
  for i in 1 2 3; do
    session "w$i" "T=\$(\"\$RLOCK\" acquire kept -w 60s --owner W$i) || exit 9
      echo W$i >>\"\$DIR/order\"
      \"\$RLOCK\" release kept --token \"\$T\""
    wait_waiters kept "$i"
  done
  # Three waiter leases, checked every half second: the queue keeps its
  # keys and its order (positions as they joined).
  for i in $(seq 1 18); do
    run rcli PTTL 'rlock:{kept}:q'
    ((output > 0)) || fail "the queue key expired ($output) after $((i / 2)) s"
    nap 0.5
  done
  rl 0 status kept --json
  assert_equal "$(json '[w["owner"] for w in d["waiters"]]')" '["W1", "W2", "W3"]'
  wait_sessions
  run cat "$BATS_TEST_TMPDIR/order"
  assert_output "$(printf 'W%s\n' 1 2 3)"
}

@test "fifo: a waiter acquires promptly after the release, not at its next poll" {
  # Five handoffs, each released as soon as the waiter is seen queued: a
  # polling waiter would sleep until its next re-check, about 1 s after it
  # queued, so 700 ms leaves a busy machine room and still fails polling.
  rl 0 acquire prompt -t 30s
  local token="$output" k t0 t1
  for k in 1 2 3 4 5; do
    session "w$k" "\"\$RLOCK\" acquire prompt -w 20s || exit 9; date +%s%N >\"\$DIR/w$k.at\""
    wait_waiters prompt 1
    t0="$(date +%s%N)"
    rl 0 release prompt --token "$token"
    wait_sessions
    t1="$(<"$BATS_TEST_TMPDIR/w$k.at")"
    token="$(<"$BATS_TEST_TMPDIR/w$k.out")"
    assert_regex "$token" '^[0-9a-f]{32}$'
    local ms=$(((t1 - t0) / 1000000))
    echo "# handoff $k: ${ms} ms" >&3
    if ((ms >= 700)); then fail "handoff $k took ${ms} ms (release -> acquired)"; fi
  done
  rl 0 release prompt --token "$token"
}

@test "fifo: a waiter killed in the middle of the queue delays those behind by at most its lease" {
  rl 0 acquire killed -t 30s
  local holder="$output"
  session w1 "T=\$(\"\$RLOCK\" acquire killed -w 40s --owner W1) || exit 9
    echo W1 >>\"\$DIR/order\"; \"\$RLOCK\" release killed --token \"\$T\""
  wait_waiters killed 1
  # The victim is the rlock process itself (exec), so kill -9 hits it.
  session w2 "exec \"\$RLOCK\" acquire killed -w 40s --owner W2"
  wait_waiters killed 2
  session w3 "T=\$(\"\$RLOCK\" acquire killed -w 40s --owner W3) || exit 9
    date +%s%N >\"\$DIR/w3.at\"
    echo W3 >>\"\$DIR/order\"; \"\$RLOCK\" release killed --token \"\$T\""
  wait_waiters killed 3
  kill -KILL "$(<"$BATS_TEST_TMPDIR/w2.pid")"
  local t_kill
  t_kill="$(date +%s%N)"
  rl 0 release killed --token "$holder"
  wait_sessions w2=137
  run cat "$BATS_TEST_TMPDIR/order"
  assert_output "$(printf 'W1\nW3')"
  local t_w3 ms
  t_w3="$(<"$BATS_TEST_TMPDIR/w3.at")"
  ms=$(((t_w3 - t_kill) / 1000000))
  echo "# W3 acquired ${ms} ms after W2 was killed" >&3
  # Waiter lease 3 s + re-check 1 s + 1.5 s slack for a loaded machine.
  if ((ms > 5500)); then fail "W3 waited ${ms} ms after W2 died"; fi
}

@test "fifo: 120 concurrent waiters all get through, each exactly once" {
  local i n=120
  for ((i = 1; i <= n; i++)); do
    session "m$i" "T=\$(\"\$RLOCK\" acquire many -t 20s -w 55s) || exit 9
      echo m$i >>\"\$DIR/got\"
      \"\$RLOCK\" release many --token \"\$T\""
  done
  wait_sessions
  run sort "$BATS_TEST_TMPDIR/got"
  assert_equal "${#lines[@]}" "$n"
  run sort -u "$BATS_TEST_TMPDIR/got"
  assert_equal "${#lines[@]}" "$n"
  rl 1 status many
  run lock_keys
  assert_output 'rlock:{many}:f'
}

@test "fifo: once every holder and waiter is gone only the fencing counters remain" {
  # A released holder, a waiter that timed out, a killed waiter and a killed
  # holder (its lock left to expire).
  # Each waiter is killed (or times out) as soon as it is queued, so that a
  # slow machine cannot let it acquire first: the holder of gone-b has 5 s
  # for that, and gone-a stays held until w2 has given up.
  rl 0 acquire gone-a -t 30s
  local a="$output"
  rl 0 acquire gone-b -t 5s
  session w3 "exec \"\$RLOCK\" acquire gone-b -w 40s -t 2s"
  wait_waiters gone-b 1
  kill -KILL "$(<"$BATS_TEST_TMPDIR/w3.pid")"
  session w1 "exec \"\$RLOCK\" acquire gone-a -w 40s"
  wait_waiters gone-a 1
  kill -KILL "$(<"$BATS_TEST_TMPDIR/w1.pid")"
  session w2 "exec \"\$RLOCK\" acquire gone-a -w 1s"
  wait_for_file "$BATS_TEST_TMPDIR/w2.rc"
  rl 0 release gone-a --token "$a"
  # The killed ones 128+9; w2 gave up waiting after 1 s (75).
  wait_sessions w1=137 w2=75 w3=137
  run lock_keys
  refute_output ''
  # Holder TTL 5 s, waiter lease 3 s: everything but :f is gone after that.
  local i
  for ((i = 0; i < 50; i++)); do
    run lock_keys
    [[ "$output" == $'rlock:{gone-a}:f\nrlock:{gone-b}:f' ]] && break
    nap 0.2
  done
  run lock_keys
  assert_output $'rlock:{gone-a}:f\nrlock:{gone-b}:f'
  # Nothing outside the prefix either (wake lists included).
  run bash -c "redis-cli -p $REDIS_PORT --scan | LC_ALL=C sort"
  assert_output $'rlock:{gone-a}:f\nrlock:{gone-b}:f'
}

@test "status: shows every holder and the queue in order, in text and --json" {
  rl 0 acquire shown -l 2 --owner H1
  local h1="$output"
  rl 0 acquire shown -l 2 --owner H2
  local h2="$output" i
  for i in 1 2 3; do
    session "w$i" "\"\$RLOCK\" acquire shown -l 2 -w 40s --owner W$i"
    wait_waiters shown "$i"
  done
  sleep 0.2
  rl 0 status shown --json
  assert_json
  assert_equal "$(json 'len(d["holders"])')" 2
  assert_equal "$(json 'sorted(h["owner"] for h in d["holders"])')" '["H1", "H2"]'
  assert_equal "$(json '[w["position"] for w in d["waiters"]]')" '[1, 2, 3]'
  assert_equal "$(json '[w["owner"] for w in d["waiters"]]')" '["W1", "W2", "W3"]'
  assert_equal "$(json 'sorted(set(w["host"] for w in d["waiters"]))')" "[\"$(hostname)\"]"
  for i in 1 2 3; do
    assert_equal "$(json "d['waiters'][$((i - 1))]['pid']")" "$(<"$BATS_TEST_TMPDIR/w$i.pid")"
  done
  # Waiting since: the first one has waited longest, and at least 200 ms.
  local w1 w3
  w1="$(json 'd["waiters"][0]["waiting_ms"]')"
  w3="$(json 'd["waiters"][2]["waiting_ms"]')"
  assert_greater "$w1" "$w3"
  assert_greater "$w3" 150

  rl 0 status shown
  assert_output --partial H1
  assert_output --partial H2
  # Queue lines in order: "1. id mode W1 host pid waiting …" (semaphore waiters).
  run grep -E '^ +[0-9]+\. ' <<<"$output"
  assert_equal "${#lines[@]}" 3
  for i in 1 2 3; do
    assert_regex "${lines[$((i - 1))]}" \
      "^ +$i\. [0-9a-f]{8} +semaphore +W$i +$(hostname) +$(<"$BATS_TEST_TMPDIR/w$i.pid") +waiting [0-9.]+m?s"
  done
  rl 0 release shown --token "$h1"
  rl 0 release shown --token "$h2"
}

@test "run: commands queued with rlock run execute one at a time, in arrival order" {
  rl 0 acquire fifo-run -t 30s
  local holder="$output" i
  for i in 1 2 3 4; do
    session "r$i" "\"\$RLOCK\" run fifo-run -w 40s --owner R$i -- \
      sh -c 'echo \"+ R$i\" >>\"\$DIR/log\"; sleep 0.2; echo \"- R$i\" >>\"\$DIR/log\"'"
    wait_waiters fifo-run "$i"
  done
  rl 0 release fifo-run --token "$holder"
  wait_sessions
  run cat "$BATS_TEST_TMPDIR/log"
  assert_output "$(for i in 1 2 3 4; do printf '+ R%s\n- R%s\n' "$i" "$i"; done)"
  run lock_keys
  assert_output 'rlock:{fifo-run}:f'
}

@test "fifo: a queued waiter rides out a server restart instead of failing" {
  # A server of its own: the file's server keeps its pid for the others.
  start_redis
  local port="$REDIS_PORT" dir
  rl 0 acquire restart-wait -t 60s
  bg_rlock waiter acquire restart-wait -w 30s
  wait_waiters restart-wait 1
  stop_redis
  sleep 1
  dir="$(_redis_dir)"
  _launch_redis "$dir" --port "$port"
  REDIS_PID="$_REDIS_PID"
  # The restarted server lost the holder and the queue: the waiter rejoins
  # with its token and gets the lock, instead of exiting 69.
  bg_wait waiter 0 20
  assert_output --regexp '^[0-9a-f]{32}$'
  rl 0 status restart-wait
}

# lock_script NAME OP ARGS...: the lock script itself on lock NAME (EVALSHA
# with the keys rlock passes), one reply element per line.
lock_script() {
  local name="$1" sha k keys=()
  shift
  sha="$(redis-cli -p "$REDIS_PORT" -x SCRIPT LOAD <"$REPO/src/lock/scripts/lock.lua")"
  for k in h s q x l i m f a; do keys+=("rlock:{$name}:$k"); done
  rcli EVALSHA "$sha" 9 "${keys[@]}" "$@"
}

# A quorum waiter's acquire (MIN_UPTIME given, here 0): queues when busy.
quorum_try() { lock_script "$1" acquire "$2" exclusive 1 30000 "2:me4:host1:11:x" 1 3000 0; }

@test "fifo: a quorum waiter that gives back a grant it took from its place in the queue goes back to that place" {
  # A quorum waiter granted by one member while the others still show the
  # old holder (a release reaches the members at different times) gives
  # that grant back (release TOKEN 1) when it has no majority. The member
  # used to hand the lock to the waiter behind it, and queue the first one
  # again at the tail at its next try: the members' orders came apart, and
  # a quorum served its waiters out of order (CI: "2 3 4 5 1").
  run lock_script gb acquire holder exclusive 1 30000 "2:me4:host1:11:h" 0 3000
  assert_line --index 0 1
  local w
  for w in 1 2 3; do
    run quorum_try gb "w$w"
    assert_line --index 0 0
    assert_line --index 1 "$w"
  done
  run lock_script gb release holder
  assert_output 1
  # w1 holds now (handed over); it confirms, then gives the grant back.
  run quorum_try gb w1
  assert_line --index 0 1
  run lock_script gb release w1 2
  assert_output 1
  # w2's re-check finds w1 ahead of it again, and takes nothing.
  run quorum_try gb w2
  assert_line --index 0 0
  assert_line --index 1 2
  run quorum_try gb w1
  assert_line --index 0 1
  # Its real release hands the lock on in order, and forgets its place.
  run lock_script gb release w1
  assert_output 1
  run rcli HEXISTS 'rlock:{gb}:m' "p:$(printf w1 | sha1sum | cut -c1-40)"
  assert_output 0
  for w in 2 3; do
    run quorum_try gb "w$w"
    assert_line --index 0 1
    run lock_script gb release "w$w"
    assert_output 1
  done
  # (The wake lists of w2 and w3, whose grants nobody popped here, expire
  # with them.)
  run bash -c "redis-cli -p $REDIS_PORT --scan --pattern 'rlock:{gb}:*' | grep -v ':w:'"
  assert_output 'rlock:{gb}:f'
}

@test "fifo: a quorum waiter that gives back only a grant (no majority showed a holder) lets the next waiter have it" {
  # Members whose queues disagree, each granting another waiter and none
  # a majority: a grant that went back to its place would be granted to
  # the same waiter again at every try, for ever. It goes to the next.
  run lock_script gn acquire holder exclusive 1 30000 "2:me4:host1:11:h" 0 3000
  assert_line --index 0 1
  local w
  for w in 1 2; do
    run quorum_try gn "w$w"
    assert_line --index 1 "$w"
  done
  run lock_script gn release holder
  run quorum_try gn w1
  assert_line --index 0 1
  run lock_script gn release w1 1
  assert_output 1
  run quorum_try gn w2
  assert_line --index 0 1
  run quorum_try gn w1
  assert_line --index 0 0
  assert_line --index 1 1
}

@test "fifo: a grant given back that no place in the queue came with leaves the lock free" {
  # Granted at once (nobody held or waited), the waiter has no place to go
  # back to: the lock is free for the next comer, and nothing is left.
  run quorum_try gf w1
  assert_line --index 0 1
  run lock_script gf release w1 2
  assert_output 1
  run lock_keys
  assert_output 'rlock:{gf}:f'
  run quorum_try gf w2
  assert_line --index 0 1
  run lock_script gf release w2
  assert_output 1
}
