#!/usr/bin/env bash
# bench/status_scale.sh: how long `rlock status` takes to list many locks.
#
# Starts a private redis-server on a free loopback port, creates N held locks
# (default 100000) with one `redis-cli --pipe` running the real lock script
# (src/lock/scripts/lock.lua, EVALSHA with rlock's 9 keys), then times, best
# of R runs in turn (default 3):
#   scan   redis-cli --scan --pattern 'rlock:*' | wc -l   (the raw key walk;
#          4 keys per held lock: h, i, m, f)
#   text   rlock status >/dev/null
#   json   rlock --json status >/dev/null
# and prints each time and its ratio to the raw scan, then each rlock row's
# peak RSS and minor page faults (GNU time, one more run each; on this kind
# of VM a page fault costs microseconds, so they are part of the time). The
# server is stopped at exit.
#
# How to read it: `rlock status` walks the meta keys with SCAN (1 in 4 keys
# here) and reads each lock with plain commands, 7 a lock, pipelined 1000
# locks a batch (src/backend/status_reads.*; a lock the reads cannot
# describe exactly goes to the lock script), the reads of what the walk has
# found going out while it goes on, and renders. The ratio
# to the raw scan says what all that costs on top of walking the keys; the
# server time per lock says how much of it is Redis. Text and JSON differ
# only in rendering. bench/README.md has figures, before and after.
#
# Usage: bench/status_scale.sh [N] [RUNS]
# Env:   RLOCK_BIN     the binary (default build/rlock)
#        RLOCK_BEFORE  another binary timed on the same keyspace in the same
#                      run (e.g. a build of the previous commit); unset: none
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$REPO/scripts/lib.sh"
RLOCK="${RLOCK_BIN:-$REPO/build/rlock}"
N="${1:-100000}"
RUNS="${2:-3}"
BEFORE="${RLOCK_BEFORE:-}"
[[ -x "$RLOCK" ]] || { echo "no binary at $RLOCK (build first, or set RLOCK_BIN)" >&2; exit 1; }
[[ -z "$BEFORE" || -x "$BEFORE" ]] || { echo "no binary at $BEFORE (RLOCK_BEFORE)" >&2; exit 1; }

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

# server_usec: the server's time so far, in microseconds, from INFO
# commandstats (every command's usec, the scripts' inner calls counted in
# the script's own; INFO and CONFIG left out), to tell the server's share
# of a listing from the client's.
server_usec() {
  redis-cli -p "$port" INFO commandstats | tr -d '\r' | python3 -c '
import re, sys
print(sum(int(m.group(2)) for m in re.finditer(r"^cmdstat_(\w+):calls=\d+,usec=(\d+)", sys.stdin.read(), re.M)
          if m.group(1) not in ("info", "config")))'
}
# timed LABEL CMD...: one run of CMD; keeps its best wall time (ms) in
# best[LABEL] and adds the server's time to server[LABEL]. The rows are run
# in turn, RUNS rounds (interleaved: a burst of load hits every row alike,
# not one row's runs).
declare -A best server
timed() {
  local label="$1" s0 start end t
  shift
  s0="$(server_usec)"
  start=$(date +%s%N)
  "$@" >/dev/null
  end=$(date +%s%N)
  server[$label]=$((${server[$label]:-0} + $(server_usec) - s0))
  t=$(((end - start) / 1000000))
  if [[ -z "${best[$label]:-}" ]] || ((t < best[$label])); then best[$label]=$t; fi
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

for ((r = 0; r < RUNS; r++)); do
  timed scan scan
  timed meta scan_meta
  timed text "$RLOCK" status
  timed json "$RLOCK" --json status
  if [[ -n "$BEFORE" ]]; then
    timed b_text "$BEFORE" status
    timed b_json "$BEFORE" --json status
  fi
done
t_scan="${best[scan]}" t_meta="${best[meta]}" t_text="${best[text]}" t_json="${best[json]}"
# The server's time per lock of one text listing.
per_lock() { python3 -c "print(f'{$1 / $RUNS / $N:.1f}')"; }
server_text="$(per_lock "${server[text]}")"
if [[ -n "$BEFORE" ]]; then
  b_text="${best[b_text]}" b_json="${best[b_json]}"
  server_before="$(per_lock "${server[b_text]}")"
fi
ratio() { python3 -c "print(f'{$1 / max($2, 1):.2f}x')"; }
# memory CMD...: "PEAK_KB KB, FAULTS faults" of one run of CMD (GNU time).
memory() {
  /usr/bin/time -f '%M KB, %R faults' -o "$work/time" "$@" >/dev/null
  cat "$work/time"
}
echo
echo "$N locks ($keys keys), best of $RUNS interleaved runs, redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')"
printf '%-44s %8s ms\n' "redis-cli --scan --pattern 'rlock:*' | wc -l" "$t_scan"
printf '%-44s %8s ms  %s the scan\n' "SCAN MATCH rlock:{*}:m COUNT 1000 (python)" "$t_meta" "$(ratio "$t_meta" "$t_scan")"
printf '%-44s %8s ms  %s the scan\n' "rlock status" "$t_text" "$(ratio "$t_text" "$t_scan")"
printf '%-44s %8s ms  %s the scan\n' "rlock --json status" "$t_json" "$(ratio "$t_json" "$t_scan")"
printf 'per lock: text %s us, json %s us (json/text %s); server time %s us\n' \
  "$((t_text * 1000 / N))" "$((t_json * 1000 / N))" "$(ratio "$t_json" "$t_text")" "$server_text"
if [[ -n "$BEFORE" ]]; then
  printf '%-44s %8s ms  %s the scan\n' "before: rlock status" "$b_text" "$(ratio "$b_text" "$t_scan")"
  printf '%-44s %8s ms  %s the scan\n' "before: rlock --json status" "$b_json" "$(ratio "$b_json" "$t_scan")"
  printf 'before, per lock: text %s us, json %s us (json/text %s); server time %s us\n' \
    "$((b_text * 1000 / N))" "$((b_json * 1000 / N))" "$(ratio "$b_json" "$b_text")" "$server_before"
fi
if [[ -x /usr/bin/time ]]; then
  printf 'peak RSS, minor page faults: text %s; json %s\n' \
    "$(memory "$RLOCK" status)" "$(memory "$RLOCK" --json status)"
  if [[ -n "$BEFORE" ]]; then
    printf 'before: text %s; json %s\n' \
      "$(memory "$BEFORE" status)" "$(memory "$BEFORE" --json status)"
  fi
fi
