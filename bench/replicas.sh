#!/usr/bin/env bash
# bench/replicas.sh: what waiting for replicas (WAIT) costs an acquire, next
# to not waiting, measured side by side in one run on one deployment: a
# master with two replicas on loopback.
#
#   --replicas all   acquire + release, WAIT for both replicas after the grant
#                    (ROLE travels with the lock script in the same round trip)
#   --replicas 1     WAIT for one
#   --replicas 0     no WAIT: the single-server cost, the baseline
#
# Prints hyperfine's mean for each and its ratio to --replicas 0. Starts its
# own servers on free loopback ports and stops them at exit.
#
# Usage: bench/replicas.sh [RUNS]   (default 200)
# Env:   RLOCK_BIN  the binary (default build/rlock)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RLOCK="${RLOCK_BIN:-$REPO/build/rlock}"
RUNS="${1:-200}"
[[ -x "$RLOCK" ]] || { echo "no binary at $RLOCK (build first, or set RLOCK_BIN)" >&2; exit 1; }
# shellcheck source=scripts/lib.sh
source "$REPO/scripts/lib.sh"

dir="$(mktemp -d)"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

# start_node PORT [REPLICAOF_PORT]
start_node() {
  local port="$1" args=(--port "$1" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir"
    --dbfilename "dump-$1.rdb" --daemonize no)
  [[ -n "${2:-}" ]] && args+=(--replicaof 127.0.0.1 "$2")
  redis-server "${args[@]}" >"$dir/$port.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.1; done
  echo "redis-server on $port did not start" >&2
  exit 1
}

master="$(free_loopback_port)"
start_node "$master"
for _ in 1 2; do
  port="$(free_loopback_port)"
  start_node "$port" "$master"
done
for _ in $(seq 100); do
  [[ "$(redis-cli -p "$master" info replication | tr -d '\r' | sed -n 's/^connected_slaves://p')" == 2 ]] && break
  sleep 0.1
done
export RLOCK_URL="redis://127.0.0.1:$master/0" RLOCK

pair() {
  echo "bash -c 'T=\$(\"\$RLOCK\" acquire bench -t 10s --replicas $1) && \"\$RLOCK\" release bench --token \$T'"
}
hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$dir/out.json" \
  -n "replicas all" "$(pair all)" \
  -n "replicas 1" "$(pair 1)" \
  -n "replicas 0" "$(pair 0)" >/dev/null

python3 - "$dir/out.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
ms = {k: v["mean"] * 1000 for k, v in r.items()}
for k, v in ms.items():
    print(f"acquire+release {k:16} {v:8.2f} ms  ± {r[k]['stddev'] * 1000:.2f}   {v / ms['replicas 0']:.2f}x replicas 0")
PY
