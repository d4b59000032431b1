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
#   wall ms  the median wall time of RUNS runs, the commands interleaved
#            (one run of each in turn, the order rotating), so that a load
#            that comes and goes weighs on all of them alike; hyperfine
#            (bench/cli_overhead.sh) runs each command's runs in one block.
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

dir="$(mktemp -d "${TMPDIR:-/tmp}/rlock-bench.XXXXXX")"
cleanup() {
  stop_private_redis
  rm -rf "$dir"
}
trap cleanup EXIT
start_private_redis "$dir" || { echo "could not start redis-server" >&2; exit 1; }
unset REDIS_URL RLOCK_PREFIX RLOCK_PASSWORD REDISCLI_AUTH RLOCK_CONFIG
export RLOCK_URL="redis://127.0.0.1:$PRIVATE_REDIS_PORT/0" HOME="$dir"

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
  printf '%s\0' "$label" "$@" >"$dir/cmd.$(wc -l <"$dir/rows")"
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

python3 - "$dir" "$RUNS" <<'PY'
import glob, os, statistics, sys, time
d, runs = sys.argv[1], int(sys.argv[2])
rows = {}
for line in open(os.path.join(d, "rows")):
    label, faults, cpu, instr = line.rstrip("\n").split("\t")
    rows[label] = [float(faults), float(cpu), int(instr)]
# Wall time, interleaved: each round runs every command once, in an order
# that rotates from round to round.
cmds = []
for path in sorted(glob.glob(os.path.join(d, "cmd.*")), key=lambda p: int(p.rsplit(".", 1)[1])):
    label, *argv = open(path, "rb").read().split(b"\0")[:-1]
    cmds.append((label.decode(), [a.decode() for a in argv]))
null = os.open(os.devnull, os.O_WRONLY)
times = {label: [] for label, _ in cmds}
for r in range(runs):
    for k in range(len(cmds)):
        label, argv = cmds[(k + r) % len(cmds)]
        t0 = time.perf_counter()
        pid = os.posix_spawnp(argv[0], argv, os.environ,
                              file_actions=[(os.POSIX_SPAWN_DUP2, null, 1)])
        os.waitpid(pid, 0)
        times[label].append((time.perf_counter() - t0) * 1000)
for label in rows:
    rows[label].append(statistics.median(times[label]))
print(f"{'':34} {'faults':>8} {'cpu ms':>8} {'instr':>10} {'wall ms':>8}")
for label, (f, c, i, w) in rows.items():
    print(f"{label:34} {f:8.0f} {c:8.2f} {i / 1e6:9.2f}M {w:8.2f}")
print()
for prefix in ["", "before: "]:
    run, ver = rows.get(prefix + "rlock run x -- true"), rows.get(prefix + "rlock --version")
    if not run:
        continue
    fl, tr = rows["flock FILE true"], rows["true"]
    name = prefix or "now: "
    for what, a, b in (("rlock run / flock", run, fl), ("rlock --version / true", ver, tr)):
        print(f"{name}{what + ':':24} wall {a[3] / b[3]:.2f}x  faults {a[0] / b[0]:.2f}x  "
              f"cpu {a[1] / b[1]:.2f}x  instructions {a[2] / b[2]:.2f}x")
PY
