# shellcheck shell=bash
# Shared by scripts/test, scripts/demo, tests/checks/*.sh and bench/*.sh: the
# Debian packages rlock needs to build, test and package itself, a function
# that installs the missing ones, and private redis-servers for the checks and
# benchmarks. Sourced, never executed.

# What a fresh Debian 12 needs, grouped by purpose. scripts/demo installs
# only RLOCK_DEMO_PACKAGES (build rlock, run a private redis-server);
# scripts/test installs RLOCK_PACKAGES, which is those plus everything the
# tests, checks and proof harness use.
RLOCK_DEMO_PACKAGES=(
  # build
  build-essential cmake pkg-config libhiredis-dev libfmt-dev libssl-dev libcli11-dev
  # a throwaway redis-server on a free port (free_loopback_port is Python)
  redis-server redis-tools python3
)
RLOCK_PACKAGES=(
  "${RLOCK_DEMO_PACKAGES[@]}"
  # unit and end-to-end tests
  libgtest-dev bats bats-assert bats-support openssl procps
  util-linux python3-redis parallel
  # rlock under Valgrind (an e2e test; the start-up benchmark's instructions)
  valgrind
  # style, man page, benchmarks, packaging, completions
  clang-format groff hyperfine dpkg-dev file bash-completion zsh fish
  # proof harness: libFuzzer and clang-tidy (clang 16: Debian 12's clang 14
  # cannot compile libstdc++'s <expected>), ThreadSanitizer's gcc runtime
  clang-16 libclang-rt-16-dev clang-tidy-16 libtsan2
)

# Prints the packages from the arguments that dpkg does not report as installed.
missing_packages() {
  local pkg
  for pkg in "$@"; do
    if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null)" != installed ]]; then
      printf '%s\n' "$pkg"
    fi
  done
}

