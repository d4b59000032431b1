#!/usr/bin/env bats
# Arguments reach the command and the lock verbatim: CLI11 must not take
# `[a,b]` apart, eat `--` or `++`, or let one option swallow the next words.
# Numbers are range-checked; typos get a suggestion.

load helpers

# Words CLI11 treats specially somewhere: vector syntax, separators,
# assignments, subcommand names and terminators, option look-alikes.
TRICKY=('[1, 2]' '[]' '[a,b]' 'a,b' '{x}' '{}' 'k=v' '--' '++' '-l' '--ttl=5s' 'status' '')

@test "arguments: every byte of every argument after -- reaches the command" {
  rl 0 run args-dash -- printf '%s|' "${TRICKY[@]}"
  assert_output '[1, 2]|[]|[a,b]|a,b|{x}|{}|k=v|--|++|-l|--ttl=5s|status||'
  rl 0 run args-dash -- jq -cn '[1,2]'
  assert_output '[1,2]'
}

@test "arguments: the command's words are verbatim without -- too, and after options" {
  rl 0 run args-plain printf '%s|' "${TRICKY[@]}"
  assert_output '[1, 2]|[]|[a,b]|a,b|{x}|{}|k=v|--|++|-l|--ttl=5s|status||'
  rl 0 -q run -t 5s args-plain -w 1s -- printf '%s|' '[x]' -c
  assert_output '[x]|-c|'
}

@test "arguments: run -- -x -- COMMAND: the -- after a name that starts with - ends the name" {
  rl 0 run -n -- -x -- printf '%s|' a -- b
  assert_output 'a|--|b|'
  # Without a -- before the name, a -- after the separator is the command's.
  rl 127 run args-dd -- -- true
  assert_stderr "rlock: error: cannot run '--': No such file or directory"
  rl 64 run -- -x --
  assert_stderr --partial "run: a command is required"
}

@test "arguments: a value option given twice is one clear usage error" {
  rl 64 acquire twice -t 5s -t 6s
  assert_equal "$stderr" "rlock: error: --ttl was given more than once (see 'rlock --help')"
  rl 64 run twice -w 1s --wait 2s -- true
  assert_equal "$stderr" "rlock: error: --wait was given more than once (see 'rlock --help')"
  rl 1 status twice
}

@test "arguments: a NAME like [a,b] is one lock, for every command" {
  local name token
  for name in '[a,b]' '[]' '++' '{a,b}' 'k=v' 'a,b' 'status'; do
    rl 0 acquire "$name" -n
    token="$output"
    rl 0 status "$name" --json
    assert_equal "$(jq -r .name <<<"$output")" "$name"
    rl 0 renew "$name" --token "$token"
    rl 0 release "$name" --token "$token"
    rl 1 status "$name"
  done
  rl 0 acquire '[a,b]'
  rl 0 status '[a,b]' --json
  assert_equal "$(jq -r .name <<<"$output")" '[a,b]'
  # Two names, one held: exit 1, and both are reported.
  rl 1 status '[a,b]' a --json
  assert_equal "$(jq -c '[.locks[].name]' <<<"$output")" '["[a,b]","a"]'
  # A NAME that looks like an option follows --.
  rl 0 acquire -- -x
  rl 0 status -- -x
  rl 0 run -n -- -x-run printf ok
  assert_output ok
}

@test "arguments: -u takes exactly one value each time, verbatim" {
  rl 0 acquire url-one
  # -u must not swallow the lock names after it.
  rl 0 status -u "$RLOCK_URL" url-one
  rl 0 status url-one -u "$RLOCK_URL" --json
  assert_equal "$(jq -r .name <<<"$output")" url-one
  # A bracketed URL is not a list of URLs.
  rl_usage_error -u "[$RLOCK_URL]" status url-one
  assert_stderr --partial "[$RLOCK_URL]"
}

@test "arguments: a comma in -u says where a quorum's list goes" {
  rl_usage_error -u "redis://127.0.0.1:1,redis://127.0.0.1:2" status x
  assert_stderr --partial 'comma list'
  assert_stderr --partial 'its own --url, or the comma list in RLOCK_URL'
  refute_stderr --partial 'must be a'
}

@test "arguments: huge and out-of-range numbers are usage errors naming the option" {
  local huge
  huge="$(printf '9%.0s' {1..300})"
  rl_usage_error acquire num -t "$huge"
  assert_stderr --partial -- '--ttl'
  rl_usage_error acquire num -w "${huge}ms"
  rl_usage_error run num --max-hold "$huge" -- true
  rl_usage_error --connect-timeout "$huge" status num
  RLOCK_CONNECT_TIMEOUT="$huge" rl_usage_error status num
  assert_stderr --partial RLOCK_CONNECT_TIMEOUT
  # A bad prefix is named where it came from (before, always --prefix).
  RLOCK_PREFIX='a{b' rl_usage_error status num
  assert_stderr --partial "invalid RLOCK_PREFIX 'a{b'"
  RLOCK_PREFIX='a{b' rl_usage_error --prefix 'c}' status num
  assert_stderr --partial "invalid --prefix 'c}'"
  rl_usage_error acquire num -E 256
  assert_stderr --partial -- '--conflict-exit-code'
  rl_usage_error acquire num -E "$huge"
  rl_usage_error acquire num -l "$huge"
  assert_stderr --partial -- '--limit'
  rl_usage_error acquire num -l 0x10
}

