#include <sys/prctl.h>

#include "cli/cli.h"

int main(int argc, char** argv) {
  // First thing, before any password is read: a crash must never write the
  // Redis password (or a token) into a core file, and no other process of
  // the same user may ptrace us or read our memory through /proc. The
  // command `run` starts is dumpable again: execve of a program that is not
  // set-user-ID resets the flag.
  prctl(PR_SET_DUMPABLE, 0);
  return rlock::cli::main(argc, argv);
}
