#!/usr/bin/env bash
# bench/cli_overhead.sh: what a whole `rlock` process costs next to the
# simplest tools that do the same job, measured side by side in one run.
#
#   acquire+release   rlock acquire + rlock release (two processes)
#   redis-cli pair    redis-cli SET k v NX PX + redis-cli EVAL (compare-and-
#                     delete): the raw Redis lock done by hand, the baseline
#   run               rlock run x -- true (acquire, heartbeat thread, fork,
#                     release)
#   flock             flock FILE true: the single-host tool rlock replaces
#   true              the bare command: process start-up alone
#
# Prints hyperfine's mean for each and the ratios that matter: rlock's pair
# to the redis-cli pair, and `rlock run` to flock and to `true`. Starts a
# private redis-server on a free loopback port and stops it at exit.
#
# Usage: bench/cli_overhead.sh [RUNS]   (default 200)
# Env:   RLOCK_BIN  the binary (default build/rlock)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RLOCK="${RLOCK_BIN:-$REPO/build/rlock}"
RUNS="${1:-200}"
[[ -x "$RLOCK" ]] || { echo "no binary at $RLOCK (build first, or set RLOCK_BIN)" >&2; exit 1; }
# shellcheck source=scripts/lib.sh
source "$REPO/scripts/lib.sh"

dir="$(mktemp -d)"
port="$(free_loopback_port)"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --daemonize no >/dev/null &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
export RLOCK_URL="redis://127.0.0.1:$port/0" RLOCK PORT="$port"

unlock='if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0'
export unlock
hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$dir/out.json" \
  -n "rlock acquire+release" \
  "bash -c 'T=\$(\"\$RLOCK\" acquire bench -t 10s) && \"\$RLOCK\" release bench --token \$T'" \
  -n "redis-cli SET NX PX + EVAL" \
  "bash -c 'redis-cli -p \$PORT SET bench tok NX PX 10000 >/dev/null && redis-cli -p \$PORT EVAL \"\$unlock\" 1 bench tok >/dev/null'" \
  -n "rlock run -- true" "$RLOCK run benchrun -- true" \
  -n "flock FILE true" "flock $dir/flock true" \
  -n "true" "true" >/dev/null

python3 - "$dir/out.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
ms = {k: v["mean"] * 1000 for k, v in r.items()}
for k, v in ms.items():
    print(f"{k:32} {v:8.2f} ms  ± {r[k]['stddev'] * 1000:.2f}")
print()
print(f"rlock acquire+release / redis-cli pair : {ms['rlock acquire+release'] / ms['redis-cli SET NX PX + EVAL']:.2f}x")
print(f"rlock run / flock                      : {ms['rlock run -- true'] / ms['flock FILE true']:.2f}x")
print(f"rlock run / true                       : {ms['rlock run -- true'] / ms['true']:.2f}x")
PY
