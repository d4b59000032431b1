#!/usr/bin/env bats
# Terminal manners: on a terminal, a waiting rlock draws one updating line
# (whom it waits for, held since when, by what command; cut to the
# terminal's width so that it never wraps) and a busy -n says
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

# on_tty_cols COLS ARGS...: on_tty with a terminal COLS columns wide (24 rows).
on_tty_cols() {
  local cols=$1 cmd
  shift
  printf -v cmd '%q ' timeout -k 5 20 "$RLOCK" "$@"
  run script -qefc "stty cols $cols rows 24 && exec $cmd" /dev/null </dev/null
}

# widest_drawn TEXT: the display width of the widest waiting line TEXT draws
# (the pieces between carriage returns, newlines and clear-to-end-of-lines
# that start "rlock: waiting"; the message ending the wait is an ordinary
# line, free to wrap).
widest_drawn() {
  python3 -c '
import re, sys, unicodedata
def width(s):
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)
pieces = re.split(r"\r|\n|\x1b\[K", sys.argv[1])
print(max(width(p) for p in pieces if p.startswith("rlock: waiting")))' "$1"
}

# waits_on_cols COLS NAME OWNER: rlock acquire NAME -w 1.6s on a terminal
# COLS wide while OWNER holds it (at least two redraws).
waits_on_cols() {
  rl 0 acquire "$2" -t 30s --owner "$3"
  on_tty_cols "$1" acquire "$2" -w 1.6s
  assert_equal "$status" 75
  assert_greater "$(grep -o $'\r\e\\[Krlock: waiting' <<<"$output" | wc -l)" 1
}

@test "terminal: the waiting line fits an 80- or 60-column terminal, cut with '~'" {
  local cols
  for cols in 80 60; do
    waits_on_cols "$cols" "tty-narrow-$cols" deploy@ci-runner-03.example.internal
    assert_greater "$cols" "$(widest_drawn "$output")"
    assert_output --partial "~"
    # Cut, not wrapped: no drawn line runs on past its row.
    assert_equal "$(grep -c 'rlock: waiting' <<<"$output")" 1
  done
}

@test "terminal: the waiting line counts wide characters as two columns" {
  waits_on_cols 60 tty-wide "配備担当者-夜間バックアップ-サーバー管理チーム"
  assert_greater 60 "$(widest_drawn "$output")"
  assert_output --partial "~"
}

@test "terminal: on a wide terminal the waiting line is whole" {
  waits_on_cols 200 tty-whole deploy@ci-runner-03.example.internal
  assert_output --regexp "waiting [0-9.]+m?s for lock 'tty-whole' held by deploy@ci-runner-03.example.internal \(pid [0-9]+, [^)]+\) since [0-9.]+m?s ago"
  assert_greater 200 "$(widest_drawn "$output")"
  refute_output --partial "~"
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
