#!/usr/bin/env bats
# rlock run and signals: passed on to the command's process group, SIGKILL
# after --kill-after, parent death, and signals while waiting for the lock.

load helpers

setup() {
  flush_redis
  M="$BATS_TEST_TMPDIR"
}

teardown() {
  # Whatever a failed test left running.
  kill_bg_pids
}

@test "run: SIGTERM reaches the command, rlock exits 143, the lock is free at once" {
  bg_rlock job run term -- bash -c \
    "trap 'echo TERM >\"$M/trapped\"; exit 143' TERM; touch '$M/ready'; sleep 30 & wait"
  wait_for_file "$M/ready"
  kill -TERM "$(<"$M/job.pid")"
  bg_wait job 143 5
  assert_equal "$(<"$M/trapped")" TERM
  rl 1 status term
}

@test "run: SIGINT, SIGHUP and SIGUSR1 are passed on too" {
  local sig
  for sig in INT HUP USR1; do
    rm -f "$M/ready" "$M/trapped"
    bg_rlock "job$sig" run pass -- bash -c \
      "trap 'echo $sig >\"$M/trapped\"; kill \$!; exit 7' $sig; touch '$M/ready'; sleep 30 & wait"
    wait_for_file "$M/ready"
    kill "-$sig" "$(<"$M/job$sig.pid")"
    bg_wait "job$sig" 7 5
    assert_equal "$(<"$M/trapped")" "$sig"
  done
  rl 1 status pass
}

@test "run: a command that outlives a signal and then dies of another is reported as that other" {
  # It traps SIGINT and carries on; then dies of a SIGTERM passed on (143),
  # or of a SIGKILL from elsewhere, say the OOM killer (137): not 130.
  local end
  for end in TERM KILL; do
    rm -f "$M/ready" "$M/int"
    bg_rlock job run outlives --kill-after 10s -- bash -c \
      "trap 'touch \"$M/int\"' INT; echo \$\$ >'$M/cmd.pid'; touch '$M/ready'; while :; do sleep 0.1; done"
    wait_for_file "$M/ready"
    kill -INT "$(<"$M/job.pid")"
    wait_for_file "$M/int"
    if [[ "$end" == TERM ]]; then
      kill -TERM "$(<"$M/job.pid")"
      bg_wait job 143 5
    else
      kill -KILL "$(<"$M/cmd.pid")"
      bg_wait job 137 5
    fi
    rl 1 status outlives
  done
}

