#pragma once
/// OpenSSL, loaded with dlopen() when the first TLS connection is made rather
/// than linked: a process that only speaks redis:// or unix:// never maps
/// libssl and libcrypto, and so never pays the dynamic loader for their
/// thousands of symbols (BIND_NOW resolves all of them at start-up: it was
/// about 70% of `rlock --version`). The Debian package still depends on
/// libssl3, so security updates of the system's OpenSSL reach rlock.
///
/// Every OpenSSL function transport.cpp calls is a function pointer below,
/// declared in rlock::redis under OpenSSL's own name: inside that namespace
/// the pointer hides the library's function, so the TLS code reads (and the
/// macros OpenSSL defines over those functions expand) as with a linked
/// OpenSSL. The pointers are null until load_openssl() has succeeded; the
/// program does not link libssl, so a function missing from the list is a
/// link error, not a silent direct call.

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <string_view>

#include "util/error.h"

namespace rlock::redis {

/// The libraries loaded, by versioned soname: the ABI the headers describe.
inline constexpr std::string_view k_libcrypto = "libcrypto.so.3";
inline constexpr std::string_view k_libssl = "libssl.so.3";

// X(library, function): every OpenSSL function rlock calls, and where it lives.
#define RLOCK_OPENSSL_FUNCTIONS(X)               \
  X(crypto, BIO_clear_flags)                     \
  X(crypto, BIO_get_data)                        \
  X(crypto, BIO_get_new_index)                   \
  X(crypto, BIO_meth_free)                       \
  X(crypto, BIO_meth_new)                        \
  X(crypto, BIO_meth_set_ctrl)                   \
  X(crypto, BIO_meth_set_read)                   \
  X(crypto, BIO_meth_set_write)                  \
  X(crypto, BIO_new)                             \
  X(crypto, BIO_set_data)                        \
  X(crypto, BIO_set_flags)                       \
  X(crypto, BIO_set_init)                        \
  X(crypto, ERR_clear_error)                     \
  X(crypto, ERR_get_error)                       \
  X(crypto, ERR_peek_last_error)                 \
  X(crypto, ERR_reason_error_string)             \
  X(crypto, PEM_def_callback)                    \
  X(crypto, X509_VERIFY_PARAM_set1_ip_asc)       \
  X(crypto, X509_verify_cert_error_string)       \
  X(ssl, SSL_CTX_check_private_key)              \
  X(ssl, SSL_CTX_ctrl)                           \
  X(ssl, SSL_CTX_free)                           \
  X(ssl, SSL_CTX_load_verify_locations)          \
  X(ssl, SSL_CTX_new)                            \
  X(ssl, SSL_CTX_set_default_passwd_cb)          \
  X(ssl, SSL_CTX_set_default_passwd_cb_userdata) \
  X(ssl, SSL_CTX_set_default_verify_paths)       \
  X(ssl, SSL_CTX_set_verify)                     \
  X(ssl, SSL_CTX_use_PrivateKey_file)            \
  X(ssl, SSL_CTX_use_certificate_chain_file)     \
  X(ssl, SSL_connect)                            \
  X(ssl, SSL_ctrl)                               \
  X(ssl, SSL_free)                               \
  X(ssl, SSL_get0_param)                         \
  X(ssl, SSL_get_error)                          \
  X(ssl, SSL_get_verify_result)                  \
  X(ssl, SSL_new)                                \
  X(ssl, SSL_peek_ex)                            \
  X(ssl, SSL_pending)                            \
  X(ssl, SSL_read_ex)                            \
  X(ssl, SSL_set1_host)                          \
  X(ssl, SSL_set_bio)                            \
  X(ssl, SSL_set_hostflags)                      \
  X(ssl, SSL_set_msg_callback)                   \
  X(ssl, SSL_write_ex)                           \
  X(ssl, TLS_client_method)

// NOLINTBEGIN(bugprone-macro-parentheses): an X-macro; its arguments are names.
#define RLOCK_OPENSSL_DECLARE(library, function) extern decltype(&::function) function;
RLOCK_OPENSSL_FUNCTIONS(RLOCK_OPENSSL_DECLARE)
#undef RLOCK_OPENSSL_DECLARE
// NOLINTEND(bugprone-macro-parentheses)

/// Loads libcrypto and libssl (RTLD_NOW: every symbol is resolved here, as
/// BIND_NOW does for rlock itself) and sets every pointer above. Once per
/// process: later calls, from any thread, return the first outcome. When
/// the libraries are missing or lack a function, a one-line error (code
/// unreachable, exit status 69) naming the library; TLS is then unavailable
/// and everything else still works.
Result<void> load_openssl();

namespace detail {
/// load_openssl()'s work, with the sonames as parameters so that a test can
/// ask for a library that does not exist. Sets the pointers only when every
/// function was found.
Result<void> load_openssl_from(std::string_view crypto, std::string_view ssl);
}  // namespace detail

}  // namespace rlock::redis
