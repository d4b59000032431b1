# shellcheck shell=bash
# Shared by scripts/test and scripts/demo: the Debian packages rlock needs to
# build, test and package itself, and a function that installs the missing
# ones. Sourced, never executed.

# Everything a fresh Debian 12 needs, grouped by purpose.
RLOCK_PACKAGES=(
  # build
  build-essential cmake pkg-config libhiredis-dev libfmt-dev libssl-dev libcli11-dev
  # unit and end-to-end tests
  libgtest-dev bats bats-assert bats-support redis-server redis-tools openssl procps
  util-linux python3-redis
  # style, man page, benchmarks, packaging, completions
  clang-format groff hyperfine dpkg-dev file bash-completion zsh fish
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

# Installs whatever is missing from RLOCK_PACKAGES, without asking anything.
# `apt-get update` runs only when something has to be installed, so a
# provisioned machine (and CI on it) never touches the network here.
# Installing redis-server may start Debian's own service on port 6379; nothing
# of ours uses it: tests and the demo start private servers on free ports.
ensure_packages() {
  local missing
  mapfile -t missing < <(missing_packages "${RLOCK_PACKAGES[@]}")
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  echo "==> installing missing packages: ${missing[*]}"
  local sudo=()
  if ((EUID != 0)); then
    if ! command -v sudo >/dev/null; then
      echo "error: not root and no sudo; please install: ${missing[*]}" >&2
      return 1
    fi
    sudo=(sudo -n)
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends -o Dpkg::Options::=--force-confdef \
    -o Dpkg::Options::=--force-confold "${missing[@]}" </dev/null
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

# Configures build/ (options already in its cache are kept unless given again).
configure_build() {
  cmake -S "$REPO" -B "$REPO/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
}
