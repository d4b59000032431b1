#!/usr/bin/env bats
# rlock run inside rlock run at any depth (RLOCK_HELD), the guardian that
# kills the command's whole process group when rlock itself is SIGKILLed,
# and the dumpability of rlock (never) and of the command (as usual).

load helpers

setup() {
  flush_redis
  M="$BATS_TEST_TMPDIR"
}

teardown() {
  kill_bg_pids
  if [[ -s "$M/grandchild" ]]; then kill -KILL "$(<"$M/grandchild")" 2>/dev/null || true; fi
  # A command (its own process group) that a failed test left running.
  if [[ -s "$M/cmd" ]]; then kill -KILL -- "-$(<"$M/cmd")" 2>/dev/null || true; fi
}

# gone PID: true when PID is no running process (absent, a zombie, or dead).
# One look at its state, so a zombie reaped between two looks is not taken
# for a live process.
gone() {
  local state
  state="$(ps -o stat= -p "$1" 2>/dev/null)" || true
  [[ -z "$state" || "$state" == Z* || "$state" == X* ]]
}

# --- nesting ------------------------------------------------------------------

@test "run: A -> B -> A runs the innermost command instead of deadlocking" {
  rl 0 run outer-a -- "$RLOCK" run inner-b -- "$RLOCK" run outer-a -w 3s -- echo hi
  assert_output hi
  rl 1 status outer-a
  rl 1 status inner-b
}

@test "run: a nested run goes ahead only when the enclosing hold covers it (mode and limit)" {
  # Covered: exclusive under exclusive, shared under exclusive or shared,
  # a slot of the same semaphore.
  rl 0 run cover-x -- "$RLOCK" run cover-x -s -- echo shared-in-exclusive
  assert_output shared-in-exclusive
  rl 0 run cover-s -s -- "$RLOCK" run cover-s -s -- echo shared-in-shared
  assert_output shared-in-shared
  rl 0 run cover-l -l 2 -- "$RLOCK" run cover-l -l 2 -- echo slot-in-slot
  assert_output slot-in-slot
  # Not covered (probe E): an exclusive run under a shared hold ran at once,
  # beside another shared holder; a limit or mode the lock is not used
  # with, which a direct acquire refuses, went unnoticed.
  rl 0 acquire cover-s -s -t 60s
  local other="$output"
  rl 64 run cover-s -s -- "$RLOCK" run cover-s -n -- echo exclusive-in-shared
  refute_output --partial exclusive-in-shared
  assert_stderr --partial "lock 'cover-s' is held shared by an enclosing rlock run, which does not cover taking it exclusively"
  rl 64 run cover-l -l 2 -- "$RLOCK" run cover-l -n -- echo exclusive-in-slot
  refute_output --partial exclusive-in-slot
  assert_stderr --partial "held as a semaphore (--limit 2)"
  rl 64 run cover-l -l 2 -- "$RLOCK" run cover-l -l 3 -n -- echo other-limit
  refute_output --partial other-limit
  rl 64 run cover-x -- "$RLOCK" run cover-x -l 2 -n -- echo slot-in-exclusive
  refute_output --partial slot-in-exclusive
  rl 64 run cover-l -l 2 -- "$RLOCK" run cover-l -s -n -- echo shared-in-slot
  refute_output --partial shared-in-slot
  rl 0 release cover-s --token "$other"
}

@test "run: RLOCK_HELD lists every enclosing hold by short id, RLOCK_NAME is the innermost" {
  rl 0 run 'a,b%' -- "$RLOCK" run inner -- sh -c 'echo "$RLOCK_NAME"; echo "$RLOCK_HELD"'
  assert_line -n 0 inner
  assert_line -n 1 --regexp '^[0-9a-f]{8}:a%2Cb%25,[0-9a-f]{8}:inner$'
  # Ids, not tokens.
  refute_line -n 1 --regexp '[0-9a-f]{32}'
}

@test "run: an inherited RLOCK_HELD entry that holds nothing does not skip the lock" {
  RLOCK_HELD=ffffffff:stale rl 0 run stale -- sh -c \
    'echo "$RLOCK_HELD"; "$0" status stale >/dev/null && echo held' "$RLOCK"
  assert_line -n 0 --regexp '^ffffffff:stale,[0-9a-f]{8}:stale$'
  assert_line -n 1 held
}

