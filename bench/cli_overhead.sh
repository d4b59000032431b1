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
#   --version         rlock --version: start-up alone (no Redis)
#   true              the bare command: process start-up alone
#
# Prints hyperfine's mean for each and the ratios that matter: rlock's pair
# to the redis-cli pair, `rlock run` to flock and to `true`, and `rlock
# --version` to `true`. With RLOCK_BEFORE set, the same rlock rows for that
# binary too, in the same run, and their ratios (before and after side by
# side). Starts a private redis-server on a free loopback port and stops it
# at exit.
#
# Usage: bench/cli_overhead.sh [RUNS]   (default 200)
# Env:   RLOCK_BIN     the binary (default build/rlock)
#        RLOCK_BEFORE  another binary to measure next to it (e.g. a build of
#                      the previous commit); unset: none
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RLOCK="${RLOCK_BIN:-$REPO/build/rlock}"
RUNS="${1:-200}"
BEFORE="${RLOCK_BEFORE:-}"
[[ -x "$RLOCK" ]] || { echo "no binary at $RLOCK (build first, or set RLOCK_BIN)" >&2; exit 1; }
[[ -z "$BEFORE" || -x "$BEFORE" ]] || { echo "no binary at $BEFORE (RLOCK_BEFORE)" >&2; exit 1; }
# shellcheck source=scripts/lib.sh
source "$REPO/scripts/lib.sh"

dir="$(mktemp -d)"
port="$(free_loopback_port)"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --daemonize no >/dev/null &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
export RLOCK_URL="redis://127.0.0.1:$port/0" RLOCK BEFORE PORT="$port"

unlock='if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0'
export unlock
# rlock_rows LABEL VAR: hyperfine arguments for the rlock rows of the binary
# in $VAR (RLOCK or BEFORE), named "LABEL...".
rlock_rows() {
  local label="$1" var="$2"
  rows+=(-n "${label}rlock acquire+release"
    "bash -c 'T=\$(\"\$$var\" acquire bench -t 10s) && \"\$$var\" release bench --token \$T'"
    -n "${label}rlock run -- true" "${!var} run benchrun -- true"
    -n "${label}rlock --version" "${!var} --version")
}
rows=()
rlock_rows "" RLOCK
if [[ -n "$BEFORE" ]]; then rlock_rows "before: " BEFORE; fi
hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$dir/out.json" \
  "${rows[@]}" \
  -n "redis-cli SET NX PX + EVAL" \
  "bash -c 'redis-cli -p \$PORT SET bench tok NX PX 10000 >/dev/null && redis-cli -p \$PORT EVAL \"\$unlock\" 1 bench tok >/dev/null'" \
  -n "flock FILE true" "flock $dir/flock true" \
  -n "true" "true" >/dev/null

python3 - "$dir/out.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
ms = {k: v["mean"] * 1000 for k, v in r.items()}
med = {k: v["median"] * 1000 for k, v in r.items()}
print(f"{'':40} {'mean':>8}       {'± sd':>6}  {'median':>8}")
for k, v in ms.items():
    print(f"{k:40} {v:8.2f} ms  ± {r[k]['stddev'] * 1000:6.2f}  {med[k]:8.2f} ms")
# Ratios of the means, and of the medians (steadier on a loaded machine).
def ratio(a, b):
    return f"{ms[a] / ms[b]:.2f}x  (medians {med[a] / med[b]:.2f}x)"
for label in ["", "before: "]:
    if label + "rlock --version" not in ms:
        continue
    name = label or "now: "
    print()
    print(f"{name}rlock acquire+release / redis-cli pair : "
          f"{ratio(label + 'rlock acquire+release', 'redis-cli SET NX PX + EVAL')}")
    print(f"{name}rlock run / flock                      : {ratio(label + 'rlock run -- true', 'flock FILE true')}")
    print(f"{name}rlock run / true                       : {ratio(label + 'rlock run -- true', 'true')}")
    print(f"{name}rlock --version / true                 : {ratio(label + 'rlock --version', 'true')}")
PY
