#!/usr/bin/env bats
# rlock run -w: the lease is lost between the grant and the renewal that
# follows a long wait (a slow network right then). Nothing has run under
# it yet: rlock goes back to waiting within -w, and never exits 1 (which
# would pass for the command's own status).

load helpers

setup() {
  flush_redis
  M="$BATS_TEST_TMPDIR"
}

teardown() {
  if [[ -s "$M/proxy.pid" ]]; then kill "$(<"$M/proxy.pid")" 2>/dev/null || true; fi
  kill_bg_pids
}

# start_slow_proxy SECONDS: a TCP proxy to the test's Redis on a free port
# (exported as PROXY_URL) that holds back the first `renew` any client sends
# for SECONDS before passing it on, and touches $M/delayed when it starts
# doing so. Everything else passes through at once.
start_slow_proxy() {
  local port
  port="$(free_port)"
  "$PYTHON" - "$port" "$REDIS_PORT" "$1" "$M/delayed" >"$M/proxy.log" 2>&1 3>&- <<'EOF' &
import asyncio, pathlib, sys
listen, upstream, delay, marker = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
state = {"delayed": False}

async def pump(reader, writer, hold_renew):
    try:
        while data := await reader.read(65536):
            if hold_renew and not state["delayed"] and b"$5\r\nrenew\r\n" in data:
                state["delayed"] = True
                pathlib.Path(marker).touch()
                await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()

async def serve(client_reader, client_writer):
    server_reader, server_writer = await asyncio.open_connection("127.0.0.1", upstream)
    await asyncio.gather(pump(client_reader, server_writer, True),
                         pump(server_reader, client_writer, False))

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    print("ready", flush=True)
    await server.serve_forever()

asyncio.run(main())
EOF
  echo "$!" >"$M/proxy.pid"
  local i
  for ((i = 0; i < 100; i++)); do
    grep -q ready "$M/proxy.log" 2>/dev/null && break
    nap 0.05
  done
  export PROXY_URL="redis://127.0.0.1:$port/0"
}

@test "run -w: a lease lost right after a long wait means waiting again, then the command runs" {
  start_slow_proxy 1.5
  # Held for 1.5s: the run waits longer than its renew interval (TTL/3),
  # so it renews right after the grant, and that renewal arrives after its
  # 1s lease has run out.
  rl 0 acquire -t 1500ms slow
  rl 0 --url "$PROXY_URL" -v run -w 10s -t 1s slow -- echo hi
  assert_output hi
  [[ -e "$M/delayed" ]] || fail "the proxy never held back a renewal"
  assert_stderr --partial "was lost before it was used (its lease ran out right after the grant); waiting for it again"
  rl 1 status slow
}

@test "run -w: when the lease is lost and the wait is used up meanwhile, exit 75, not 1" {
  start_slow_proxy 2
  rl 0 acquire -t 1500ms taken
  rl_bg job --url "$PROXY_URL" run -w 2500ms -t 1s taken -- echo must-not-run
  wait_for_file "$M/delayed" 10
  # The run's 1s lease ends while its renewal is held back: take the lock.
  local i
  for ((i = 0; i < 60; i++)); do
    "$RLOCK" acquire -n -t 10s taken >/dev/null 2>&1 && break
    nap 0.05
  done
  rl 0 status taken
  rl_wait job 75
  refute_output --partial must-not-run
}

@test "acquire -w: a lease lost right after a long wait means waiting again, never a token that holds nothing" {
  start_slow_proxy 1.5
  rl 0 acquire -t 1500ms lost
  rl 0 --url "$PROXY_URL" -v acquire -w 10s -t 1s lost
  local token="$output"
  [[ -e "$M/delayed" ]] || fail "the proxy never held back a renewal"
  assert_stderr --partial "was lost before it was used (its lease ran out right after the grant); waiting for it again"
  rl 0 renew lost --token "$token"
  rl 0 release lost --token "$token"
}

@test "acquire -w: SIGTERM during the renewal after a long wait gives the lock back: exit 143, no token" {
  start_slow_proxy 1
  rl 0 acquire -t 1500ms term
  bg_rlock job --url "$PROXY_URL" acquire -w 10s -t 6s term
  wait_for_file "$M/delayed" 10
  kill -TERM "$(<"$M/job.pid")"
  bg_wait job 143
  assert_output ""
  rl 1 status term
}
