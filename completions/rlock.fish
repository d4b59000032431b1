# fish completion for rlock(1). Installed as
# /usr/share/fish/vendor_completions.d/rlock.fish. Completes commands,
# options, file names for the options that take a file, and lock names (from
# `rlock --json status`, asked of the server the command line points at, and
# only if it answers within a second).

set -l __rlock_commands run acquire renew release status

# Valued options: their value is not a positional.
set -g __rlock_valued -u --url --prefix --user --password-file --sentinel-user \
    --sentinel-password-file --replicas --cacert --cacertdir --cert --key --sni --connect-timeout --config -t --ttl -w --wait --timeout -E --conflict-exit-code \
    -l --limit --owner -c --kill-after --min-hold --max-hold --token --token-file --holder

# Scans the tokens typed before the cursor: prints the command word and then
# the positionals (option values skipped), one per line, each as
# "w:INDEX:WORD" (INDEX: its place among the tokens, the first being 1);
# "--" once options end ("--" typed); "c" if `-c CMD` was given (run's
# command is then a shell string, not positionals).
function __rlock_scan
    set -l tokens (commandline -opc)
    set -l skip 0
    set -l dashdash 0
    set -l i 1
    for token in $tokens[2..-1]
        set i (math $i + 1)
        if test $skip = 1
            set skip 0
            continue
        end
        if test $dashdash = 0
            if test "$token" = --
                set dashdash 1
                printf '%s\n' --
                continue
            end
            if contains -- $token $__rlock_valued
                test "$token" = -c; and printf '%s\n' c
                set skip 1
                continue
            end
            # A cluster of letters whose last one takes a value (-nt 5s).
            if string match -qr -- '^-[A-Za-z]{2,}$' $token
                and contains -- -(string sub -s -1 -- $token) $__rlock_valued
                string match -qr -- 'c$' $token; and printf '%s\n' c
                set skip 1
                continue
            end
            if string match -q -- '-*' $token
                string match -qr -- '^(-c.+|--c=.*)$' $token; and printf '%s\n' c
                continue
            end
        end
        printf 'w:%s:%s\n' $i $token
    end
end

function __rlock_words
    __rlock_scan | string replace -rf '^w:[0-9]+:' ''
end

function __rlock_no_command
    test (count (__rlock_words)) -eq 0
end

# True where a lock name is wanted: the first positional of run, acquire,
# renew and release; any positional of status.
function __rlock_wants_name
    set -l words (__rlock_words)
    switch "$words[1]"
        case status
            return 0
        case run acquire renew release
            test (count $words) -eq 1
            return
    end
    return 1
end

# True once `run NAME` is typed: what follows is the command to run (file
# names allowed).
function __rlock_in_run_command
    set -l words (__rlock_words)
    test "$words[1]" = run; and test (count $words) -ge 2
end

# Prints how many words `run` has (its name, the program, its arguments);
# fails for another command, or `run -c CMD` (no program then).
function __rlock_run_count
    set -l scan (__rlock_scan)
    contains -- c $scan; and return 1
    set -l words (string replace -rf '^w:[0-9]+:' '' $scan)
    test "$words[1]" = run; or return 1
    math (count $words) - 1
end

# True right after `run NAME` (or `run NAME --`): the program to run.
function __rlock_run_wants_command
    test "$(__rlock_run_count)" = 1
end

# True in the arguments of the command `run` runs (its program typed):
# completed as that command's own.
function __rlock_in_run_arguments
    set -l n (__rlock_run_count); or return 1
    test $n -ge 2
end

# The command `run` runs, from its program to the cursor, completed as that
# command's own (git's subcommands, ls' options).
function __rlock_complete_run_arguments
    set -l program (__rlock_scan | string match -r '^w:.*')[3]
    set -l at (string split -f2 : -- $program)
    set -l tokens (commandline -opc)
    complete -C (string join ' ' -- (string escape -- $tokens[$at..-1]) (commandline -ct))
end

# True where rlock's options may be typed: not after "--", not in the
# command `run` runs.
function __rlock_options_here
    set -l scan (__rlock_scan)
    contains -- -- $scan; and return 1
    set -l words (string replace -rf '^w:[0-9]+:' '' $scan)
    test "$words[1]" = run; and test (count $words) -ge 3; and return 1
    return 0
end

function __rlock_lock_names
    set -l tokens (commandline -opc)
    set -l bin $tokens[1]
    command -q $bin; or test -x "$bin"; or set bin rlock
    set -l conn
    set -l i 2
    while test $i -le (count $tokens)
        set -l token $tokens[$i]
        switch $token
            case -u --url --prefix --user --password-file --sentinel-user \
                --sentinel-password-file --cacert --cacertdir --cert --key --sni --config
                set i (math $i + 1)
                if test $i -le (count $tokens)
                    set conn $conn $token $tokens[$i]
                end
            case '--url=*' '--prefix=*' '--user=*' '--password-file=*' '--sentinel-user=*' \
                '--sentinel-password-file=*' '--cacert=*' \
                '--cacertdir=*' '--cert=*' '--key=*' '--sni=*' \
                '--config=*' --tls --insecure
                set conn $conn $token
            # The line's own is left out: completion gives its own 0.5 s,
            # and rlock refuses the option twice (nothing would be offered).
            case --connect-timeout
                set i (math $i + 1)
        end
        set i (math $i + 1)
    end
    # Only names whose JSON escapes are \" and \\: one with a control character
    # or a byte that is not UTF-8 (\n, \u...) is not offered, since decoding
    # only those two gave another name (new\nline for a newline).
    # 1 s: completion must never hang on an unreachable server.
    timeout 1 $bin $conn --connect-timeout 0.5 --quiet --json status 2>/dev/null </dev/null |
        string match -ra '"name":"(?:[^"\\\\]|\\\\["\\\\])*"' |
        string replace -r '^"name":"(.*)"$' '$1' |
        string replace -a '\\"' '"' |
        string replace -a '\\\\' '\\'
