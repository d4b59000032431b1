# bash completion for rlock(1)                              -*- shell-script -*-
# Installed as /usr/share/bash-completion/completions/rlock. Completes the
# commands, each command's options, file names for the options that take a
# file, and lock names (from `rlock --json status`, asked of the server the
# command line so far points at, and only if it answers within a second).

_rlock_commands="run acquire renew release status"
_rlock_global_opts="-u --url --prefix --user --password-file --sentinel-user
  --sentinel-password-file --replicas --tls --cacert --cacertdir --cert --key --sni --insecure
  --connect-timeout --config --show-command --json -v --verbose -q --quiet -h --help"
_rlock_lock_opts="-t --ttl -n --nonblock -w --wait --timeout -E --conflict-exit-code -s --shared
  -l --limit --owner"
# Options that take a value (the next word is theirs, not a positional).
_rlock_valued="-u --url --prefix --user --password-file --sentinel-user --sentinel-password-file
  --replicas --cacert --cacertdir --cert --key --sni --connect-timeout --config -t --ttl -w --wait --timeout -E --conflict-exit-code -l --limit
  --owner -c --kill-after --min-hold --max-hold --token --token-file --holder"

# The options of one command (global options are valid after it too).
_rlock_command_opts() {
  case "$1" in
    run) echo "$_rlock_lock_opts -c --kill-after --min-hold --max-hold" ;;
    acquire) echo "$_rlock_lock_opts" ;;
    renew) echo "--token --token-file -t --ttl" ;;
    release) echo "--token --token-file --force --holder" ;;
    status) echo "-t --ttl" ;;
  esac
}

# Lock names under the prefix, from the server the typed options point at.
# Only the connection options are passed on, so nothing else is changed.
# A word as the shell will pass it: without the quotes around it, or
# around the value of an --option='...' (a URL is often quoted).
_rlock_unquote() {
  local word="$1" head=""
  if [[ "$word" == --*=* ]]; then
    head="${word%%=*}="
    word="${word#*=}"
  fi
  if [[ ${#word} -ge 2 && ( "$word" == \'*\' || "$word" == \"*\" ) ]]; then
    word="${word:1:${#word}-2}"
  fi
  printf '%s' "$head$word"
}

_rlock_lock_names() {
  local bin="${words[0]}" i word conn=()
  # shellcheck disable=SC2088  # a literal "~/" typed on the command line
  if [[ "$bin" == "~/"* ]]; then bin="$HOME/${bin#\~/}"; fi
  if ! type -P "$bin" >/dev/null 2>&1; then bin=rlock; fi
  for ((i = 1; i < cword; i++)); do
    word="$(_rlock_unquote "${words[i]}")"
    case "$word" in
      -u | --url | --prefix | --user | --password-file | --sentinel-user | \
        --sentinel-password-file | --cacert | --cacertdir | --cert | --key | --sni | --config)
        if ((i + 1 < cword)); then conn+=("$word" "$(_rlock_unquote "${words[i + 1]}")"); fi
        ((i++))
        ;;
      --url=* | --prefix=* | --user=* | --password-file=* | --sentinel-user=* | \
        --sentinel-password-file=* | --cacert=* | --cacertdir=* | --cert=* | --key=* | --sni=* | \
        --config=* | --tls | --insecure)
        conn+=("$word")
        ;;
      # The line's own is left out: completion gives its own 0.5 s, and rlock
      # refuses the option twice (nothing would be offered).
      --connect-timeout) ((i++)) ;;
      --connect-timeout=*) ;;
    esac
  done
  # Only names whose JSON escapes are \" and \\: one with a control character
  # or a byte that is not UTF-8 (\n, \u...) is not offered, since decoding
  # only those two gave another name (new\nline for a newline).
  # 1 s: completion must never hang on an unreachable server.
  timeout 1 "$bin" "${conn[@]}" --connect-timeout 0.5 --quiet --json status 2>/dev/null </dev/null |
    grep -o '"name":"\([^"\\]\|\\["\\]\)*"' | sed -e 's/^"name":"//' -e 's/"$//' -e 's/\\"/"/g' \
    -e 's/\\\\/\\/g'
}