@test "run: nesting works through a renamed copy of rlock, outside or inside" {
  cp "$RLOCK" "$M/rlock-copy"
  rl 0 run copied -- "$M/rlock-copy" run -w 3s copied -- echo inner-copy
  assert_output inner-copy
  run timeout -k 5 20 "$M/rlock-copy" run copied3 -- "$RLOCK" run -w 3s copied3 -- echo outer-copy
  assert_equal "$status" 0
  assert_output outer-copy
}

@test "run: a hold taken on another host is no enclosing run, its pid an ancestor here or not" {
  unshare -u true 2>/dev/null || skip "unshare -u is not permitted here (needs root)"
  # The outer run takes the lock as host 'elsewhere'; the nested one, in a
  # UTS namespace of its own, runs on this host again: the same id in
  # RLOCK_HELD, an ancestor with the holder's pid, the same program, but
  # another host. Copied across hosts, that environment must not skip the lock.
  cat >"$M/nested" <<EOF
#!/bin/sh
hostname '$(hostname)'
exec "$RLOCK" run -n hosted -- echo RAN
EOF
  chmod +x "$M/nested"
  run timeout -k 5 20 unshare -u sh -c 'hostname elsewhere && exec "$@"' sh \
    "$RLOCK" run hosted -- unshare -u "$M/nested"
  # The nested run finds the lock busy (75); the outer run passes that on.
  assert_equal "$status" 75
  refute_output --partial RAN
}

