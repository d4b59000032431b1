#!/usr/bin/env bash
# Checks that the minimum ACL documented in README.md (and, command for
# command, in man/rlock.1) is enough: creates that user on a private
# redis-server (Redis 7 checks the commands a script calls against the
# caller's ACL), then as that user runs acquire, a queued acquire woken by
# release (BLPOP), renew, status, status of every lock, shared and semaphore
# locks, release --force, a database other than 0 (SELECT), and the EVAL
# fallback after SCRIPT FLUSH, and run; and that a job
# user with the same rules but a narrower key pattern (the documented way to
# keep jobs from forcing each other's locks) cannot force a lock outside it.
# Also checks that a user without the script's commands is refused (so the
# check would notice a lock script calling a new command).
# Binary: $RLOCK_BIN, else $BUILD_DIR/rlock, else build/rlock.
set -euo pipefail
REPO="${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
# shellcheck source=scripts/lib.sh
source "$REPO/scripts/lib.sh"
RLOCK="${RLOCK_BIN:-${BUILD_DIR:-$REPO/build}/rlock}"
[[ -x "$RLOCK" ]] || { echo "acl.sh: no binary at $RLOCK" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/rlock-acl.XXXXXX")"
bg_pid=""
cleanup() {
  if [[ -n "$bg_pid" ]]; then kill "$bg_pid" 2>/dev/null || true; fi
  stop_private_redis
  rm -rf "$work"
}
trap cleanup EXIT

# The documented line, and the same commands in the man page.
acl_line="$(grep -m1 -E '^ *ACL SETUSER locker ' "$REPO/README.md" | sed 's/^ *//')"
[[ -n "$acl_line" ]] || { echo "acl.sh: no 'ACL SETUSER locker' line in README.md" >&2; exit 1; }
readme_cmds="$(grep -oE '[+-]@?[a-z_]+' <<<"$acl_line" | LC_ALL=C sort)"
man_cmds="$(sed -n '/^ACL SETUSER locker/,/^\.EE/p' "$REPO/man/rlock.1" | sed 's/\\-/-/g' |
  grep -oE '(^| )[+-]@?[a-z_]+' | tr -d ' ' | LC_ALL=C sort)"
if [[ "$readme_cmds" != "$man_cmds" ]]; then
  echo "acl.sh: the ACL in README.md and man/rlock.1 differ:" >&2
  diff <(echo "$readme_cmds") <(echo "$man_cmds") >&2 || true
  exit 1
fi
echo "README.md and man/rlock.1 document the same ACL ($(wc -l <<<"$readme_cmds") rules)"

