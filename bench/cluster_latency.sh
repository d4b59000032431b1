#!/usr/bin/env bash
# bench/cluster_latency.sh: what an acquire + release costs on a Redis
# Cluster next to a single server, measured side by side in one run on the
# same machine: `rlock run NAME -- true`, one process that acquires, starts
# its heartbeat (which asks whether the server is a Cluster node), runs
# `true` and releases.
#
#   single             one redis-server, no replicas
#   cluster, owner     a Cluster of 3 masters + 3 replicas, the URL naming the
#                      master of the lock's slot (no redirection)
#   cluster, other     the URL naming another master (one MOVED, then the owner)
#   cluster, seed list two seeds, the first another master (CLUSTER SLOTS,
#                      then the owner)
#
# On the Cluster each acquire also waits for the shard's replica (ROLE +
# WAIT, the default --replicas all); `--replicas 0`-like figures are the
# single server's. Prints hyperfine's mean for each and the ratios to the
# single server. Starts its own servers on free loopback ports (each Cluster
# port's bus port, +10000, free too) and stops them at exit.
#
# Usage: bench/cluster_latency.sh [RUNS]   (default 200)
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
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

# A port whose bus port (+10000) is free too.
cluster_port() {
  local p
  for _ in $(seq 50); do
    p="$(free_loopback_port)"
    ((p + 10000 <= 65535)) || continue
    if python3 -c 'import socket,sys; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' \
      "$((p + 10000))" 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  echo "no free port pair" >&2
  return 1
}

start() {  # start NAME PORT ARGS...
  local name="$1" port="$2"
  shift 2
  mkdir -p "$dir/$name"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir/$name" \
    --daemonize no --logfile "$dir/$name/log" "$@" >/dev/null &
  pids+=("$!")
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "redis-server on $port did not start" >&2
  return 1
}

single="$(free_loopback_port)"
start single "$single"
nodes=()
for n in 1 2 3 4 5 6; do
  p="$(cluster_port)"
  start "node$n" "$p" --cluster-enabled yes --cluster-config-file "$dir/node$n/nodes.conf" \
    --cluster-node-timeout 1000 --repl-diskless-sync-delay 0
  nodes+=("127.0.0.1:$p")
done
redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1
first="${nodes[0]##*:}"
for _ in $(seq 200); do
  ok=0
  for node in "${nodes[@]}"; do
    redis-cli -p "${node##*:}" CLUSTER INFO | grep -q '^cluster_state:ok' && ok=$((ok + 1))
  done
  ((ok == 6)) && break
  sleep 0.1
done
((ok == 6)) || { echo "the Cluster did not come up" >&2; exit 1; }
sleep 1  # replicas finish their first sync

# The lock's slot: its owner, and another master.
slot="$(redis-cli -p "$first" CLUSTER KEYSLOT 'rlock:{bench}:m')"
read -r owner other < <(redis-cli -p "$first" --json CLUSTER SLOTS | python3 -c '
import json, sys
slot = int(sys.argv[1])
ranges = json.load(sys.stdin)
owner = next(r[2][1] for r in ranges if r[0] <= slot <= r[1])
other = next(r[2][1] for r in ranges if r[2][1] != owner)
print(owner, other)' "$slot")

# One process per sample: `rlock run NAME -- true` acquires, starts the
# heartbeat, runs the command and releases (hyperfine -N: no shell between).
hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$dir/out.json" \
  -n single "$RLOCK -u redis://127.0.0.1:$single/0 run bench -t 10s -n -- true" \
  -n "cluster, owner" "$RLOCK -u redis://127.0.0.1:$owner/0 run bench -t 10s -n -- true" \
  -n "cluster, other" "$RLOCK -u redis://127.0.0.1:$other/0 run bench -t 10s -n -- true" \
  -n "cluster, seed list" "$RLOCK -u redis://127.0.0.1:$other,127.0.0.1:$owner/0 run bench -t 10s -n -- true" \
  >"$dir/hyperfine.log"

python3 - "$dir/out.json" <<'PY'
import json, sys
results = {r["command"]: r["mean"] * 1000 for r in json.load(open(sys.argv[1]))["results"]}
base = results["single"]
print(f"{'rlock run NAME -- true':34} {'mean':>9} {'x single':>9}")
for name, mean in results.items():
    print(f"{name:34} {mean:7.2f}ms {mean / base:9.2f}")
PY
