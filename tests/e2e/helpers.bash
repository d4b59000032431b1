# shellcheck shell=bash
# Loaded by every suite (`load helpers`). Starts private redis-servers on free
# loopback ports, and runs the binary through `rl`, which bounds every call
# with a timeout and checks its exit status.

bats_require_minimum_version 1.5.0

# bats-support and bats-assert: what `load DIR/load.bash` does, without
# their `$(dirname ...)` per file (15 processes, for every test).
# _library_files DIR: sets _LIBRARY_FILES to the files DIR/load.bash
# sources, in its order; fails if that file holds any other line.
_library_files() {
  local line pattern='^source "\$\(dirname "\$\{BASH_SOURCE\[0\]\}"\)/([A-Za-z0-9_./-]+)"$'
  _LIBRARY_FILES=()
  while IFS= read -r line || [[ -n "$line" ]]; do
    [[ -z "$line" || "$line" == '#'* ]] && continue
    [[ "$line" =~ $pattern && -f "$1/${BASH_REMATCH[1]}" ]] || return 1
    _LIBRARY_FILES+=("$1/${BASH_REMATCH[1]}")
  done <"$1/load.bash"
}
for _library in /usr/lib/bats/bats-support /usr/lib/bats/bats-assert; do
  if _library_files "$_library"; then
    for _library_file in "${_LIBRARY_FILES[@]}"; do
      # shellcheck source=/dev/null
      source "$_library_file"
    done
  else
    load "$_library/load.bash"
  fi
done
unset _library _library_file _LIBRARY_FILES