# ensure_packages [PACKAGE...]: installs whatever is missing from the
# packages given (default: RLOCK_PACKAGES), without asking anything.
# `apt-get update` runs only when something has to be installed, so a
# provisioned machine (and CI on it) never touches the network here. apt's
# output goes to a log, printed only if it fails: one line says what is
# being installed. Installing redis-server may start Debian's own service on
# port 6379; nothing of ours uses it: tests and the demo start private
# servers on free ports.
ensure_packages() {
  local missing
  if (($# == 0)); then set -- "${RLOCK_PACKAGES[@]}"; fi
  mapfile -t missing < <(missing_packages "$@")
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  echo "==> installing missing packages (a minute or two): ${missing[*]}"
  local sudo=()
  if ((EUID != 0)); then
    if ! command -v sudo >/dev/null; then
      echo "error: not root and no sudo; please install: ${missing[*]}" >&2
      return 1
    fi
    sudo=(sudo -n)
  fi
  local log rc=0
  log="$(mktemp "${TMPDIR:-/tmp}/rlock-apt.XXXXXX")"
  { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends -o Dpkg::Options::=--force-confdef \
      -o Dpkg::Options::=--force-confold "${missing[@]}"; } </dev/null >"$log" 2>&1 || rc=$?
  if ((rc != 0)); then
    cat "$log" >&2
    echo "error: apt-get failed (exit $rc) installing: ${missing[*]}" >&2
  fi
  rm -f "$log"
  return "$rc"
}

# Prints a TCP port on 127.0.0.1 that nothing is bound to, outside the
# kernel's ephemeral range (so an outgoing connection cannot take it meanwhile).
free_loopback_port() {
  python3 - <<'EOF'
import random, socket
lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
candidates = [p for p in range(20000, 60001) if not lo <= p <= hi] or list(range(20000, 60001))
for port in random.sample(candidates, 200):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
    print(port)
    break
else:
    raise SystemExit("no free port found")
EOF
}

# The server of start_private_redis: empty until one runs, so a script's EXIT
# trap may call stop_private_redis before (or without) starting one.
PRIVATE_REDIS_PORT=""
PRIVATE_REDIS_PID=""

# start_private_redis DIR: starts a throwaway redis-server (no persistence) on
# 127.0.0.1 at a random port in 20000-49999, with DIR as its working directory
# and DIR/redis.log as its log, and waits (up to 5 s) until it answers PING;
# tries up to 5 ports. Sets PRIVATE_REDIS_PORT and PRIVATE_REDIS_PID and
# returns 0, or returns 1 with nothing left running. PRIVATE_REDIS_PID is set
# as soon as the server is started, so an EXIT trap that calls
# stop_private_redis never leaks it. Call it in the script's own shell, not in
# $(...), so that the server is a child of that shell and can be reaped.
start_private_redis() {
  local dir="$1" candidate i _
  PRIVATE_REDIS_PORT=""
  PRIVATE_REDIS_PID=""
  for _ in 1 2 3 4 5; do
    candidate="$(free_loopback_port)"
    redis-server --port "$candidate" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$dir" --logfile "$dir/redis.log" </dev/null >/dev/null 2>&1 &
    PRIVATE_REDIS_PID=$!
    for ((i = 0; i < 100; i++)); do
      # The server that answers must be ours: another one may have taken the
      # port in the meantime, and its data is not ours to flush.
      if redis-cli -p "$candidate" info server 2>/dev/null | tr -d '\r' |
        grep -qx "process_id:$PRIVATE_REDIS_PID"; then
        # shellcheck disable=SC2034 # read by the scripts that source this file
        PRIVATE_REDIS_PORT=$candidate
        return 0
      fi
      kill -0 "$PRIVATE_REDIS_PID" 2>/dev/null || break
      sleep 0.05
    done
    stop_private_redis
  done
  return 1
}

# stop_private_redis: stops the server of start_private_redis, if any, and
# waits for it to exit; safe to call more than once (e.g. from a trap).
stop_private_redis() {
  if [[ -n "${PRIVATE_REDIS_PID:-}" ]]; then
    kill "$PRIVATE_REDIS_PID" 2>/dev/null || true
    wait "$PRIVATE_REDIS_PID" 2>/dev/null || true
  fi
  PRIVATE_REDIS_PID=""
}

# Configures build/ (options already in its cache are kept unless given again).
configure_build() {
  cmake -S "$REPO" -B "$REPO/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
}

# ensure_valkey DIR: a valkey-server for the Valkey stage of scripts/test
# (protocol.md: rlock works on Redis 7 and on Valkey). Debian 12 has Valkey
# only in bookworm-backports (valkey-server and valkey-tools, 8.0): their
# packages are downloaded (apt verifies them against Debian's archive key)
# and unpacked into DIR, not installed, so that the machine's apt sources,
# its redis-server and the names it answers to are left as they are: the
# server is DIR/usr/bin/valkey-server. Nothing is fetched when DIR already
# holds one that runs. apt's output goes to a log, printed only if it fails.
ensure_valkey() {
  local dir="$1" tmp rc=0 deb
  if "$dir/usr/bin/valkey-server" --version >/dev/null 2>&1; then
    return 0
  fi
  echo "==> fetching valkey-server from Debian's bookworm-backports (unpacked into $dir)"
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/rlock-valkey.XXXXXX")"
  mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/debs"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]" \
    "http://deb.debian.org/debian bookworm-backports main" >"$tmp/sources.list"
  local apt=(apt-get -q -o "Dir::Etc::SourceList=$tmp/sources.list"
    -o "Dir::Etc::SourceParts=$tmp/none" -o "Dir::State::Lists=$tmp/lists"
    -o "Dir::Cache=$tmp/cache" -o "APT::Sandbox::User=$(id -un)")
  { "${apt[@]}" update &&
    (cd "$tmp/debs" && "${apt[@]}" download valkey-server valkey-tools); } \
    </dev/null >"$tmp/apt.log" 2>&1 || rc=$?
  if ((rc == 0)); then
    mkdir -p "$dir"
    for deb in "$tmp"/debs/*.deb; do
      dpkg-deb -x "$deb" "$dir" || rc=$?
    done
  fi
  if ((rc == 0)) && ! "$dir/usr/bin/valkey-server" --version >/dev/null 2>&1; then
    echo "error: the unpacked valkey-server does not run" >&2
    rc=1
  fi
  if ((rc != 0)); then
    cat "$tmp/apt.log" >&2
    echo "error: could not fetch valkey-server from bookworm-backports (exit $rc)" >&2
  fi
  rm -rf "$tmp"
  return "$rc"
}
