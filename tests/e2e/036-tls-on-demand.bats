#!/usr/bin/env bats
# OpenSSL is loaded (dlopen) only when a TLS connection is made: a plain
# redis:// or unix:// process never maps libssl or libcrypto, a rediss:// one
# does. The maps are read from the command `rlock run` starts ($PPID is rlock).

load helpers

setup_file() {
  start_redis
  start_tls_redis optional
}

@test "tls on demand: a plain redis:// run maps neither libssl nor libcrypto" {
  rl 0 run plain -- sh -c 'cat /proc/$PPID/maps'
  assert_output --partial libhiredis
  refute_output --partial libssl
  refute_output --partial libcrypto
}

@test "tls on demand: a unix:// run maps neither" {
  rl 0 -u "unix://$REDIS_SOCK" run plain-unix -- sh -c 'cat /proc/$PPID/maps'
  refute_output --partial libssl
  refute_output --partial libcrypto
}

@test "tls on demand: a rediss:// run loads the system's libssl.so.3 and libcrypto.so.3" {
  rl 0 -u "rediss://127.0.0.1:$TLS_PORT" --cacert "$TLS_DIR/ca.pem" \
    run tls -- sh -c 'cat /proc/$PPID/maps'
  assert_output --regexp '/libssl\.so\.3'
  assert_output --regexp '/libcrypto\.so\.3'
}

@test "tls on demand: the binary does not link OpenSSL (no NEEDED entry)" {
  run readelf -d "$RLOCK"
  assert_success
  assert_output --partial 'libhiredis'
  refute_output --partial 'libssl'
  refute_output --partial 'libcrypto'
}

@test "start-up: the binary needs no shared C++ runtime, libfmt or libm (nothing for the loader to map and resolve)" {
  # A sanitizer build keeps the shared runtime (CMakeLists.txt,
  # RLOCK_STATIC_RUNTIME); the binary the suites normally run does not.
  if readelf -d "$RLOCK" | grep -q 'libasan\|libtsan'; then skip "sanitizer build"; fi
  run readelf -d "$RLOCK"
  assert_success
  refute_output --partial 'libstdc++'
  refute_output --partial 'libfmt'
  refute_output --partial 'libgcc_s'
  # Nor libm: what libstdc++ would call in it is left out at link time.
  refute_output --partial 'libm.so'
}

@test "start-up: the heartbeat thread starts 100 ms into the command, not before it" {
  # A sanitizer runtime adds threads of its own.
  if readelf -d "$RLOCK" | grep -q 'libasan\|libtsan'; then skip "sanitizer build"; fi
  # rlock's threads, seen from the command ($PPID is rlock): one at once,
  # two once the heartbeat has started (its first renewal is 10 s away).
  rl 0 run lazy -- sh -c 'ls /proc/$PPID/task | wc -l; sleep 0.5; ls /proc/$PPID/task | wc -l'
  assert_equal "${lines[0]}" 1
  assert_equal "${lines[1]}" 2
}
