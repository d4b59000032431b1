#!/usr/bin/env bats
# stdout that cannot be written (a full disk, a closed descriptor) is an
# error for every command; `acquire` then releases the lock it took, since
# nobody received its token. A pipe whose reader has gone ends `status`,
# --help and --version quietly, as it ends any Unix filter.

load helpers

setup() {
  flush_redis
  M="$BATS_TEST_TMPDIR"
}

teardown() {
  kill_bg_pids
}

# rl_redirected EXPECTED REDIRECTION ARGS...: like rl, with stdout redirected
# by the shell (">/dev/full", ">&-").
rl_redirected() {
  local expected="$1" redirection="$2"
  shift 2
  run --separate-stderr timeout -k 5 "$RL_TIMEOUT" bash -c "exec \"\$0\" \"\$@\" $redirection" "$RLOCK" "$@"
  _rl_check "$expected" "rlock $* $redirection"
}

# rl_unread EXPECTED ARGS...: like rl, with stdout a pipe whose reader has
# already gone (`rlock status | head` once head has its lines), so that the
# first write meets EPIPE every time. A death by a signal is reported as
# the shell reports it: 128 + the signal.
rl_unread() {
  local expected="$1"
  shift
  run --separate-stderr "$PYTHON" -c '
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
p = subprocess.run(sys.argv[1:], stdout=w, timeout=int(os.environ["RL_TIMEOUT"]))
sys.exit(128 - p.returncode if p.returncode < 0 else p.returncode)
' "$RLOCK" "$@"
  _rl_check "$expected" "rlock $* | (reader gone)"
}

@test "output errors: acquire into a full disk fails and leaves the lock free" {
  rl_redirected 70 '>/dev/full' acquire full-disk -t 60s
  assert_stderr --regexp '^rlock: error: cannot write to standard output: No space left on device$'
  rl 1 status full-disk
  # Free: another acquire gets it at once.
  rl 0 acquire full-disk -n
}

@test "output errors: acquire into a file past ulimit -f fails and leaves the lock free" {
  # Before: SIGXFSZ killed rlock (153) with the lock taken for its TTL.
  run bash -c 'ulimit -f 0; exec "$0" acquire fsize -t 60s >"$1"' "$RLOCK" "$M/token"
  assert_equal "$status" 70
  assert_output --partial 'cannot write to standard output: File too large'
  rl 1 status fsize
}

# full_pipe: fd 7 of the caller, the write end of a FIFO (also open for
# reading, so that nothing blocks opening it) filled to capacity, nobody
# draining it: a write to it blocks.
full_pipe() {
  mkfifo "$M/fifo"
  exec 7<>"$M/fifo"
  "$PYTHON" -c '
import fcntl, os
fcntl.fcntl(7, fcntl.F_SETFL, fcntl.fcntl(7, fcntl.F_GETFL) | os.O_NONBLOCK)
try:
    while True:
        os.write(7, b"x" * 4096)
except BlockingIOError:
    pass
fcntl.fcntl(7, fcntl.F_SETFL, fcntl.fcntl(7, fcntl.F_GETFL) & ~os.O_NONBLOCK)'
}

@test "output errors: acquire into a full pipe nobody drains: SIGTERM still ends it, and the lock is released" {
  # Before: blocked in write, it took no notice of TERM or INT, and gave
  # the token out once its lease had run out.
  full_pipe
  "$RLOCK" acquire full-pipe -t 30s >&7 2>"$M/job.err" 3>&- &
  echo "$!" >"$M/job.pid"
  : >"$M/job.out"
  local i
  for ((i = 0; i < 50; i++)); do
    "$RLOCK" status full-pipe >/dev/null 2>&1 && break
    nap 0.1
  done
  nap 0.2
  kill -TERM "$(<"$M/job.pid")"
  bg_wait job 143 5
  rl 1 status full-pipe
  exec 7>&-
}

@test "output errors: acquire into a full pipe nobody drains gives up when the lease runs out (70), released" {
  full_pipe
  "$RLOCK" acquire full-lease -t 1s >&7 2>"$M/job.err" 3>&- &
  echo "$!" >"$M/job.pid"
  : >"$M/job.out"
  bg_wait job 70 10
  assert_stderr --partial "cannot write the token: standard output took nothing before the lease ran out"
  rl 1 status full-lease
  # And no token ever went in: the pipe holds the filler alone.
  assert_equal "$(timeout 5 "$PYTHON" -c '
import os
data = b""
os.set_blocking(7, False)
try:
    while True:
        chunk = os.read(7, 65536)
        if not chunk: break
        data += chunk
except BlockingIOError:
    pass
print(set(data) == {ord("x")})')" True
  exec 7>&-
}

@test "output errors: acquire --json into a full disk fails and leaves the lock free" {
  rl_redirected 70 '>/dev/full' acquire full-json --json -t 60s
  rl 1 status full-json
}

@test "output errors: acquire with stdout closed fails and leaves the lock free" {
  rl_redirected 70 '>&-' acquire closed-out -t 60s
  assert_stderr --partial 'cannot write to standard output: Bad file descriptor'
  rl 1 status closed-out
  # Nothing was sent to Redis on the descriptor stdout would have had.
  assert_equal "$(lock_keys)" 'rlock:{closed-out}:f'
}

