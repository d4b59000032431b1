#!/usr/bin/env bats
# A host name whose DNS lookup never answers: --connect-timeout bounds the
# lookup, a signal cuts it short, and in a quorum it costs only that
# member's answer, not the healthy members' ones.
#
# Every rlock call runs inside one network and mount namespace (unshare -n
# -m) made for this file: loopback up, /etc/resolv.conf bind-mounted to a
# nameserver on 127.0.0.1:53 that takes every query and never answers (a
# Python UDP socket), with the resolver's timeouts at 3 s x 2 attempts, so a
# lookup left to the resolver takes 6 s or more. Two redis-servers of this
# file live on loopback inside it.

load helpers

# The blackhole nameserver, which says it is ready by creating argv[1].
# It brings the namespace's loopback up first (SIOCGIFFLAGS, SIOCSIFFLAGS
# with IFF_UP on a 40-byte struct ifreq), without iproute2's `ip`.
_BLACKHOLE='
import fcntl, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, struct.pack("16sH22x", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))
s.bind(("127.0.0.1", 53))
open(sys.argv[1], "w").close()
while True:
    s.recvfrom(4096)
'
# The host that cannot be resolved, and the quorum with it as third member.
HANG_HOST=redis.invalid.test
HANG_URL="redis://$HANG_HOST:6379/0"
# The quorum's TTL: its members must have been up this long (the
# delayed-restart rule), so the first quorum test waits for that.
DNS_TTL=4

setup_file() {
  if ! unshare -n -m true 2>/dev/null; then
    export DNS_SKIP="unshare -n -m is not permitted (needs root or user namespaces)"
    return 0
  fi
  local dir="$BATS_FILE_TMPDIR/ns" i
  mkdir -p "$dir"
  printf 'nameserver 127.0.0.1\noptions timeout:3 attempts:2\n' >"$dir/resolv.conf"
  # The nameserver holds the namespaces: nsenter joins them through its pid.
  # shellcheck disable=SC2016 # expanded by sh, from its arguments
  unshare -n -m sh -c 'mount --bind "$1/resolv.conf" /etc/resolv.conf &&
    exec "$2" -c "$3" "$1/ready"' _ "$dir" "$PYTHON" "$_BLACKHOLE" </dev/null >/dev/null 2>&1 3>&- &
  export NS_PID=$!
  for ((i = 0; i < 100; i++)); do
    [[ -e "$dir/ready" ]] && break
    nap 0.05
  done
  [[ -e "$dir/ready" ]] || fail "the namespace's nameserver did not start"
  # rlock, run inside the namespace (nsenter execs: the pid stays rlock's).
  printf '#!/bin/sh\nexec nsenter -t %s -n -m -- %q "$@"\n' "$NS_PID" "$RLOCK" >"$dir/rlock"
  chmod +x "$dir/rlock"
  local port
  for port in 6390 6391; do
    mkdir -p "$dir/$port"
    in_ns "${RLOCK_E2E_SERVER:-redis-server}" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --daemonize yes --dir "$dir/$port" --pidfile "$dir/$port/redis.pid" >/dev/null
  done
  for port in 6390 6391; do
    for ((i = 0; i < 100; i++)); do
      [[ "$(in_ns redis-cli -p "$port" ping 2>/dev/null)" == PONG ]] && break
      nap 0.05
    done
  done
  export QUORUM_URLS="redis://127.0.0.1:6390/0,redis://127.0.0.1:6391/0,$HANG_URL"
}

