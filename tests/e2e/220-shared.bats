#!/usr/bin/env bats
# Shared (read) locks: many shared holders at once, an exclusive waits for all
# of them, and a shared newcomer queues behind a waiting exclusive.

load helpers

teardown() {
  stop_sessions
  kill_bg_pids
}

# --- tests -------------------------------------------------------------------

@test "shared: several shared holders hold the lock at once" {
  local i
  for i in 1 2 3; do rl 0 acquire readers -s -n --owner R$i; done
  rl 0 status readers --json
  assert_json
  assert_equal "$(json 'len(d["holders"])')" 3
  assert_equal "$(json 'sorted(set(h["mode"] for h in d["holders"]))')" '["shared"]'
  assert_equal "$(json 'd["mode"]')" shared
  rl 0 status readers
  assert_output --partial 'held (shared), 3 holders'
  # An exclusive cannot join them.
  rl 75 acquire readers -n
}

@test "shared: an exclusive waits until every shared holder has released" {
  local i tokens=()
  for i in 1 2 3; do
    rl 0 acquire rw -s -n
    tokens+=("$output")
  done
  session x "\"\$RLOCK\" acquire rw -w 40s --owner X || exit 9; date +%s%N >\"\$DIR/x.at\""
  wait_waiters rw 1
  rl 0 release rw --token "${tokens[0]}"
  rl 0 release rw --token "${tokens[1]}"
  sleep 0.3
  run cat "$BATS_TEST_TMPDIR/x.out"
  assert_output ''
  rl 0 status rw --json
  assert_equal "$(json 'len(d["holders"])')" 1
  assert_equal "$(json '[w["owner"] for w in d["waiters"]]')" '["X"]'
  local t0
  t0="$(date +%s%N)"
  rl 0 release rw --token "${tokens[2]}"
  wait_sessions
  run cat "$BATS_TEST_TMPDIR/x.out"
  assert_output --regexp '^[0-9a-f]{32}$'
  local t_x ms
  t_x="$(<"$BATS_TEST_TMPDIR/x.at")"
  ms=$(((t_x - t0) / 1000000))
  if ((ms >= 700)); then fail "the exclusive took ${ms} ms after the last shared release"; fi
  rl 0 status rw --json
  assert_equal "$(json '[h["mode"] for h in d["holders"]]')" '["exclusive"]'
}

@test "shared: a shared newcomer waits behind a queued exclusive instead of overtaking it" {
  rl 0 acquire order -s -t 30s --owner S1
  local s1="$output"
  touch "$BATS_TEST_TMPDIR/order"
  session x "T=\$(\"\$RLOCK\" acquire order -w 40s --owner X) || exit 9
    echo X >>\"\$DIR/order\"; sleep 0.3; \"\$RLOCK\" release order --token \"\$T\""
  wait_waiters order 1
  # Only shared holders, but an exclusive is queued: no overtaking.
  rl 75 acquire order -s -n
  session s2 "T=\$(\"\$RLOCK\" acquire order -s -w 40s --owner S2) || exit 9
    echo S2 >>\"\$DIR/order\"; \"\$RLOCK\" release order --token \"\$T\""
  session s3 "T=\$(\"\$RLOCK\" acquire order -s -w 40s --owner S3) || exit 9
    echo S3 >>\"\$DIR/order\"; \"\$RLOCK\" release order --token \"\$T\""
  wait_waiters order 3
  rl 0 status order --json
  assert_equal "$(json '[(w["owner"], w["mode"]) for w in d["waiters"]]')" \
    '[["X", "exclusive"], ["S2", "shared"], ["S3", "shared"]]'
  sleep 0.3
  run cat "$BATS_TEST_TMPDIR/order"
  assert_output ''
  rl 0 release order --token "$s1"
  wait_sessions
  run head -n 1 "$BATS_TEST_TMPDIR/order"
  assert_output X
  run sort "$BATS_TEST_TMPDIR/order"
  assert_output "$(printf 'S2\nS3\nX')"
}

