#!/usr/bin/env bats
# TLS details: names only from subjectAltName, a rejected client certificate,
# a plain-text port, an encrypted client key.

load helpers

setup_file() {
  start_redis
  # Client certificates required.
  start_tls_redis yes
  export REQUIRED_PORT="$TLS_PORT"
  # A server certificate whose only name is its CN (no subjectAltName).
  (
    set -e
    cd "$TLS_DIR"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout nosan.key -out nosan.csr -subj /CN=localhost
    printf 'extendedKeyUsage=serverAuth\n' >nosan.ext
    openssl x509 -req -in nosan.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile nosan.ext -out nosan.pem
    # The client key, encrypted with a passphrase.
    openssl pkey -in client.key -aes256 -passout pass:s3cret -out client-encrypted.key
  ) >"$BATS_FILE_TMPDIR/openssl.log" 2>&1
  local dir port
  dir="$(_redis_dir)"
  port="$(free_port)"
  _launch_redis "$dir" --port 0 --tls-port "$port" \
    --tls-cert-file "$TLS_DIR/nosan.pem" --tls-key-file "$TLS_DIR/nosan.key" \
    --tls-ca-cert-file "$TLS_DIR/ca.pem" --tls-auth-clients no
  export NOSAN_PORT="$port"
}

setup() {
  :
}

@test "tls: a certificate naming the host only in its CN is refused (77)" {
  rl 77 -u "rediss://localhost:$NOSAN_PORT" --cacert "$TLS_DIR/ca.pem" acquire x -n
  assert_stderr --partial 'TLS verification failed'
  # The same certificate is fine when verification is off: only the name is at fault.
  rl 0 -u "rediss://localhost:$NOSAN_PORT" --insecure status
}

@test "tls: a server that rejects the missing client certificate is an authentication failure (77)" {
  # Its alert often loses the race against the connection reset: every time
  # must be 77, not "connection reset" 69.
  local round
  for round in 1 2 3 4 5 6 7 8 9 10; do
    rl 77 -u "rediss://127.0.0.1:$REQUIRED_PORT" --cacert "$TLS_DIR/ca.pem" acquire x -n
    assert_stderr --regexp '^rlock: error: .*certificate'
  done
}

@test "tls: rediss:// against a plain-text port says it is probably not a TLS port" {
  rl 69 -u "rediss://127.0.0.1:$REDIS_PORT" --insecure --connect-timeout 1s acquire x -n
  assert_stderr --partial 'probably not a TLS port'
}

@test "tls: a TLS option on the command line with a plain-text URL is a usage error, not a plain connection" {
  # It sent AUTH in the clear to whatever answered: the user meant TLS.
  local option
  for option in "--cacert=$TLS_DIR/ca.pem" "--cacertdir=$TLS_DIR" "--sni=localhost" --insecure; do
    rl_usage_error -u "redis://127.0.0.1:$REDIS_PORT" "$option" acquire tls-opt -n
    assert_stderr --regexp "^rlock: error: --[a-z]+ is a TLS option, but redis://127.0.0.1:$REDIS_PORT/0 is plain text: use rediss:// or --tls"
  done
  rl 1 status tls-opt
  # With --tls it is TLS; a cacert from the config file may serve its other
  # URLs, so a plain URL given with it is no error.
  rl 0 -u "redis://localhost:$NOSAN_PORT" --tls --insecure status
  printf 'cacert = %s\n' "$TLS_DIR/ca.pem" >"$BATS_TEST_TMPDIR/rlock.conf"
  chmod 600 "$BATS_TEST_TMPDIR/rlock.conf"
  rl 0 --config "$BATS_TEST_TMPDIR/rlock.conf" -u "redis://127.0.0.1:$REDIS_PORT" acquire tls-opt -n
}