@test "run: a holder's pid that names another program among the ancestors is no enclosing run" {
  unshare -pf --mount-proc --kill-child true 2>/dev/null ||
    skip "unshare -p is not permitted here (needs root)"
  # The holder runs in a pid namespace of its own, where /bin/true takes pid
  # 2 and rlock run pid 3. Another namespace, numbered the same way, has a
  # shell as pid 3 above the nested rlock: the holder's id (public, from
  # status) in RLOCK_HELD and an ancestor with its pid must not be enough.
  unshare -pf --mount-proc --kill-child sh -c '/bin/true; "$0" run -t 30s pidns -- sleep 60; :' \
    "$RLOCK" >/dev/null 2>&1 </dev/null 3>&- &
  echo "$!" >"$M/holder.pid"
  disown "$!"  # no "Killed" report when the teardown kills it
  local i
  for ((i = 0; i < 100; i++)); do
    rl 0,1 status --json pidns
    ((status == 0)) && break
    nap 0.1
  done
  assert_equal "$status" 0
  local id pid
  read -r id pid < <("$PYTHON" -c 'import json, sys
h = json.load(sys.stdin)["holders"][0]
print(h["id"], h["pid"])' <<<"$output")
  assert_equal "$pid" 3
  run timeout -k 5 20 unshare -pf --mount-proc --kill-child sh -c \
    '/bin/true; sh -c "RLOCK_HELD=$1:pidns \"\$0\" run -n pidns -- echo RAN; echo status=\$?" "$0"; :' \
    "$RLOCK" "$id"
  refute_output --partial RAN
  assert_output "status=75"
}

# --- the guardian -----------------------------------------------------------------

# start_orphan NAME SCRIPT OPTIONS...: `rlock run -t 2s NAME OPTIONS -- sh -c
# SCRIPT $M/grandchild` in the background; SCRIPT must write its background
# job's pid to "$0". Waits until it has.
start_orphan() {
  local name="$1" script="$2"
  shift 2
  bg_rlock job run -t 2s "$name" "$@" -- sh -c "$script" "$M/grandchild"
  local i
  for ((i = 0; i < 200; i++)); do
    [[ -s "$M/grandchild" ]] && return 0
    nap 0.05
  done
  fail "the command did not start its background job"
}

# acquire_after_kill NAME: SIGKILLs rlock (unless already done), then takes
# NAME as soon as the lease allows; fails unless the grandchild is dead by
# then.
acquire_after_kill() {
  local grandchild i
  grandchild="$(<"$M/grandchild")"
  kill -KILL "$(<"$M/job.pid")" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    if "$RLOCK" acquire -n -t 5s "$1" >/dev/null 2>&1; then
      if ! gone "$grandchild"; then
        fail "the grandchild still runs after the lock was taken again:" \
          "$(ps -o pid,ppid,pgid,stat,wchan:20,comm -p "$grandchild" 2>&1)" \
          "guardians: $(pgrep -a -x rlock-guard 2>&1)"
      fi
      bg_wait job 137 5
      return 0
    fi
    nap 0.05
  done
  fail "the lock did not become free after its TTL"
}

@test "run: A -- run B -- CMD: when A loses its lock, CMD (in B's group) is dead before A exits" {
  # CMD ignores SIGTERM and is in B's process group, out of A's reach; A's
  # SIGKILL at its deadline kills B, whose CMD then comes to A (subreaper).
  local cmd
  bg_rlock outer run nest-a -t 3s --kill-after 1s -- \
    "$RLOCK" run nest-b -t 60s --kill-after 20s -- \
    bash -c "trap '' TERM; echo \$\$ >'$M/cmd'; while :; do sleep 0.05; done"
  wait_for_file "$M/cmd"
  cmd="$(<"$M/cmd")"
  # An operator evicts A's holder: A notices at its next renewal (TTL/3).
  rl 0 release nest-a --force
  bg_wait outer 79 10
  if ! gone "$cmd"; then
    kill -KILL "$cmd" 2>/dev/null || true
    fail "the inner command outlived the outer rlock's lost lock"
  fi
}

@test "run: A -- run B -- run C -- CMD: when A ends it, CMD is dead before A exits, every time" {
  # A kills B's group; C then comes to A, is killed, and only once C has
  # exited does CMD come to A: A must look until nobody is left, not stop
  # when B's group is gone (then CMD lived on for C's kill-after).
  # The race was lost about one time in three: eight rounds.
  local i cmd
  for ((i = 1; i <= 8; i++)); do
    rm -f "$M/cmd"
    rl 79 run "nest3-a$i" --max-hold 1s --kill-after 200ms -- "$RLOCK" run "nest3-b$i" -- \
      "$RLOCK" run "nest3-c$i" -- sh -c "trap '' TERM; echo \$\$ >'$M/cmd'; while :; do date >/dev/null; sleep 0.01; done"
    cmd="$(<"$M/cmd")"
    # Another client takes A at once.
    rl 0 acquire "nest3-a$i" -n
    nap 0.3
    if ! gone "$cmd"; then
      kill -KILL "$cmd" 2>/dev/null || true
      fail "round $i: the innermost command outlived the outer run"
    fi
  done
}

@test "run: kill -9 of the outer rlock of A -- run B -- CMD: CMD is dead by A's lease end, not after B's kill-after" {
  # A's guardian kills B (A's command); B's guardian would then give CMD
  # B's --kill-after (20 s), far beyond A's lease: it reads A's deadline
  # page (RLOCK_DEADLINES) and kills CMD by A's point instead.
  local cmd
  bg_rlock outer run nest-d -t 1500ms -- "$RLOCK" run nest-e -t 60s --kill-after 20s -- \
    bash -c "trap '' TERM; echo \$\$ >'$M/cmd'; while :; do sleep 0.05; done"
  wait_for_file "$M/cmd"
  cmd="$(<"$M/cmd")"
  kill -KILL "$(<"$M/outer.pid")"
  # Granted once A's lease is over (1.5 s at most).
  rl 0 acquire nest-d -w 10s
  if ! gone "$cmd"; then
    kill -KILL "$cmd" 2>/dev/null || true
    fail "the inner command outlived the outer lease"
  fi
}

@test "run: RLOCK_DEADLINES names the runs' deadline pages, open in the command; a forged entry is ignored" {
  rl 0 run dl-a -- "$RLOCK" run dl-b -- sh -c 'echo "$RLOCK_DEADLINES"; for fd in $(echo "$RLOCK_DEADLINES" | tr , " "); do readlink "/proc/$$/fd/$fd"; done'
  assert_line -n 0 --regexp '^[0-9]+,[0-9]+$'
  assert_line -n 1 --partial 'memfd:rlock-deadline'
  assert_line -n 2 --partial 'memfd:rlock-deadline'
  # Not a page (stdin, a file, nothing): the run goes on without it.
  RLOCK_DEADLINES="0,1,x,99" rl 0 run dl-c -- true
}

@test "run: kill -9 of rlock kills the command's grandchild before the lock is free again" {
  start_orphan orphan 'sleep 30 & echo $! >"$0"; wait'
  acquire_after_kill orphan
}

@test "run: kill -9 of rlock: a grandchild ignoring SIGTERM gets SIGKILL after --kill-after" {
  local grandchild
  start_orphan stubborn "trap '' TERM; sleep 30 & echo \$! >\"\$0\"; wait" --kill-after 1s
  grandchild="$(<"$M/grandchild")"
  kill -KILL "$(<"$M/job.pid")"
  # SIGTERM went out at once, and is ignored; SIGKILL comes after 1s.
  sleep 0.3
  if gone "$grandchild"; then fail "killed before --kill-after was over"; fi
  acquire_after_kill stubborn
}

@test "run: rlock stopped past the lease: the guardian kills the command, and rlock says 79, not 137" {
  local grandchild
  start_orphan stopped 'sleep 30 & echo $! >"$0"; wait'
  grandchild="$(<"$M/grandchild")"
  kill -STOP "$(<"$M/job.pid")"
  # The guardian hears nothing more and kills the group before the 2 s lease
  # can end.
  local i
  for ((i = 0; i < 100; i++)); do
    gone "$grandchild" && break
    nap 0.05
  done
  gone "$grandchild" || fail "the guardian did not kill the command of a stopped rlock"
  kill -CONT "$(<"$M/job.pid")"
  bg_wait job 79 10
  run cat "$BATS_TEST_TMPDIR/job.err"
  assert_output --partial "lost lock 'stopped'"
  # Killed before the lease could run out, as it was: not "at the end of
  # the lease" (probe E).
  assert_output --partial "so it was killed before the lease could run out"
}

@test "run: rlock and its guardian read one clock, the boot clock: in a time namespace where it is 11 days ahead of the monotonic one, a run renews and ends 0, and a stopped rlock's command is dead by the lease end" {
  # Leases count the time a machine spends suspended (CLOCK_BOOTTIME), as
  # the server's clock does. No test can suspend the machine; a time
  # namespace whose boot clock is offset from its monotonic clock makes any
  # deadline computed on one and judged on the other off by 11 days: the
  # guardian would kill at once, or never.
  if ! unshare --time --boottime 1000000 --fork true 2>/dev/null; then
    skip "no time namespaces here (needs root and Linux 5.6)"
  fi
  printf '#!/bin/sh\nexec unshare --time --boottime 1000000 --fork %q "$@"\n' "$RLOCK" >"$M/ns-rlock"
  chmod +x "$M/ns-rlock"
  RLOCK="$M/ns-rlock" rl 0 run -t 1s boot-clock -- sleep 2.5
  RLOCK="$M/ns-rlock" start_orphan boot-clock 'sleep 30 & echo $! >"$0"; wait'
  local grandchild rlock_pid i
  grandchild="$(<"$M/grandchild")"
  rlock_pid="$(pgrep -P "$(<"$M/job.pid")")"
  [[ -n "$rlock_pid" ]] || fail "rlock is not the child of unshare"
  kill -STOP "$rlock_pid"
  for ((i = 0; i < 100; i++)); do
    gone "$grandchild" && break
    nap 0.05
  done
  gone "$grandchild" || fail "the guardian did not kill the command of a stopped rlock"
  kill -CONT "$rlock_pid"
  bg_wait job 79 10
}

@test "run: the guardian holds no terminal, socket or lock, and leaves with the run" {
  # From inside the command: rlock's other child is the guardian.
  # Its stdio is /dev/null: a `$(rlock run ...)` or a pipeline never waits
  # for it, and it cannot read or write the terminal.
  rl 0 run guarded -- sh -c \
    'g=$(pgrep -x -P $PPID rlock-guard) && echo "$g" && readlink /proc/$g/fd/0 /proc/$g/fd/1 \
      /proc/$g/fd/2 && ls -l /proc/$g/fd | grep -c socket:; true'
  local guardian="${lines[0]:-}"
  assert_regex "$guardian" '^[0-9]+$'
  assert_line -n 1 /dev/null
  assert_line -n 2 /dev/null
  assert_line -n 3 /dev/null
  assert_line -n 4 0
  gone "$guardian" || fail "the guardian is still there after the run"
  ! kill -0 "$guardian" 2>/dev/null || fail "the guardian was left as a zombie"
}

@test "run: a guardian killed while the command runs is replaced, and still kills the command when rlock dies" {
  # `pkill -9 rlock` matches rlock-guard too. Before: rlock went on without
  # one, and a kill -9 of rlock next left the command running unlocked.
  "$RLOCK" run replaced -t 3s -- sh -c 'echo $$ >"$1/cmd"; exec sleep 300' sh "$M" \
    >"$M/job.out" 2>"$M/job.err" 3>&- &
  local rp=$! first second i
  echo "$rp" >"$M/job.pid"
  wait_for_file "$M/cmd"
  first="$(pgrep -x -P "$rp" rlock-guard)"
  assert_regex "$first" '^[0-9]+$'
  kill -KILL "$first"
  for ((i = 0; i < 50; i++)); do
    second="$(pgrep -x -P "$rp" rlock-guard || true)"
    [[ -n "$second" && "$second" != "$first" ]] && break
    nap 0.1
  done
  assert_regex "$second" '^[0-9]+$'
  [[ "$second" != "$first" ]] || fail "no new guardian"
  # The command runs on, unharmed, and the lock is held.
  gone "$(<"$M/cmd")" && fail "the command died with its guardian"
  rl 0 status replaced
  # rlock dies: the new guardian ends the command at once (SIGTERM).
  kill -KILL "$rp"
  for ((i = 0; i < 50; i++)); do
    gone "$(<"$M/cmd")" && break
    nap 0.1
  done
  gone "$(<"$M/cmd")" || fail "the command outlived rlock and its guardian"
}

@test "run: rlock and its guardian killed together (the OOM killer ends both): the command still gets SIGTERM" {
  # They share memory, and the OOM killer kills every process that uses
  # the victim's. Before: the command ran on, unlocked, after the lease.
  "$RLOCK" run both-gone -t 3s -- sh -c \
    'trap "echo TERM >\"$1/trapped\"; exit 0" TERM; echo $$ >"$1/cmd"; sleep 300 & wait' sh "$M" \
    >"$M/job.out" 2>"$M/job.err" 3>&- &
  local rp=$! guardian i
  echo "$rp" >"$M/job.pid"
  wait_for_file "$M/cmd"
  guardian="$(pgrep -x -P "$rp" rlock-guard)"
  assert_regex "$guardian" '^[0-9]+$'
  echo "$guardian" >"$M/guardian.pid"
  # Both by one kill(1), the guardian first, rlock microseconds later: too
  # soon for rlock to start a new one, mostly (and a new one would end the
  # command too). (Not a stopped guardian: orphaned by rlock's death, its
  # process group would get SIGCONT from the kernel.)
  kill -KILL "$guardian" "$rp"
  wait_for_file "$M/trapped" 5
  assert_equal "$(<"$M/trapped")" TERM
}

@test "run: the guardian leaves rlock's starved scheduling (SCHED_IDLE, nice, a pinned CPU) behind" {
  # Starved beside busy loops, a guardian that inherited rlock's SCHED_IDLE
  # or nice 19 on the same CPU acted up to seconds late: past the lease,
  # where another host may hold the lock.
  chrt -i 0 taskset -c 0 nice -n 10 "$RLOCK" run sched -- sleep 30 \
    >"$M/job.out" 2>"$M/job.err" 3>&- &
  local rp=$! guardian i
  echo "$rp" >"$M/job.pid"
  for ((i = 0; i < 50; i++)); do
    guardian="$(pgrep -x -P "$rp" rlock-guard || true)"
    [[ -n "$guardian" ]] && break
    nap 0.1
  done
  assert_regex "$guardian" '^[0-9]+$'
  nap 0.2
  run chrt -p "$guardian"
  assert_line --partial "scheduling policy: SCHED_OTHER"
  # As root it takes the highest priority; rlock itself keeps what it was given.
  # (/proc/PID/stat's 19th field: its nice value.)
  if ((EUID == 0)); then
    assert_equal "$(awk '{print $19}' "/proc/$guardian/stat")" -20
  fi
  assert_equal "$(awk '{print $19}' "/proc/$rp/stat")" 10
  run chrt -p "$rp"
  assert_line --partial "scheduling policy: SCHED_IDLE"
  assert_equal "$(awk '/^Cpus_allowed_list/ {print $2}' "/proc/$guardian/status")" \
    "$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)"
  kill -TERM "$rp"
  bg_wait job 143 10
}

@test "run: a heartbeat that cannot start stops the command at once, releases, and says why (79)" {
  # A user at its process limit (ulimit -u): rlock, its guardian and the
  # command fit, the heartbeat's thread does not. Before: the command ran
  # until the lease was nearly out, then was reported as a lock lost to an
  # outage. A uid of its own, so that nothing else counts against it.
  ((EUID == 0)) || skip "needs root, to run as a uid of its own"
  run timeout 20 setpriv --reuid=54321 --regid=54321 --clear-groups bash -c \
    'ulimit -u 3; exec env HOME=/nonexistent "$0" run no-thread -t 30s -- sleep 40' "$RLOCK"
  assert_equal "$status" 79
  assert_output --partial "cannot start the heartbeat thread"
  assert_output --partial "so it could not be kept; the command was terminated"
  rl 1 status no-thread
}

@test "run: the guardian is a process in rlock's own memory, not a fork's copy" {
  # kcmp(KCMP_VM) answers 0 when two processes share one address space. A
  # fork copied rlock's page tables and then took a copy-on-write fault for
  # each page either process wrote: ~2 ms of a short run on a VM.
  case "$(uname -m)" in
    x86_64) kcmp=312 ;;
    aarch64) kcmp=272 ;;
    *) skip "the guardian forks on $(uname -m)" ;;
  esac
  rl 0 run shared-vm -- sh -c \
    'g=$(pgrep -x -P $PPID rlock-guard) && "$1" -c "import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
