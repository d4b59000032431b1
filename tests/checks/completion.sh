#!/usr/bin/env bash
# Checks the shell completions in completions/. bash: sources rlock.bash,
# fills COMP_WORDS/COMP_CWORD as bash would, calls _rlock and checks the
# COMPREPLY candidates: commands at position 1, options per command, files
# after --password-file, and lock names from a private redis-server this
# script starts (and stops). zsh and fish: syntax (and, for fish, the same
# candidates) when those shells are installed; skipped with a note otherwise.
# Binary: $RLOCK_BIN, else $BUILD_DIR/rlock, else build/rlock.
set -euo pipefail
REPO="${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
# shellcheck source=scripts/lib.sh
source "$REPO/scripts/lib.sh"
RLOCK="${RLOCK_BIN:-${BUILD_DIR:-$REPO/build}/rlock}"
[[ -x "$RLOCK" ]] || { echo "completion.sh: no binary at $RLOCK" >&2; exit 1; }
RLOCK="$(cd "$(dirname "$RLOCK")" && pwd)/$(basename "$RLOCK")"

work="$(mktemp -d "${TMPDIR:-/tmp}/rlock-completion.XXXXXX")"
cleanup() {
  stop_private_redis
  rm -rf "$work"
}
trap cleanup EXIT

failures=0
checked=0
fail() {
  echo "completion.sh: FAIL: $*" >&2
  failures=$((failures + 1))
}

# --- a private server with three locks ---------------------------------------
start_private_redis "$work" || { echo "completion.sh: could not start redis-server" >&2; exit 1; }
port="$PRIVATE_REDIS_PORT"
unset REDIS_URL RLOCK_PREFIX RLOCK_PASSWORD REDISCLI_AUTH RLOCK_CONFIG RLOCK_CONNECT_TIMEOUT
export HOME="$work" RLOCK_URL="redis://127.0.0.1:$port/0"
for name in nightly-report deploy-prod "build cache"; do
  "$RLOCK" acquire -t 120s "$name" >/dev/null
done
"$RLOCK" --prefix other: acquire -t 120s elsewhere >/dev/null
# Names JSON escapes: a quote is offered; a newline, a tab or a byte that is
# not UTF-8 is not (decoding \" and \\ alone made another name of them).
for name in 'odd"quote' $'odd\nline' $'odd\ttab' $'odd\xffbyte'; do
  "$RLOCK" acquire -t 120s "$name" >/dev/null
done

# Completion runs `rlock` (COMP_WORDS[0]) from PATH.
ln -s "$RLOCK" "$work/rlock"
export PATH="$work:$PATH"
mkdir -p "$work/files" && touch "$work/files/secret.pw" "$work/files/server.pem"

# --- bash ------------------------------------------------------------------------
# shellcheck source=completions/rlock.bash
source "$REPO/completions/rlock.bash"
[[ "$(complete -p rlock)" == *"-F _rlock"* ]] || fail "bash: _rlock is not registered for rlock"

# complete_bash WORD...: the candidates _rlock offers for the last word.
complete_bash() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMP_LINE="$*"
  COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  _rlock
  printf '%s\n' "${COMPREPLY[@]}" | LC_ALL=C sort
}

# expect SHELL "WORDS" "EXPECTED CANDIDATES (newline-separated, sorted)"
expect() {
  local shell="$1" typed="$2" want="$3" got
  checked=$((checked + 1))
  if [[ "$shell" == bash ]]; then
    eval "got=\"\$(complete_bash $typed)\""
  else
    got="$(cd "$work/files/.." && fish -c "source '$REPO/completions/rlock.fish'; complete -C \"$4\"" |
      cut -f1 | LC_ALL=C sort)"
  fi
  if [[ "$got" != "$want" ]]; then
    fail "$shell: '$typed' offered [${got//$'\n'/|}], expected [${want//$'\n'/|}]"
  fi
}

