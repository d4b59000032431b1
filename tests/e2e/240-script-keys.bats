#!/usr/bin/env bats
# What the lock script leaves in Redis, and when its cheap paths may skip
# work: every key but the fencing counter has an expiry after every
# operation; a lock nobody holds or waits for leaves only that counter; the
# purge, skipped while no lease can have ended (purge_at in the meta hash),
# still removes a lease that ends earlier than the others.

load helpers

teardown() {
  kill_bg_pids
}

# expiring NAME: fails unless every key of NAME but :f has an expiry in the
# future (PTTL > 0), and :f has none.
expiring() {
  local key left
  while read -r key; do
    [[ -n "$key" ]] || continue
    left="$(rcli PTTL "$key")"
    if [[ "$key" == *:f ]]; then
      ((left == -1)) || fail "$key has an expiry ($left ms)"
    elif ((left <= 0)); then
      fail "$key does not expire (PTTL $left)"
    fi
  done <<<"$(rcli --scan --pattern "rlock:{$1}:*")"
}

@test "keys: every key but f expires after every operation; a free lock leaves only f" {
  rl 0 acquire k -t 30s
  local a="$output"
  expiring k
  bg_rlock w acquire k -w 20s -t 30s
  wait_waiters k 1
  expiring k
  rl 0 renew k --token "$a" -t 10s
  expiring k
  # The release hands the lock to w, which confirms it.
  rl 0 release k --token "$a"
  bg_wait w 0
  local w="$output"
  expiring k
  rl 0 status k
  expiring k
  rl 0 release k --token "$w"
  run lock_keys
  assert_output 'rlock:{k}:f'

  # A semaphore and a shared lock, both released by their last holder.
  rl 0 acquire sem -l 2
  local s1="$output"
  rl 0 acquire sem -l 2
  local s2="$output"
  expiring sem
  rl 0 release sem --token "$s1"
  expiring sem
  rl 0 release sem --token "$s2"
  rl 0 acquire sh --shared
  local r1="$output"
  rl 0 acquire sh --shared
  local r2="$output"
  expiring sh
  rl 0 release sh --token "$r1"
  expiring sh
  rl 0 release sh --token "$r2"
  run lock_keys
  assert_output $'rlock:{k}:f\nrlock:{sem}:f\nrlock:{sh}:f'

  # A forced release (the audit key stays), then a lock whose meta hash was
  # deleted under a holder: the busy reply writes a new one, with an expiry.
  rl 0 acquire fm
  rl 0 release fm --force
  expiring fm
  rl 0 acquire fm
  expiring fm
  rcli DEL 'rlock:{fm}:m' >/dev/null
  rl 75 acquire fm -n
  expiring fm
}

@test "keys: a killed waiter is purged although the holder's lease is much longer" {
  # The holder's 60 s lease is the earliest end the script knew before the
  # waiters joined; joining must lower it to the waiter's 3 s lease, or the
  # live waiter's re-checks (once a second, which also keep the queue's keys
  # alive) would never purge the killed one.
  rl 0 acquire dead-w -t 60s
  bg_rlock w1 acquire dead-w -w 30s
  wait_waiters dead-w 1
  kill -KILL "$(<"$BATS_TEST_TMPDIR/w1.pid")"
  bg_rlock w2 acquire dead-w -w 30s
  wait_waiters dead-w 2
  local i
  for ((i = 0; i < 50; i++)); do
    (($(rcli ZCARD 'rlock:{dead-w}:q') == 1)) && break
    nap 0.2
  done
  assert_equal "$(rcli ZCARD 'rlock:{dead-w}:q')" 1
  assert_equal "$(rcli ZCARD 'rlock:{dead-w}:l')" 1
  # The killed waiter's wake list is gone, the live one's is not made yet.
  run bash -c "redis-cli -p $REDIS_PORT --scan --pattern 'rlock:{dead-w}:w:*'"
  assert_output ''
}

@test "keys: waiters killed while a holder renews leave no records once the queue's keys would have expired" {
  # The queue's keys (q, x, l) expire two waiter leases (6 s) after the last
  # re-check, while the holder's renewals keep i alive: the dead waiters'
  # records then stayed in i for as long as the lock was held, beyond the
  # reach of any purge. l now lives as long as i.
  bg_rlock holder run -t 3s dead-records -- sh -c "echo >\"$BATS_TEST_TMPDIR/held\"; sleep 12"
  wait_for_file "$BATS_TEST_TMPDIR/held"
  local i
  for ((i = 0; i < 3; i++)); do
    bg_rlock "w$i" acquire dead-records -w 5m
  done
  wait_waiters dead-records 3
  for ((i = 0; i < 3; i++)); do kill -KILL "$(<"$BATS_TEST_TMPDIR/w$i.pid")"; done
  nap 8
  # The next call purges them: only the holder's record is left.
  rl 75 acquire dead-records -n
  assert_equal "$(rcli HLEN 'rlock:{dead-records}:i')" 1
}

@test "keys: a lease shortened by --min-hold is purged when it ends" {
  # After its command, run sets the lease to what is left of --min-hold:
  # the only renewal that may shorten a lease (a plain renew extends only).
  rl 0 run short -t 60s --min-hold 1s -- true
  rl 0 status short
  sleep 1.2
  # Not left to H's expiry (60 s): the acquire's purge removes the ended lease.
  rl 0 acquire short -n -t 60s
}
