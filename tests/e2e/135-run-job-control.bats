#!/usr/bin/env bats
# Job control: `rlock run` and its command are one job of an interactive
# shell, as `flock` and its command are. Ctrl-Z stops both and gives the
# prompt back, `fg` resumes both (the command gets the terminal), a command
# started in the background that reads the terminal stops the job until
# `fg`, and a stop longer than the lease loses the lock (exit 79) without
# the command ever running beside another holder. ptyshell.py drives a real
# `bash -i` on a pseudo-terminal; every wait in it is bounded.

load helpers
load watcher

teardown() {
  touch "$BATS_TEST_TMPDIR/stop-watching"
  kill_bg_pids
}

# shell STEP...: runs ptyshell.py with the steps (see there), bounded by a
# timeout; $output is what the terminal showed. Fails the test, showing the
# terminal, when a step timed out.
shell() {
  run --separate-stderr timeout -k 5 60 "$PYTHON" "$REPO/tests/e2e/ptyshell.py" "$@"
  if ((status != 0)); then
    batslib_print_kv_single_or_multi 8 status "$status" stderr "$stderr" terminal "$output" |
      batslib_decorate "the terminal did not show what was expected" | fail
  fi
}

# The prompt ptyshell.py gives bash, at the end of what was printed.
PROMPT='?PROMPT\$ $'

@test "job control: Ctrl-C kills the command and rlock dies of it too: the shell stops the command list, as with flock" {
  local run
  printf -v run '%q run jc-c -t 30s -- bash -c %q; echo "after-$((6 * 7))"\n' "$RLOCK" 'echo "go-$((6 * 7))"; sleep 20'
  shell ">$run" '?go-42' '>\x03' "$PROMPT" '>echo "rc=$?"\n' '?rc=[0-9]+'
  # Bash goes on with a list only when the job exited; dead of SIGINT, it stops.
  refute_output --partial 'after-42'
  assert_output --partial 'rc=130'
  rl 1 status jc-c
}

@test "job control: Ctrl-C stops a script (bash -c, sh -c) that runs rlock, as it stops one that runs flock" {
  local inner run sh
  # The script's shell and rlock share a group, the command has the
  # terminal: the shell stops only if it got the signal too.
  for sh in bash sh; do
    printf -v inner '%q run jc-s -t 30s -- bash -c %q; echo "after-$((6 * 7))"' "$RLOCK" 'echo "go-$((6 * 7))"; sleep 20'
    printf -v run '%s -c %q\n' "$sh" "$inner"
    shell ">$run" '?go-42' '>\x03' "$PROMPT" '>echo "rc=$?"\n' '?rc=[0-9]+'
    refute_output --partial 'after-42'
    assert_output --partial 'rc=130'
  done
  rl 1 status jc-s
}

@test "job control: Ctrl-Z stops rlock with its command and gives the prompt back; fg resumes both" {
  local run
  printf -v run '%q run jc-z -t 30s -- bash -c %q\n' "$RLOCK" 'echo "go-$((6 * 7))"; sleep 1.5; echo "done-$((6 * 7))"'
  shell ">$run" '?go-42' '>\x1a' '?Stopped' "$PROMPT" \
    '>jobs -l\n' '?Stopped' "$PROMPT" \
    '>fg\n' '?done-42' "$PROMPT" '>echo rc=$?\n' '?rc=[0-9]+'
  assert_output --partial 'rc=0'
  # Stopped, but still its job's: the lock was held all along, and given
  # back once the command finished.
  rl 1 status jc-z
}

@test "job control: Ctrl-Z with stdin not the terminal (echo | rlock run) stops the command too" {
  # The terminal is rlock's stdout: the command must get it all the same,
  # else Ctrl-Z stopped rlock alone and the command ran on unrenewed.
  local run segment
  printf -v run 'echo | %q run jc-p -t 30s -- bash -c %q\n' "$RLOCK" 'for i in $(seq 30); do echo "tick-$i"; sleep 0.1; done; echo "done-$((6 * 7))"'
  shell ">$run" '?tick-3' '>\x1a' '?Stopped' "$PROMPT" \
    '>sleep 1; echo "slept-$((6 * 7))"\n' '?slept-42' "$PROMPT" \
    '>fg\n' '?done-42' "$PROMPT" '>echo rc=$?\n' '?rc=[0-9]+'
  assert_output --partial 'rc=0'
  segment="${output#*Stopped}"
  segment="${segment%%slept-42*}"
  # (The job's line shows the command as typed: "tick-$i", no number.)
  if [[ "$segment" =~ tick-[0-9] ]]; then
    fail "the command went on while its job was stopped: $segment"
  fi
  rl 1 status jc-p
}

@test "job control: stopped longer than the lease, fg ends with exit 79 and no second holder" {
  M="$BATS_TEST_TMPDIR"
  local run
  # The command records a tick every 0.1 s while it runs.
  printf -v run '%q run jc-lost -t 2s -- bash -c %q %q\n' "$RLOCK" \
    'echo "go-$((6 * 7))"; while :; do echo "${EPOCHREALTIME/./}" >>"$0"; sleep 0.1; done' "$M/ticks"
  start_watcher jc-lost
  shell ">$run" '?go-42' '~0.5' '>\x1a' '?Stopped' "$PROMPT" '~4' \
    '>fg\n' "$PROMPT" '>echo rc=$?\n' '?rc=[0-9]+'
  stop_watcher
  assert_output --partial 'rc=79'
  assert_output --partial "lost lock 'jc-lost'"
  # The watcher got the lock meanwhile, but never while the command ran
  # (from its first tick to its last), and once after it.
  local first_tick last_tick got after=0
  first_tick="$(head -n 1 "$M/ticks")"
  last_tick="$(tail -n 1 "$M/ticks")"
  while read -r got; do
    if ((got >= first_tick && got <= last_tick)); then
      fail "the watcher got the lock $(((last_tick - got) / 1000)) ms before the command's last tick"
    fi
    if ((got > last_tick)); then after=1; fi
  done <"$M/watcher.got"
  ((after)) || fail "the watcher never got the lock after the command stopped"
  rl 1 status jc-lost
}