# The index in COMP_WORDS where word $1 of `words` begins: bash splits a
# word at '=' and ':' (`--ttl=5s`, a URL), `words` has it whole.
_rlock_raw_index() {
  local j=0 i=0 piece=""
  while ((j < $1 && i < ${#COMP_WORDS[@]})); do
    piece+="${COMP_WORDS[i]}"
    ((i++))
    if [[ "$piece" == "${words[j]}" ]]; then
      piece=""
      ((j++))
    fi
  done
  echo "$i"
}

_rlock() {
  local cur="${COMP_WORDS[COMP_CWORD]}" prev="" words cword
  ((COMP_CWORD > 0)) && prev="${COMP_WORDS[COMP_CWORD - 1]}"
  COMPREPLY=()
  # The words as typed, an option's "=value" and a URL's ":port" included
  # (bash-completion's helper); without it, as bash split them.
  if declare -F _get_comp_words_by_ref >/dev/null; then
    _get_comp_words_by_ref -n =: words cword
  else
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
  fi

  # The value of an option: files where a file is wanted, nothing to guess
  # for durations, numbers and free text.
  case "$prev" in
    --password-file | --sentinel-password-file | --cacert | --cert | --key | --config | \
      --token-file)
      compopt -o filenames 2>/dev/null
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      return 0
      ;;
    --cacertdir)
      compopt -o filenames 2>/dev/null
      mapfile -t COMPREPLY < <(compgen -d -- "$cur")
      return 0
      ;;
    -c)
      mapfile -t COMPREPLY < <(compgen -c -- "$cur")
      return 0
      ;;
    --replicas)
      mapfile -t COMPREPLY < <(compgen -W "all 0 1 2" -- "$cur")
      return 0
      ;;
  esac
  if [[ " ${_rlock_valued//$'\n'/ } " == *" $prev "* ]]; then
    return 0
  fi

  # Find the command word and the positionals typed after it.
  local i word command="" positionals=0 dashdash=0 program=0
  for ((i = 1; i < cword; i++)); do
    word="${words[i]}"
    if ((dashdash)); then
      ((positionals++))
      ((positionals == 2)) && program=$i
      continue
    fi
    case "$word" in
      --) [[ "$command" == run ]] && dashdash=1 ;;
      -*)
        if [[ " ${_rlock_valued//$'\n'/ } " == *" $word "* ]]; then
          ((i++))
        elif [[ "$word" =~ ^-[A-Za-z]{2,}$ && " ${_rlock_valued//$'\n'/ } " == *" -${word: -1} "* ]]; then
          ((i++)) # a cluster whose last letter takes a value: -nt 5s
        fi
        ;;
      *)
        if [[ -z "$command" ]]; then
          command="$word"
        else
          ((positionals++))
          ((positionals == 2)) && program=$i
        fi
        ;;
    esac
  done

  if [[ -z "$command" ]]; then
    if [[ "$cur" == -* ]]; then
      mapfile -t COMPREPLY < <(compgen -W "$_rlock_global_opts -V --version" -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -W "$_rlock_commands" -- "$cur")
    fi
    return 0
  fi

  # `run NAME [--] COMMAND...`: after the name, complete the command to run
  # (`run -- NAME`: the name first).
  if [[ "$command" == run ]] && ((positionals >= 2 || (dashdash && positionals >= 1))); then
    if ((positionals >= 2)) && declare -F _command_offset >/dev/null; then
      # The command's own arguments, as bash-completion completes them
      # (as sudo's are).
      _command_offset "$(_rlock_raw_index "$program")"
      return 0
    fi
    compopt -o filenames 2>/dev/null
    if ((positionals == 1)); then
      mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u)
    else
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
    return 0
  fi
  if [[ "$command" == run ]] && ((positionals == 1)) && [[ "$cur" != -* ]]; then
    mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u)
    return 0
  fi

  if [[ "$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_rlock_command_opts "$command") $_rlock_global_opts" \
      -- "$cur")
    return 0
  fi

  case "$command" in
    run | acquire | renew | release)
      ((positionals == 0)) || return 0
      ;;
    status) ;;
    *) return 0 ;;
  esac
  # Filtered by hand, not with compgen -W, which would expand and unquote
  # names; names may hold spaces and quotes, so what is inserted is quoted.
  local name
  while IFS= read -r name; do
    [[ -n "$name" && "$name" == "$cur"* ]] && COMPREPLY+=("$(printf '%q' "$name")")
  done < <(_rlock_lock_names)
  return 0
}

complete -F _rlock rlock
