#!/usr/bin/env bats
# TLS: certificate verification (77 on failure), --insecure, client certificates.

load helpers

setup_file() {
  # Client certificates: accepted, not required...
  start_tls_redis optional
  export OPTIONAL_PORT="$TLS_PORT" OPTIONAL_SOCK="$TLS_SOCK"
  # ...and required.
  start_tls_redis yes
  export REQUIRED_PORT="$TLS_PORT" REQUIRED_SOCK="$TLS_SOCK"
}

setup() {
  redis-cli -s "$OPTIONAL_SOCK" FLUSHALL >/dev/null
  redis-cli -s "$REQUIRED_SOCK" FLUSHALL >/dev/null
}

@test "tls: a server certificate signed by --cacert is trusted" {
  rl 0 -u "rediss://127.0.0.1:$OPTIONAL_PORT" --cacert "$TLS_DIR/ca.pem" acquire tls
  local token="$output"
  run redis-cli -s "$OPTIONAL_SOCK" --scan --pattern 'rlock:*'
  assert_output --partial tls
  rl 0 -u "rediss://127.0.0.1:$OPTIONAL_PORT" --cacert "$TLS_DIR/ca.pem" release tls --token "$token"
}

@test "tls: --tls with a redis:// URL speaks TLS too" {
  rl 0 -u "redis://127.0.0.1:$OPTIONAL_PORT" --tls --cacert "$TLS_DIR/ca.pem" acquire tls-flag
}

@test "tls: redis:// against a TLS-only port says it may be one (69), not only 'connection reset'" {
  rl 69 -u "redis://127.0.0.1:$OPTIONAL_PORT" acquire plain-to-tls -n
  assert_stderr --regexp "^rlock: error: redis://127.0.0.1:$OPTIONAL_PORT/0: .* before any reply \(if that is a TLS port: rediss:// or --tls; if not, the server.s log says why: a reply over client-output-buffer-limit, say\)$"
}

@test "tls: a server certificate from an untrusted CA exits 77" {
  rl 77 -u "rediss://127.0.0.1:$OPTIONAL_PORT" --cacert "$TLS_DIR/other-ca.pem" acquire tls -n
  assert_stderr --regexp '^rlock: error: '
}

@test "tls: a private CA is not trusted by default (exits 77)" {
  rl 77 -u "rediss://127.0.0.1:$OPTIONAL_PORT" acquire tls -n
}

@test "tls: a --cacert or --cacertdir that is not there is a usage error naming it, not a failed verification" {
  rl 64 -u "rediss://127.0.0.1:$OPTIONAL_PORT" --cacert "$TLS_DIR/missing.pem" acquire tls -n
  assert_stderr --partial "cannot load CA certificates from $TLS_DIR/missing.pem"
  rl 64 -u "rediss://127.0.0.1:$OPTIONAL_PORT" --cacertdir "$TLS_DIR/missing" acquire tls -n
  assert_stderr "rlock: error: cannot load CA certificates from $TLS_DIR/missing: No such file or directory"
  rl 64 -u "rediss://127.0.0.1:$OPTIONAL_PORT" --cacertdir "$TLS_DIR/ca.pem" acquire tls -n
  assert_stderr "rlock: error: cannot load CA certificates from $TLS_DIR/ca.pem: not a directory"
  # The same through a quorum, a Sentinel or a server that is down: before
  # any connection, not 69 as if every node were out of reach.
  rl 64 -u "rediss://127.0.0.1:$OPTIONAL_PORT" -u "rediss://localhost:$OPTIONAL_PORT" \
    -u "rediss://127.0.0.1:$REQUIRED_PORT" --cacert "$TLS_DIR/missing.pem" status
  assert_stderr "rlock: error: cannot load CA certificates from $TLS_DIR/missing.pem: No such file or directory"
  rl 64 -u "rediss-sentinel://127.0.0.1:$OPTIONAL_PORT#m" --cacert "$TLS_DIR/missing.pem" status
  rl 64 -u "rediss://127.0.0.1:$(free_port)" --cert "$TLS_DIR/missing.pem" \
    --key "$TLS_DIR/client.key" --cacert "$TLS_DIR/ca.pem" status
  assert_stderr "rlock: error: cannot load TLS client certificate $TLS_DIR/missing.pem: No such file or directory"
}

@test "tls: --insecure skips verification" {
  rl 0 -u "rediss://127.0.0.1:$OPTIONAL_PORT" --insecure acquire tls-insecure
}

@test "tls: a client certificate from --cert/--key is accepted where one is required" {
  rl 0 -u "rediss://127.0.0.1:$REQUIRED_PORT" --cacert "$TLS_DIR/ca.pem" \
    --cert "$TLS_DIR/client.pem" --key "$TLS_DIR/client.key" acquire tls-client
}

@test "tls: without a client certificate a server that requires one refuses" {
  rl 69,77 -u "rediss://127.0.0.1:$REQUIRED_PORT" --cacert "$TLS_DIR/ca.pem" acquire tls-client -n
}
