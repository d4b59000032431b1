#!/usr/bin/env bash
# bench/quorum.sh: what a quorum costs next to one server, measured side by
# side in one run: `rlock acquire` + `rlock release` (two processes) against
#
#   1 server          one redis-server, the baseline
#   3 members         a quorum of three redis-servers
#   5 members         a quorum of five
#   5, one frozen     the same five with one SIGSTOPped: the parallel
#                     requests must not wait for it
#
# Prints hyperfine's mean for each and its ratio to the single server.
# Then the handoff latency on one server and on the five members: a holder
# holds, a waiter (`rlock acquire -w`) blocks on every server's wake list,
# and the time from the start of the holder's `rlock release` to the
# waiter's grant (its token on stdout) is taken HANDOFFS times (default
# 30): median, 90th percentile, and the ratio of the medians. Then
# contended throughput: 8 processes each looping `rlock run -w 1m
# bench-tp -- true` for 5 s, on one server and on the five members:
# sections a second (each one a handoff through the FIFO wait), and the
# ratio.
# Starts five private redis-servers on free loopback ports (and waits until
# they have been up for the TTL used, 1 s: a younger quorum member does not
# count, see the man page's QUORUM), stops them at exit.
#
# Usage: bench/quorum.sh [RUNS [HANDOFFS]]   (default 100, 30)
# Env:   RLOCK_BIN  the binary (default build/rlock)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RLOCK="${RLOCK_BIN:-$REPO/build/rlock}"
RUNS="${1:-100}"
HANDOFFS="${2:-30}"
[[ -x "$RLOCK" ]] || { echo "no binary at $RLOCK (build first, or set RLOCK_BIN)" >&2; exit 1; }
# shellcheck source=scripts/lib.sh
source "$REPO/scripts/lib.sh"

dir="$(mktemp -d)"
pids=()
ports=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
for k in 1 2 3 4 5; do
  port="$(free_loopback_port)"
  mkdir "$dir/$k"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir/$k" \
    --daemonize no >/dev/null &
  pids+=("$!")
  ports+=("$port")
done
for port in "${ports[@]}"; do
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
sleep 1.2

url() { echo "redis://127.0.0.1:${ports[$1]}/0"; }
one="$(url 0)"
three="$(url 0),$(url 1),$(url 2)"
five="$three,$(url 3),$(url 4)"
export RLOCK
pair() {
  echo "bash -c 'RLOCK_URL=$1; export RLOCK_URL; T=\$(\"\$RLOCK\" acquire bench -t 1s) && \"\$RLOCK\" release bench --token \$T'"
}

hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$dir/healthy.json" \
  -n "1 server" "$(pair "$one")" \
  -n "3 members" "$(pair "$three")" \
  -n "5 members" "$(pair "$five")" >/dev/null
kill -STOP "${pids[4]}"
hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$dir/frozen.json" \
  -n "5 members, one frozen" "$(pair "$five")" >/dev/null
kill -CONT "${pids[4]}"

python3 - "$dir/healthy.json" "$dir/frozen.json" <<'PY'
import json, sys
r = {}
for path in sys.argv[1:]:
    r.update({x["command"]: x for x in json.load(open(path))["results"]})
base = r["1 server"]["mean"]
print("acquire + release (two rlock processes):")
for k, v in r.items():
    print(f"  {k:24} {v['mean'] * 1000:8.2f} ms  ± {v['stddev'] * 1000:5.2f}   {v['mean'] / base:5.2f}x one server")
PY

# The handoff: holder's release -> waiter's grant, on one server and on the
# five members. The waiter is taken as blocked once every server lists a
# BLPOP client (a release before that would be no handoff at all).
python3 - "$HANDOFFS" "$one" "${ports[0]}" "$five" "${ports[*]}" <<'PY'
import os, statistics, subprocess, sys, time
rlock = os.environ["RLOCK"]
runs = int(sys.argv[1])

def blocked(ports):
    for p in ports:
        out = subprocess.run(["redis-cli", "-p", p, "client", "list"], capture_output=True, text=True).stdout
        if "cmd=blpop" not in out:
            return False
    return True

def handoff(url, ports):
    env = dict(os.environ, RLOCK_URL=url)
    took = []
    for i in range(runs):
        name = f"bench-handoff-{i}"
        token = subprocess.run([rlock, "acquire", name, "-t", "10s"], env=env, check=True,
                               capture_output=True, text=True).stdout.strip()
        waiter = subprocess.Popen([rlock, "acquire", name, "-w", "30s", "-t", "10s"], env=env,
                                  stdout=subprocess.PIPE, text=True)
        for _ in range(500):
            if blocked(ports):
                break
            time.sleep(0.01)
        else:
            sys.exit("bench: the waiter never blocked")
        start = time.monotonic()
        subprocess.run([rlock, "release", name, "--token", token], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        granted = waiter.stdout.readline().strip()
        took.append(time.monotonic() - start)
        if waiter.wait() != 0 or not granted:
            sys.exit("bench: the waiter did not get the lock")
        subprocess.run([rlock, "release", name, "--token", granted], env=env, check=True,
                       stdout=subprocess.DEVNULL)
    took.sort()
    return statistics.median(took) * 1000, took[int(len(took) * 0.9) - 1] * 1000

one = handoff(sys.argv[2], [sys.argv[3]])
five = handoff(sys.argv[4], sys.argv[5].split())
print(f"handoff, holder's release -> waiter's grant ({runs} each; the release is a process too):")
print(f"  1 server                 median {one[0]:7.2f} ms  p90 {one[1]:7.2f} ms")
print(f"  5 members                median {five[0]:7.2f} ms  p90 {five[1]:7.2f} ms"
      f"   {five[0] / one[0]:5.2f}x one server")
PY

# throughput URL: sections a second of 8 looping `rlock run` processes, 5 s.
throughput() {
  local url="$1" k out="$dir/tp.$RANDOM" loops=()
  mkdir "$out"
  for k in 1 2 3 4 5 6 7 8; do
    (
      n=0
      end=$((SECONDS + 5))
      while ((SECONDS < end)); do
        RLOCK_URL="$url" "$RLOCK" run -w 1m -t 2s bench-tp -- true && n=$((n + 1))
      done
      echo "$n" >"$out/$k"
    ) &
    loops+=("$!")
  done
  # Not a bare `wait`: that would wait for the redis-servers too.
  wait "${loops[@]}"
  echo "$(($(cat "$out"/* | paste -sd+ | bc) / 5))"
}
tp1="$(throughput "$one")"
tp5="$(throughput "$five")"
echo "contended throughput (8 processes looping rlock run, 5 s):"
echo "  1 server                 $tp1 sections/s"
echo "  5 members                $tp5 sections/s   $(python3 -c "print(f'{$tp5 / max($tp1, 1):.2f}')")x one server"
