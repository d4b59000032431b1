#!/usr/bin/env bash
# Checks that the binary carries the hardening CMakeLists.txt asks for
# (RLOCK_HARDEN): a position-independent executable (ASLR), full RELRO (a
# GNU_RELRO segment and BIND_NOW, so the GOT is read-only once started), the
# stack protector (it calls __stack_chk_fail), and _FORTIFY_SOURCE. Fortify
# leaves no mark when every buffer size is provably right (the compiler calls
# no __*_chk function then, and hardening-check says "unknown"), so it is
# checked in the compile commands of the build: every source of src/ is
# compiled with -D_FORTIFY_SOURCE=2 (and -fstack-protector-strong).
# Binary: $RLOCK_BIN, else $BUILD_DIR/rlock, else build/rlock; compile
# commands: $BUILD_DIR/compile_commands.json, else next to the binary.
set -euo pipefail
REPO="${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
RLOCK="${RLOCK_BIN:-${BUILD_DIR:-$REPO/build}/rlock}"

[[ -x "$RLOCK" ]] || { echo "hardening.sh: no binary at $RLOCK" >&2; exit 1; }
command -v readelf >/dev/null || { echo "hardening.sh: readelf (binutils) is missing" >&2; exit 1; }

header="$(readelf -h "$RLOCK")"
dynamic="$(readelf -d "$RLOCK")"
segments="$(readelf -lW "$RLOCK")"
symbols="$(readelf --dyn-syms -W "$RLOCK")"

problems=()
# PIE: a shared-object type ELF with the PIE flag (a plain shared library
# would be DYN too, but has no DF_1_PIE).
grep -Eq 'Type:[[:space:]]+DYN' <<<"$header" && grep -Eq 'FLAGS_1.*\bPIE\b' <<<"$dynamic" ||
  problems+=("not a position-independent executable (PIE)")
grep -q 'GNU_RELRO' <<<"$segments" || problems+=("no RELRO segment")
grep -Eq '\(FLAGS\).*\bBIND_NOW\b|FLAGS_1.*\bNOW\b|\(BIND_NOW\)' <<<"$dynamic" ||
  problems+=("no BIND_NOW (only partial RELRO)")
grep -q '__stack_chk_fail' <<<"$symbols" || problems+=("no stack protector (__stack_chk_fail)")
commands="${BUILD_DIR:-$(dirname "$RLOCK")}/compile_commands.json"
if [[ -f "$commands" ]]; then
  unfortified="$(python3 - "$commands" <<'EOF'
import json, sys
for entry in json.load(open(sys.argv[1])):
    source = entry["file"]
    if "/src/" not in source:
        continue
    flags = entry.get("command") or " ".join(entry.get("arguments", []))
    if "-D_FORTIFY_SOURCE=2" not in flags or "-fstack-protector-strong" not in flags:
        print(source)
EOF
)"
  [[ -z "$unfortified" ]] ||
    problems+=("compiled without -D_FORTIFY_SOURCE=2 -fstack-protector-strong: $(tr "\n" " " <<<"$unfortified")")
elif ! grep -Eq '__[a-z0-9_]+_chk@' <<<"$symbols"; then
  problems+=("no compile_commands.json, and no __*_chk call: cannot tell whether it is fortified")
fi

if ((${#problems[@]})); then
  for problem in "${problems[@]}"; do echo "hardening.sh: $RLOCK: $problem" >&2; done
  exit 1
fi
echo "hardening: $(basename "$RLOCK") is PIE, full RELRO (BIND_NOW), stack-protected, fortified"