@test "tls: a CA file or directory, client certificate or key that others could change is refused (78)" {
  # Whoever can write the trust store can make rlock trust their server.
  local d="$BATS_TEST_TMPDIR/trust" hash
  mkdir -m 700 "$d" "$d/cadir"
  cp "$TLS_DIR/ca.pem" "$TLS_DIR/client.pem" "$TLS_DIR/client.key" "$d/"
  hash="$(openssl x509 -hash -noout -in "$d/ca.pem")"
  cp "$d/ca.pem" "$d/cadir/$hash.0"
  chmod 644 "$d/ca.pem" "$d/client.pem" "$d/cadir/$hash.0"
  chmod 600 "$d/client.key"
  local tls=(-u "rediss://127.0.0.1:$REQUIRED_PORT" --cert "$d/client.pem" --key "$d/client.key")
  rl 0 "${tls[@]}" --cacert "$d/ca.pem" status
  rl 0 "${tls[@]}" --cacertdir "$d/cadir" status
  local file
  for file in ca.pem client.pem client.key; do
    chmod g+w "$d/$file"
    rl 78 "${tls[@]}" --cacert "$d/ca.pem" status
    assert_stderr "rlock: error: refusing $(case $file in ca.pem) echo 'CA certificate file' ;; client.pem) echo 'TLS client certificate' ;; *) echo 'TLS client key' ;; esac) '$d/$file': others can write it; fix: chmod go-w '$d/$file'"
    chmod g-w "$d/$file"
  done
  chmod o+w "$d/cadir"
  rl 78 "${tls[@]}" --cacertdir "$d/cadir" status
  assert_stderr --partial "refusing CA certificate directory '$d/cadir': others can write it"
  chmod o-w "$d/cadir"
  chmod o+w "$d/cadir/$hash.0"
  rl 78 "${tls[@]}" --cacertdir "$d/cadir" status
  assert_stderr --partial "refusing CA certificate '$d/cadir/$hash.0'"
  # OpenSSL's own variables, when no CA option is given.
  SSL_CERT_DIR="$d/cadir" rl 78 "${tls[@]}" status
  assert_stderr --partial "refusing CA certificate '$d/cadir/$hash.0'"
  chmod o-w "$d/cadir/$hash.0"
  chmod o+w "$d/ca.pem"
  SSL_CERT_FILE="$d/ca.pem" rl 78 "${tls[@]}" status
  assert_stderr --partial "refusing CA certificate file (SSL_CERT_FILE) '$d/ca.pem'"
  # Before any connection: a Sentinel or quorum deployment says 78 too,
  # not 69 as if every node were out of reach.
  rl 78 -u "rediss-sentinel://127.0.0.1:$REQUIRED_PORT#m" --cacert "$d/ca.pem" status
  rl 78 -u "rediss://127.0.0.1:$REQUIRED_PORT" -u "rediss://localhost:$REQUIRED_PORT" \
    -u "rediss://127.0.0.1:$NOSAN_PORT" --cacert "$d/ca.pem" status
  assert_equal "${#stderr_lines[@]}" 1
  chmod o-w "$d/ca.pem"
  SSL_CERT_FILE="$d/ca.pem" rl 0 "${tls[@]}" status
  # Another user's file (root's is trusted): that user could change it.
  if [[ "$(id -u)" == 0 ]] && id nobody >/dev/null 2>&1; then
    chown nobody "$d/ca.pem"
    rl 78 "${tls[@]}" --cacert "$d/ca.pem" status
    assert_stderr --regexp "^rlock: error: refusing CA certificate file '$d/ca.pem': it is owned by another user \(uid [0-9]+\)"
  fi
}

@test "tls: an encrypted --key without a terminal is refused with a clear message (77)" {
  # setsid: no controlling terminal, as under cron or systemd.
  run --separate-stderr timeout -k 5 "$RL_TIMEOUT" setsid -w "$RLOCK" \
    -u "rediss://127.0.0.1:$REQUIRED_PORT" --cacert "$TLS_DIR/ca.pem" \
    --cert "$TLS_DIR/client.pem" --key "$TLS_DIR/client-encrypted.key" acquire x -n
  _rl_check 77 "rlock (setsid) acquire with an encrypted key"
  assert_stderr "rlock: error: the TLS client key $TLS_DIR/client-encrypted.key is encrypted and there is no terminal to ask for its passphrase; use a key without a passphrase, readable only by this user"
}

# A wrong passphrase typed at the terminal was "cannot load TLS client key"
# (64, a usage error): it is a credential refused, as a wrong password is.
@test "tls: a wrong passphrase for an encrypted --key, typed at a terminal, is 77 and says so" {
  local line
  printf -v line '%q -u %q --cacert %q --cert %q --key %q acquire x -n; echo "rc=$?"\n' \
    "$RLOCK" "rediss://127.0.0.1:$REQUIRED_PORT" "$TLS_DIR/ca.pem" "$TLS_DIR/client.pem" \
    "$TLS_DIR/client-encrypted.key"
  run --separate-stderr timeout -k 5 60 "$PYTHON" "$REPO/tests/e2e/ptyshell.py" \
    ">$line" '?pass phrase' '>wrong-passphrase\n' '?rc=[0-9]+'
  assert_success
  assert_output --partial "rlock: error: wrong passphrase for the TLS client key $TLS_DIR/client-encrypted.key"
  assert_output --partial 'rc=77'
  refute_output --partial 'rc=0'
  # The right one is taken.
  run --separate-stderr timeout -k 5 60 "$PYTHON" "$REPO/tests/e2e/ptyshell.py" \
    ">$line" '?pass phrase' '>s3cret\n' '?rc=[0-9]+'
  assert_success
  assert_output --partial 'rc=0'
}