@test "shared: shared waiters queued behind an exclusive holder are let in together" {
  rl 0 acquire together -t 30s
  local x="$output" i
  for i in 1 2 3; do
    # Each holds 1 s: if they were let in one at a time, it would take 3 s.
    session "s$i" "T=\$(\"\$RLOCK\" acquire together -s -w 40s) || exit 9
      echo \"+ \$(date +%s%N)\" >>\"\$DIR/log\"; sleep 1
      echo \"- \$(date +%s%N)\" >>\"\$DIR/log\"
      \"\$RLOCK\" release together --token \"\$T\""
    wait_waiters together "$i"
  done
  rl 0 release together --token "$x"
  wait_sessions
  run sort -k2,2n -k1,1r "$BATS_TEST_TMPDIR/log"
  assert_equal "${lines[0]:0:1}${lines[1]:0:1}${lines[2]:0:1}" '+++'
  run lock_keys
  assert_output 'rlock:{together}:f'
}

@test "run: readers under rlock run --shared overlap, a writer runs alone after them" {
  local i
  # Each reader stays inside until the test opens the gate (at most 20 s):
  # three can be inside at once only if they share the lock, however slowly
  # a loaded machine starts them.
  for i in 1 2 3; do
    session "r$i" "\"\$RLOCK\" run rwrun -s -w 30s -- sh -c '
      echo \"+ \$(date +%s%N) R\" >>\"\$DIR/log\"
      i=0; while [ ! -e \"\$DIR/gate\" ] && [ \$i -lt 400 ]; do sleep 0.05; i=\$((i + 1)); done
      echo \"- \$(date +%s%N) R\" >>\"\$DIR/log\"'"
  done
  # Until all three are inside: at most 10 s by the clock (a count of polls
  # would stretch without bound on a loaded machine).
  local n=0 give_up=$(($(now_ms) + 10000))
  while (($(now_ms) < give_up)); do
    rl 0,1 status rwrun --json
    n="$(json 'len(d["holders"])')"
    ((n == 3)) && break
    nap 0.05
  done
  assert_equal "$n" 3
  # The writer queues while the readers are inside, then they leave.
  session w "\"\$RLOCK\" run rwrun -w 30s -- sh -c '
    echo \"+ \$(date +%s%N) W\" >>\"\$DIR/log\"; sleep 0.1
    echo \"- \$(date +%s%N) W\" >>\"\$DIR/log\"'"
  wait_waiters rwrun 1
  touch "$BATS_TEST_TMPDIR/gate"
  wait_sessions
  # In time order: three readers enter before any leaves; the writer enters
  # after the last reader left.
  run sort -k2,2n -k1,1r "$BATS_TEST_TMPDIR/log"
  assert_equal "${#lines[@]}" 8
  assert_equal "$(printf '%s' "${lines[@]:0:3}" | tr -cd '+R')" '+R+R+R'
  assert_regex "${lines[6]}" '^\+ [0-9]+ W$'
  assert_regex "${lines[7]}" '^- [0-9]+ W$'
}

@test "shared: an exclusive waiter giving up does not let the shared waiter behind it in beside an exclusive holder" {
  rl 0 acquire gave-up -t 60s
  rl_bg writer acquire gave-up -t 60s -w 2s
  wait_waiters gave-up 1
  bg_rlock reader acquire gave-up --shared -t 60s -w 10s
  wait_waiters gave-up 2
  rl_wait writer 75
  # The writer left the queue; the exclusive holder still holds, alone.
  rl 0 status gave-up --json
  assert_equal "$(json 'len(d["holders"])')" 1
  assert_equal "$(json 'd["holders"][0]["mode"]')" exclusive
  assert_equal "$(json 'len(d["waiters"])')" 1
}

@test "shared: an exclusive waiter killed with -9 does not keep shared newcomers out once its place lapsed" {
  rl 0 acquire dead-writer -t 60s
  local holder="$output"
  bg_rlock writer acquire dead-writer -t 60s
  wait_waiters dead-writer 1
  kill -KILL "$(<"$BATS_TEST_TMPDIR/writer.pid")"
  # Past its 3 s waiter lease: it is purged, and nobody waits any more.
  sleep 3.3
  rl 0 release dead-writer --token "$holder"
  rl 0 acquire dead-writer --shared -t 10s -n
}
