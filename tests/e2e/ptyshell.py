#!/usr/bin/python3
"""Drives an interactive `bash --norc -i` on a fresh pseudo-terminal, as a
person at a terminal would, for the job-control suite (135).

Usage: ptyshell.py STEP...   where each STEP is one of
  >TEXT    type TEXT, where \\n is Enter, \\x1a Ctrl-Z, \\x03 Ctrl-C (any
           other backslash pair is typed as it is)
  ?REGEX   wait until REGEX matches what the terminal printed since the last
           match (which it then consumes); fails after PTY_TIMEOUT seconds
           (default 15)
  ~SECS    let SECS seconds pass, reading the terminal meanwhile

The prompt is "PROMPT$ " (step "?PROMPT\\$ $" waits for it). Everything the
terminal printed goes to stdout at the end; the exit status is 1 when a wait
timed out (naming the step on stderr), else 0. Whatever is left of the
terminal's session (stopped jobs, their commands, guardians) is killed
before exiting, so that nothing outlives the test.
"""

import os
import pty
import re
import select
import signal
import sys
import time

TIMEOUT = float(os.environ.get("PTY_TIMEOUT", "15"))


def unescape(text):
    """TEXT as bytes, with \\n, \\r and \\xHH turned into what they name and
    every other backslash pair left alone (a line quoted by printf %q keeps
    its quoting)."""

    def one(m):
        e = m.group(1)
        if e == "n":
            return "\n"
        if e == "r":
            return "\r"
        if e.startswith("x"):
            return chr(int(e[1:], 16))
        return m.group(0)

    return re.sub(r"\\(x[0-9a-fA-F]{2}|.)", one, text, flags=re.S).encode()


def session_members(sid):
    """Pids of the processes of session `sid` (from /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        # state ppid pgrp session ...
        if int(fields[3]) == sid:
            pids.append(int(entry))
    return pids


def main(steps):
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["PS1"] = "PROMPT$ "
        os.environ.pop("PROMPT_COMMAND", None)
        os.execvp("bash", ["bash", "--norc", "--noprofile", "-i"])

    transcript = []
    unread = ""

    def read_for(seconds, until=None):
        """Reads the terminal for `seconds`, or until `until` matches."""
        nonlocal unread
        end = time.monotonic() + seconds
        while True:
            if until is not None:
                m = until.search(unread)
                if m:
                    unread = unread[m.end() :]
                    return True
            left = end - time.monotonic()
            if left <= 0:
                return until is None
            ready, _, _ = select.select([fd], [], [], min(left, 0.1))
            if not ready:
                continue
            try:
                data = os.read(fd, 4096).decode(errors="replace")
            except OSError:  # the shell is gone: nothing more will come
                data = ""
            if not data:
                time.sleep(min(left, 0.1))
                continue
            transcript.append(data)
            unread += data

    ok = read_for(TIMEOUT, re.compile(r"PROMPT\$ $"))
    failed = None if ok else "the first prompt"
    for step in steps if ok else []:
        kind, arg = step[0], step[1:]
        if kind == ">":
            os.write(fd, unescape(arg))
        elif kind == "?":
            if not read_for(TIMEOUT, re.compile(arg)):
                failed = step
                break
        elif kind == "~":
            read_for(float(arg))
        else:
            failed = f"unknown step {step!r}"
            break

    # Leave nothing behind: the whole session, stopped or not.
    for member in session_members(pid):
        try:
            os.kill(member, signal.SIGKILL)
        except OSError:
            pass
    os.close(fd)
    os.waitpid(pid, 0)
    sys.stdout.write("".join(transcript))
    if failed:
        sys.stderr.write(f"ptyshell: timed out waiting for {failed}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