@test "arguments: a mistyped command suggests the right one" {
  rl_usage_error stauts x
  assert_stderr --partial "did you mean 'status'"
  rl_usage_error -u "$RLOCK_URL" relase x
  assert_stderr --partial "did you mean 'release'"
  rl_usage_error frobnicate
  refute_stderr --partial 'did you mean'
}

@test "arguments: --help lists every global option, whatever else the line names" {
  # Only the options a line names are registered (start-up cost); help must
  # still show them all, in every form that asks for it.
  local opt
  local -a global=(--url --prefix --user --password-file --sentinel-user
    --sentinel-password-file --replicas --tls --cacert --cacertdir --cert --key --sni
    --insecure --connect-timeout --config --show-command --json --verbose --quiet --version)
  for form in --help -h '-q --help' '--json -h'; do
    # shellcheck disable=SC2086
    rl 0 $form
    for opt in "${global[@]}"; do assert_output --partial "$opt"; done
  done
  # And a global option is taken wherever it stands, in any spelling.
  rl 0 -qv --json status -u "$RLOCK_URL" --prefix=args-help: --connect-timeout=2s
  assert_output --partial '"locks"'
}

@test "arguments: run --help prints one usage block, with both forms" {
  rl 0 run --help
  assert_equal "$(grep -c 'Usage:' <<<"$output")" 1
  assert_output --partial 'Usage: rlock [GLOBAL] run NAME'
  assert_output --partial "-c 'SHELL COMMAND'"
}

@test "arguments: the token can come from a file or stdin instead of argv" {
  local token
  rl 0 acquire tok
  token="$output"
  (umask 077 && echo "$token" >"$BATS_TEST_TMPDIR/token")
  rl 0 renew tok --token-file "$BATS_TEST_TMPDIR/token" --ttl 20s
  run --separate-stderr timeout 20 "$RLOCK" renew tok --token - <<<"$token"
  assert_success
  run --separate-stderr timeout 20 "$RLOCK" release tok --token - <<<"$token"
  assert_success
  rl 1 status tok
  rl 0 acquire tok
  (umask 077 && echo "$output" >"$BATS_TEST_TMPDIR/token")
  rl 0 release tok --token-file "$BATS_TEST_TMPDIR/token"
  rl_usage_error release tok --token x --token-file "$BATS_TEST_TMPDIR/token"
  rl_usage_error release tok --token-file "$BATS_TEST_TMPDIR/missing"
  run --separate-stderr timeout 20 "$RLOCK" release tok --token - </dev/null
  assert_equal "$status" 64
}

@test "arguments: an empty --token and an --owner over 256 bytes are usage errors" {
  rl_usage_error release args-empty --token ''
  assert_stderr --partial 'the token is empty'
  rl_usage_error renew args-empty --token ''
  rl_usage_error acquire args-owner --owner "$(printf 'o%.0s' {1..257})"
  assert_stderr --partial 'at most 256'
  rl 0 acquire args-owner -n --owner "$(printf 'o%.0s' {1..256})"
}

@test "arguments: run -c with no shell command (or a blank one) is a usage error, and takes no lock" {
  rl_usage_error run c-missing -c
  assert_stderr "rlock: error: -c: a value is required (see 'rlock --help')"
  rl_usage_error run c-missing -t 5s -c
  rl_usage_error run c-missing -c --
  rl_usage_error run c-missing -c -- true
  rl_usage_error run c-missing -nc
  # Any option that takes a value, last or before --.
  rl_usage_error acquire c-missing --owner
  assert_stderr "rlock: error: --owner: a value is required (see 'rlock --help')"
  rl_usage_error acquire c-missing -t -- x
  rl_usage_error run c-missing -c ''
  assert_stderr "rlock: error: run: -c needs a shell command ('-c' was given none)"
  rl_usage_error run c-missing -c '  '
  # Never acquired: no fence was ever handed out.
  rl 1 status c-missing
  assert_output "lock 'c-missing': free (last fence 0)"
  rl 0 run c-missing -c 'exit 0'
}

@test "arguments: words a command does not take are named in the order they were given" {
  rl 64 acquire a b c
  assert_equal "$stderr" "rlock: error: unexpected arguments: 'b' 'c' (see 'rlock --help')"
  rl 64 renew a --token t -- b
  assert_equal "$stderr" "rlock: error: unexpected argument 'b' (see 'rlock --help')"
  rl 64 release x --token t 'y z'
  assert_equal "$stderr" "rlock: error: unexpected argument 'y z' (see 'rlock --help')"
  # Nothing was taken.
  rl 1 status a
}

