#!/usr/bin/env bash
# Checks man/rlock.1: groff formats it without a single warning, every
# command `rlock --help` lists has an entry in COMMANDS, and every long option
# the binary prints in `rlock --help` and `rlock CMD --help` appears in the
# page (a command or option nobody documented fails here).
# Binary: $RLOCK_BIN, else $BUILD_DIR/rlock, else build/rlock.
set -euo pipefail
REPO="${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
RLOCK="${RLOCK_BIN:-${BUILD_DIR:-$REPO/build}/rlock}"
MAN="$REPO/man/rlock.1"

[[ -x "$RLOCK" ]] || { echo "man.sh: no binary at $RLOCK" >&2; exit 1; }

warnings="$(groff -man -z -wall "$MAN" 2>&1)"
if [[ -n "$warnings" ]]; then
  echo "man.sh: groff warnings in man/rlock.1:" >&2
  echo "$warnings" >&2
  exit 1
fi
echo "groff -man -z -wall man/rlock.1: no warnings"

# The page's source with groff's \- turned back into plain hyphens.
page="$(sed 's/\\-/-/g' "$MAN")"
# The COMMANDS section documents each command as a tagged paragraph, ".TP"
# then ".B CMD ...". (Any line mentioning the word would not do: "run" and
# "status" appear all over the page.)
command_tags="$(awk '/^\.SH /{in_commands = ($0 ~ /^\.SH COMMANDS/)}
  in_commands && prev == ".TP" && /^\.B /{print $2} {prev = $0}' <<<"$page")"
help="$("$RLOCK" --help)"
# The commands: the "Subcommands:" block of --help, so a new one is checked too.
mapfile -t commands < <(awk '/^Subcommands:/ {f = 1; next} f && !NF {exit} f {print $1}' <<<"$help")
((${#commands[@]} >= 5)) || { echo "man.sh: found only ${#commands[@]} commands in rlock --help" >&2; exit 1; }
for cmd in "${commands[@]}"; do
  help+=$'\n'"$("$RLOCK" "$cmd" --help)"
  grep -qx -- "$cmd" <<<"$command_tags" ||
    { echo "man.sh: command '$cmd' has no entry in COMMANDS" >&2; exit 1; }
done
mapfile -t options < <(grep -oE -- '--[a-z][a-z0-9-]*' <<<"$help" | sort -u)
((${#options[@]} > 10)) || { echo "man.sh: found only ${#options[@]} options in --help" >&2; exit 1; }
missing=()
for opt in "${options[@]}"; do
  grep -Eq -- "${opt}([^a-z0-9-]|$)" <<<"$page" || missing+=("$opt")
done
if ((${#missing[@]})); then
  echo "man.sh: options in rlock --help missing from man/rlock.1: ${missing[*]}" >&2
  exit 1
fi
echo "all ${#options[@]} long options of rlock --help and rlock {${commands[*]}} --help are in the man page"
