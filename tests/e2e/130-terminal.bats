#!/usr/bin/env bats
# Terminal manners: on a terminal, a waiting rlock draws one updating line
# (whom it waits for, held since when, by what command) and a busy -n says
# who holds the lock; -q silences both. Off a terminal, the other suites check
# that it stays silent. `script` gives rlock a pseudo-terminal as stderr.

load helpers

# on_tty ARGS...: runs rlock ARGS with stdin, stdout and stderr on a fresh
# pseudo-terminal (bounded by a timeout); $output is what the terminal got,
# $status rlock's exit status.
on_tty() {
  local cmd
  printf -v cmd '%q ' timeout -k 5 20 "$RLOCK" "$@"
  run script -qefc "$cmd" /dev/null </dev/null
}

@test "terminal: a waiter draws one updating line naming the holder and its command" {
  rl 0 acquire tty-wait -t 30s --owner alice-deploy
  local token="$output"
  (sleep 2.5 && "$RLOCK" release tty-wait --token "$token") 3>&- &
  local releaser=$!
  on_tty run tty-wait -w 10s -- true
  # Only our own job: a bare `wait` would also wait for what other suites
  # of the same bats run left behind.
  wait "$releaser"
  assert_equal "$status" 0
  assert_output --partial "waiting"
  assert_output --regexp "for lock 'tty-wait' held by alice-deploy \(pid [0-9]+, [^)]+\) since [0-9.]+m?s ago"
  # Updated in place: redrawn (once a second: at least twice in 2.5 s) after
  # a carriage return + clear-to-end-of-line, all on one line. The terminal
  # turns each newline into "\r\n", so count lines, not regex over "\n".
  assert_greater "$(grep -o $'\r\e\\[Krlock: waiting' <<<"$output" | wc -l)" 1
  assert_equal "$(grep -c 'rlock: waiting' <<<"$output")" 1
}

@test "terminal: a busy -n prints one line saying who holds the lock" {
  rl 0 acquire tty-busy -t 30s --owner bob-backup
  on_tty run tty-busy -n -- true
  assert_equal "$status" 75
  assert_output --partial "held by bob-backup"
  assert_equal "$(grep -c 'rlock:' <<<"$output")" 1
}

@test "terminal: -q keeps a busy -n and a waiter silent" {
  rl 0 acquire tty-quiet -t 30s
  on_tty -q run tty-quiet -n -- true
  assert_equal "$status" 75
  assert_output ''
  on_tty -q acquire tty-quiet -w 1.5s
  assert_equal "$status" 75
  assert_output ''
}