# ctrl_c_script NAME RLOCK-ARGS...: runs `rlock ARGS; echo AFTER` in a bash
# script of its own session, sends SIGINT to the script's whole process
# group (Ctrl-C in a terminal, a CI job's cancel) once lock NAME has a
# holder or a waiter of the script's, and prints how the script ended and
# what it printed.
ctrl_c_script() {
  local name="$1"
  shift
  "$PYTHON" - "$RLOCK" "$name" "$@" <<'EOF'
import json, os, signal, subprocess, sys, time
rl, name, args = sys.argv[1], sys.argv[2], sys.argv[3:]
script = " ".join("'%s'" % a for a in [rl] + args) + '; echo "AFTER $?"'
def parties():
    out = subprocess.run([rl, "status", name, "--json"], capture_output=True, text=True).stdout
    try:
        d = json.loads(out)
    except ValueError:
        return 0
    return len(d.get("holders", [])) + len(d.get("waiters", []))
before = parties()
p = subprocess.Popen(["bash", "-c", script], start_new_session=True,
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
deadline = time.monotonic() + 10
while time.monotonic() < deadline and parties() <= before:
    time.sleep(0.05)
time.sleep(0.3)
os.killpg(p.pid, signal.SIGINT)
out, _ = p.communicate(timeout=20)
print(("script %d %s" % (p.returncode, out.strip())).strip())
EOF
}

@test "run: Ctrl-C to the calling script's group stops the script too, as with flock" {
  # bash goes on after a child that *exits* 130 (it takes the Ctrl-C as
  # handled): rlock cleans up, then dies of SIGINT itself.
  run ctrl_c_script ctrl-c run ctrl-c -- sleep 10
  assert_output 'script -2'
  rl 1 status ctrl-c
  # The same while still waiting for the lock: it leaves the queue first.
  rl 0 acquire ctrl-c-busy -t 30s
  run ctrl_c_script ctrl-c-busy run ctrl-c-busy -- true
  assert_output 'script -2'
  run ctrl_c_script ctrl-c-busy acquire ctrl-c-busy
  assert_output 'script -2'
  rl 0 status ctrl-c-busy --json
  assert_equal "$(json 'len(d["waiters"])')" 0
}

@test "run: a signal rlock was started with ignored stays ignored (nohup)" {
  "$RLOCK" run nohup -- bash -c \
    "trap 'echo TERM >\"$M/trapped\"; exit 0' TERM; touch '$M/ready'; sleep 30 & wait" \
    >"$M/job.out" 2>"$M/job.err" </dev/null 3>&- &
  echo "$!" >"$M/job.pid"
  wait_for_file "$M/ready"
  # This shell started it as a background job: SIGINT is ignored.
  kill -INT "$(<"$M/job.pid")"
  sleep 0.5
  kill -0 "$(<"$M/job.pid")" || fail "SIGINT stopped a run that was started ignoring it"
  rl 0 status nohup
  kill -TERM "$(<"$M/job.pid")"
  bg_wait job 0 5
  assert_equal "$(<"$M/trapped")" TERM
}

@test "acquire: a SIGTERM that comes once the token is printed never leaves the lock held with a failure" {
  # The token is out: the caller owns the lock. Before, a signal landing
  # while rlock exited killed it (143) with the lock held for its TTL, and
  # `T=$(rlock acquire x) || exit` never released it (3 of 200).
  local fifo="$BATS_TEST_TMPDIR/out" i pid rc token failed=0
  mkfifo "$fifo"
  for ((i = 1; i <= 200; i++)); do
    "$RLOCK" acquire "sig-after-$i" -t 30s >"$fifo" &
    pid=$!
    read -r token <"$fifo"
    kill -TERM "$pid" 2>/dev/null || true
    rc=0
    wait "$pid" || rc=$?
    if ((rc != 0)) && "$RLOCK" status "sig-after-$i" >/dev/null 2>&1; then failed=$((failed + 1)); fi
    "$RLOCK" release "sig-after-$i" --token "$token" >/dev/null 2>&1 || true
  done
  ((failed == 0)) || fail "$failed of 200 acquires exited non-zero with their lock held"
}

@test "acquire -w: SIGINT it was started with ignored stays ignored; SIGTERM leaves the queue, 143" {
  rl 0 acquire ign -t 30s
  local token="$output"
  "$RLOCK" acquire -w 30s ign >"$M/job.out" 2>"$M/job.err" </dev/null 3>&- &
  echo "$!" >"$M/job.pid"
  wait_waiters ign 1
  # This shell started it as a background job: SIGINT is ignored.
  kill -INT "$(<"$M/job.pid")"
  sleep 0.5
  running "$(<"$M/job.pid")" || fail "SIGINT stopped an acquire that was started ignoring it"
  assert_equal "$(waiters ign)" 1
  kill -TERM "$(<"$M/job.pid")"
  bg_wait job 143 5
  assert_equal "$(waiters ign)" 0
  rl 0 release ign --token "$token"
}

@test "run: a command ignoring SIGTERM is killed after --kill-after; rlock exits 143" {
  local started elapsed
  bg_rlock job run stubborn --kill-after 1s -- bash -c \
    "trap '' TERM; touch '$M/ready'; sleep 20"
  wait_for_file "$M/ready"
  started="$(now_ms)"
  kill -TERM "$(<"$M/job.pid")"
  bg_wait job 143 10
  elapsed=$(($(now_ms) - started))
  # SIGKILL after 1s, long before the command's own 20s.
  assert_greater "$elapsed" 900
  assert_greater 4000 "$elapsed"
  rl 1 status stubborn
}

@test "run: kill -9 of rlock sends SIGTERM to the command; the lock expires by its TTL" {
  local started
  bg_rlock job run orphan -t 2s -- bash -c \
    "trap 'echo TERM >\"$M/trapped\"; kill \$!; exit 0' TERM; touch '$M/ready'; sleep 30 & wait"
  wait_for_file "$M/ready"
  kill -KILL "$(<"$M/job.pid")"
  started="$(now_ms)"
  wait_for_file "$M/trapped" 5
  bg_wait job 137 5
  while (($(now_ms) - started < 2500)); do
    if ! "$RLOCK" status orphan >/dev/null 2>&1; then break; fi
    nap 0.1
  done
  rl 1 status orphan
}

@test "run: a signal while waiting for the lock leaves the queue and exits 128+N" {
  local token
  rl 0 acquire waited -t 30s
  token="$output"
  bg_rlock waiter run waited -- touch "$M/must-not-run"
  # Until it is queued (status lists a waiter).
  wait_waiters waited 1
  kill -TERM "$(<"$M/waiter.pid")"
  bg_wait waiter 143 5
  # Left the queue on the way out, not merely dropped after its lease.
  assert_equal "$(waiters waited)" 0
  [[ ! -e "$M/must-not-run" ]] || fail "the command ran although the wait was interrupted"
  rl 0 release waited --token "$token"
  rl 1 status waited
}

@test "run: the command starts in its own process group" {
  rl 0 run pgrp -- sh -c 'ps -o pgid= -p $$; echo $$'
  assert_equal "$(echo "${lines[0]}" | tr -d ' ')" "${lines[1]}"
}

# A stop for rlock's own group while the command has no terminal (no
# terminal at all here; at a prompt, a shell that gave its job the terminal
# only after rlock looked): the command stops with rlock, and goes on when
# rlock is continued (before: rlock stopped alone, the command ran on,
# unrenewed). Stopped is the state T in /proc/PID/stat.
@test "run: SIGTSTP to rlock stops its command too; SIGCONT continues both" {
  bg_rlock ts run -t 30s ts -- bash -c 'echo $$ >"$0/cmd.pid"; for i in $(seq 60); do echo "$i" >>"$0/ticks"; sleep 0.05; done' "$M"
  wait_for_file "$M/ticks"
  local rlock_pid cmd_pid state i before after
  rlock_pid="$(<"$M/ts.pid")"
  cmd_pid="$(<"$M/cmd.pid")"
  kill -TSTP "$rlock_pid"
  for ((i = 0; i < 100; i++)); do
    state="$(awk '{print $3}' "/proc/$cmd_pid/stat")"
    [[ "$state" == T ]] && break
    nap 0.05
  done
  assert_equal "$state" T
  assert_equal "$(awk '{print $3}' "/proc/$rlock_pid/stat")" T
  before="$(wc -l <"$M/ticks")"
  nap 0.5
  after="$(wc -l <"$M/ticks")"
  assert_equal "$after" "$before"
  kill -CONT "$rlock_pid"
  bg_wait ts 0
  assert_equal "$(wc -l <"$M/ticks")" 60
  rl 1 status ts
}

# as_daemon SIG... -- COMMAND...: COMMAND with those signals ignored (SIG_IGN
# survives exec), as a daemon that ignores them starts its jobs; and
# SIGALRM after 30 s (an alarm survives exec too): a COMMAND that hangs
# dies of it rather than hang the test. Replaces the (sub)shell it runs in,
# so that `as_daemon ... &` leaves COMMAND's pid in $!.
as_daemon() {
  exec "$PYTHON" -c '
import os, signal, sys
args = sys.argv[1:]
cut = args.index("--")
for name in args[:cut]:
    signal.signal(getattr(signal, name), signal.SIG_IGN)
signal.alarm(30)
os.execvp(args[cut + 1], args[cut + 1:])' "$@"
}

# ignored_in MASK SIG: whether /proc's SigIgn hex MASK has signal SIG.
ignored_in() {
  (((0x$1 >> ($2 - 1)) & 1))
}

@test "run: started with SIGCHLD ignored (a daemon's habit), it still sees the command end and releases" {
  # Before: the kernel reaped the command, rlock never saw it end, renewed
  # the lock forever and ignored SIGTERM.
  run as_daemon SIGCHLD -- "$RLOCK" run chld -t 3s -- \
    awk '/^SigIgn/ {print $2}' /proc/self/status
  assert_success
  # The command gets SIGCHLD ignored, as it would from flock.
  ignored_in "$output" 17 || fail "SIGCHLD not ignored in the command: SigIgn $output"
  rl 1 status chld
  # And a signal still ends a run whose command runs on.
  as_daemon SIGCHLD -- "$RLOCK" run chld2 -t 3s -- sleep 30 >"$M/job.out" 2>"$M/job.err" 3>&- &
  echo "$!" >"$M/job.pid"
  local i
  for ((i = 0; i < 50; i++)); do
    "$RLOCK" status chld2 >/dev/null 2>&1 && break
    nap 0.1
  done
  kill -TERM "$(<"$M/job.pid")"
  bg_wait job 143 10
  rl 1 status chld2
}

@test "run: SIGPIPE and SIGXFSZ reach the command as the caller had them" {
  # rlock ignores both for itself; the command gets the caller's.
  rl 0 run sigs -- awk '/^SigIgn/ {print $2}' /proc/self/status
  ! ignored_in "$output" 13 || fail "SIGPIPE ignored in the command: SigIgn $output"
  ! ignored_in "$output" 25 || fail "SIGXFSZ ignored in the command: SigIgn $output"
  run as_daemon SIGPIPE SIGXFSZ -- "$RLOCK" run sigs -- awk '/^SigIgn/ {print $2}' /proc/self/status
  assert_success
  ignored_in "$output" 13 || fail "SIGPIPE not ignored in the command: SigIgn $output"
  ignored_in "$output" 25 || fail "SIGXFSZ not ignored in the command: SigIgn $output"
}

@test "run: under ulimit -f 0, rlock is not killed by SIGXFSZ with the lock taken" {
  # ThreadSanitizer's runtime writes a file of its own before main().
  if readelf -d "$RLOCK" | grep -q 'libasan\|libtsan'; then skip "sanitizer build"; fi
  run bash -c 'ulimit -f 0; exec "$0" run fsize -t 30s -- echo ran' "$RLOCK"
  assert_success
  assert_output ran
  rl 1 status fsize
}