@test "arguments: an unknown option is named, with the option it likely meant, before it can shift a name" {
  # --tll took no value, so 5s was the lock's name and x an extra word.
  rl 64 acquire --tll 5s unknown-x
  assert_equal "$stderr" "rlock: error: unknown option '--tll'; did you mean '--ttl'? (see 'rlock acquire --help')"
  rl 64 renew a --bogus 1
  assert_equal "$stderr" "rlock: error: unknown option '--bogus' (see 'rlock renew --help')"
  # A global option is suggested although the line did not build it.
  rl 64 status --jsn
  assert_equal "$stderr" "rlock: error: unknown option '--jsn'; did you mean '--json'? (see 'rlock status --help')"
  rl 64 acquire -Z unknown-x
  assert_equal "$stderr" "rlock: error: unknown option '-Z' (see 'rlock acquire --help')"
  # A misspelt option's value is not said back (it may be a secret).
  rl 64 acquire --passwrd=hunter2 unknown-x
  assert_equal "$stderr" "rlock: error: unknown option '--passwrd' (see 'rlock acquire --help')"
  # run: the typo is not taken for the command, and nothing ran.
  rl 64 run unknown-x --kil-after 1 -- touch "$BATS_TEST_TMPDIR/ran"
  assert_stderr --partial "unknown option '--kil-after'; did you mean '--kill-after'?"
  assert [ ! -e "$BATS_TEST_TMPDIR/ran" ]
  # Before the command word, in a cluster, after an unknown letter: never
  # the value.
  local words
  for words in "--passwrd=hunter2 status" "--tokn=hunter2 release unknown-x" \
    "acquire -nZhunter2 unknown-x" "-qahunter2 status" "-nZhunter2 acquire unknown-x" \
    "status -xhunter2" "acquire unknown-x --tls=hunter2" "renew unknown-x -token hunter2" \
    "-url redis://:hunter2@127.0.0.1:1/0 status" "redis://:hunter2@127.0.0.1:1/0 status"; do
    # shellcheck disable=SC2086 # the words of the command line
    rl 64 $words
    refute_stderr --partial hunter2
  done
  # Another command's option is said to be one.
  rl 64 release unknown-x --ttl 5s --force
  assert_stderr --partial "unknown option '--ttl'; it is an option of run, acquire, renew and status, not of release"
  # A value that starts like an option is a value; a line asking for help gets it.
  rl 0 acquire --owner -abc -t 5s unknown-owner
  rl 0 acquire --tll unknown-x --help
  assert_output --partial "Usage: rlock acquire"
  # After --, a word that looks like an option is a name or the command's.
  rl 1 status -- --tll
  rl 0 run unknown-x -- sh -c 'echo "$1"' sh --tll
  assert_output -- --tll
  rl 1 status unknown-x 5s
}

@test "arguments: a password option (--password, --sentinel-password, redis-cli's -a) is refused, never said back" {
  local option
  for option in --password --password=hunter2 --sentinel-password=hunter2 -a -ahunter2 -qahunter2; do
    rl 64 status "$option" hunter2
    assert_stderr --regexp "^rlock: error: there is no (--password|--sentinel-password|-a) option: a password on the command line is visible to every user in ps; use --(sentinel-)?password-file"
    refute_stderr --partial hunter2
    rl 64 "$option" hunter2 acquire secret-x
    refute_stderr --partial hunter2
  done
  rl 1 status secret-x
}

@test "arguments: unexpected arguments are said back without a token or a URL's password" {
  local token=0123456789abcdef0123456789abcdef
  rl 64 release -- -x --token "$token"
  assert_stderr --partial "unexpected arguments: '--token' '...'"
  rl 64 release -- -x "--token=$token" "redis://:s3cret@127.0.0.1:1/0"
  assert_stderr --partial "'--token=...' 'redis://127.0.0.1:1/0'"
  refute_stderr --partial "$token"
  refute_stderr --partial s3cret
}

@test "arguments: --option= is an empty value, never the next word" {
  # --owner= took --shared as the owner, and the lock was taken exclusive.
  rl 0 acquire args-empty --owner= --shared -t 30s --json
  assert_equal "$(json 'd["mode"]')" shared
  rl 0 status args-empty --json
  assert_equal "$(json '[h["owner"] for h in d["holders"]]')" '[""]'
  rl 0 acquire args-empty --shared -n
  # Before the command word too (the command word was taken as the prefix).
  rl 0 --prefix= --json status
  # And the empty value gets the option's own check.
  rl 64 acquire args-empty-ttl --ttl=
  assert_equal "$stderr" "rlock: error: --ttl: invalid duration '': empty (use e.g. 1500ms, 30s, 5m, 1h30m, 0.5)"
  rl 64 release args-empty --force --holder=
  assert_stderr --regexp "^rlock: error: --holder: the id is empty"
  rl 0 status args-empty --json
  assert_equal "$(json 'len(d["holders"])')" 2
}