# Every command the lock scripts call must be in it (Redis 7 checks them).
# Only calls with a literal command name can be listed: any other call
# (double quotes, a variable) would slip past this list, so it fails here.
# (No match is a count of 0, checked below, not an error.)
calls="$({ grep -ohE 'redis\.p?call *\(' "$REPO"/src/lock/scripts/*.lua || true; } | wc -l)"
literal_calls="$({ grep -ohE "redis\.p?call\('[A-Za-z]+'" "$REPO"/src/lock/scripts/*.lua || true; } | wc -l)"
if ((calls == 0 || calls != literal_calls)); then
  echo "acl.sh: $((calls - literal_calls)) of $calls redis.call()s in src/lock/scripts/*.lua" \
    "do not name their command as a literal 'NAME'" >&2
  exit 1
fi
script_cmds="$(grep -ohE "redis\.p?call\('[A-Za-z]+'" "$REPO"/src/lock/scripts/*.lua |
  sed -E "s/.*\('//; s/'//" | tr '[:upper:]' '[:lower:]' | LC_ALL=C sort -u)"
missing=()
for cmd in $script_cmds; do
  grep -qx "+$cmd" <<<"$readme_cmds" || missing+=("$cmd")
done
if ((${#missing[@]})); then
  echo "acl.sh: the lock script calls commands the documented ACL lacks: ${missing[*]}" >&2
  echo "  (add +${missing[*]// / +} to README.md and man/rlock.1)" >&2
  exit 1
fi
echo "the ACL allows all $(wc -w <<<"$script_cmds") commands src/lock/scripts/*.lua calls"

# The script asks the ACL about each of them before a write (see below):
# its list for writes other than a renewal must name every one (TIME is
# called first, before anything is written; acl_refusal asks about DEL
# itself, with every key).
checked="$(sed -n "/^elseif op ~= 'status' then/,/if refused then return refused end/p" \
  "$REPO/src/lock/scripts/lock.lua" | grep -oE "'[A-Z]+'" | tr -d "'" |
  tr '[:upper:]' '[:lower:]' | LC_ALL=C sort -u)"
unchecked=()
for cmd in $script_cmds; do
  [[ "$cmd" == time || "$cmd" == del ]] || grep -qx "$cmd" <<<"$checked" || unchecked+=("$cmd")
done
if [[ -z "$checked" ]] || ((${#unchecked[@]})); then
  echo "acl.sh: the lock script does not ask the ACL about: ${unchecked[*]:-(no list found)}" >&2
  exit 1
fi
echo "the lock script asks the ACL about each of them before it writes"

start_private_redis "$work" || { echo "acl.sh: could not start redis-server" >&2; exit 1; }
port="$PRIVATE_REDIS_PORT"
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on 127.0.0.1:$port:"

admin() { redis-cli -p "$port" "$@" </dev/null; }
password="acl-check-$RANDOM$RANDOM"
read -ra acl_args <<<"${acl_line/>PASSWORD/>$password}"
[[ "$(admin "${acl_args[@]}")" == OK ]] || { echo "acl.sh: redis rejected: $acl_line" >&2; exit 1; }
printf '%s\n' "$password" >"$work/password"
chmod 600 "$work/password"

unset REDIS_URL RLOCK_PREFIX RLOCK_PASSWORD REDISCLI_AUTH RLOCK_CONFIG RLOCK_CONNECT_TIMEOUT
export HOME="$work" RLOCK_URL="redis://127.0.0.1:$port/3"
as_locker() { timeout 20 "$RLOCK" --user locker --password-file "$work/password" "$@" </dev/null; }

step() {
  local want="$1" what="$2" rc=0
  shift 2
  "$@" >"$work/out" 2>"$work/err" || rc=$?
  if [[ ",$want," != *",$rc,"* ]]; then
    echo "acl.sh: $what: exit $rc, expected $want" >&2
    cat "$work/out" "$work/err" >&2
    exit 1
  fi
  echo "  ok: $what"
}

admin SCRIPT FLUSH >/dev/null
step 0 "acquire (EVALSHA, then the EVAL fallback)" as_locker acquire -t 60s acl-lock
token="$(cat "$work/out")"
as_locker acquire -w 15s acl-lock >"$work/waiter.out" 2>"$work/waiter.err" &
bg_pid=$!
for ((i = 0; i < 100; i++)); do
  [[ "$(as_locker --json status acl-lock)" == *'"waiters":[{'* ]] && break
  sleep 0.05
done
step 0 "status NAME with a waiter queued" as_locker status acl-lock
grep -q 'waiting (1)' "$work/out" || { echo "acl.sh: the waiter is not queued" >&2; exit 1; }
step 0 "renew" as_locker renew acl-lock --token "$token" -t 60s
step 0 "release, waking the waiter (BLPOP)" as_locker release acl-lock --token "$token"
rc=0
wait "$bg_pid" || rc=$?
bg_pid=""
[[ "$rc" == 0 ]] || { echo "acl.sh: the waiter exited $rc" >&2; cat "$work/waiter.err" >&2; exit 1; }
echo "  ok: the queued acquire got the lock"
step 0 "shared lock" as_locker acquire -s -t 60s acl-shared
step 0 "semaphore" as_locker acquire -l 2 -t 60s acl-pool
admin SCRIPT FLUSH >/dev/null
step 0 "status of every lock (SCAN, pipelined EVALSHA, EVAL fallback)" as_locker --json status
[[ "$(grep -o '"name":' "$work/out" | wc -l)" == 3 ]] || { echo "acl.sh: status listed $(cat "$work/out")" >&2; exit 1; }
# A status is read-only (EVALSHA_RO, EVAL_RO): a server whose writes are
# paused still answers it, with the script cache empty too.
admin SCRIPT FLUSH >/dev/null
[[ "$(admin CLIENT PAUSE 30000 WRITE)" == OK ]] || { echo "acl.sh: CLIENT PAUSE refused" >&2; exit 1; }
step 0 "status NAME while writes are paused (EVALSHA_RO, EVAL_RO fallback)" as_locker status acl-lock
step 0 "status of every lock while writes are paused" as_locker status
admin CLIENT UNPAUSE >/dev/null
step 0 "release --force" as_locker release acl-lock --force
step 0 "run" as_locker run acl-run -- true

# The documented way to keep jobs from forcing each other's locks: the same
# rules with a key pattern covering only the job's own locks.
job_line="${acl_line/SETUSER locker/SETUSER job}"
read -ra job_args <<<"${job_line/'~rlock:*'/'~rlock:{acl-job-*}:*'}"
job_args=("${job_args[@]/>PASSWORD/>$password}")
[[ "$(admin "${job_args[@]}")" == OK ]] || { echo "acl.sh: redis rejected the job user" >&2; exit 1; }
as_job() { timeout 20 "$RLOCK" --user job --password-file "$work/password" "$@" </dev/null; }
step 0 "a job user takes a lock its key pattern covers" as_job acquire -t 60s acl-job-1
step 77 "a job user cannot force a lock outside its key pattern" as_job release acl-shared --force
step 0 "the operator's lock is still held" as_locker status acl-shared

# Without the commands the script calls, Redis 7 refuses the script. Redis
# 7.0 words this refusal "ERR The user executing the script can't run this
# command", not NOPERM, so rlock may classify it as a server error (76)
# rather than an ACL failure (77): either is accepted here.
# Both checked: without the user, or refused for another reason (a failed
# AUTH also exits 77), this would pass without testing anything.
[[ "$(admin ACL SETUSER scriptless on ">$password" resetkeys '~rlock:*' resetchannels -@all \
  +evalsha +eval +blpop +scan +select)" == OK ]] || { echo "acl.sh: redis rejected the scriptless user" >&2; exit 1; }
step 76,77 "a user without the script's commands is refused" \
  timeout 20 "$RLOCK" --user scriptless --password-file "$work/password" acquire acl-other
# (The script's first call is TIME, which it names when refused.)
grep -qiE "script|the 'time' command" "$work/err" || {
  echo "acl.sh: the scriptless user was refused, but not for the script's commands:" >&2
  cat "$work/err" >&2
  exit 1
}

# Without any one of the commands the script calls, every operation that
# writes is refused (77) before it changes anything (a renewal, which
# needs only a few, may go through instead): Redis keeps what a
# script wrote before a refused call, so the script asks the ACL first. The
# lock's keys (DUMP: contents and scores, expiries left out) must be the
# same after each refusal. Then ROLE, which the client sends with the
# default --replicas all: refused at once (77), not waited out like
# replicas that lag (69 after the whole -w).
admin SCRIPT FLUSH >/dev/null
state() {
  local keys
  mapfile -t keys < <(admin -n 3 --scan --pattern 'rlock:{acl-part*' | LC_ALL=C sort)
  printf '%s\n' "${keys[@]}"
  printf 'DUMP %s\n' "${keys[@]}" | redis-cli -p "$port" -n 3 | od -An -tx1
}
as_admin() { timeout 20 "$RLOCK" "$@" </dev/null; }
as_admin acquire -t 600s acl-part >"$work/part.token"
part_token="$(cat "$work/part.token")"
as_admin acquire -t 600s -l 2 acl-part-pool >/dev/null
before="$(state)"
[[ "$before" == *'rlock:{acl-part}:h'* ]] || { echo "acl.sh: no keys for acl-part" >&2; exit 1; }
# part_user CMD [RULE...]: (re)creates the user `part`: the documented ACL
# without +CMD, then RULEs (a selector).
part_user() {
  local cmd="$1" line args
  shift
  line="$(sed -E "s/ \\+$cmd( |$)/ /" <<<"${acl_line/SETUSER locker/SETUSER part}")"
  [[ "$line" != *" +$cmd "* && "$line" != *" +$cmd" ]] || { echo "acl.sh: +$cmd not removed" >&2; exit 1; }
  read -ra args <<<"${line/>PASSWORD/>$password}"
  admin ACL DELUSER part >/dev/null
  [[ "$(admin "${args[@]}" "$@")" == OK ]] || { echo "acl.sh: redis rejected the user without +$cmd $*" >&2; exit 1; }
}
as_part() { timeout 20 "$RLOCK" --user part --password-file "$work/password" "$@" </dev/null; }
for cmd in $script_cmds; do
  part_user "$cmd"
  for op in "acquire -n acl-part" "acquire -n acl-part-free" "acquire -n -l 2 acl-part-pool" \
    "renew acl-part --token $part_token" "release acl-part --token $part_token" \
    "release acl-part --force" "run -n acl-part-run -- true"; do
    rc=0
    # shellcheck disable=SC2086 # $op is a list of words
    as_part $op >"$work/out" 2>"$work/err" || rc=$?
    if [[ "$rc" == 0 && "$op" == renew* ]]; then
      # A renewal writes only its lease, its expiries and purge_at, and
      # asks only about what it needs: the lock is still consistent.
      before="$(state)"
      continue
    fi
    if [[ "$rc" != 77 ]] || ! grep -q "'$cmd'" "$work/err"; then
      echo "acl.sh: without +$cmd, '${op/$part_token/TOKEN}' exited $rc (expected 77 naming $cmd):" >&2
      cat "$work/err" >&2
      exit 1
    fi
    if [[ "$(state)" != "$before" ]]; then
      echo "acl.sh: without +$cmd, '${op/$part_token/TOKEN}' was refused but changed the lock:" >&2
      diff <(echo "$before") <(state) >&2 || true
      exit 1
    fi
  done
done
echo "  ok: without any one of the script's $(wc -w <<<"$script_cmds") commands, every write is refused and changes nothing"
as_admin renew acl-part --token "$part_token" >/dev/null || { echo "acl.sh: the holder lost acl-part" >&2; exit 1; }
part_user role
step 77 "without +role, acquire -w 60s is refused at once" \
  timeout 10 "$RLOCK" --user part --password-file "$work/password" acquire -w 60s acl-role
grep -q 'ROLE was refused' "$work/err" || { echo "acl.sh: not refused for ROLE:" >&2; cat "$work/err" >&2; exit 1; }
step 0 "without +role, --replicas 0 takes the lock" \
  timeout 10 "$RLOCK" --user part --password-file "$work/password" --replicas 0 acquire acl-role
# A waiter too: it could never hold, so it must not wait its turn to learn it.
as_admin acquire -t 60s acl-role-held >/dev/null
step 77 "without +role, acquire -w 60s of a held lock is refused at once" \
  timeout 10 "$RLOCK" --user part --password-file "$work/password" acquire -w 60s acl-role-held
grep -q 'ROLE was refused' "$work/err" || { echo "acl.sh: not refused for ROLE:" >&2; cat "$work/err" >&2; exit 1; }
[[ "$(as_admin --json status acl-role-held)" == *'"waiters":[]'* ]] ||
  { echo "acl.sh: the refused waiter stayed queued:" >&2; as_admin status acl-role-held >&2; exit 1; }

# An ACL selector may allow a command on other keys only: the script asks
# about each command with the key it uses it on. Here LPUSH (the grant to
# a waiter) is allowed only elsewhere: a release that would wake a waiter
# is refused with nothing changed.
part_user lpush '(+lpush ~elsewhere:*)'
sel_token="$(as_admin acquire -t 60s acl-part-sel)"
as_admin acquire -w 30s acl-part-sel >/dev/null 2>&1 &
bg_pid=$!
for ((i = 0; i < 100; i++)); do
  [[ "$(as_admin --json status acl-part-sel)" == *'"waiters":[{'* ]] && break
  sleep 0.05
done
before="$(state)"
step 77 "a release that would grant a waiter, by a user allowed LPUSH only elsewhere, is refused" \
  timeout 10 "$RLOCK" --user part --password-file "$work/password" release acl-part-sel --token "$sel_token"
grep -q "'lpush'" "$work/err" || { echo "acl.sh: not refused for LPUSH:" >&2; cat "$work/err" >&2; exit 1; }
[[ "$(state)" == "$before" ]] || { echo "acl.sh: the refused release changed acl-part-sel" >&2; exit 1; }
as_admin release acl-part-sel --token "$sel_token" >/dev/null
wait "$bg_pid" || { echo "acl.sh: the waiter on acl-part-sel did not get it" >&2; exit 1; }
bg_pid=""

# A waiter whose BLPOP the ACL refuses leaves the queue it joined: else the
# next release grants the lock to nobody, for the waiter lease.
part_user blpop
step 77 "without +blpop, acquire -w is refused" \
  timeout 10 "$RLOCK" --user part --password-file "$work/password" acquire -w 5s acl-part
grep -q "blpop" "$work/err" || { echo "acl.sh: not refused for BLPOP:" >&2; cat "$work/err" >&2; exit 1; }
queue="$(as_admin --json status acl-part)"
[[ "$queue" == *'"waiters":[]'* ]] || {
  echo "acl.sh: the refused waiter left itself in the queue of acl-part: $queue" >&2
  exit 1
}
echo "  ok: the refused waiter left the queue"
echo "acl: the documented minimum ACL works for every command"