# (Without a process when the directory is already absolute and plain.)
if [[ "$BATS_TEST_DIRNAME" == /*/tests/e2e && "$BATS_TEST_DIRNAME" != *'/.'* && "$BATS_TEST_DIRNAME" != *//* ]]; then
  REPO="${BATS_TEST_DIRNAME%/tests/e2e}"
else
  REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
fi
# The binary under test: RLOCK_BIN overrides the one scripts/test builds.
RLOCK="${RLOCK_BIN:-$REPO/build/rlock}"
# Seconds any single rlock call may take before the test fails as hung.
RL_TIMEOUT=20
# Debian's python3 (it has python3-redis), not whatever python3 PATH finds first.
PYTHON=/usr/bin/python3
# For the polling helpers' Python: with PYTHONPATH="$E2E_PY", `import
# miniredis as redis` stands in for redis-py (see miniredis.py).
E2E_PY="$REPO/tests/e2e"

# The suites must not see the caller's Redis, secrets or config. This file is
# sourced again for every test, after setup_file exported RLOCK_URL: clean the
# environment only once per file.
if [[ -z "${RLOCK_E2E_CLEAN_ENV:-}" ]]; then
  unset RLOCK_URL REDIS_URL RLOCK_PREFIX RLOCK_PASSWORD REDISCLI_AUTH RLOCK_SENTINEL_PASSWORD \
    RLOCK_CONNECT_TIMEOUT XDG_CONFIG_HOME
  # One home per file: suites run side by side (bats --jobs), and one that
  # writes a config file there must not change what another one reads.
  export HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$HOME"
  export RLOCK_E2E_CLEAN_ENV=1
fi

# --- waiting without processes ----------------------------------------------
# Starting a process (fork and exec) costs milliseconds of CPU on a loaded
# machine, and the polling loops below may run hundreds of times per file:
# their sleeps, reads of files and looks at processes stay in the shell.

# nap SECONDS: `sleep SECONDS` without a process: `read -t` on a FIFO that
# nobody writes (opened read-write, so that the open never blocks). A
# signal to the shell does not end it early.
_NAP_FIFO="$BATS_RUN_TMPDIR/nap.fifo"
if [[ ! -p "$_NAP_FIFO" ]]; then
  # Files of one run load this side by side: one mkfifo may lose the race.
  mkfifo "$_NAP_FIFO" 2>/dev/null || [[ -p "$_NAP_FIFO" ]]
fi
nap() {
  local _nap
  if [[ -p "$_NAP_FIFO" ]]; then
    read -r -t "$1" _nap <>"$_NAP_FIFO" || true
  else
    sleep "$1"
  fi
}

# --- running the binary ------------------------------------------------------

# rl EXPECTED ARGS...: runs `rlock ARGS...` with a timeout and fails the test
# unless it exits with EXPECTED (or one of a comma-separated list, "75,76").
# Afterwards $status, $output (stdout only), $lines and $stderr are set.
# It does what `run --separate-stderr` would, minus the processes that adds
# (a mktemp for the stderr file, a subshell around the command): stdout
# as by $(...), stderr read back as `run` reads it.
rl() {
  # keep_empty_lines and BATS_RUN_COMMAND: read by bats_separate_lines and bats.
  # shellcheck disable=SC2034
  local expected="$1" flags="$-" err="${BATS_TEST_TMPDIR:-$BATS_FILE_TMPDIR}/.rl-stderr" keep_empty_lines=
  shift
  set +eET
  output="$(timeout -k 5 "$RL_TIMEOUT" "$RLOCK" "$@" 2>"$err")" && status=0 || status=$?
  bats_separate_lines lines output
  read -d '' -r stderr <"$err" || true
  bats_separate_lines stderr_lines stderr
  # shellcheck disable=SC2034
  BATS_RUN_COMMAND="timeout -k 5 $RL_TIMEOUT $RLOCK $*"
  set "-$flags"
  _rl_check "$expected" "rlock $*"
}

_rl_check() {
  local expected="$1" command="$2"
  if [[ ",$expected," != *",$status,"* ]]; then
    local why="rlock exited with an unexpected status"
    if ((status == 124 || status == 137)); then why="rlock timed out after ${RL_TIMEOUT}s"; fi
    batslib_print_kv_single_or_multi 8 \
      command "$command" expected "$expected" actual "$status" \
      stdout "$output" stderr "$stderr" | batslib_decorate "$why" | fail
  fi
}

# rl_bg TAG ARGS...: starts `rlock ARGS...` in the background (with the same
# timeout). If RL_GATE names a file, it waits for that file to appear first,
# so that several started processes race each other. Collect with rl_wait.
rl_bg() {
  local tag="$1"
  shift
  local base="$BATS_TEST_TMPDIR/bg.$tag"
  (
    if [[ -n "${RL_GATE:-}" ]]; then
      for ((i = 0; i < 500; i++)); do
        [[ -e "$RL_GATE" ]] && break
        nap 0.01
      done
    fi
    rc=0
    timeout -k 5 "$RL_TIMEOUT" "$RLOCK" "$@" >"$base.out" 2>"$base.err" </dev/null || rc=$?
    echo "$rc" >"$base.rc"
  ) 3>&- &
  echo "$!" >"$base.pid"
  echo "rlock $*" >"$base.cmd"
}

# rl_wait TAG EXPECTED: waits for `rl_bg TAG` to end, sets $status, $output
# and $stderr like `rl`, and checks the exit status like `rl`.
rl_wait() {
  local base="$BATS_TEST_TMPDIR/bg.$1" expected="$2"
  wait "$(<"$base.pid")" || true
  status="$(<"$base.rc")"
  output="$(<"$base.out")"
  stderr="$(<"$base.err")"
  bats_separate_lines lines output
  bats_separate_lines stderr_lines stderr
  _rl_check "$expected" "$(<"$base.cmd")"
}

# --- rlock in the background, signalled (the `run` suites) ------------------

# bg_rlock TAG ARGS...: starts rlock itself in the background (not through
# timeout, so that $BATS_TEST_TMPDIR/TAG.pid is rlock's own pid and signals
# reach it); its stdout/stderr go to TAG.out/.err there. Collect with bg_wait.
# A background job of a non-interactive shell starts with SIGINT and SIGQUIT
# ignored; `env --default-signal` (which execs, keeping the pid) undoes that,
# so rlock starts with the dispositions a foreground one would have.
bg_rlock() {
  local tag="$1" dir="$BATS_TEST_TMPDIR"
  shift
  env --default-signal=INT,QUIT "$RLOCK" "$@" >"$dir/$tag.out" 2>"$dir/$tag.err" </dev/null 3>&- &
  echo "$!" >"$dir/$tag.pid"
}

# until_ok TRIES COMMAND...: runs COMMAND every 0.2 s, at most TRIES times,
# until it answers OK; its last answer (stdout and stderr) is left in $reply.
until_ok() {
  local tries="$1" i
  shift
  for ((i = 0; i < tries; i++)); do
    reply="$("$@" 2>&1)"
    [[ "$reply" == OK ]] && return 0
    nap 0.2
  done
  return 1
}

# running PID: true while PID exists and is not a zombie (a child of this
# shell that died stays a zombie, which `kill -0` still finds, until reaped).
# One look, at /proc/PID/stat alone (no process started): with `kill -0`
# first, bash could reap the zombie between the two, and the gone process
# would then read as "running". The state is the field after the command
# name, which is in parentheses and may itself hold spaces and ")".
running() {
  local stat
  [[ "$1" =~ ^[0-9]+$ ]] || return 1
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat="${stat##*) }"
  [[ -n "$stat" && "$stat" != [ZX]* ]]
}

# bg_wait TAG EXPECTED [SECONDS]: waits at most SECONDS (default 15) for
# `bg_rlock TAG` to exit (SIGKILLs it and fails the test if it does not),
# checks its status like `rl`, and sets $status, $output, $lines, $stderr.
bg_wait() {
  local tag="$1" expected="$2" limit="${3:-15}" dir="$BATS_TEST_TMPDIR" pid i
  pid="$(<"$dir/$tag.pid")"
  for ((i = 0; i < limit * 20; i++)); do
    running "$pid" || break
    nap 0.05
  done
  if running "$pid"; then
    kill -KILL "$pid" 2>/dev/null || true
    fail "rlock $tag did not exit within ${limit}s"
  fi
  status=0
  wait "$pid" || status=$?
  rm -f "$dir/$tag.pid"
  output="$(<"$dir/$tag.out")"
  stderr="$(<"$dir/$tag.err")"
  bats_separate_lines lines output
  bats_separate_lines stderr_lines stderr
  _rl_check "$expected" "rlock ($tag)"
}

# kill_bg_pids: SIGKILLs the pid in every $BATS_TEST_TMPDIR/*.pid (for
# teardown: whatever bg_rlock started that a failed test never collected).
kill_bg_pids() {
  local f
  for f in "$BATS_TEST_TMPDIR"/*.pid; do
    if [[ -e "$f" ]]; then kill -KILL "$(<"$f")" 2>/dev/null || true; fi
  done
}

# wait_for_file PATH [SECONDS]: waits at most SECONDS (default 10) until PATH
# exists; fails the test otherwise.
wait_for_file() {
  local i limit="${2:-10}"
  for ((i = 0; i < limit * 20; i++)); do
    [[ -e "$1" ]] && return 0
    nap 0.05
  done
  fail "timed out waiting for $1"
}

# now_ms: the wall clock in milliseconds (what `date +%s%N` / 10^6 says,
# without starting date).
now_ms() {
  echo $((${EPOCHREALTIME/[!0-9]/} / 1000))
}

# --- sessions: scripts of several rlock calls in the background --------------
# For the queueing suites (fifo, semaphore, shared). A file that uses session
# stops what a failed test left running with `teardown() { stop_sessions; }`.

# session TAG SCRIPT: runs the bash SCRIPT in the background, bounded by a
# timeout, with $RLOCK and $DIR (the test's tmpdir) set. Its stdout/stderr go
# to $DIR/TAG.out/.err, and its pid to $DIR/TAG.pid: the pid of the bash that
# runs SCRIPT, which is the pid status shows for an `acquire` it runs (the
# trailing `exit` keeps bash from exec-ing the last command). Its exit status
# (124 if the timeout ended it, 128+N if a signal killed it) goes to
# $DIR/TAG.rc once it ended: collect and check it with wait_sessions.
session() {
  local tag="$1" script="$2" dir="$BATS_TEST_TMPDIR"
  # A wrapper subshell waits for the timeout and records its status; the
  # timeout's own pid (TAG.tpid) is what stop_sessions signals, so that its
  # process group, rlock children included, goes too.
  (
    RLOCK="$RLOCK" DIR="$dir" timeout -k 5 60 bash -c "echo \$\$ >'$dir/$tag.pid'; $script; exit \$?" \
      >"$dir/$tag.out" 2>"$dir/$tag.err" </dev/null &
    echo "$!" >"$dir/$tag.tpid"
    rc=0
    wait "$!" || rc=$?
    echo "$rc" >"$dir/$tag.rc"
  ) 3>&- &
  echo "$tag $!" >>"$dir/sessions"
  # Both pid files are written first thing; wait (bounded, 5 s) so callers
  # can use them.
  local i
  for ((i = 0; i < 500; i++)); do
    [[ -s "$dir/$tag.pid" && -s "$dir/$tag.tpid" ]] && return 0
    nap 0.01
  done
  fail "session $tag did not start within 5 s"
}

# _reap_sessions: waits for the wrapper of every session of this test.
_reap_sessions() {
  local tag pid
  [[ -f "$BATS_TEST_TMPDIR/sessions" ]] || return 0
  while read -r tag pid; do wait "$pid" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/sessions"
}

# wait_sessions [TAG=EXPECTED...]: waits for every session of this test to
# end, then fails the test unless each exited 0, or (for a TAG given here)
# with EXPECTED (one status or a comma-separated list, like rl).
wait_sessions() {
  local dir="$BATS_TEST_TMPDIR" arg tag pid rc report=()
  local -A want=()
  for arg in "$@"; do want["${arg%%=*}"]="${arg#*=}"; done
  _reap_sessions
  [[ -f "$dir/sessions" ]] || fail "wait_sessions: no session was started"
  while read -r tag pid; do
    rc=none
    if [[ -f "$dir/$tag.rc" ]]; then rc="$(<"$dir/$tag.rc")"; fi
    if [[ ",${want[$tag]:-0}," != *",$rc,"* ]]; then
      report+=("session $tag exited $rc, expected ${want[$tag]:-0}; stderr: $(cat "$dir/$tag.err" 2>/dev/null)")
    fi
    unset 'want[$tag]'
  done <"$dir/sessions"
  # A status expected of a session that never ran is a mistake in the test.
  for tag in "${!want[@]}"; do report+=("wait_sessions: no session $tag"); done
  if ((${#report[@]})); then
    printf '%s\n' "${report[@]}" | batslib_decorate "sessions ended unexpectedly" | fail
  fi
}

# stop_sessions: kills whatever a failed test left running (timeout's process
# group takes the rlock children with it).
stop_sessions() {
  local tag pid
  [[ -f "$BATS_TEST_TMPDIR/sessions" ]] || return 0
  while read -r tag pid; do
    if [[ -s "$BATS_TEST_TMPDIR/$tag.tpid" ]]; then
      kill -TERM "$(<"$BATS_TEST_TMPDIR/$tag.tpid")" 2>/dev/null || true
    fi
  done <"$BATS_TEST_TMPDIR/sessions"
  _reap_sessions
}

# waiters NAME: how many waiters `status NAME --json` shows (-1 if it prints
# no document with a "waiters" list). Counted in the shell, without a JSON
# parser process (this runs every 50 ms in wait_waiters): each element of
# that list is an object with a "position" field, a key that no other
# object of the document has and that no JSON string can hold unescaped.
waiters() {
  local doc marks
  doc="$("$RLOCK" status "$1" --json 2>/dev/null)"
  if [[ "$doc" != '{'*'}' || "$doc" != *'"waiters":['* ]]; then
    echo -1
    return 0
  fi
  marks="${doc//'"position":'/$'\x01'}"
  marks="${marks//[!$'\x01']/}"
  echo "${#marks}"
}

# wait_waiters NAME N: waits (bounded, 10 s) until NAME has exactly N waiters.
wait_waiters() {
  local i n
  for ((i = 0; i < 200; i++)); do
    n="$(waiters "$1")"
    ((n == $2)) && return 0
    nap 0.05
  done
  fail "lock '$1' has $n waiters, expected $2"
}

# --- assertions --------------------------------------------------------------

# assert_stderr / refute_stderr: assert_output / refute_output on $stderr.
assert_stderr() {
  local output="$stderr"
  assert_output "$@"
}
refute_stderr() {
  local output="$stderr"
  refute_output "$@"
}

# Fails unless $output is one valid JSON document.
assert_json() {
  if ! "$PYTHON" -m json.tool <<<"$output" >/dev/null 2>&1; then
    batslib_print_kv_single_or_multi 6 output "$output" | batslib_decorate "not valid JSON" | fail
  fi
}

# json EXPR: prints the Python expression EXPR evaluated with `d` bound to the
# JSON document in $output; booleans, null, lists and objects print as JSON.
#   fence="$(json 'd["fence"]')"
json() {
  "$PYTHON" -c '
import json, sys
d = json.loads(sys.argv[2])
r = eval(sys.argv[1])
print(json.dumps(r) if r is None or isinstance(r, (bool, dict, list)) else r)
' "$1" "$output"
}

# assert_greater A B: integer A > integer B.
assert_greater() {
  if ! [[ "$1" =~ ^[0-9]+$ && "$2" =~ ^[0-9]+$ ]] || (($1 <= $2)); then
    batslib_print_kv_single 8 left "$1" right "$2" | batslib_decorate "expected left > right" | fail
  fi
}

# The usage-error contract: exit 64, nothing on stdout, one line on stderr
# that starts "rlock: error:" (a CLI usage line is tolerated; at most one
# extra hint line such as "Run with --help").
rl_usage_error() {
  rl 64 "$@"
  assert_output ''
  assert_regex "${stderr_lines[0]:-}" '^(rlock: error: .+|[Uu]sage: .+)'
  if ((${#stderr_lines[@]} > 2)); then
    batslib_print_kv_single_or_multi 8 command "rlock $*" stderr "$stderr" |
      batslib_decorate "more than one error line on stderr" | fail
  fi
}

# --- ports and servers -------------------------------------------------------

# Prints a TCP port on 127.0.0.1 that nothing is bound to. Ports are taken
# outside the kernel's ephemeral range (no outgoing connection takes them
# meanwhile) and never handed out twice in one bats run, so files run one
# after another cannot collide.
free_port() {
  "$PYTHON" - "$BATS_RUN_TMPDIR/ports-handed-out" <<'EOF'
import fcntl, random, socket, sys
lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
candidates = [p for p in range(20000, 60001) if not lo <= p <= hi] or list(range(20000, 60001))
with open(sys.argv[1], "a+") as ledger:
    fcntl.flock(ledger, fcntl.LOCK_EX)
    ledger.seek(0)
    taken = {int(line) for line in ledger if line.strip()}
    for port in random.sample(candidates, 500):
        if port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ledger.write(f"{port}\n")
        print(port)
        break
    else:
        raise SystemExit("free_port: no free port found")
EOF
}

# _launch_redis DIR ARGS...: starts redis-server (or RLOCK_E2E_SERVER, such as
# a valkey-server: scripts/test's Valkey stage) in the foreground of a
# background job, with DIR as its working directory and unix socket, records
# it for stop_all_redis, and waits (bounded) until it answers on the socket.
# Sets _REDIS_PID. A NOAUTH answer counts as up (servers with requirepass).
# redis-cli is asked only once the socket exists (before, it could only
# fail, and each call is a process).
_launch_redis() {
  local dir="$1"
  shift
  "${RLOCK_E2E_SERVER:-redis-server}" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    --dir "$dir" --unixsocket "$dir/redis.sock" --unixsocketperm 700 \
    --logfile "$dir/redis.log" "$@" </dev/null >"$dir/stdout.log" 2>&1 3>&- &
  _REDIS_PID=$!
  echo "$_REDIS_PID $dir" >>"$BATS_FILE_TMPDIR/redis-servers"
  local i reply
  # 10 s: a loaded CI machine starts redis in well under a second.
  for ((i = 0; i < 200; i++)); do
    if ! kill -0 "$_REDIS_PID" 2>/dev/null; then
      echo "redis-server $* exited at start:" >&2
      cat "$dir/redis.log" "$dir/stdout.log" >&2 2>/dev/null
      return 1
    fi
    if [[ -S "$dir/redis.sock" ]]; then
      reply="$(redis-cli -s "$dir/redis.sock" ping 2>&1 </dev/null || true)"
      if [[ "$reply" == PONG || "$reply" == *NOAUTH* ]]; then
        return 0
      fi
    fi
    nap 0.05
  done
  echo "redis-server $* did not answer within 10 s" >&2
  cat "$dir/redis.log" >&2 2>/dev/null
  return 1
}

# A fresh directory for one server; short, so the socket path fits in 108 bytes.
_redis_dir() {
  mktemp -d "${TMPDIR:-/tmp}/rlock-e2e.XXXXXX"
}

# start_redis [redis-server args...]: a private redis-server on 127.0.0.1.
# Exports REDIS_PORT, REDIS_PID, REDIS_SOCK, REDIS_DIR and RLOCK_URL.
start_redis() {
  local dir port
  # A port found free can be taken before redis binds it: try another.
  for _ in 1 2 3; do
    dir="$(_redis_dir)"
    port="$(free_port)"
    if _launch_redis "$dir" --port "$port" "$@"; then
      export REDIS_PORT="$port" REDIS_PID="$_REDIS_PID" REDIS_DIR="$dir"
      export REDIS_SOCK="$dir/redis.sock"
      export RLOCK_URL="redis://127.0.0.1:$port/0"
      return 0
    fi
  done
  return 1
}

# start_reply_proxy MODE PATTERN N: tests/e2e/replyproxy.py in front of this
# file's server (see there: drop N replies, or one N seconds late), its
# URL in PROXY_URL once it listens; its output in $BATS_TEST_TMPDIR/proxy.log,
# its pid in proxy.pid there (kill_bg_pids stops it).
start_reply_proxy() {
  local port i
  port="$(free_port)"
  "$PYTHON" "$BATS_TEST_DIRNAME/replyproxy.py" "$1" "$port" "$REDIS_PORT" "$2" "$3" \
    >"$BATS_TEST_TMPDIR/proxy.log" 2>&1 3>&- &
  echo "$!" >"$BATS_TEST_TMPDIR/proxy.pid"
  for ((i = 0; i < 100; i++)); do
    grep -q listening "$BATS_TEST_TMPDIR/proxy.log" 2>/dev/null && break
    nap 0.05
  done
  export PROXY_URL="redis://127.0.0.1:$port/0"
}

# start_hung_server: a redis-server stopped with SIGSTOP, on HUNG_PORT: the
# kernel still accepts connections to it, and nothing ever answers (a hung
# or frozen node). Its pid is in $BATS_TEST_TMPDIR/hung.pid, so that
# kill_bg_pids SIGKILLs it if the test fails; stop_hung_server otherwise.
# Leaves REDIS_PORT and RLOCK_URL as they were.
start_hung_server() {
  local port="${REDIS_PORT:-}" pid="${REDIS_PID:-}" dir="${REDIS_DIR:-}" url="${RLOCK_URL:-}"
  start_redis || return 1
  export HUNG_PORT="$REDIS_PORT" HUNG_PID="$REDIS_PID"
  export REDIS_PORT="$port" REDIS_PID="$pid" REDIS_DIR="$dir" RLOCK_URL="$url"
  kill -STOP "$HUNG_PID"
  echo "$HUNG_PID" >"$BATS_TEST_TMPDIR/hung.pid"
}
stop_hung_server() {
  kill -CONT "$HUNG_PID"
  rm -f "$BATS_TEST_TMPDIR/hung.pid"
  stop_redis "$HUNG_PID"
}

# rcli ARGS...: redis-cli against the server of the last start_redis.
rcli() {
  redis-cli -p "$REDIS_PORT" "$@" </dev/null
}

# redis_cmd PORT ARGS...: sends the command ARGS to 127.0.0.1:PORT over
# bash's /dev/tcp, without starting a process (redis-cli is the costliest
# process the polling loops start), and sets the array $redis_reply to the
# reply flattened as `redis-cli` prints it without a terminal: a status
# (+OK), integer or bulk string is one element, an array its elements in
# order, nested arrays flattened, a nil or empty bulk string "". Returns 2
# for an error reply (alone in $redis_reply, and on stderr), 1 when the
# connection fails or the reply does not arrive within REDIS_CMD_TIMEOUT
# seconds (default 3: a frozen server). With RLOCK_E2E_TLS: over TLS,
# see _redis_cmd_tls.
redis_cmd() {
  local LC_ALL=C port="$1" fd arg request rc=0 limit="${REDIS_CMD_TIMEOUT:-3}"
  if e2e_tls; then
    _redis_cmd_tls "$@"
    return
  fi
  shift
  request="*$#"$'\r\n'
  for arg in "$@"; do request+="\$${#arg}"$'\r\n'"$arg"$'\r\n'; done
  redis_reply=()
  exec {fd}<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf '%s' "$request" >&"$fd"
  _redis_read "$fd" "$limit" || rc=$?
  exec {fd}>&-
  case "$rc" in
    0) return 0 ;;
    2)
      redis_reply=("${redis_reply[-1]}")
      echo "redis_cmd $port $*: ${redis_reply[0]}" >&2
      return 2
      ;;
  esac
  echo "redis_cmd $port $*: no complete reply within $limit s" >&2
  return 1
}

# _redis_read FD SECONDS: appends one RESP2 reply read from FD to $redis_reply;
# returns 2 for an error reply, 1 when the reply is incomplete or not RESP.
_redis_read() {
  local fd="$1" limit="$2" line data n k rc=0
  IFS= read -r -t "$limit" line <&"$fd" || return 1
  line="${line%$'\r'}"
  case "$line" in
    [+:]*) redis_reply+=("${line:1}") ;;
    -*)
      redis_reply+=("${line:1}")
      return 2
      ;;
    '$-1' | '*-1') redis_reply+=("") ;;
    '$'[0-9]*)
      n="${line:1}"
      [[ "$n" =~ ^[0-9]+$ ]] || return 1
      data=""
      # The bulk string and its CRLF, read as bytes (LC_ALL=C).
      if ((n > 0)); then IFS= read -r -N "$n" -t "$limit" data <&"$fd" || return 1; fi
      IFS= read -r -N 2 -t "$limit" line <&"$fd" || return 1
      redis_reply+=("$data")
      ;;
    '*'[0-9]*)
      n="${line:1}"
      [[ "$n" =~ ^[0-9]+$ ]] || return 1
      for ((k = 0; k < n; k++)); do
        _redis_read "$fd" "$limit" || rc=$?
        # An error inside an array is an element, not the reply.
        if ((rc == 2)); then rc=0; fi
        ((rc == 0)) || return "$rc"
      done
      ;;
    *) return 1 ;;
  esac
}

# flush_redis [PORT]: FLUSHALL on the server of the last start_redis (or on
# PORT); fails unless it answers OK.
flush_redis() {
  redis_cmd "${1:-$REDIS_PORT}" FLUSHALL && [[ "${redis_reply[0]}" == OK ]]
}

# make_tls_certs DIR: a CA, a server certificate for 127.0.0.1/localhost and
# a client certificate signed by it, and an unrelated second CA.
make_tls_certs() {
  local d="$1"
  mkdir -p "$d"
  (
    set -e
    cd "$d"
    local key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    for ca in ca other-ca; do
      openssl req -x509 "${key[@]}" -keyout "$ca.key" -out "$ca.pem" -days 2 \
        -subj "/CN=rlock test $ca" -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign,cRLSign
    done
    openssl req -new "${key[@]}" -keyout server.key -out server.csr -subj /CN=127.0.0.1
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile server.ext -out server.pem
    openssl req -new "${key[@]}" -keyout client.key -out client.csr -subj /CN=rlock-client
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile client.ext -out client.pem
  ) >"$d/openssl.log" 2>&1 || {
    cat "$d/openssl.log" >&2
    return 1
  }
}

# start_tls_redis [optional|yes|no]: a redis-server that speaks only TLS on
# 127.0.0.1 (client certificates: optional by default). Certificates are made
# once per file. Exports TLS_PORT, TLS_PID, TLS_SOCK (plain, for set-up), TLS_DIR.
start_tls_redis() {
  local auth_clients="${1:-optional}" dir port
  if [[ -z "${TLS_DIR:-}" ]]; then
    make_tls_certs "$BATS_FILE_TMPDIR/tls" || return 1
    export TLS_DIR="$BATS_FILE_TMPDIR/tls"
  fi
  for _ in 1 2 3; do
    dir="$(_redis_dir)"
    port="$(free_port)"
    if _launch_redis "$dir" --port 0 --tls-port "$port" \
      --tls-cert-file "$TLS_DIR/server.pem" --tls-key-file "$TLS_DIR/server.key" \
      --tls-ca-cert-file "$TLS_DIR/ca.pem" --tls-auth-clients "$auth_clients"; then
      export TLS_PORT="$port" TLS_PID="$_REDIS_PID" TLS_SOCK="$dir/redis.sock"
      return 0
    fi
  done
  return 1
}

# --- TLS topologies ------------------------------------------------------------
# A suite opts in with `export RLOCK_E2E_TLS=1` before start_cluster or
# start_sentinel_topology: every node (and Sentinel) then listens on TLS
# only (`--port 0 --tls-port P`), talks TLS to the others (replication,
# Cluster bus, Sentinel links), and the helpers reach it over TLS too:
# redis_cmd through redis-cli, the Python checks through miniredis (which
# reads RLOCK_E2E_TLS_CA). The ports keep their meaning: each is the node's
# TLS port, which is what CLUSTER SLOTS, MOVED, INFO replication and the
# Sentinels report over TLS.

# e2e_tls: true when this file's topologies speak TLS.
e2e_tls() {
  [[ -n "${RLOCK_E2E_TLS:-}" ]]
}

# e2e_tls_prepare: for start_cluster / start_sentinel_topology in TLS mode:
# makes the certificates once per file (TLS_DIR, as start_tls_redis does)
# and exports RLOCK_E2E_TLS_CA, the CA the helpers verify the nodes with.
e2e_tls_prepare() {
  e2e_tls || return 0
  if [[ -z "${TLS_DIR:-}" ]]; then
    make_tls_certs "$BATS_FILE_TMPDIR/tls" || return 1
    export TLS_DIR="$BATS_FILE_TMPDIR/tls"
  fi
  export RLOCK_E2E_TLS_CA="$TLS_DIR/ca.pem"
}

# e2e_tls_args: sets the arrays E2E_TLS_SERVER (redis-server options that
# move the node of port $1 to TLS, replication and Cluster bus included)
# and E2E_TLS_CLI (redis-cli options to reach it); both empty unless TLS.
# Clients need no certificate; the nodes present the client certificate
# to each other (the Cluster bus always asks for one, and the server
# certificate is for serverAuth only).
e2e_tls_args() {
  E2E_TLS_SERVER=()
  E2E_TLS_CLI=()
  e2e_tls || return 0
  # shellcheck disable=SC2034 # read by cluster.bash and sentinel.bash
  E2E_TLS_SERVER=(--port 0 --tls-port "$1" --tls-cert-file "$TLS_DIR/server.pem"
    --tls-key-file "$TLS_DIR/server.key" --tls-ca-cert-file "$TLS_DIR/ca.pem"
    --tls-client-cert-file "$TLS_DIR/client.pem" --tls-client-key-file "$TLS_DIR/client.key"
    --tls-auth-clients no --tls-replication yes)
  E2E_TLS_CLI=(--tls --cacert "$TLS_DIR/ca.pem")
}

# rl_tls_refused ARGS...: `rl 77 ARGS`, twice: with --cacert naming the
# unrelated CA of make_tls_certs, and with no --cacert (the system's CAs,
# which never signed the test CA). Each time nothing on stdout and one
# error line that names the TLS verification.
rl_tls_refused() {
  local ca
  for ca in "--cacert=$TLS_DIR/other-ca.pem" ""; do
    rl 77 "$@" ${ca:+"$ca"}
    assert_output ''
    assert_equal "${#stderr_lines[@]}" 1
    assert_regex "$stderr" '^rlock: error: TLS verification failed for rediss://127\.0\.0\.1:[0-9]+/0: certificate verify failed'
  done
}

# _redis_cmd_tls PORT ARGS...: redis_cmd over TLS, through redis-cli (bash
# has no TLS): the reply as redis-cli prints it without a terminal, one
# element a line (so only for replies without newlines in them). An error
# reply is told by its leading code word, which redis-cli prints bare.
_redis_cmd_tls() {
  local port="$1" out rc=0 limit="${REDIS_CMD_TIMEOUT:-3}"
  shift
  e2e_tls_args "$port"
  out="$(timeout -k 1 "$limit" redis-cli "${E2E_TLS_CLI[@]}" -h 127.0.0.1 -p "$port" "$@" </dev/null 2>&1)" || rc=$?
  redis_reply=()
  if ((rc != 0)) || [[ "$out" == 'Could not connect'* || "$out" == *'Connection reset'* ||
    "$out" == 'Error: '* || "$out" == *'Server closed the connection'* ]]; then
    echo "redis_cmd $port $*: ${out:-no reply within $limit s}" >&2
    return 1
  fi
  mapfile -t redis_reply <<<"$out"
  if ((${#redis_reply[@]} == 1)) && [[ "$out" =~ ^[A-Z]+\  && "$out" != OK* ]]; then
    echo "redis_cmd $port $*: $out" >&2
    return 2
  fi
  return 0
}

# _stop_pid PID: SIGTERM, then SIGKILL after 5 s; reaps it if it is our child.
_stop_pid() {
  local pid="$1" i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    if ! running "$pid"; then
      wait "$pid" 2>/dev/null || true
      return 0
    fi
    nap 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# stop_redis [PID]: stops one server (default: the last start_redis) and
# removes its directory.
stop_redis() {
  local pid="${1:-${REDIS_PID:-}}" p dir
  [[ -n "$pid" ]] || return 0
  while read -r p dir; do
    if [[ "$p" == "$pid" ]]; then
      _stop_pid "$p"
      rm -rf "$dir"
    fi
  done <"$BATS_FILE_TMPDIR/redis-servers"
}

# stop_all_redis: stops every server this file started (for teardown_file,
# which runs even when a test or setup_file failed).
stop_all_redis() {
  local p dir
  [[ -f "$BATS_FILE_TMPDIR/redis-servers" ]] || return 0
  while read -r p dir; do
    _stop_pid "$p"
    rm -rf "$dir"
  done <"$BATS_FILE_TMPDIR/redis-servers"
  : >"$BATS_FILE_TMPDIR/redis-servers"
}

# --- looking at what rlock left in Redis -------------------------------------

# lock_keys [redis-cli args...]: every key under the default prefix, sorted
# bytewise, one per line.
# Fails if redis-cli does (a pipeline into sort would hide that, and an
# unreachable server would look like one without keys).
lock_keys() {
  local keys
  keys="$(rcli "$@" --scan --pattern 'rlock:*')" || return
  if [[ -n "$keys" ]]; then LC_ALL=C sort <<<"$keys"; fi
}

# key_snapshot [DB]: "KEY<TAB>sha1 of DUMP" for every key of the last
# start_redis server, sorted bytewise: two snapshots differ exactly where a
# key appeared, vanished or changed value (TTLs are not compared).
key_snapshot() {
  PYTHONPATH="$E2E_PY" "$PYTHON" - "$REDIS_PORT" "${1:-0}" <<'EOF'
import hashlib, sys
import miniredis as redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), db=int(sys.argv[2]))
out = sys.stdout.buffer
for key in sorted(r.scan_iter(count=1000)):
    dump = r.dump(key)
    if dump is not None:
        out.write(key + b"\t" + hashlib.sha1(dump).hexdigest().encode() + b"\n")
EOF
}

# --- default lifecycle ---------------------------------------------------------
# Most suites want one private server per file and an empty keyspace per
# test; a suite that needs something else defines its own setup_file, setup
# or teardown_file after `load helpers`, which replaces these.

setup_file() {
  start_redis
}

teardown_file() {
  stop_all_redis
}

setup() {
  flush_redis
}
