#!/usr/bin/env bats
# A deployment that cannot give the replica acknowledgements asked for is
# unavailable: an acquire without -w says so (69) after riding it out like
# any outage, instead of taking and giving back the lock forever.

load helpers

@test "replicas: without -w, a grant no replica can acknowledge ends in 69, not a wait forever" {
  # This server has no replica at all; --replicas 1 can never be met.
  RL_TIMEOUT=60 rl 69 --replicas 1 acquire never-acked -t 5s
  assert_equal "${#stderr_lines[@]}" 1
  assert_stderr --partial "0 of 1 replicas acknowledged"
  # Nothing is left held: the grant was given back each time.
  rl 1 status never-acked
  # -n gives up at once, as before.
  rl 69 --replicas 1 acquire never-acked -n
}
