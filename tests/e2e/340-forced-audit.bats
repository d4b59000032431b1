#!/usr/bin/env bats
# The audit record of forced releases: the last ones are kept (not only the
# latest), each with the OS user and host and the Redis ACL user the forcing
# client reported.

load helpers

@test "forced audit: keeps the last forced releases, newest first" {
  local owner
  for owner in first second third; do
    rl 0 acquire contested --owner "$owner" -t 60s
    rl 0 release contested --force
  done
  rl 1 status contested --json
  assert_json
  assert_equal "$(json '[a["evicted"][0]["owner"] for a in d["forced_history"]]')" \
    '["third", "second", "first"]'
  # "forced" stays the latest one.
  assert_equal "$(json 'd["forced"]["evicted"][0]["owner"]')" third
  rl 1 status contested
  assert_equal "$(printf '%s\n' "${lines[@]}" | grep -c '^  force-released ')" 3
  assert_line --index 1 --regexp '^  force-released .* [0-9a-f]{8} third .*\(ACL user default, self-reported\)$'
}

@test "forced audit: keeps at most 20 entries" {
  local round
  for ((round = 1; round <= 22; round++)); do
    rl 0 acquire many --owner "owner-$round" -t 60s
    rl 0 release many --force
  done
  rl 1 status many --json
  assert_equal "$(json 'len(d["forced_history"])')" 20
  assert_equal "$(json 'd["forced_history"][0]["evicted"][0]["owner"]')" owner-22
  assert_equal "$(json 'd["forced_history"][-1]["evicted"][0]["owner"]')" owner-3
}

@test "forced audit: records the ACL user the operator connected as" {
  printf 'op-secret\n' >"$BATS_TEST_TMPDIR/password"
  rcli ACL SETUSER operator on '>op-secret' '~rlock:*' '+@all' >/dev/null
  rl 0 acquire audited -t 60s
  rl 0 --user operator --password-file "$BATS_TEST_TMPDIR/password" release audited --force
  rl 1 status audited --json
  assert_equal "$(json 'd["forced"]["acl_user"]')" operator
  assert_equal "$(json 'd["forced"]["by"]["owner"]')" "$(id -un)@$(hostname)"
  rcli ACL DELUSER operator >/dev/null
}

@test "forced audit: an unreadable audit record is ignored, not fatal" {
  rl 0 acquire scribbled -t 60s
  rcli SET 'rlock:{scribbled}:a' $'garbage\e[2J' >/dev/null
  rl 0 status scribbled --json
  assert_equal "$(json 'd["forced_history"]')" '[]'
  rl 0 release scribbled --force
  rl 1 status scribbled --json
  assert_equal "$(json 'len(d["forced_history"])')" 1
}

@test "forced audit: an evicted semaphore holder is a semaphore holder, also once the lock is free" {
  # The script records a semaphore's holders as exclusive, and the forced
  # release's reply had no limit to tell them apart: it said exclusive.
  rl 0 acquire sem --limit 2 -t 60s --owner a
  rl 0 acquire sem --limit 2 -t 60s --owner b
  rl 0 acquire shr --shared -t 60s --owner c
  rl 0 release sem --force --json
  assert_equal "$(json '[e["mode"] for e in d["evicted"]]')" '["semaphore", "semaphore"]'
  rl 0 release shr --force --json
  assert_equal "$(json '[e["mode"] for e in d["evicted"]]')" '["shared"]'
  # Free now (limit 1 again): the audit still says what they held.
  rl 1 status sem --json
  assert_equal "$(json '[e["mode"] for e in d["forced"]["evicted"]]')" '["semaphore", "semaphore"]'
  rl 0 acquire ex -t 60s
  rl 0 release ex --force --json
  assert_equal "$(json '[e["mode"] for e in d["evicted"]]')" '["exclusive"]'
}