print(libc.syscall($2, int(sys.argv[1]), int(sys.argv[2]), 1, 0, 0))" "$PPID" "$g"' \
    sh "$PYTHON" "$kcmp"
  assert_output 0
}

@test "run: under Valgrind the guardian is a fork, and the run works" {
  # Valgrind runs no process that shares memory without being a thread: it
  # would stop rlock at the guardian's start.
  run --separate-stderr timeout 60 valgrind -q --error-exitcode=99 "$RLOCK" run valgrind -- \
    sh -c 'pgrep -x -P $PPID rlock-guard >/dev/null && echo guarded'
  assert_success
  assert_output guarded
}

# --- core dumps ------------------------------------------------------------------------

@test "run: rlock is not dumpable, the command it runs is" {
  command -v setpriv >/dev/null || skip "setpriv (util-linux) is missing"
  # As an unprivileged user, /proc/PID of a non-dumpable process belongs to
  # root; prctl(PR_GET_DUMPABLE) is 3.
  run --separate-stderr timeout 20 setpriv --reuid=65534 --regid=65534 --clear-groups \
    "$RLOCK" run dumpable -- sh -c \
    'stat -c %u /proc/$PPID/environ; "$0" -c "import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"' \
    "$PYTHON"
  assert_success
  assert_line -n 0 0
  assert_line -n 1 1
}

@test "run --json nested in a run of the same lock: it becomes the command, and the enclosing run's document reports it" {
  # One document, the enclosing run's: the nested rlock exec'd the command
  # (killing it kills the command, a signal reaches the command once).
  rl 4 --json run nest-json -- "$RLOCK" --json run nest-json -- sh -c 'echo inner; exit 4'
  assert_equal "${#lines[@]}" 2
  assert_equal "${lines[0]}" inner
  output="${lines[1]}"
  assert_json
  assert_equal "$(json 'd["exit_code"], d["released"]')" '(4, True)'
}
