#!/usr/bin/env bats
# Counting semaphores (--limit N): never more than N inside, in FIFO order,
# and every user of a lock must agree on N.

load helpers

teardown() {
  stop_sessions
  kill_bg_pids
}

# --- helpers of this file ----------------------------------------------------

# max_inside FILE: the most "+ NS" entries not yet matched by a "- NS" at any
# moment, from a log of enter (+) and exit (-) lines with nanosecond times.
max_inside() {
  sort -k2,2n -k1,1r "$1" | awk '$1 == "+" { n++; if (n > max) max = n } $1 == "-" { n-- } END { print max + 0 }'
}

# --- tests -------------------------------------------------------------------

@test "semaphore: --limit 3 with six one-second holders lets at most three in, and all six finish" {
  local i
  for i in 1 2 3 4 5 6; do
    session "h$i" "T=\$(\"\$RLOCK\" acquire sem -l 3 -t 20s -w 30s) || exit 9
      echo \"+ \$(date +%s%N)\" >>\"\$DIR/log\"
      sleep 1
      echo \"- \$(date +%s%N)\" >>\"\$DIR/log\"
      \"\$RLOCK\" release sem --token \"\$T\" && echo done >>\"\$DIR/done\""
  done
  wait_sessions
  run cat "$BATS_TEST_TMPDIR/done"
  assert_equal "${#lines[@]}" 6
  run grep -c '^+' "$BATS_TEST_TMPDIR/log"
  assert_output 6
  run max_inside "$BATS_TEST_TMPDIR/log"
  # Three at once proves the semaphore admits N, not just one.
  assert_output 3
  rl 1 status sem
}

@test "semaphore: -n takes a free slot and exits 75 when all N are taken" {
  rl 0 acquire slots -l 3 -n
  rl 0 acquire slots -l 3 -n
  rl 0 acquire slots -l 3 -n
  rl 75 acquire slots -l 3 -n
  assert_output ''
  rl 0 status slots --json
  assert_json
  assert_equal "$(json 'd["limit"]')" 3
  assert_equal "$(json 'len(d["holders"])')" 3
  assert_equal "$(json 'd["mode"]')" semaphore/3
}

@test "semaphore: waiters for a full semaphore are served in arrival order" {
  rl 0 acquire semfifo -l 2 --owner A
  local a="$output" i
  rl 0 acquire semfifo -l 2 --owner B
  local b="$output"
  for i in 1 2 3 4; do
    session "w$i" "T=\$(\"\$RLOCK\" acquire semfifo -l 2 -w 40s --owner W$i) || exit 9
      echo W$i >>\"\$DIR/order\"
      \"\$RLOCK\" release semfifo --token \"\$T\""
    wait_waiters semfifo "$i"
  done
  # Each waits for a semaphore place, and says so.
  rl 0 status semfifo --json
  assert_equal "$(json '",".join(w["mode"] for w in d["waiters"])')" "semaphore,semaphore,semaphore,semaphore"
  rl 0 status semfifo
  assert_line --regexp '^ +1\. [0-9a-f]{8} +semaphore +W1 '
  rl 0 release semfifo --token "$a"
  wait_sessions
  run cat "$BATS_TEST_TMPDIR/order"
  assert_output "$(printf 'W%s\n' 1 2 3 4)"
  rl 0 release semfifo --token "$b"
}

@test "semaphore: a --limit that differs from the lock's exits 64 naming both values" {
  rl 0 acquire mismatch -l 3
  local token="$output"
  rl_usage_error acquire mismatch -l 2 -n
  assert_stderr --partial "'mismatch'"
  assert_stderr --regexp 'limit 3'
  assert_stderr --regexp 'limit 2'
  # Also when waiting: the mismatch is an error at once, not a wait.
  rl_usage_error acquire mismatch -l 5 -w 10s
  assert_stderr --regexp 'limit 3'
  assert_stderr --regexp 'limit 5'
  # The default limit is 1, and a plain lock says so too.
  rl_usage_error acquire mismatch -n
  assert_stderr "rlock: error: lock 'mismatch' is used with --limit 3, not --limit 1 (the default); every user of a lock must give the same limit"
  # A shared taker gave no limit: its conflict is the mode, said so.
  rl_usage_error acquire mismatch -s -n
  assert_stderr "rlock: error: lock 'mismatch' is a semaphore (--limit 3), which cannot be taken --shared; every user of a lock must take it the same way"
  rl 0 status mismatch --json
  assert_equal "$(json 'len(d["holders"])')" 1
  assert_equal "$(json 'len(d["waiters"])')" 0
  rl 0 release mismatch --token "$token"
  # Once nobody uses it, the lock may be used with another limit.
  rl 0 acquire mismatch -l 2 -n
}

@test "run: rlock run --limit 2 runs at most two commands at once, and all of them" {
  local i
  for i in 1 2 3 4 5; do
    session "r$i" "\"\$RLOCK\" run semrun -l 2 -w 30s -- sh -c '
      echo \"+ \$(date +%s%N)\" >>\"\$DIR/log\"; sleep 0.5
      echo \"- \$(date +%s%N)\" >>\"\$DIR/log\"'"
  done
  wait_sessions
  run grep -c '^-' "$BATS_TEST_TMPDIR/log"
  assert_output 5
  run max_inside "$BATS_TEST_TMPDIR/log"
  assert_output 2
  run lock_keys
  assert_output 'rlock:{semrun}:f'
}

@test "semaphore: two places freed at once (release --force) go to two waiters, never three" {
  rl 0 acquire two-free --limit 2 -t 60s
  rl 0 acquire two-free --limit 2 -t 60s
  rl_bg w1 acquire two-free --limit 2 -t 60s
  wait_waiters two-free 1
  rl_bg w2 acquire two-free --limit 2 -t 60s
  wait_waiters two-free 2
  bg_rlock w3 acquire two-free --limit 2 -t 60s
  wait_waiters two-free 3
  rl 0 release two-free --force
  # The first two waiters hold; the third still waits.
  rl_wait w1 0
  rl_wait w2 0
  rl 0 status two-free --json
  assert_equal "$(json 'len(d["holders"])')" 2
  assert_equal "$(json 'len(d["waiters"])')" 1
  rl 75 acquire two-free --limit 2 -n
}
