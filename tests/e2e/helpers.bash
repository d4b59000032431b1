# shellcheck shell=bash
# Loaded by every suite (`load helpers`). Starts private redis-servers on free
# loopback ports, and runs the binary through `rl`, which bounds every call
# with a timeout and checks its exit status.

bats_require_minimum_version 1.5.0
load /usr/lib/bats/bats-support/load.bash
load /usr/lib/bats/bats-assert/load.bash

REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
# The binary under test: RLOCK_BIN overrides the one scripts/test builds.
RLOCK="${RLOCK_BIN:-$REPO/build/rlock}"
# Seconds any single rlock call may take before the test fails as hung.
RL_TIMEOUT=20
# Debian's python3 (it has python3-redis), not whatever python3 PATH finds first.
PYTHON=/usr/bin/python3

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

# --- running the binary ------------------------------------------------------

# rl EXPECTED ARGS...: runs `rlock ARGS...` with a timeout and fails the test
# unless it exits with EXPECTED (or one of a comma-separated list, "75,76").
# Afterwards $status, $output (stdout only), $lines and $stderr are set.
rl() {
  local expected="$1"
  shift
  run --separate-stderr timeout -k 5 "$RL_TIMEOUT" "$RLOCK" "$@"
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
        sleep 0.01
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
  wait "$(cat "$base.pid")" || true
  status="$(cat "$base.rc")"
  output="$(cat "$base.out")"
  stderr="$(cat "$base.err")"
  bats_separate_lines lines output
  bats_separate_lines stderr_lines stderr
  _rl_check "$expected" "$(cat "$base.cmd")"
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
    sleep 0.2
  done
  return 1
}

# running PID: true while PID exists and is not a zombie (a child of this
# shell that died stays a zombie, which `kill -0` still finds, until reaped).
# One look, by ps alone: with `kill -0` first, bash could reap the zombie
# between the two (while it waits for the command substitution), and the
# empty answer of ps then read as "running".
running() {
  local stat
  stat="$(ps -o stat= -p "$1" 2>/dev/null)" || return 1
  [[ -n "$stat" && "$stat" != Z* ]]
}

# bg_wait TAG EXPECTED [SECONDS]: waits at most SECONDS (default 15) for
# `bg_rlock TAG` to exit (SIGKILLs it and fails the test if it does not),
# checks its status like `rl`, and sets $status, $output, $lines, $stderr.
bg_wait() {
  local tag="$1" expected="$2" limit="${3:-15}" dir="$BATS_TEST_TMPDIR" pid i
  pid="$(cat "$dir/$tag.pid")"
  for ((i = 0; i < limit * 20; i++)); do
    running "$pid" || break
    sleep 0.05
  done
  if running "$pid"; then
    kill -KILL "$pid" 2>/dev/null || true
    fail "rlock $tag did not exit within ${limit}s"
  fi
  status=0
  wait "$pid" || status=$?
  rm -f "$dir/$tag.pid"
  output="$(cat "$dir/$tag.out")"
  stderr="$(cat "$dir/$tag.err")"
  bats_separate_lines lines output
  bats_separate_lines stderr_lines stderr
  _rl_check "$expected" "rlock ($tag)"
}

# kill_bg_pids: SIGKILLs the pid in every $BATS_TEST_TMPDIR/*.pid (for
# teardown: whatever bg_rlock started that a failed test never collected).
kill_bg_pids() {
  local f
  for f in "$BATS_TEST_TMPDIR"/*.pid; do
    if [[ -e "$f" ]]; then kill -KILL "$(cat "$f")" 2>/dev/null || true; fi
  done
}

# wait_for_file PATH [SECONDS]: waits at most SECONDS (default 10) until PATH
# exists; fails the test otherwise.
wait_for_file() {
  local i limit="${2:-10}"
  for ((i = 0; i < limit * 20; i++)); do
    [[ -e "$1" ]] && return 0
    sleep 0.05
  done
  fail "timed out waiting for $1"
}

# now_ms: the wall clock in milliseconds.
now_ms() {
  echo $(($(date +%s%N) / 1000000))
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
    sleep 0.01
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
    rc="$(cat "$dir/$tag.rc" 2>/dev/null || echo none)"
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
      kill -TERM "$(cat "$BATS_TEST_TMPDIR/$tag.tpid")" 2>/dev/null || true
    fi
  done <"$BATS_TEST_TMPDIR/sessions"
  _reap_sessions
}

# waiters NAME: how many waiters `status NAME --json` shows (-1 if it fails).
waiters() {
  "$RLOCK" status "$1" --json 2>/dev/null |
    "$PYTHON" -c 'import json,sys; print(len(json.load(sys.stdin)["waiters"]))' 2>/dev/null ||
    echo -1
}

# wait_waiters NAME N: waits (bounded, 10 s) until NAME has exactly N waiters.
wait_waiters() {
  local i n
  for ((i = 0; i < 200; i++)); do
    n="$(waiters "$1")"
    ((n == $2)) && return 0
    sleep 0.05
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

# _launch_redis DIR ARGS...: starts redis-server in the foreground of a
# background job, with DIR as its working directory and unix socket, records
# it for stop_all_redis, and waits (bounded) until it answers on the socket.
# Sets _REDIS_PID. A NOAUTH answer counts as up (servers with requirepass).
_launch_redis() {
  local dir="$1"
  shift
  redis-server --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
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
    reply="$(redis-cli -s "$dir/redis.sock" ping 2>&1 </dev/null || true)"
    if [[ "$reply" == PONG || "$reply" == *NOAUTH* ]]; then
      return 0
    fi
    sleep 0.05
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

# rcli ARGS...: redis-cli against the server of the last start_redis.
rcli() {
  redis-cli -p "$REDIS_PORT" "$@" </dev/null
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

# _stop_pid PID: SIGTERM, then SIGKILL after 5 s; reaps it if it is our child.
_stop_pid() {
  local pid="$1" i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    if ! running "$pid"; then
      wait "$pid" 2>/dev/null || true
      return 0
    fi
    sleep 0.05
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
  "$PYTHON" - "$REDIS_PORT" "${1:-0}" <<'EOF'
import hashlib, sys
import redis
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
  rcli FLUSHALL >/dev/null
}