@test "job control: fg renews an overdue lease before the command runs again" {
  M="$BATS_TEST_TMPDIR"
  local run
  # TTL 6s: renewals every 2 s, termination due 4.2 s after the last one.
  printf -v run '%q run jc-renew -t 6s -- bash -c %q %q\n' "$RLOCK" \
    'tick() { echo "${EPOCHREALTIME/./}" >>"$0"; }; tick; echo "go-$((6 * 7))"; while :; do tick; sleep 0.05; done' "$M/ticks"
  # Stopped at once, past the first renewal (2 s), with Redis paused: the
  # renewal cannot be had, so the command must stay stopped after fg until
  # the lease is given up (exit 79). Resumed at once, it would run for the
  # second or more left before termination. The pause ends after that point
  # (4.5 s after it began, which was after the lease's start), and soon
  # enough not to hold up the next test.
  shell ">$run" '?go-42' '>\x1a' '?Stopped' "$PROMPT" \
    ">redis-cli -p $REDIS_PORT client pause 4500 all\n" '?OK' "$PROMPT" '~2.3' \
    ">echo \${EPOCHREALTIME/./} >$M/fg; fg\n" "$PROMPT" '>echo rc=$?\n' '?rc=[0-9]+'
  assert_output --partial 'rc=79'
  local fg last_tick
  fg="$(<"$M/fg")"
  last_tick="$(tail -n 1 "$M/ticks")"
  assert_greater "$fg" "$last_tick"
}

@test "job control: started in the background, a command reading the terminal waits for fg" {
  local run
  printf -v run '%q run jc-bg -- bash -c %q &\n' "$RLOCK" 'read -r x; echo "got-$x"'
  # (Polled: the job stops once rlock has the lock and the command reads.)
  shell ">$run" "$PROMPT" \
    ">until jobs -l %1 | grep -q 'tty input'; do sleep 0.1; done; jobs -l\n" \
    '?Stopped \(tty input\)' "$PROMPT" \
    '>fg\n' '?jc-bg' '~0.5' '>hello\n' '?got-hello' "$PROMPT" '>echo rc=$?\n' '?rc=[0-9]+'
  assert_output --partial 'rc=0'
  rl 1 status jc-bg
}

@test "job control: kill %1 of a stopped run ends it at once, not after --kill-after" {
  local run
  printf -v run '%q run jc-kill --kill-after 8s -- bash -c %q\n' "$RLOCK" 'echo "go-$((6 * 7))"; sleep 30'
  local before=$SECONDS
  shell ">$run" '?go-42' '>\x1a' '?Stopped' "$PROMPT" \
    '>set -b; kill %1\n' '?Exit 143'
  # bash sends SIGTERM then SIGCONT to rlock's group, rlock passes both on
  # to the command's: it ends well before the 8 s after which SIGKILL would
  # have. (`set -b`: bash says so as soon as it ends; a `wait %1` right
  # after the kill could still find the job stopped.)
  assert_greater 6 "$((SECONDS - before))"
  rl 1 status jc-kill
}

@test "run: SIGTERM to rlock ends a command stopped by SIGSTOP at once (SIGCONT follows it)" {
  local dir="$BATS_TEST_TMPDIR"
  bg_rlock job run jc-stop --kill-after 8s -- bash -c 'echo $$ >"$0"; exec sleep 30' "$dir/cmd"
  wait_for_file "$dir/cmd"
  local cmd
  cmd="$(<"$dir/cmd")"
  kill -STOP "$cmd"
  # No terminal involved: rlock keeps the lock for the stopped command.
  nap 0.3
  running "$(<"$dir/job.pid")" || fail "rlock did not keep running"
  rl 0 status jc-stop
  kill -TERM "$(<"$dir/job.pid")"
  # Within 4 s: SIGKILL would come only 8 s after the SIGTERM.
  bg_wait job 143 4
  rl 1 status jc-stop
}

@test "run: SIGCONT to rlock continues a command stopped by SIGSTOP, as the man page says" {
  # Before, only a signal to the command's own group (which the user had to
  # find) continued it; rlock renewed its lease for ever. Probe I: 4 of 4.
  local dir="$BATS_TEST_TMPDIR" cmd state n
  bg_rlock job run jc-cont -t 3s -- bash -c 'echo $$ >"$0"; kill -STOP $$; echo resumed >"$0.resumed"' "$dir/cmd"
  wait_for_file "$dir/cmd"
  cmd="$(<"$dir/cmd")"
  for ((n = 0; n < 50; n++)); do
    state="$(ps -o stat= -p "$cmd" 2>/dev/null || true)"
    [[ "$state" == T* ]] && break
    nap 0.1
  done
  [[ "$state" == T* ]] || fail "the command did not stop (state '$state')"
  kill -CONT "$(<"$dir/job.pid")"
  bg_wait job 0 5
  assert [ -e "$dir/cmd.resumed" ]
  rl 1 status jc-cont
}