teardown_file() {
  local pidfile
  for pidfile in "$BATS_FILE_TMPDIR"/ns/*/redis.pid; do
    if [[ -e "$pidfile" ]]; then kill -KILL "$(<"$pidfile")" 2>/dev/null || true; fi
  done
  if [[ -n "${NS_PID:-}" ]]; then
    kill -KILL "$NS_PID" 2>/dev/null || true
    wait "$NS_PID" 2>/dev/null || true
  fi
}

setup() {
  if [[ -n "${DNS_SKIP:-}" ]]; then skip "$DNS_SKIP"; fi
  RLOCK="$BATS_FILE_TMPDIR/ns/rlock"
  # The quorum's; the single-server tests name their URL with -u.
  export RLOCK_URL="$QUORUM_URLS" RLOCK_CONNECT_TIMEOUT=1s
}

teardown() {
  kill_bg_pids
}

# in_ns COMMAND...: runs COMMAND inside the file's namespaces.
in_ns() {
  nsenter -t "$NS_PID" -n -m -- "$@"
}

# wait_uptime: until rlock counts both servers as up DNS_TTL seconds (INFO
# may say a second more than a server has been up: rlock takes it off).
wait_uptime() {
  local port uptime i
  for port in 6390 6391; do
    for ((i = 0; i < 200; i++)); do
      uptime="$(in_ns redis-cli -p "$port" info server | sed -n 's/^uptime_in_seconds:\([0-9]*\).*/\1/p')"
      ((${uptime:-0} >= DNS_TTL + 1)) && break
      nap 0.1
    done
  done
}

# took_less START_MS LIMIT_MS WHAT: fails unless less than LIMIT_MS passed.
took_less() {
  local took=$(($(now_ms) - $1))
  ((took < $2)) || fail "$3 took ${took} ms (the resolver alone takes 6 s)"
}

@test "dns: a lookup that never answers fails within --connect-timeout, on one line, 69" {
  # assert_stderr matches the whole of stderr: one line.
  local start
  start="$(now_ms)"
  rl 69 acquire -u "$HANG_URL" dns-one --connect-timeout 1s
  took_less "$start" 4000 "the failed acquire"
  assert_stderr "rlock: error: cannot connect to $HANG_URL: cannot resolve $HANG_HOST: no answer within 1s"
}

@test "dns: SIGTERM during the lookup ends acquire -w at once with 128+15" {
  # --connect-timeout 5s: what ends the lookup is the signal, not a timeout.
  bg_rlock waiter acquire -w 10s --connect-timeout 5s -u "$HANG_URL" dns-term
  nap 0.5
  local start
  start="$(now_ms)"
  kill -TERM "$(<"$BATS_TEST_TMPDIR/waiter.pid")"
  # Leaving the queue has a second of its own (its own lookup hangs too).
  bg_wait waiter 143 10
  took_less "$start" 3000 "ending after SIGTERM"
}

@test "dns: a quorum with one member's lookup hanging grants, shows it, renews, waits, releases" {
  wait_uptime
  local start token
  start="$(now_ms)"
  rl 0 acquire -t "${DNS_TTL}s" dns-quorum
  took_less "$start" 3000 "the quorum's acquire"
  token="$output"
  rl 0 status dns-quorum
  assert_line --regexp "^ +ok +redis://127\.0\.0\.1:6390/0 "
  assert_line --regexp "^ +ok +redis://127\.0\.0\.1:6391/0 "
  assert_line --regexp "^ +unreachable +$HANG_URL .*cannot resolve $HANG_HOST: no answer within 1s"
  rl 0 renew dns-quorum --token "$token"
  # A waiter queued on the healthy members is woken by the release.
  rl_bg waiter acquire -w 10s -t "${DNS_TTL}s" dns-quorum
  nap 0.5
  rl 0 release dns-quorum --token "$token"
  rl_wait waiter 0
  rl 0 release dns-quorum --token "$output"
}

@test "dns: run over a quorum with one member's lookup hanging runs the command and renews" {
  wait_uptime
  # Runs past the TTL: only renewals (through the heartbeat) keep it.
  rl 0 run -t "${DNS_TTL}s" dns-run -- sh -c 'sleep 5; echo ran'
  assert_output ran
  rl 1 status -t "${DNS_TTL}s" dns-run
}
