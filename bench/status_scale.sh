#!/usr/bin/env bash
# bench/status_scale.sh: how long `rlock status` takes to list many locks.
#
# Starts a private redis-server on a free loopback port, creates N held locks
# (default 100000) with one `redis-cli --pipe` running the real lock script
# (src/lock/scripts/lock.lua, EVALSHA with rlock's 9 keys), then times, best
# of R runs (default 3):
#   scan   redis-cli --scan --pattern 'rlock:*' | wc -l   (the raw key walk;
#          4 keys per held lock: h, i, m, f)
#   text   rlock status >/dev/null
#   json   rlock --json status >/dev/null
# and prints each time and its ratio to the raw scan. The server is stopped
# at exit.
#
# How to read it: `rlock status` does a SCAN for the meta keys (1 in 4 keys
# here) and then one EVALSHA of the status operation per lock, pipelined 500
# at a time, so it costs one script run per lock on top of the scan; the
# ratio to the scan says how much that costs. Text and JSON differ only in
# rendering.
#
# Figures from one run on the development VM (2 vCPU shared with other
# builds, load average about 6; Redis 7.0.15; RelWithDebInfo), N=100000,
# best of 3. Rerun to compare: the numbers depend on the machine.
#   redis-cli --scan --pattern 'rlock:*' | wc -l     2667 ms  (400000 keys)
#   SCAN MATCH rlock:{*}:m COUNT 1000 (python)       1445 ms  0.5x the scan
#   rlock status                                     8272 ms  3.1x the scan
#   rlock --json status                             10513 ms  3.9x the scan
#   per lock: text 82 us, json 105 us; server time per status script 57 us
# So about 70% of `rlock status` is the server running the status script,
# once per lock; the scan itself is a small part.
#
# Usage: bench/status_scale.sh [N] [RUNS]
# Env:   RLOCK_BIN  the binary (default build/rlock)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$REPO/scripts/lib.sh"
RLOCK="${RLOCK_BIN:-$REPO/build/rlock}"
N="${1:-100000}"
RUNS="${2:-3}"
[[ -x "$RLOCK" ]] || { echo "no binary at $RLOCK (build first, or set RLOCK_BIN)" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/rlock-bench.XXXXXX")"
cleanup() {
  stop_private_redis
  rm -rf "$work"
}
trap cleanup EXIT

start_private_redis "$work" || { echo "could not start redis-server" >&2; exit 1; }
port="$PRIVATE_REDIS_PORT"

unset REDIS_URL RLOCK_PREFIX RLOCK_PASSWORD REDISCLI_AUTH RLOCK_CONFIG RLOCK_CONNECT_TIMEOUT
export RLOCK_URL="redis://127.0.0.1:$port/0" HOME="$work"

echo "creating $N locks on 127.0.0.1:$port ..."
sha="$(redis-cli -p "$port" -x SCRIPT LOAD <"$REPO/src/lock/scripts/lock.lua")"
python3 - "$N" "$sha" <<'PY' | redis-cli -p "$port" --pipe >"$work/pipe.log"
import sys
count, sha = int(sys.argv[1]), sys.argv[2]
out = sys.stdout.buffer
for i in range(count):
    base = f"rlock:{{bench-{i:06d}}}:"
    blob = f"11:bench-owner8:gen-host{len(str(i))}:{i}9:bench job"
    args = ["EVALSHA", sha, "9"] + [base + s for s in "hsqxlimfa"] + [
        "acquire", f"{i:032x}", "exclusive", "1", "3600000", blob, "0", "3000"]
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        b = a.encode()
        out.write(b"$%d\r\n%s\r\n" % (len(b), b))
PY
grep -q "errors: 0, replies: $N" "$work/pipe.log" || { cat "$work/pipe.log" >&2; exit 1; }

# best CMD...: the best wall time of RUNS runs of CMD, in seconds.
best() {
  local best="" start end t
  for ((r = 0; r < RUNS; r++)); do
    start=$(date +%s%N)
    "$@" >/dev/null
    end=$(date +%s%N)
    t=$(((end - start) / 1000000))
    if [[ -z "$best" ]] || ((t < best)); then best=$t; fi
  done
  echo "$best"
}
scan() { redis-cli -p "$port" --scan --pattern 'rlock:*' | wc -l; }
# The walk rlock itself does: SCAN with COUNT 1000 for the meta keys.
# (redis-cli 7.0 has no --count for --scan: Debian's python3-redis does it.)
scan_meta() {
  /usr/bin/python3 -c 'import sys, redis
r = redis.Redis(port=int(sys.argv[1]))
print(sum(1 for _ in r.scan_iter(match="rlock:{*}:m", count=1000)))' "$port"
}

keys="$(scan)"
rows="$(($("$RLOCK" status | wc -l) - 1))"
listed="$("$RLOCK" --json status | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["locks"]))')"
[[ "$rows" == "$N" && "$listed" == "$N" ]] ||
  { echo "status listed $rows rows / $listed JSON locks, expected $N" >&2; exit 1; }

t_scan="$(best scan)"
t_meta="$(best scan_meta)"
redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
t_text="$(best "$RLOCK" status)"
# Server time per status script run (INFO commandstats), to tell the server's
# share from the client's.
evalsha_us="$(redis-cli -p "$port" INFO commandstats | tr -d '\r' |
  sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p')"
t_json="$(best "$RLOCK" --json status)"
ratio() { python3 -c "print(f'{$1 / max($2, 1):.1f}x')"; }
echo
echo "$N locks ($keys keys), best of $RUNS runs, redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')"
printf '%-44s %8s ms\n' "redis-cli --scan --pattern 'rlock:*' | wc -l" "$t_scan"
printf '%-44s %8s ms  %s the scan\n' "SCAN MATCH rlock:{*}:m COUNT 1000 (python)" "$t_meta" "$(ratio "$t_meta" "$t_scan")"
printf '%-44s %8s ms  %s the scan\n' "rlock status" "$t_text" "$(ratio "$t_text" "$t_scan")"
printf '%-44s %8s ms  %s the scan\n' "rlock --json status" "$t_json" "$(ratio "$t_json" "$t_scan")"
printf 'per lock: text %s us, json %s us; server time per status script: %s us\n' \
  "$((t_text * 1000 / N))" "$((t_json * 1000 / N))" "${evalsha_us:-?}"