nl=$'\n'
expect bash "rlock ''" "acquire${nl}release${nl}renew${nl}run${nl}status"
expect bash "rlock re" "release${nl}renew"
expect bash "rlock --json st" "status"
expect bash "rlock acquire --t" "--timeout${nl}--tls${nl}--ttl"
expect bash "rlock run --k" "--key${nl}--kill-after"
expect bash "rlock run --m" "--max-hold${nl}--min-hold"
expect bash "rlock release --f" "--force"
expect bash "rlock renew x --to" $'--token\n--token-file'
expect bash "rlock status ''" "build\\ cache${nl}deploy-prod${nl}nightly-report${nl}odd\\\"quote"
expect bash "rlock status o" "odd\\\"quote"
expect bash "rlock release n" "nightly-report"
expect bash "rlock -u $RLOCK_URL run -n d" "deploy-prod"
expect bash "rlock --prefix other: status ''" "elsewhere"
# The line's own --connect-timeout beside completion's (rlock refuses two).
expect bash "rlock --connect-timeout 2 status n" "nightly-report"
expect bash "rlock status --connect-timeout=2 n" "nightly-report"
expect bash "rlock release nightly-report ''" ""
expect bash "rlock -u redis://127.0.0.1:1/0 status ''" ""
expect bash "rlock acquire --ttl ''" ""
expect bash "rlock --password-file $work/files/sec" "$work/files/secret.pw"
expect bash "rlock status --cacert $work/files/ser" "$work/files/server.pem"
expect bash "rlock run job -- true" "true"
# After `run --` comes the name (one that starts with '-'), not a file.
expect bash "rlock run -- n" "nightly-report"
# run's options after the name too, until the command's word.
expect bash "rlock run job --w" "--wait"
# With bash-completion loaded (as in an interactive shell), the command's
# own arguments are completed as that command's: here ls' options.
if [[ -r /usr/share/bash-completion/bash_completion ]]; then
  # complete_loaded LINE WORD...: _rlock's candidates in a bash that has
  # bash-completion loaded, COMP_WORDS as bash splits LINE (at '=' and ':').
  complete_loaded() {
    bash -c 'source /usr/share/bash-completion/bash_completion 2>/dev/null
      source "$1/completions/rlock.bash"
      COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}; shift 2
      COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
      _rlock 2>/dev/null; printf "%s\n" "${COMPREPLY[@]}" | LC_ALL=C sort' _ "$REPO" "$@"
  }
  expect_loaded() {
    local want="$1" got
    shift
    checked=$((checked + 1))
    got="$(complete_loaded "$@")"
    [[ "$got" == "$want" ]] || fail "bash (bash-completion): '$1' offered [${got//$'\n'/|}], expected [${want//$'\n'/|}]"
  }
  expect_loaded --almost-all "rlock run job -w 5s ls --almost-al" rlock run job -w 5s ls --almost-al
  # An option's =value and a URL's :port are split by bash: still one word.
  expect_loaded --almost-all "rlock run --ttl=5s job ls --almost-al" \
    rlock run --ttl = 5s job ls --almost-al
  expect_loaded --wait "rlock run --owner=me job --w" rlock run --owner = me job --w
  expect_loaded --almost-all "rlock run -nt 5s job ls --almost-al" rlock run -nt 5s job ls --almost-al
  expect_loaded "build\\ cache${nl}deploy-prod${nl}nightly-report${nl}odd\\\"quote" "rlock -u $RLOCK_URL status " \
    rlock -u redis : //127.0.0.1 : "$port/0" status ""
  # A quoted URL (as bash passes the words: quotes on).
  expect_loaded "build\\ cache${nl}deploy-prod${nl}nightly-report${nl}odd\\\"quote" "rlock -u '$RLOCK_URL' status " \
    rlock -u "'redis" : //127.0.0.1 : "$port/0'" status ""
  expect_loaded "elsewhere" "rlock --prefix='other:' status " rlock --prefix = "'other" : "'" status ""
fi
echo "bash: $checked completions checked (commands, options per command, files, lock names from a live server)"

# --- zsh and fish -------------------------------------------------------------------
if command -v zsh >/dev/null; then
  zsh -n "$REPO/completions/_rlock" || fail "zsh: syntax error in completions/_rlock"
  head -1 "$REPO/completions/_rlock" | grep -qx '#compdef rlock' || fail "zsh: first line is not '#compdef rlock'"
  echo "zsh: completions/_rlock parses"
else
  echo "zsh: not installed, completions/_rlock not checked"
fi
if command -v fish >/dev/null; then
  fish -n "$REPO/completions/rlock.fish" || fail "fish: syntax error in completions/rlock.fish"
  before=$checked
  expect fish "rlock ''" "acquire${nl}release${nl}renew${nl}run${nl}status" "rlock "
  expect fish "rlock acquire --t" "--timeout${nl}--tls${nl}--ttl" "rlock acquire --t"
  expect fish "rlock status ''" "build cache${nl}deploy-prod${nl}nightly-report${nl}odd\"quote" "rlock status "
  expect fish "rlock status o" "odd\"quote" "rlock status o"
  expect fish "rlock release --force n" "nightly-report" "rlock release --force n"
  expect fish "rlock --connect-timeout 2 status n" "nightly-report" "rlock --connect-timeout 2 status n"
  # run's options after the name, and the command's own after its word.
  expect fish "rlock run job --w" "--wait" "rlock run job --w"
  expect fish "rlock run job -w 5s ls --almost-al" "--almost-all" "rlock run job -w 5s ls --almost-al"
  expect fish "rlock run job -- --w" "" "rlock run job -- --w"
  expect fish "rlock run job -- ls --almost-al" "--almost-all" "rlock run job -- ls --almost-al"
  expect fish "rlock run -nt 5s job ls --almost-al" "--almost-all" "rlock run -nt 5s job ls --almost-al"
  echo "fish: completions/rlock.fish parses; $((checked - before)) completions checked"
else
  echo "fish: not installed, completions/rlock.fish not checked"
fi

if ((failures)); then
  echo "completion.sh: $failures of $checked checks failed" >&2
  exit 1
fi
echo "completion: all $checked checks passed"