end

# No file names except where a file is wanted and after `run NAME`.
complete -c rlock -n 'not __rlock_in_run_command' -f

# Commands.
complete -c rlock -n __rlock_no_command -a run -d 'Run a command while holding a lock'
complete -c rlock -n __rlock_no_command -a acquire -d 'Take a lock and print its token'
complete -c rlock -n __rlock_no_command -a renew -d 'Extend a lock held with TOKEN'
complete -c rlock -n __rlock_no_command -a release -d 'Release a lock (token or --force)'
complete -c rlock -n __rlock_no_command -a status -d 'Show holders and waiters of locks'
complete -c rlock -n __rlock_no_command -s V -l version -d 'Print version information'
complete -c rlock -n __rlock_options_here -s h -l help -d 'Print help'

# Lock names, and the command to run after `run NAME`.
complete -c rlock -n __rlock_wants_name -a '(__rlock_lock_names)' -d 'lock'
complete -c rlock -n __rlock_run_wants_command -a '(__fish_complete_command)'
complete -c rlock -n __rlock_in_run_arguments -f -a '(__rlock_complete_run_arguments)'

# Global options (before or after the command).
complete -c rlock -n __rlock_options_here -s u -l url -x -d 'Redis URL (redis://, rediss://, unix://, redis-sentinel://)'
complete -c rlock -n __rlock_options_here -l prefix -x -d 'Key namespace (default rlock:)'
complete -c rlock -n __rlock_options_here -l user -x -d 'ACL user name'
complete -c rlock -n __rlock_options_here -l password-file -r -F -d 'Read the password from this file'
complete -c rlock -n __rlock_options_here -l sentinel-user -x -d 'ACL user name for the Sentinels'
complete -c rlock -n __rlock_options_here -l sentinel-password-file -r -F -d "Read the Sentinels' password from this file"
complete -c rlock -n __rlock_options_here -l replicas -x -a 'all 0 1 2' -d 'Replicas that must acknowledge (default all)'
complete -c rlock -n __rlock_options_here -l tls -d 'Use TLS'
complete -c rlock -n __rlock_options_here -l cacert -r -F -d 'CA certificate file'
complete -c rlock -n __rlock_options_here -l cacertdir -x -a '(__fish_complete_directories)' -d 'Directory of CA certificates'
complete -c rlock -n __rlock_options_here -l cert -r -F -d 'Client certificate (PEM)'
complete -c rlock -n __rlock_options_here -l key -r -F -d 'Client private key (PEM)'
complete -c rlock -n __rlock_options_here -l sni -x -d 'TLS server name'
complete -c rlock -n __rlock_options_here -l insecure -d "Don't verify the server's certificate"
complete -c rlock -n __rlock_options_here -l connect-timeout -x -d 'Per connection attempt (default 2s)'
complete -c rlock -n __rlock_options_here -l config -r -F -d 'Config file'
complete -c rlock -n __rlock_options_here -l show-command -d 'Store full command lines in Redis (default: program names)'
complete -c rlock -n __rlock_options_here -l json -d 'One JSON document on stdout'
complete -c rlock -n __rlock_options_here -s v -l verbose -d 'More on stderr'
complete -c rlock -n __rlock_options_here -s q -l quiet -d 'Less on stderr'

# Lock options (acquire and run).
set -l __rlock_locking '__fish_seen_subcommand_from run acquire; and __rlock_options_here'
complete -c rlock -n $__rlock_locking -s t -l ttl -x -d 'Lease length (default 30s)'
complete -c rlock -n $__rlock_locking -s n -l nonblock -d 'Fail at once if the lock is busy'
complete -c rlock -n $__rlock_locking -s w -l wait -x -d 'Give up waiting after DURATION'
complete -c rlock -n $__rlock_locking -l timeout -x -d 'Give up waiting after DURATION'
complete -c rlock -n $__rlock_locking -s E -l conflict-exit-code -x -d 'Exit code when busy (default 75)'
complete -c rlock -n $__rlock_locking -s s -l shared -d 'Shared (read) lock'
complete -c rlock -n $__rlock_locking -s l -l limit -x -d 'Counting semaphore: up to N holders'
complete -c rlock -n $__rlock_locking -l owner -x -d 'Free text shown by status'

# Run options.
set -l __rlock_running '__fish_seen_subcommand_from run; and __rlock_options_here'
complete -c rlock -n $__rlock_running -s c -x -a '(__fish_complete_command)' -d 'Run CMD with /bin/sh -c'
complete -c rlock -n $__rlock_running -l kill-after -x -d 'Grace between SIGTERM and SIGKILL'
complete -c rlock -n $__rlock_running -l min-hold -x -d 'Keep the lock at least DURATION'
complete -c rlock -n $__rlock_running -l max-hold -x -d 'Stop renewing after DURATION'

# renew and release.
complete -c rlock -n '__fish_seen_subcommand_from renew release' -l token -x -d 'The token printed by acquire (- reads stdin)'
complete -c rlock -n '__fish_seen_subcommand_from renew release' -l token-file -r -F -d 'Read the token from this file'
complete -c rlock -n '__fish_seen_subcommand_from renew' -s t -l ttl -x -d 'New lease length from now'
complete -c rlock -n '__fish_seen_subcommand_from status' -s t -l ttl -x -d 'Quorum: the TTL the locks are taken with'
complete -c rlock -n '__fish_seen_subcommand_from release' -l force -d 'Evict the holder(s) whatever their token'
complete -c rlock -n '__fish_seen_subcommand_from release' -l holder -x -d 'With --force: evict only this holder id'
