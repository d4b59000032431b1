#!/usr/bin/env bats
# A broken or hostile server (a fake one, in python, on 127.0.0.1): rlock
# must neither hang past its deadlines nor let a reply exhaust its memory.

load helpers

# The fake server: each connection is answered according to MODE.
#   blackhole      accept, read, never answer
#   huge-array     answer every command with *2147483647 (a 16 GiB array to hiredis)
#   nested-arrays  answer with arrays of 900000 elements nested 7 deep
#   endless-bulk   announce a 1 GB bulk string and stream it without end
#   endless-line   a status line that never ends
#   trickle        announce a 50 MB bulk string, send a byte every 20 ms
#   scan-forever   SCAN always answers cursor 1 (never 0), anything else +OK
#   odd-acquire    a master (ROLE) whose every script answers {7, 0}: a
#                  state no rlock script gives
setup_file() {
  cat >"$BATS_FILE_TMPDIR/fake.py" <<'PY'
import socket, socketserver, sys, time
mode, port_file = sys.argv[1], sys.argv[2]

def commands(f):
    while True:
        line = f.readline()
        if not line:
            return
        if not line.startswith(b"*"):
            continue
        args = []
        for _ in range(int(line[1:])):
            n = int(f.readline()[1:])
            args.append(f.read(n + 2)[:-2])
        yield args

class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        f = s.makefile("rb")
        try:
            for args in commands(f):
                if mode == "blackhole":
                    time.sleep(3600)
                elif mode == "huge-array":
                    s.sendall(b"*2147483647\r\n")
                elif mode == "nested-arrays":
                    s.sendall(b"*900000\r\n" * 7)
                elif mode == "endless-bulk":
                    s.sendall(b"$1000000000\r\n")
                    while True:
                        s.sendall(b"a" * 65536)
                elif mode == "endless-line":
                    s.sendall(b"+")
                    while True:
                        s.sendall(b"a" * 65536)
                elif mode == "trickle":
                    s.sendall(b"$50000000\r\n")
                    while True:
                        s.sendall(b"a")
                        time.sleep(0.02)
                elif mode == "odd-acquire":
                    if args[0].upper() == b"ROLE":
                        s.sendall(b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n")
                    elif args[0].upper() in (b"EVALSHA", b"EVAL"):
                        s.sendall(b"*2\r\n:7\r\n:0\r\n")
                    else:
                        s.sendall(b"+OK\r\n")
                elif mode == "scan-forever":
                    if args[0].upper() == b"SCAN":
                        s.sendall(b"*2\r\n$1\r\n1\r\n*0\r\n")
                    else:
                        s.sendall(b"+OK\r\n")
        except OSError:
            pass

class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

with Server(("127.0.0.1", 0), Handler) as server:
    with open(port_file + ".tmp", "w") as out:
        out.write(str(server.server_address[1]))
    import os
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()
PY
}

# No real server here: the default per-test FLUSHALL does not apply.
setup() {
  :
}

teardown_file() {
  :
}

teardown() {
  if [[ -n "${FAKE_PID:-}" ]]; then kill "$FAKE_PID" 2>/dev/null || true; fi
  kill_bg_pids
}

# fake_server MODE: starts the fake server; sets FAKE_PID and RLOCK_URL.
fake_server() {
  local port_file="$BATS_TEST_TMPDIR/fake.port"
  "$PYTHON" "$BATS_FILE_TMPDIR/fake.py" "$1" "$port_file" 3>&- &
  FAKE_PID=$!
  wait_for_file "$port_file"
  export RLOCK_URL="redis://127.0.0.1:$(<"$port_file")/0"
}

# rl_measured EXPECTED ARGS...: `rl` that also sets $elapsed_ms and $rss_kb.
rl_measured() {
  local expected="$1" start
  shift
  start="$(now_ms)"
  run --separate-stderr /usr/bin/time -f '%M' -o "$BATS_TEST_TMPDIR/rss" \
    timeout -k 5 "$RL_TIMEOUT" "$RLOCK" "$@"
  elapsed_ms=$(($(now_ms) - start))
  rss_kb="$(tail -n 1 "$BATS_TEST_TMPDIR/rss")"
  _rl_check "$expected" "rlock $*"
}

@test "hostile: a server announcing a 2^31-element array gets 76 at once, with little memory" {
  fake_server huge-array
  rl_measured 76 acquire x -n
  assert_stderr --partial 'refused a reply of more than 1000000 elements'
  ((elapsed_ms < 5000)) || fail "took ${elapsed_ms} ms"
  ((rss_kb < 50000)) || fail "RSS ${rss_kb} kB"
}

@test "hostile: nested arrays count together against the element limit" {
  fake_server nested-arrays
  rl_measured 76 acquire x -n
  assert_stderr --partial 'refused a reply of more than 1000000 elements'
  ((rss_kb < 50000)) || fail "RSS ${rss_kb} kB"
}

@test "hostile: an endless bulk string gets 76 within the deadline, with little memory" {
  fake_server endless-bulk
  rl_measured 76 acquire x -n
  assert_stderr --partial 'refused a reply of more than 67108864 bytes'
  ((elapsed_ms < 5000)) || fail "took ${elapsed_ms} ms"
  ((rss_kb < 50000)) || fail "RSS ${rss_kb} kB"
}

@test "hostile: an endless status line gets 76 within the deadline, with little memory" {
  fake_server endless-line
  rl_measured 76 acquire x -n
  assert_stderr --partial 'refused a reply line longer than'
  ((elapsed_ms < 5000)) || fail "took ${elapsed_ms} ms"
  ((rss_kb < 50000)) || fail "RSS ${rss_kb} kB"
}

@test "hostile: a reply that trickles in ends at the command deadline (69)" {
  fake_server trickle
  rl_measured 69 acquire x -n
  # The message gives what was left of the 5 s command deadline when the
  # reply started: connecting on a busy machine may have used a little of it.
  assert_stderr --regexp 'timed out after (5|4\.[5-9])s'
  ((elapsed_ms < 7000)) || fail "took ${elapsed_ms} ms"
}

@test "hostile: a SCAN cursor that never returns to 0 ends status with 76" {
  fake_server scan-forever
  rl_measured 76 status
  assert_stderr --partial 'SCAN did not finish after 100000 steps'
  ((rss_kb < 50000)) || fail "RSS ${rss_kb} kB"
}

@test "hostile: a server that never answers: run -w 3s gives up after 3 s, not two command timeouts" {
  fake_server blackhole
  rl_measured 69 run -w 3s x -- true
  assert_stderr --regexp 'timed out after (3|2\.[5-9])s'
  ((elapsed_ms >= 2900 && elapsed_ms < 4500)) || fail "took ${elapsed_ms} ms"
}

@test "hostile: SIGTERM ends an acquire blocked on a server that never answers, exit 143" {
  fake_server blackhole
  bg_rlock acq acquire x
  sleep 1
  local start
  start="$(now_ms)"
  kill -TERM "$(<"$BATS_TEST_TMPDIR/acq.pid")"
  bg_wait acq 143 10
  local took=$(($(now_ms) - start))
  # The leave-the-queue courtesy is bounded to 1 s; ignoring the signal until
  # the read gives up would take the rest of the 5 s command timeout (4 s).
  ((took < 3000)) || fail "took ${took} ms after SIGTERM"
}

# An acquire reply in a state the script never gives was read as "busy"
# (75, and a waiter queued on it for ever): it is no answer of rlock's.
@test "hostile: an acquire answered in a state no script gives is 76, not busy" {
  fake_server odd-acquire
  rl 76 acquire odd -n
  assert_stderr --partial 'unexpected reply'
  rl 76 run odd -w 2s -- true
  assert_stderr --partial 'unexpected reply'
}