@test "output errors: status with stdout closed or full is an error" {
  rl 0 acquire shown -t 60s
  rl_redirected 70 '>&-' status
  assert_stderr --partial 'cannot write to standard output'
  rl_redirected 70 '>&-' status shown
  rl_redirected 70 '>/dev/full' status --json
  rl_redirected 70 '>/dev/full' status shown
}

@test "output errors: status, --help and --version into a pipe nobody reads end quietly, like ls | head" {
  rl 0 acquire piped -t 60s
  local args
  for args in status 'status --json' 'status piped' 'status piped --json' 'status nobody' \
    --help --version; do
    # shellcheck disable=SC2086 # the words of $args are separate arguments
    RL_TIMEOUT="$RL_TIMEOUT" rl_unread 141 $args
    assert_equal "$stderr" ''
  done
}

@test "output errors: acquire into a pipe nobody reads is still an error, and the lock stays free" {
  RL_TIMEOUT="$RL_TIMEOUT" rl_unread 70 acquire unread -t 60s
  assert_stderr --regexp '^rlock: error: cannot write to standard output: Broken pipe$'
  rl 1 status unread
}

@test "output errors: renew, release and release --force report a failed write" {
  rl 0 acquire written -t 60s
  local token="$output"
  rl_redirected 70 '>/dev/full' --json renew written --token "$token"
  rl_redirected 70 '>/dev/full' release written --force
  rl 0 acquire written -t 60s
  token="$output"
  rl_redirected 70 '>/dev/full' --json release written --token "$token"
  # Text renew and release print nothing, so nothing can fail.
  rl 0 acquire written -t 60s
  token="$output"
  rl_redirected 0 '>/dev/full' renew written --token "$token"
  rl_redirected 0 '>/dev/full' release written --token "$token"
}

@test "output errors: --version and --help into a full disk or a closed stdout are errors too" {
  local args
  for args in --version --help 'run --help' 'status --help'; do
    # shellcheck disable=SC2086 # the words of $args are separate arguments
    rl_redirected 70 '>/dev/full' $args
    assert_stderr --partial 'cannot write to standard output: No space left on device'
    # shellcheck disable=SC2086
    rl_redirected 70 '>&-' $args
    assert_stderr --partial 'cannot write to standard output: Bad file descriptor'
  done
  rl 0 --version
  assert_output --partial 'rlock '
}

@test "output errors: a stderr that cannot be written never aborts rlock, and a run still releases its lock" {
  # fmt::print(stderr) threw on a failed write: exit 134 (SIGABRT), and a
  # `run -v` died holding its lock, before it ran the command.
  rl_redirected 64 '2>/dev/full' --bogus
  rl_redirected 0 '2>/dev/full' -v run stderr-full -t 60s -- touch "$BATS_TEST_TMPDIR/ran"
  assert [ -e "$BATS_TEST_TMPDIR/ran" ]
  rl 1 status stderr-full
  rl_redirected 0 '2>&-' -v run stderr-closed -t 60s -- true
  rl 1 status stderr-closed
}

@test "output errors: a run whose stderr is a full pipe nobody reads keeps renewing: the heartbeat's warning never blocks it" {
  # `rlock run job -- make 2>&1 | less`, the pager stopped: the heartbeat
  # wrote its warning (here, a server that may evict keys) to the full
  # pipe, blocked there, stopped renewing, and the command was killed as if
  # the lock were lost (79). Probe I: 4 of 4.
  rcli CONFIG SET maxmemory 100mb >/dev/null
  rcli CONFIG SET maxmemory-policy allkeys-lru >/dev/null
  full_pipe
  "$RLOCK" run stderr-pipe -t 1500ms -- sleep 4 >"$M/job.out" 2>&7 3>&- &
  echo "$!" >"$M/job.pid"
  : >"$M/job.err"
  local rc=0
  bg_wait job 0 15 || rc=$?
  rcli CONFIG SET maxmemory 0 >/dev/null
  rcli CONFIG SET maxmemory-policy noeviction >/dev/null
  exec 7>&-
  ((rc == 0)) || return "$rc"
  rl 1 status stderr-pipe
}

@test "output errors: run -v whose stderr is a full pipe nobody reads still supervises, releases and exits" {
  # Its 'acquired' line blocked the main thread before the command was
  # watched: no heartbeat, no release, the process hung for good and the
  # lock was held until it expired (probe N). Now what run writes while it
  # holds the lock goes through the writer thread, waited for a few seconds
  # at most after the release.
  full_pipe
  "$RLOCK" -v run stderr-verbose -t 30s -- sleep 1 >"$M/job.out" 2>&7 3>&- &
  echo "$!" >"$M/job.pid"
  : >"$M/job.err"
  local rc=0
  bg_wait job 0 15 || rc=$?
  exec 7>&-
  ((rc == 0)) || return "$rc"
  rl 1 status stderr-verbose
}
