#!/usr/bin/env bash
# bench/startup_cost.sh: what a whole `rlock` command costs the machine, in
# the units that do not swing with the load, next to the tools it replaces,
# measured side by side in one run.
#
# For each command (rlock --version, rlock run x -- true, flock FILE true,
# true), with every process it starts counted (the guardian, the command):
#   faults   minor page faults, mean of RUNS runs (perf stat). On a virtual
#            machine a fault is expensive (a bare `true` with ~48 of them
#            costs ~1.8 ms of CPU), so they track a command's cost closely.
#   cpu ms   CPU time (perf stat task-clock): steadier than wall time, but
#            it still grows with the load.
#   instr    instructions (valgrind --tool=callgrind, --trace-children):
#            exact and independent of the load.
# and the ratios of rlock run to flock and of rlock --version to true. With
# RLOCK_BEFORE set, the rlock rows of that binary too, in the same run.
# Starts a private redis-server on a free loopback port and stops it at exit.
#
# Usage: bench/startup_cost.sh [RUNS]   (default 100)
# Needs: perf (linux-perf), valgrind.
# Env:   RLOCK_BIN     the binary (default build/rlock)
#        RLOCK_BEFORE  another binary to measure next to it; unset: none
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RLOCK="${RLOCK_BIN:-$REPO/build/rlock}"
RUNS="${1:-100}"
BEFORE="${RLOCK_BEFORE:-}"
[[ -x "$RLOCK" ]] || { echo "no binary at $RLOCK (build first, or set RLOCK_BIN)" >&2; exit 1; }
[[ -z "$BEFORE" || -x "$BEFORE" ]] || { echo "no binary at $BEFORE (RLOCK_BEFORE)" >&2; exit 1; }
for tool in perf valgrind; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }
done
# shellcheck source=scripts/lib.sh
source "$REPO/scripts/lib.sh"

dir="$(mktemp -d)"
port="$(free_loopback_port)"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --daemonize no >/dev/null &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
unset REDIS_URL RLOCK_PREFIX RLOCK_PASSWORD REDISCLI_AUTH RLOCK_CONFIG
export RLOCK_URL="redis://127.0.0.1:$port/0" HOME="$dir"

# measure LABEL COMMAND...: one row (faults, cpu ms, instructions).
measure() {
  local label="$1" faults cpu instr
  shift
  perf stat -x, -e page-faults,task-clock -r "$RUNS" -o "$dir/perf" "$@" >/dev/null 2>&1
  faults="$(awk -F, '$3 ~ /page-faults/ {print $1}' "$dir/perf")"
  cpu="$(awk -F, '$3 ~ /task-clock/ {print $1}' "$dir/perf")"
  rm -f "$dir"/cg.*
  valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$dir/cg.%p" "$@" \
    >/dev/null 2>"$dir/vg.log"
  instr="$(awk '/refs:/ {gsub(",", "", $NF); s += $NF} END {print s}' "$dir/vg.log")"
  printf '%s\t%s\t%s\t%s\n' "$label" "$faults" "$cpu" "$instr" >>"$dir/rows"
}

rlock_rows() {
  local label="$1" bin="$2"
  measure "${label}rlock --version" "$bin" --version
  measure "${label}rlock run x -- true" "$bin" run benchrun -- true
}
: >"$dir/rows"
rlock_rows "" "$RLOCK"
if [[ -n "$BEFORE" ]]; then rlock_rows "before: " "$BEFORE"; fi
measure "flock FILE true" flock "$dir/flock" true
measure "true" true

python3 - "$dir/rows" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    label, faults, cpu, instr = line.rstrip("\n").split("\t")
    rows[label] = (float(faults), float(cpu), int(instr))
print(f"{'':34} {'faults':>8} {'cpu ms':>8} {'instr':>10}")
for label, (f, c, i) in rows.items():
    print(f"{label:34} {f:8.0f} {c:8.2f} {i / 1e6:9.2f}M")
print()
for prefix in ["", "before: "]:
    run, ver = rows.get(prefix + "rlock run x -- true"), rows.get(prefix + "rlock --version")
    if not run:
        continue
    fl, tr = rows["flock FILE true"], rows["true"]
    name = prefix or "now: "
    print(f"{name}rlock run / flock:   faults {run[0] / fl[0]:.2f}x  cpu {run[1] / fl[1]:.2f}x  "
          f"instructions {run[2] / fl[2]:.2f}x")
    print(f"{name}rlock --version / true: faults {ver[0] / tr[0]:.2f}x  cpu {ver[1] / tr[1]:.2f}x  "
          f"instructions {ver[2] / tr[2]:.2f}x")
PY
